"""The generator: values, the problem, modules, custom forwards and Functions, the loss."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction as Fr

from .analysis import Analysis, broadcast
from .exprs import MAX_EXPR_DEPTH, ExprCtx, _broadcastable, _sub_shape
from .hooks import HookGen
from .hooks2 import HookGenV2
from .layers import LAYER_SHARE, LayerGen
from .morelayers import MoreLayers
from .steps import StepGen
from .program import ProgramGen
from .rand import Src
from .specs import BackwardSpec, FnSpec, Leaf, Mod, ProblemSpec, Stmt
from .trees import ODD_VALUES, TRANSCENDENTAL_BUDGET, VALUES, src

#: How often a custom forward is written as a YAML list of lines instead of a block string
#: (once refused by adjoint: tests/data/regressions/forward_as_yaml_list.yaml).
FORWARD_AS_LIST = 0.2
#: The share of problems written with the v2 contract's features (methods, views, indexing,
#: in-place statements, no_grad blocks, v2 hook kinds and options, steps, PyTorch errors).
V2_SHARE = 0.7
#: How often the root of a v2 problem (a custom module) returns a tuple.
TUPLE_P = 0.12
#: Share of one-input custom Functions (v2 problems) that write their input and mark it dirty.
DIRTY_P = 0.35
#: How often a custom forward of a v2 problem gets statements.
STATEMENT_P = 0.6


class Gen(HookGen, HookGenV2, ProgramGen, StepGen, LayerGen, MoreLayers):
    def __init__(self, s: Src, budget: int = TRANSCENDENTAL_BUDGET, v2_share: float | None = None,
                 train: bool = False):
        self.s = s
        self.train = train     # every variant a training loop (tests/gen/train.py; sweep --kind train)
        self.counter = Counter()
        self.targets: list[Leaf] = []
        self.inputs: list[Leaf] = []
        self.budget = budget
        self.mult = 1          # how many times the module being generated will run
        self.v2 = False        # this problem uses the v2 contract's forms (drawn in problem())
        self.v2_used: Counter = Counter()   # v2 forms and statements made (coverage)
        self.v2_share = V2_SHARE if v2_share is None else v2_share
        self.layer_share = LAYER_SHARE

    def spend(self) -> bool:
        """Take one transcendental op (times the number of calls of the module it is in)
        from the budget (False: not enough left, stay rational)."""
        if self.budget < self.mult:
            return False
        self.budget -= self.mult
        return True

    def fresh(self, prefix: str) -> str:
        n = self.counter[prefix]
        self.counter[prefix] += 1
        return f"{prefix}{n}"

    # ------------------------------------------------------------------ values
    def value(self) -> Fr:
        if self.s.coin(0.05):
            return self.s.choice(ODD_VALUES)
        return self.s.choice(VALUES)

    def values(self, shape) -> list:
        n = 1
        for d in shape:
            n *= d
        return [self.value() for _ in range(n)]

    def dim(self) -> int:
        return self.s.weighted([(2, 2), (2, 1), (2, 3)])

    def shape(self, max_rank: int = 3) -> tuple:
        rank = self.s.weighted([(3, 1), (3, 2), (2, 0), (1, 3)][: max_rank + 1])
        return tuple(self.dim() for _ in range(rank))

    def leaf(self, name: str, shape, rg: bool) -> Leaf:
        vals = self.values(shape)
        scale = None
        if self.s.coin(0.05):
            scale = self.s.choice([Fr(1, 4), Fr(1, 2), Fr(2), Fr(-1)])
        return Leaf(name, tuple(shape), vals, rg, scale)

    # ------------------------------------------------------------------ problem
    def problem(self) -> ProblemSpec:
        s = self.s
        r = s.int(0, 999)   # one draw decides v2 and layer problems (the draws of the others are unchanged)
        self.v2 = r >= round((1 - self.v2_share) * 1000)
        if self.v2 and r >= round((1 - self.layer_share) * 1000):
            return self.layer_problem()
        n_in = s.weighted([(6, 1), (3, 2), (1, 3)])
        root_kind = "custom" if n_in > 1 else s.weighted([(4, "Sequential"), (4, "custom"), (1, "Linear"),
                                                          (1, "elementwise"), (1, "function")])
        in_shapes = []
        for i in range(n_in):
            if root_kind in ("Sequential", "Linear") or (i == 0 and root_kind == "custom"):
                in_shapes.append(self.shape_min_rank(1))
            else:
                in_shapes.append(self.shape())
        for i, shp in enumerate(in_shapes):
            rg = s.coin(0.6)
            self.inputs.append(self.leaf(f"x{i}", shp, rg))
        if not any(l.rg for l in self.inputs) and s.coin(0.3):
            self.inputs[0].rg = True
        model = self.root_module(root_kind, in_shapes)
        loss = None
        tuple_out = self.v2 and model.type is None and model.function is None and s.coin(TUPLE_P)
        if tuple_out or s.coin(0.7):
            loss = self.loss(model.out_shape)
        if tuple_out:   # return a, b: y is the tuple, the loss takes both (y[0] where it took y)
            i = s.int(0, len(model.inputs) - 1)
            extra = s.choice([("b", "*", ("n", model.inputs[i]), ("c", Fr(2))), ("f", "relu", ("n", model.inputs[i])),
                              ("op", "method", "clone", ("n", model.inputs[i]), (), "", tuple(model.in_shapes[i]), "node")])
            model.ret = ("tup", (model.ret, extra))
            model.as_list = False
            loss = ("b", "+", _on_first(loss), ("f", "sum", ("idx", ("n", "y"), 1)))
            self.v2_used["v2 forward returns a tuple"] += 1
        name = f"gen-{self.fresh('p')}"
        dtype = s.weighted([(8, "float64"), (1, "float32"), (1, None)])
        p = ProblemSpec(name, self.inputs, self.targets, model, loss, [], BackwardSpec(), None, dtype)
        if not self.ensure_grad(p):
            return p
        self.hooks_and_variants(p)
        p.features.update(self.v2_used)
        if self.v2:
            p.features["v2 problem"] += 1
        return p

    def shape_min_rank(self, r: int) -> tuple:
        while True:
            shp = self.shape()
            if len(shp) >= r:
                return shp

    def ensure_grad(self, p: ProblemSpec) -> bool:
        """Make the backward start from something that requires grad (else PyTorch raises)."""
        a = Analysis(p, p.inputs, [])
        if a.root.rg:
            return True
        for leaf in p.inputs:
            leaf.rg = True
        for m in p.model.walk():
            for leaf in m.params:
                leaf.rg = True
        return Analysis(p, p.inputs, []).root.rg

    # ------------------------------------------------------------------ modules
    def root_module(self, kind: str, in_shapes: list) -> Mod:
        if kind == "Sequential":
            return self.sequential("model", "", in_shapes[0], depth=0)
        if kind == "Linear":
            return self.linear("model", "", in_shapes[0])
        if kind == "elementwise":
            return self.elementwise("model", "", in_shapes[0])
        if kind == "function":
            return self.function_module("model", "", in_shapes)
        return self.custom("model", "", in_shapes, depth=0, root=True)

    def child_name(self, seq: bool) -> str:
        if seq and self.s.coin(0.25):
            return None  # use the position, as nn.Sequential does
        return self.fresh("c") if not seq else self.fresh("l")

    def path(self, parent: str, name: str) -> str:
        return f"{parent}.{name}" if parent else name

    def module(self, name: str, parent: str, in_shape: tuple, depth: int) -> Mod:
        """A module taking one input of in_shape, any kind."""
        s = self.s
        kinds = [(5, "Linear"), (4, "elementwise"), (1, "Identity")]
        if depth < 2:
            kinds += [(3, "custom"), (2, "function"), (1, "Sequential")]
        if len(in_shape) == 0:
            kinds = [(w, k) for w, k in kinds if k != "Linear"]
        kind = s.weighted(kinds)
        path = self.path(parent, name)
        if kind == "Linear":
            return self.linear(name, path, in_shape)
        if kind == "elementwise":
            return self.elementwise(name, path, in_shape)
        if kind == "Identity":
            return Mod(name, path, "Identity", ["x"], [in_shape], in_shape)
        if kind == "Sequential":
            return self.sequential(name, path, in_shape, depth + 1)
        if kind == "function":
            return self.function_module(name, path, [in_shape])
        return self.custom(name, path, [in_shape], depth + 1)

    def linear(self, name: str, path: str, in_shape: tuple) -> Mod:
        out_f = self.dim()
        in_f = in_shape[-1]
        pre = f"{path}." if path else ""
        params = [self.leaf(pre + "weight", (out_f, in_f), self.s.coin(0.85))]
        bias = self.s.coin(0.7)
        if bias:
            params.append(self.leaf(pre + "bias", (out_f,), self.s.coin(0.85)))
        return Mod(name, path, "Linear", ["x"], [in_shape], in_shape[:-1] + (out_f,), params, bias=bias)

    def elementwise(self, name: str, path: str, in_shape: tuple) -> Mod:
        t = self.s.weighted([(3, "ReLU"), (2, "Tanh"), (2, "Sigmoid"), (1, "Identity")])
        if t in ("Tanh", "Sigmoid") and not self.spend():
            t = "ReLU"
        return Mod(name, path, t, ["x"], [in_shape], in_shape)

    def sequential(self, name: str, path: str, in_shape: tuple, depth: int) -> Mod:
        n = self.s.weighted([(2, 1), (4, 2), (2, 3)])
        children = []
        shape = in_shape
        for i in range(n):
            cname = self.child_name(seq=True)
            if cname is None:
                cname = str(i)
            child = self.module(cname, path, shape, depth + 1)
            children.append(child)
            shape = child.out_shape
        return Mod(name, path, "Sequential", ["x"], [in_shape], shape, children=children)

    # ------------------------------------------------------------------ custom modules
    def custom(self, name: str, path: str, in_shapes: list, depth: int, root: bool = False) -> Mod:
        s = self.s
        if root:
            arg_names = [l.name if s.coin(0.5) else f"u{i}" for i, l in enumerate(self.inputs)]
        elif len(in_shapes) == 1:
            arg_names = [s.weighted([(3, "x"), (1, "u"), (1, "v")])]
        else:
            arg_names = [f"a{i}" for i in range(len(in_shapes))]
        mod = Mod(name, path, None, arg_names, list(in_shapes), (), write_inputs=arg_names != ["x"] or s.coin(0.2))
        mod.as_list = s.coin(FORWARD_AS_LIST)
        ctx = ExprCtx(self, mod, allow_params=True, allow_targets=s.coin(0.15))
        for a, shp in zip(arg_names, in_shapes):
            ctx.env[a] = shp
            ctx.weights[a] = 6
        if root or s.coin(0.4):
            for i, l in enumerate(self.inputs):  # problem inputs are names in every forward
                if l.name not in ctx.env:
                    ctx.env[l.name] = l.shape
                    ctx.weights[l.name] = 1 if not root else 3
        # children
        n_children = 0
        if depth < 3:
            n_children = s.weighted([(3, 0), (4, 1), (2, 2), (1, 3)])
        unused: list[str] = []
        for _ in range(n_children):
            cname = self.fresh("c")
            cpath = self.path(path, cname)
            kind = s.weighted([(3, "single"), (2, "multi")]) if depth < 2 else "single"
            times = s.weighted([(4, 1), (2, 2)])
            outer = self.mult
            self.mult = outer * times
            if kind == "multi":
                n_args = s.weighted([(3, 2), (1, 3)])
                shapes = [self.shape() for _ in range(n_args)]
                if s.coin(0.3):
                    shapes[0] = self.shape_min_rank(1)
                child = self.multi_input(cname, cpath, shapes, depth + 1)
            else:
                child = self.module(cname, path, self.shape(), depth + 1)
            self.mult = outer
            mod.children.append(child)
            for _ in range(times):
                args = tuple(ctx.expr_for_arg(shp) for shp in child.in_shapes)
                if (len(args) > 1 and child.in_shapes[0] == child.in_shapes[1] and args[0][0] == "n"
                        and s.coin(0.15)):
                    args = (args[0], args[0]) + args[2:]   # one tensor passed twice
                call = ("call", child.name, args)
                if s.coin(0.7) or not (mod.lines or unused):
                    local = self.fresh("h")
                    mod.lines.append((local, call))
                    ctx.env[local] = child.out_shape
                    ctx.weights[local] = 8
                    unused.append(local)
                else:
                    ctx.inline.append((call, child.out_shape))
        # extra lines
        for _ in range(s.weighted([(3, 0), (2, 1), (1, 2)])):
            local = self.fresh("h")
            shp = self.shape() if s.coin(0.5) else s.choice(list(in_shapes))
            tree = ctx.expr(shp, MAX_EXPR_DEPTH - 1)
            mod.lines.append((local, tree))
            ctx.env[local] = shp
            ctx.weights[local] = 8
            unused.append(local)
        # v2 statements: in place, index assignment, unpacking, no_grad blocks
        if self.v2 and s.coin(STATEMENT_P):
            self.statements(mod, ctx, unused, {ln[0]: ln[1] for ln in mod.lines if isinstance(ln, tuple)})
            if any(isinstance(ln, Stmt) and ln.kind == "with" for ln in mod.lines):
                mod.as_list = False
        # the result
        choices = list(in_shapes) + [ctx.env[u] for u in unused[-2:]] + [self.shape()]
        out_shape = s.choice(choices)
        ret = ctx.expr(out_shape, MAX_EXPR_DEPTH - 1)
        ret = ctx.fold_in(ret, out_shape, [u for u in unused if u not in ctx.used])
        ret = ctx.fold_in(ret, out_shape, [a for a in arg_names if a not in ctx.used and s.coin(0.8)])
        if not mod.children and not mod.lines and s.coin(0.08):
            i = s.int(0, len(arg_names) - 1)   # the forward returns its argument itself
            ret, out_shape = ("n", arg_names[i]), in_shapes[i]
        for call, shp in ctx.inline:  # inline child calls not placed yet: every call happens
            ret = ctx.fold_term(ret, out_shape, call, shp)
        mod.ret = ret
        mod.out_shape = out_shape
        return mod

    def multi_input(self, name: str, path: str, in_shapes: list, depth: int) -> Mod:
        if self.s.coin(0.3):
            return self.function_module(name, path, in_shapes)
        return self.custom(name, path, in_shapes, depth)

    # ------------------------------------------------------------------ custom Functions
    def function_module(self, name: str, path: str, in_shapes: list) -> Mod:
        """A hand-written autograd.Function with declared formulas: right or (often) wrong."""
        s = self.s
        pre = f"{path}." if path else ""
        correct = s.coin(0.6)
        if len(in_shapes) >= 2:
            args = [f"a{i}" for i in range(len(in_shapes))]
            shape = in_shapes[0]
            for shp in in_shapes[1:]:
                shape = broadcast(shape, shp) if _broadcastable(shape, shp) else None
                if shape is None:
                    break
            if shape is None:  # make the extra inputs broadcast with the first
                in_shapes = [in_shapes[0]] + [_sub_shape(in_shapes[0], s) for _ in in_shapes[1:]]
                shape = in_shapes[0]
                for shp in in_shapes[1:]:
                    shape = broadcast(shape, shp)
            a, b = args[0], args[1]
            template = s.weighted([(2, "mul_add"), (1, "mul_sig")])
            if template == "mul_sig" and not self.spend():
                template = "mul_add"
            if template == "mul_add":
                fwd = ("b", "+", ("b", "*", ("n", a), ("n", b)), ("n", a))
                grads = {a: f"grad_output * ({b} + 1)" if correct else f"grad_output * {b}",
                         b: f"grad_output * {a}"}
            else:
                fwd = ("b", "*", ("n", a), ("f", "sigmoid", ("n", b)))
                grads = {a: f"grad_output * sigmoid({b})",
                         b: (f"grad_output * {a} * sigmoid({b}) * (1 - sigmoid({b}))" if correct
                             else f"grad_output * {a} * sigmoid({b})")}
            for extra in args[2:]:
                fwd = ("b", "-", fwd, ("n", extra))
                grads[extra] = "-grad_output" if correct else "grad_output"
            mod = Mod(name, path, None, args, list(in_shapes), shape, ret=fwd, write_inputs=True)
        else:
            shape = in_shapes[0]
            arg = s.weighted([(3, "x"), (1, "u")])
            x = ("n", arg)
            template = s.weighted([(2, "square"), (1, "tanh"), (1, "sin"), (1, "exp"), (2, "scale"),
                                   (2, "linear" if len(shape) == 2 else "scale"), (1, "two_lines")])
            if template in ("tanh", "sin", "exp", "two_lines") and not self.spend():
                template = "square"
            if self.v2 and s.coin(DIRTY_P):
                return self.dirty_function(name, path, arg, shape, correct)
            params = []
            if template == "square":
                fwd, grads = ("b", "*", x, x), {arg: f"2 * grad_output * {arg}" if correct else f"grad_output * {arg}"}
            elif template == "tanh":
                fwd = ("f", "tanh", x)
                grads = {arg: "grad_output * (1 - output * output)" if correct else "grad_output * output"}
            elif template == "sin":
                fwd = ("f", "sin", x)
                grads = {arg: f"grad_output * cos({arg})" if correct else f"grad_output * sin({arg})"}
            elif template == "exp":
                fwd, grads = ("f", "exp", x), {arg: "grad_output * output" if correct else "grad_output"}
            elif template == "scale":
                wshape = _sub_shape(shape, s)
                params = [self.leaf(pre + "w", wshape, s.coin(0.85))]
                fwd = ("b", "*", x, ("n", "w"))
                grads = {arg: "grad_output * w", "w": f"grad_output * {arg}" if correct else "grad_output"}
            elif template == "linear":
                out_f = self.dim()
                params = [self.leaf(pre + "weight", (out_f, shape[1]), s.coin(0.85)),
                          self.leaf(pre + "bias", (out_f,), s.coin(0.85))]
                fwd = ("b", "+", ("b", "@", x, ("f", "t", ("n", "weight"))), ("n", "bias"))
                grads = {arg: "grad_output @ weight",
                         "weight": f"t(grad_output) @ {arg}" if correct else f"t(grad_output) @ {arg} * 2",
                         "bias": "grad_output"}
                shape = (shape[0], out_f)
            else:  # two lines: locals of the forward are names in the backward formulas
                params = [self.leaf(pre + "w", _sub_shape(shape, s), s.coin(0.85))]
                lines = [("h", ("b", "*", x, ("n", "w")))]
                fwd = ("f", "tanh", ("n", "h"))
                grads = {arg: "grad_output * (1 - output * output) * w" if correct else "grad_output * w",
                         "w": f"grad_output * (1 - output * output) * {arg}"}
                mod = Mod(name, path, None, [arg], [in_shapes[0]], shape, params, lines=lines, ret=fwd,
                          write_inputs=arg != "x")
                mod.function = self.fn_spec(mod, grads, correct)
                return mod
            mod = Mod(name, path, None, [arg], [in_shapes[0]], shape, params, ret=fwd, write_inputs=arg != "x")
        mod.function = self.fn_spec(mod, grads, correct)
        return mod

    def dirty_function(self, name: str, path: str, arg: str, shape: tuple, correct: bool) -> Mod:
        """A Function that writes its input in place and returns it: ``ctx.mark_dirty(arg)``,
        the result saved (``save: [arg]``, the input after the write and the version bump).
        A leaf that requires grad, or an input an earlier node saved, makes PyTorch raise:
        those are predicted errors."""
        s = self.s
        op = s.weighted([(3, "mul_"), (2, "add_"), (1, "exp_")])
        if op == "exp_" and not self.spend():
            op = "mul_"
        if op == "mul_":
            k = s.choice([Fr(2), Fr(-3), Fr(1, 2)])
            args = (("c", k),)
            grad = f"grad_output * {src(('c', k))}" if correct else "grad_output"
        elif op == "add_":
            args = (("c", s.choice([Fr(1), Fr(-2), Fr(1, 4)])),)
            grad = "grad_output + 0 * saved[0]" if correct else "grad_output * saved[0]"
        else:
            args = ()
            grad = "grad_output * saved[0]" if correct else "grad_output"
        line = Stmt("inplace", arg, op=op, args=args, label=f"dirty {op}")
        mod = Mod(name, path, None, [arg], [shape], shape, [], lines=[line], ret=("n", arg),
                  write_inputs=arg != "x")
        spec = self.fn_spec(mod, {arg: grad}, correct)
        spec.dirty, spec.save = (arg,), (arg,)
        mod.function = spec
        return mod

    def fn_spec(self, mod: Mod, grads: dict, correct: bool) -> FnSpec:
        from_text = {k: v for k, v in grads.items() if not self.s.coin(0.1)}  # a missing slot returns None
        cls = self.s.choice(["Fn", "Custom", "My"]) + self.fresh("F").upper()
        return FnSpec(cls, from_text, correct and len(from_text) == len(grads))

    # ------------------------------------------------------------------ the loss
    def loss(self, y_shape: tuple):
        s = self.s
        ctx = ExprCtx(self, None, allow_params=False, allow_targets=True)
        ctx.env["y"] = y_shape
        ctx.weights["y"] = 10
        for l in self.inputs:
            ctx.env[l.name] = l.shape
            ctx.weights[l.name] = 1
        kind = s.weighted([(3, "sq"), (2, "reduce"), (2, "random"), (1, "normsq")])
        y = ("n", "y")
        if kind == "sq":
            t = ("n", ctx.target(y_shape))
            return ("f", "sum", ("b", "**", ("b", "-", y, t), ("c", Fr(2))))
        if kind == "normsq":
            t = ("n", ctx.target(y_shape))
            return ("b", "*", ("c", Fr(1, 2)), ("b", "**", ("f", "norm", ("b", "-", y, t)), ("c", Fr(2))))
        if kind == "reduce":
            inner = y if s.coin(0.5) else ("b", s.choice(["*", "+", "-"]), y, ctx.expr(y_shape, 1))
            return ("f", ctx.reduction(), inner) if y_shape != () or s.coin(0.5) else inner
        inner = ctx.fold_in(ctx.expr(y_shape, 2), y_shape, ["y"]) if s.coin(0.7) else ctx.expr(y_shape, 2)
        if "y" not in ctx.used:
            inner = ("b", "+", inner, y)
        out = inner if y_shape == () else ("f", ctx.reduction(), inner)
        return out


def _on_first(tree):
    """The loss tree with ``y`` read as ``y[0]`` (the forward now returns a tuple)."""
    if tree == ("n", "y"):
        return ("idx", ("n", "y"), 0)
    if isinstance(tree, tuple):
        return tuple(_on_first(x) if isinstance(x, tuple) else x for x in tree)
    return tree
