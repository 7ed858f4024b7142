"""Random valid problem files, for differential testing of ``solve`` against real PyTorch.

One generator, two sources of randomness:

* :func:`problems` is a Hypothesis strategy (``@given(problems())``) that yields YAML text;
* :func:`generate` takes a ``random.Random`` (the sweep in benchmarks/sweep.py: problem ``i``
  of seed ``s`` is ``generate(random.Random(f"{s}-{i}"))``, reproducible one by one).

What it builds (each with a weight, so every feature appears often): a root module that is a
Sequential, a built-in, or a custom module with one or several inputs; built-in Linear (with
and without bias, on 1-D, 2-D and 3-D inputs), ReLU, Tanh, Sigmoid, Identity, nested
Sequentials; custom modules with multi-line forwards and children (a child called twice,
multi-input children fed tensors that do not require grad), custom autograd Functions with
correct and wrong backward formulas; every expression op (+ - * / ** @ unary -, relu tanh
sigmoid exp log sin cos sqrt abs sum mean norm t) with numbers on either side, broadcasting
and matmul of ranks 1-2 and N-D @ 1-D/2-D; leaves with and without requires_grad, parameters
with requires_grad false; targets; a loss or none (then ``backward.grad_output`` when the
output is not a scalar); ``backward(inputs=...)`` and ``method: grad``; hooks of every kind
(module full_backward / full_backward_pre / backward / forward / forward_pre, tensor hook and
retain_grad, node pre / post) returning nothing, a rescaled or replaced gradient, tuples with
None entries, ``does:`` rebinding, removed before or after backward, registered after the
forward; and variants.

Validity by construction: the generator tracks shapes statically, and for each variant runs
a small abstract interpretation of the model (which tensor requires grad, has a grad_fn, and
which edges that grad_fn has) mirroring ``nn.Module._call_impl``, so that hooks are only put
where PyTorch accepts them and their returned tuples have the right length and only touch
defined slots. What it cannot see statically is *values*: a forward that is not finite (the
solver refuses: log of a negative number, division by zero) and a hook argument that turns
out to be None at run time (PyTorch raises TypeError too). :func:`check` skips the first
kind, and for any other ProblemError requires PyTorch to raise as well.

Values are small rationals (mostly dyadic, so exact in floating point), zeros included, and
a "kink" form puts relu, abs, sqrt, norm and x ** 0 exactly at 0. Exact values of nested
transcendental functions swell, so each problem gets a budget of them
(:data:`TRANSCENDENTAL_BUDGET`, counted per call of the module they are in); past it, ops
stay rational. One problem in five is hook-dense (8-14 hooks a variant, piled on a couple
of tensors and modules).

Generating never imports ``adjoint``: it only writes YAML. :func:`check` (used by
tests/test_differential.py and benchmarks/sweep.py) then solves a file, runs it in PyTorch
through ``adjoint.torchside`` and compares with ``adjoint.compare``.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field, replace
from fractions import Fraction as Fr

# ============================================================================ randomness


class Src:
    """Draws from Hypothesis (``draw``) or from a ``random.Random``. Hypothesis shrinks every
    draw toward 0, so the first option of a choice is the simplest one."""

    def __init__(self, draw=None, rng: random.Random | None = None):
        self._draw = draw
        self._rng = rng
        if draw is not None:
            from hypothesis import strategies as st
            self._st = st

    def int(self, lo: int, hi: int) -> int:
        if self._draw is not None:
            return self._draw(self._st.integers(lo, hi))
        return self._rng.randint(lo, hi)

    def coin(self, p: float) -> bool:
        """True with probability p (shrinks to False)."""
        return self.int(0, 999) >= round((1 - p) * 1000)

    def choice(self, seq):
        seq = list(seq)
        return seq[self.int(0, len(seq) - 1)]

    def weighted(self, pairs):
        """pairs: [(weight, value)]; shrinks toward the first."""
        pairs = [(w, v) for w, v in pairs if w > 0]
        total = sum(w for w, _ in pairs)
        r = self.int(0, total - 1)
        for w, v in pairs:
            if r < w:
                return v
            r -= w
        raise AssertionError

    def subset(self, seq, p: float):
        return [x for x in seq if self.coin(p)]


# ============================================================================ expression trees
# ('n', name) | ('c', Fraction) | ('f', fn, arg) | ('neg', a) | ('b', op, a, b)
# | ('call', child, (args...)) | ('idx', tree, i) | ('tup', (items...)) | ('none',)

UNARY_ELEMENTWISE = ("relu", "tanh", "sigmoid", "exp", "log", "sin", "cos", "sqrt", "abs")
RATIONAL_UNARY = ("relu", "abs")   # exact results stay rationals
#: Transcendental ops per problem (tanh, exp, sqrt, fractional powers, Tanh modules, ...).
#: Exact values of nested transcendental expressions swell (thousands of SymPy ops per
#: element after a few layers), and solve time with them; past the budget the generator
#: sticks to ops whose exact values stay rational.
TRANSCENDENTAL_BUDGET = 4
REDUCTIONS = ("sum", "mean", "norm")

VALUES = [Fr(1, 2), Fr(-1, 2), Fr(1), Fr(-1), Fr(3, 4), Fr(-3, 4), Fr(2), Fr(-2), Fr(1, 4), Fr(-1, 4),
          Fr(3, 2), Fr(-3, 2), Fr(0), Fr(5, 4), Fr(-5, 4), Fr(1, 8)]
ODD_VALUES = [Fr(1, 3), Fr(-2, 3), Fr(3, 10), Fr(-7, 10), Fr(1, 5)]


def num_text(v: Fr) -> str:
    """A number as expression text (and YAML number when dyadic with a short decimal)."""
    if v.denominator == 1:
        return str(v.numerator)
    d = v.denominator
    if d & (d - 1) == 0 and d <= 64:
        s = f"{float(v):.10f}".rstrip("0")
        if Fr(s) == v:
            return s
    return f"{v.numerator}/{v.denominator}"


def _atomic(t) -> bool:
    if t[0] in ("n", "f", "call", "idx", "tup", "none"):
        return True
    if t[0] == "c":
        return t[1] >= 0 and "/" not in num_text(t[1])
    return False


def src(t) -> str:
    k = t[0]
    if k == "n":
        return t[1]
    if k == "c":
        return num_text(t[1])
    if k == "f":
        return f"{t[1]}({src(t[2])})"
    if k == "neg":
        return f"-{_par(t[1])}"
    if k == "b":
        return f"{_par(t[2])} {t[1]} {_par(t[3])}"
    if k == "call":
        return f"{t[1]}({', '.join(src(a) for a in t[2])})"
    if k == "idx":
        return f"{src(t[1])}[{t[2]}]"
    if k == "tup":
        inner = ", ".join(src(a) for a in t[1])
        return f"({inner},)" if len(t[1]) == 1 else f"({inner})"
    if k == "none":
        return "None"
    raise TypeError(t)


def _par(t) -> str:
    return src(t) if _atomic(t) else f"({src(t)})"


def op_names(t, out: Counter) -> None:
    """Count the expression ops of a tree (for coverage reports)."""
    k = t[0]
    if k == "f":
        out[t[1]] += 1
        op_names(t[2], out)
    elif k == "neg":
        out["unary -"] += 1
        op_names(t[1], out)
    elif k == "b":
        a_num, b_num = t[2][0] == "c", t[3][0] == "c"
        tag = t[1] + (" n" if b_num else "") if not a_num else "n " + t[1]
        out[tag] += 1
        op_names(t[2], out)
        op_names(t[3], out)
    elif k == "call":
        out["child call"] += 1
        for a in t[2]:
            op_names(a, out)
    elif k == "idx":
        op_names(t[1], out)
    elif k == "tup":
        for a in t[1]:
            op_names(a, out)


# ============================================================================ static problem model

@dataclass
class Leaf:
    name: str                 # full tensor name
    shape: tuple
    values: list              # row-major Fractions
    rg: bool
    scale: Fr | None = None   # written as {value, scale}: values are pre-scale


@dataclass
class FnSpec:
    name: str
    grads: dict               # slot -> tree | None (absent key: returns None)
    correct: bool


@dataclass
class Mod:
    name: str                 # key under the parent ("model" for the root)
    path: str                 # "" for the root
    type: str | None
    inputs: list              # argument names
    in_shapes: list
    out_shape: tuple
    params: list = field(default_factory=list)      # Leaf (full names)
    children: list = field(default_factory=list)    # Mod
    lines: list = field(default_factory=list)       # (local name, tree)
    ret: object = None
    function: FnSpec | None = None
    bias: bool = True                               # Linear
    write_inputs: bool = False                      # emit inputs: even when it is [x]
    as_list: bool = False                           # forward written as a YAML list of lines

    @property
    def label(self) -> str:
        return self.path or "model"

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()

    def param(self, short: str) -> Leaf | None:
        for p in self.params:
            if p.name.rsplit(".", 1)[-1] == short:
                return p
        return None


@dataclass
class HookSpec:
    on: str                   # module | tensor | node
    target: str
    kind: str
    returns: object = None    # tree or None
    does: list = field(default_factory=list)   # [(name, tree)]
    remove: str | None = None
    when: str | None = None
    label: str | None = None
    implicit_kind: bool = False   # tensor hooks: leave out kind: hook (the default)


@dataclass
class BackwardSpec:
    method: str = "backward"
    inputs: list = field(default_factory=list)
    grad_output: tuple | None = None   # (shape, values)

    def empty(self) -> bool:
        return self.method == "backward" and not self.inputs and self.grad_output is None


@dataclass
class VariantSpec:
    name: str
    inputs: dict              # name -> Leaf overriding the top level (empty: none)
    hooks: list | None        # None: inherit the top-level hooks
    backward: BackwardSpec | None


@dataclass
class ProblemSpec:
    name: str
    inputs: list              # Leaf
    targets: list             # Leaf
    model: Mod
    loss: object              # tree or None
    hooks: list
    backward: BackwardSpec
    variants: list | None     # VariantSpec, or None: no variants key
    dtype: str | None         # None: no dtype key (float32)


# ============================================================================ abstract interpretation
# Mirrors adjoint's contract / nn.Module._call_impl: for one variant, which tensor requires
# grad, whether it has a grad_fn, and the edges of that grad_fn.

@dataclass(frozen=True)
class Info:
    shape: tuple
    rg: bool
    gf: bool = False
    edges: tuple = ()         # per grad_fn input slot: is the edge defined
    nouts: int = 1            # outputs of the grad_fn
    nr: int = 0               # which output of the grad_fn this tensor is
    deps: frozenset = frozenset()   # named tensors requiring grad that this one depends on
    leaf: bool = False


def _node(shape, edges, deps, nouts=1, nr=0) -> Info:
    rg = any(edges)
    return Info(shape, rg, rg, tuple(edges) if rg else (), nouts if rg else 1, nr if rg else 0,
                frozenset(deps) if rg else frozenset())


@dataclass
class CallInfo:
    path: str
    callid: str
    args_rg: tuple            # after forward-pre hooks, before the BackwardHookFunction
    out: Info
    wrapped_out: bool


class Analysis:
    def __init__(self, p: ProblemSpec, inputs: list, hooks: list):
        self.p = p
        self.inputs = inputs
        self.names: dict[str, Info] = {}
        self.calls: list[CallInfo] = []
        self.counts: Counter = Counter()
        self.mhooks: dict[str, list[HookSpec]] = {}
        for h in hooks:
            if h.on == "module" and h.when != "after_forward":
                self.mhooks.setdefault(h.target, []).append(h)
        self.globals: dict[str, Info] = {}
        self.params: dict[str, Info] = {}
        self.root: Info | None = None
        self.ops: Counter = Counter()     # coverage: matmul ranks, broadcasting, mixed inputs
        self.run()

    def leaf_info(self, leaf: Leaf, name: str) -> Info:
        return Info(leaf.shape, leaf.rg, False, (), 1, 0, frozenset([name]) if leaf.rg else frozenset(), True)

    def bind(self, name: str, info: Info) -> Info:
        if info.rg:
            info = replace(info, deps=info.deps | {name})
        self.names[name] = info
        return info

    def run(self) -> None:
        for leaf in self.inputs + self.p.targets:
            self.globals[leaf.name] = self.bind(leaf.name, self.leaf_info(leaf, leaf.name))
        for m in self.p.model.walk():
            for leaf in m.params:
                self.params[leaf.name] = self.bind(leaf.name, self.leaf_info(leaf, leaf.name))
        out = self.call(self.p.model, [self.globals[leaf.name] for leaf in self.inputs])
        if "y" not in self.names:
            out = self.bind("y", out)
        self.root = out
        if self.p.loss is not None:
            self.root = self.bind("loss", self.eval(self.p.loss, dict(self.names), None))

    # ------------------------------------------------------------------ modules
    def call(self, mod: Mod, args: list) -> Info:
        self.counts[mod.label] += 1
        k = self.counts[mod.label]
        callid = mod.label if k == 1 else f"{mod.label}#{k}"
        regs = self.mhooks.get(mod.label, [])
        args = list(args)
        for h in regs:
            if h.kind == "forward_pre" and h.returns is not None:
                r = self.eval(h.returns, {"input": tuple(args)}, None)
                args = list(r) if isinstance(r, tuple) else [r]
        args_rg = tuple(a.rg for a in args)
        if len(args) > 1 and any(args_rg) and not all(args_rg):
            self.ops["multi-input call, mixed requires_grad"] += 1
        wrap = any(h.kind in ("full_backward", "full_backward_pre") for h in regs)
        if wrap and any(args_rg):  # BackwardHookFunction: one node, an edge per input, an output each
            args = [Info(a.shape, a.rg, a.rg, args_rg if a.rg else (), len(args) if a.rg else 1, i if a.rg else 0,
                         a.deps) for i, a in enumerate(args)]
        out = self.forward(mod, args, callid)
        for h in regs:
            if h.kind == "forward" and h.returns is not None:
                out = self.eval(h.returns, {"input": tuple(args), "output": out}, None)
        wrapped_out = False
        if wrap and out.rg:
            out = Info(out.shape, True, True, (True,), 1, 0, out.deps)
            wrapped_out = True
        out = self.bind(callid, out)
        self.calls.append(CallInfo(mod.label, callid, args_rg, out, wrapped_out))
        return out

    def forward(self, mod: Mod, args: list, callid: str) -> Info:
        if mod.type == "Linear":
            x = args[0]
            w = self.params[mod.param("weight").name]
            b = self.params[mod.param("bias").name] if mod.bias else None
            out_shape = x.shape[:-1] + (w.shape[0],)
            deps = x.deps | w.deps | (b.deps if b else frozenset())
            if b is not None and len(x.shape) == 2:
                return _node(out_shape, (b.rg, x.rg, w.rg), deps)     # AddmmBackward0
            if b is None and len(x.shape) == 2:
                return _node(out_shape, (x.rg, w.rg), deps)           # MmBackward0
            return _node(out_shape, (x.rg or w.rg or (b is not None and b.rg),), deps)
        if mod.type in ("ReLU", "Tanh", "Sigmoid"):
            return _node(args[0].shape, (args[0].rg,), args[0].deps)
        if mod.type == "Identity":
            return args[0]
        if mod.type == "Sequential":
            x = args[0]
            for c in mod.children:
                x = self.call(c, [x])
            return x
        env = dict(self.globals)
        env.update({p.name.rsplit(".", 1)[-1]: self.params[p.name] for p in mod.params})
        env.update(dict(zip(mod.inputs, args)))
        if mod.function is not None:
            slots = list(args) + [self.params[p.name] for p in mod.params]
            return _node(mod.out_shape, tuple(s.rg for s in slots), frozenset().union(*(s.deps for s in slots)))
        prefix = f"{callid}." if mod.path else ""
        for name, tree in mod.lines:
            env[name] = self.bind(prefix + name, self.eval(tree, env, mod))
        out = self.eval(mod.ret, env, mod)
        assert out.shape == tuple(mod.out_shape), (mod.label, out.shape, mod.out_shape)
        return out

    # ------------------------------------------------------------------ expressions
    def eval(self, t, env: dict, mod: Mod | None):
        k = t[0]
        if k == "n":
            return env[t[1]]
        if k == "c":
            return t[1]
        if k == "none":
            return None
        if k == "idx":
            return self.eval(t[1], env, mod)[t[2]]
        if k == "tup":
            return tuple(self.eval(a, env, mod) for a in t[1])
        if k == "call":
            child = next(c for c in mod.children if c.name == t[1])
            args = [self.eval(a, env, mod) for a in t[2]]
            assert [a.shape for a in args] == [tuple(x) for x in child.in_shapes], (child.path, args)
            return self.call(child, args)
        if k == "neg":
            a = self.eval(t[1], env, mod)
            return _node(a.shape, (a.rg,), a.deps)
        if k == "f":
            a = self.eval(t[2], env, mod)
            shape = () if t[1] in REDUCTIONS else (tuple(reversed(a.shape)) if t[1] == "t" else a.shape)
            return _node(shape, (a.rg,), a.deps)
        if k == "b":
            op = t[1]
            a = self.eval(t[2], env, mod)
            b = self.eval(t[3], env, mod)
            if isinstance(a, Fr) or isinstance(b, Fr):
                x = b if isinstance(a, Fr) else a
                if op in ("**",) or (isinstance(a, Fr) and op == "-"):
                    return _node(x.shape, (x.rg,), x.deps)      # pow / rpow / rsub
                return _node(x.shape, (x.rg, False), x.deps)    # wrapped number: a None edge
            deps = a.deps | b.deps
            if op == "@":
                shape = matmul_shape(a.shape, b.shape)
                self.ops[f"@ {min(len(a.shape), 3)}-D @ {len(b.shape)}-D"] += 1
                da, db = len(a.shape), len(b.shape)
                if (da == 1 and db == 2) or da >= 3:
                    return _node(shape, (a.rg or b.rg,), deps)  # squeeze / _unsafe_view
                return _node(shape, (a.rg, b.rg), deps)
            if a.shape != b.shape:
                self.ops["broadcast"] += 1
            return _node(broadcast(a.shape, b.shape), (a.rg, b.rg), deps)
        raise TypeError(t)


def broadcast(a: tuple, b: tuple) -> tuple:
    n = max(len(a), len(b))
    pa = (1,) * (n - len(a)) + tuple(a)
    pb = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(pa, pb):
        assert x == y or x == 1 or y == 1, (a, b)
        out.append(max(x, y))
    return tuple(out)


def matmul_shape(a: tuple, b: tuple) -> tuple:
    assert a and b and len(b) <= 2 and a[-1] == b[0], (a, b)
    if len(a) == 1 and len(b) == 1:
        return ()
    if len(a) == 2 and len(b) == 1:
        return (a[0],)
    if len(a) == 1 and len(b) == 2:
        return (b[1],)
    if len(b) == 1:
        return a[:-1]
    return a[:-1] + (b[1],)


# ============================================================================ the generator

MAX_EXPR_DEPTH = 3
#: How often a custom forward is written as a YAML list of lines instead of a block string
#: (once refused by adjoint: tests/data/regressions/forward_as_yaml_list.yaml).
FORWARD_AS_LIST = 0.2


class Gen:
    def __init__(self, s: Src, budget: int = TRANSCENDENTAL_BUDGET):
        self.s = s
        self.counter = Counter()
        self.targets: list[Leaf] = []
        self.inputs: list[Leaf] = []
        self.budget = budget
        self.mult = 1          # how many times the module being generated will run

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
        if s.coin(0.7):
            loss = self.loss(model.out_shape)
        name = f"gen-{self.fresh('p')}"
        dtype = s.weighted([(8, "float64"), (1, "float32"), (1, None)])
        p = ProblemSpec(name, self.inputs, self.targets, model, loss, [], BackwardSpec(), None, dtype)
        if not self.ensure_grad(p):
            return p
        self.hooks_and_variants(p)
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

    # ------------------------------------------------------------------ hooks and variants
    def hooks_and_variants(self, p: ProblemSpec) -> None:
        s = self.s
        # one problem in five is hook-dense: 8-14 hooks a variant, most of them on a couple of
        # tensors and modules (ordering between many hooks at one node is where engines slip)
        self.dense = s.coin(0.2)
        self.focus_p = 0.8 if self.dense else 0.5
        mode = s.weighted([(3, "plain"), (3, "variants"), (1, "inherit")])
        if mode == "plain":
            p.hooks, p.backward = self.variant_hooks(p, p.inputs, self.hook_count())
            return
        if mode == "inherit":  # top-level hooks, variants that only change values or nothing
            p.hooks, p.backward = self.variant_hooks(p, p.inputs, self.hook_count())
            p.variants = []
            for i in range(s.int(1, 3)):
                new = {}
                if s.coin(0.5):
                    for l in p.inputs:
                        if s.coin(0.6):
                            new[l.name] = Leaf(l.name, l.shape, self.values(l.shape), l.rg)
                p.variants.append(VariantSpec(f"v{i}", new, None, None))
            return
        p.backward = BackwardSpec(grad_output=self.needs_grad_output(p))
        if s.coin(0.3):
            p.hooks, _ = self.variant_hooks(p, p.inputs, self.hook_count(), backward=False)
        p.variants = []
        for i in range(s.int(1, 3)):
            vname = s.choice(["v", "case", "run-"]) + str(i)
            new = {}
            if s.coin(0.35):
                for l in p.inputs:
                    if s.coin(0.5):
                        rg = l.rg if s.coin(0.5) else not l.rg
                        vals = self.values(l.shape) if s.coin(0.7) else list(l.values)
                        new[l.name] = Leaf(l.name, l.shape, vals, rg)
            inputs = [new.get(l.name, l) for l in p.inputs]
            if not Analysis(p, inputs, []).root.rg:
                new = {}
                inputs = list(p.inputs)
            hooks, back = self.variant_hooks(p, inputs, self.hook_count())
            if back.empty() and s.coin(0.5):
                back = None
            p.variants.append(VariantSpec(vname, new, hooks, back))

    def hook_count(self) -> int:
        if self.dense:
            return self.s.int(8, 14)
        return self.s.weighted([(1, 0), (3, 1), (4, 2), (3, 3), (2, 5), (1, 8)])

    def needs_grad_output(self, p: ProblemSpec):
        if p.loss is None:
            shp = p.model.out_shape
            if shp != () or self.s.coin(0.2):
                return (shp, self.values(shp))
        return None

    def variant_hooks(self, p: ProblemSpec, inputs: list, n: int, backward: bool = True):
        s = self.s
        paths = [m.label for m in p.model.walk()]
        mods = {m.label: m for m in p.model.walk()}
        # 1. module hooks: targets and kinds (legacy and full never on one module)
        module_hooks: list[HookSpec] = []
        mode: dict[str, str] = {}
        focus = [s.choice(paths) for _ in range(2)]   # hooks pile up on a few modules and tensors
        for _ in range(n):
            if not s.coin(0.5):
                continue
            target = s.choice(focus) if s.coin(self.focus_p) else s.choice(paths)
            kind = s.weighted([(4, "full_backward"), (2, "full_backward_pre"), (3, "backward"), (2, "forward"),
                               (2, "forward_pre")])
            fam = {"full_backward": "full", "backward": "legacy"}.get(kind)
            if fam and mode.setdefault(target, fam) != fam:
                continue
            h = HookSpec("module", target, kind)
            if s.coin(0.05):
                h.when = "after_forward"  # too late for module hooks: never called, in torch and in adjoint
            if kind == "forward_pre" and s.coin(0.5):
                m = mods[target]
                if len(m.inputs) == 1 and s.coin(0.3):
                    h.returns = self.fwd_replace(("idx", ("n", "input"), 0))
                else:
                    items = [self.fwd_replace(("idx", ("n", "input"), i)) if s.coin(0.6)
                             else ("idx", ("n", "input"), i) for i in range(len(m.inputs))]
                    h.returns = ("tup", tuple(items))
            elif kind == "forward" and s.coin(0.5):
                h.returns = self.fwd_replace(("n", "output"))
            module_hooks.append(h)
        # 2. what requires grad, in this variant, with these forward-time hooks
        a = Analysis(p, inputs, module_hooks)
        # 3. returns of module backward hooks
        for h in module_hooks:
            if h.kind in ("full_backward", "full_backward_pre", "backward") and s.coin(0.5):
                h.returns = self.module_returns(h, mods[h.target], [c for c in a.calls if c.path == h.target])
            if h.kind in ("full_backward", "backward"):
                self.tuple_does(h, "grad_input")
            elif h.kind == "full_backward_pre":
                self.tuple_does(h, "grad_output")
        # 4. tensor and node hooks
        rg_names = [nm for nm, inf in a.names.items() if inf.rg]
        gf_names = [nm for nm, inf in a.names.items() if inf.gf]
        # the backward's form first: hooks then like to sit on the tensors it starts from or
        # is taken with respect to (captured vs executed nodes, retained non-leaf inputs)
        back = BackwardSpec(grad_output=self.needs_grad_output(p)) if backward else BackwardSpec()
        if backward:
            deps = sorted(a.root.deps)
            choice = s.weighted([(6, "plain"), (2, "inputs"), (2, "grad")])
            if choice != "plain" and deps:
                chosen = [d for d in deps if s.coin(0.4)] or [s.choice(deps)]
                back.method = "grad" if choice == "grad" else "backward"
                unreachable = [nm for nm in rg_names if nm not in a.root.deps and nm not in chosen]
                if unreachable and s.coin(0.1 if choice == "inputs" else 0.03):
                    # backward(inputs=) leaves its .grad None; autograd.grad raises (both sides)
                    chosen.insert(s.int(0, len(chosen)), s.choice(unreachable))
                back.inputs = chosen
        others: list[HookSpec] = []
        self.focus = [self.pick_target(rg_names) for _ in range(2)] if rg_names else []
        wrt = [nm for nm in back.inputs if nm in rg_names]
        if wrt and s.coin(0.7):
            self.focus[0] = s.choice(wrt)
        for _ in range(n):
            kind = s.weighted([(5, "tensor"), (2, "retain"), (3, "node")])
            if kind == "node" and gf_names:
                target = self.pick_target(gf_names)
                info = a.names[target]
                nk = s.weighted([(1, "pre"), (1, "post")])
                h = HookSpec("node", target, nk)
                if s.coin(0.5):
                    h.returns = self.node_returns(nk, info)
                self.tuple_does(h, "grad_outputs" if nk == "pre" else "grad_inputs")
            elif kind == "retain" and rg_names:
                h = HookSpec("tensor", self.pick_target(rg_names), "retain_grad")
            elif rg_names:
                h = HookSpec("tensor", self.pick_target(rg_names), "hook", implicit_kind=s.coin(0.5))
                self.tensor_returns(h)
            else:
                continue
            if s.coin(0.1):
                h.when = "after_forward"
            others.append(h)
        for h in module_hooks + others:
            if h.kind != "retain_grad" and s.coin(0.15):
                h.remove = s.choice(["before_backward", "after_backward"])
            if s.coin(0.1):
                h.label = f"hook {self.fresh('L')}"
        # 5. interleave, keeping each list's own order (forward-pre hooks chain in order)
        hooks = []
        i = j = 0
        while i < len(module_hooks) or j < len(others):
            if j >= len(others) or (i < len(module_hooks) and s.coin(0.5)):
                hooks.append(module_hooks[i])
                i += 1
            else:
                hooks.append(others[j])
                j += 1
        return hooks, back

    def pick_target(self, names: list) -> str:
        focus = [n for n in getattr(self, "focus", []) if n in names]
        if focus and self.s.coin(self.focus_p):
            return self.s.choice(focus)
        # prefer non-leaf, named intermediates and module outputs a little
        weighted = [(3 if ("." in n or n.startswith("h") or n in ("loss", "y", "model")) else 2, n) for n in names]
        return self.s.weighted(weighted)

    def fwd_replace(self, t):
        s = self.s
        return s.weighted([(3, ("b", "*", t, ("c", s.choice([Fr(2), Fr(-1), Fr(1, 2)])))),
                           (2, ("b", "+", t, ("c", Fr(1)))), (1, ("f", "tanh", t)), (1, ("neg", t)),
                           (1, ("b", "*", ("c", Fr(3)), t))])

    def rescale(self, t):
        s = self.s
        return s.weighted([(4, ("b", "*", ("c", s.choice([Fr(2), Fr(3), Fr(-1), Fr(1, 2)])), t)),
                           (2, ("b", "*", t, ("c", Fr(2)))),
                           (2, ("b", "+", ("b", "*", t, ("c", Fr(0))), ("c", Fr(1)))),   # replace by ones
                           (1, ("b", "+", t, ("c", Fr(1)))), (1, ("neg", t)), (1, ("b", "/", t, ("c", Fr(2))))])

    def tuple_returns(self, arg: str, defined: list, allow_none: bool = True):
        """(entry, ...) over slots: pass through, None, or rescale a slot known to be defined."""
        s = self.s
        items = []
        for i, ok in enumerate(defined):
            src_i = ("idx", ("n", arg), i)
            options = [(2, src_i)]
            if allow_none:
                options.append((1, ("none",)))
            if ok:
                options.append((5, self.rescale(src_i)))
            items.append(s.weighted(options))
        if all(it[0] == "none" for it in items) and s.coin(0.3):
            return ("none",)
        return ("tup", tuple(items))

    def module_returns(self, h: HookSpec, m: Mod, calls: list):
        s = self.s
        if h.kind == "full_backward":
            n = len(m.inputs)
            if any(not any(c.args_rg) for c in calls):
                # no input requires grad: PyTorch allows only None (or all-None) returns
                return ("tup", tuple(("none",) for _ in range(n))) if s.coin(0.5) else None
            defined = [all(c.args_rg[i] for c in calls) for i in range(n)]
            if n == 1 and m.in_shapes[0] == m.out_shape and defined[0] and s.coin(0.2):
                return ("tup", (self.rescale(("idx", ("n", "grad_output"), 0)),))
            return self.tuple_returns("grad_input", defined)
        if h.kind == "full_backward_pre":
            return s.weighted([(5, ("tup", (self.rescale(("idx", ("n", "grad_output"), 0)),))),
                               (1, ("tup", (("none",),))), (1, ("tup", (("idx", ("n", "grad_output"), 0),)))])
        # legacy: the grad_inputs of the last node of the module
        edges = {c.out.edges for c in calls if c.out.gf}
        if len(edges) != 1:
            return None
        return self.tuple_returns("grad_input", list(next(iter(edges))))

    def node_returns(self, kind: str, info: Info):
        s = self.s
        if kind == "pre":
            items = []
            for k in range(info.nouts):
                src_k = ("idx", ("n", "grad_outputs"), k)
                items.append(self.rescale(src_k) if k == info.nr else src_k)
            if s.coin(0.1):
                items[info.nr] = ("none",)
            return ("tup", tuple(items))
        return self.tuple_returns("grad_inputs", list(info.edges))

    def tensor_returns(self, h: HookSpec) -> None:
        s = self.s
        g = ("n", "grad")
        style = s.weighted([(4, "observe"), (5, "rescale"), (1, "does_only"), (1, "does_ret"), (1, "does_rebind")])
        if style == "rescale":
            h.returns = self.rescale(g)
        elif style == "does_only":
            h.does = [("grad", ("b", "*", g, ("c", Fr(3))))]       # rebinding a local: no effect
        elif style == "does_ret":
            h.does = [("g2", ("b", "*", g, ("c", Fr(3))))]
            h.returns = ("b", "-", ("n", "g2"), g)
        elif style == "does_rebind":                              # rebinding, then returning it: effect
            h.does = [("grad", ("b", "+", g, ("c", Fr(1)))), ("grad", ("b", "*", g, ("c", Fr(2))))]
            h.returns = g

    def tuple_does(self, h: HookSpec, arg: str) -> None:
        """Module and node hooks: rebind the tuple argument in ``does:`` (no effect), or copy it
        and return the copy (the same values back)."""
        s = self.s
        if h.returns is None and s.coin(0.15):
            h.does = [(arg, ("none",))] if s.coin(0.5) else [("copy", ("n", arg))]
        elif h.returns is None and s.coin(0.1):
            h.does = [("copy", ("n", arg))]
            h.returns = ("n", "copy")


# ============================================================================ expressions in context

def _broadcastable(a: tuple, b: tuple) -> bool:
    for x, y in zip(reversed(a), reversed(b)):
        if x != y and x != 1 and y != 1:
            return False
    return True


def _sub_shape(shape: tuple, s: Src) -> tuple:
    """A shape that broadcasts into ``shape`` without changing it."""
    if not shape or s.coin(0.2):
        return () if s.coin(0.5) or not shape else shape
    keep = s.int(0, len(shape))
    tail = shape[len(shape) - keep:]
    return tuple(d if s.coin(0.7) else 1 for d in tail)


class ExprCtx:
    """Generates expression trees of a requested shape over the names of one forward (or the loss)."""

    def __init__(self, g: Gen, mod: Mod | None, allow_params: bool, allow_targets: bool):
        self.g = g
        self.s = g.s
        self.mod = mod
        self.env: dict[str, tuple] = {}
        self.weights: dict[str, int] = {}
        self.allow_params = allow_params
        self.allow_targets = allow_targets
        self.used: set[str] = set()
        self.inline: list = []

    def target(self, shape: tuple) -> str:
        for t in self.g.targets:
            if t.shape == shape and self.s.coin(0.5):
                return t.name
        leaf = self.g.leaf(self.g.fresh("t"), shape, False)
        self.g.targets.append(leaf)
        return leaf.name

    def new_leaf(self, shape: tuple):
        if self.allow_params and self.mod is not None and (not self.allow_targets or self.s.coin(0.8)):
            short = self.g.fresh("p") if self.s.coin(0.8) else self.g.fresh("A")
            pre = f"{self.mod.path}." if self.mod.path else ""
            self.mod.params.append(self.g.leaf(pre + short, shape, self.s.coin(0.85)))
            self.env[short] = shape
            self.weights[short] = 2
            return ("n", short)
        if self.allow_targets:
            name = self.target(shape)
            self.env[name] = shape
            self.weights[name] = 1
            return ("n", name)
        return None

    def name_of(self, shape: tuple, exact: bool = True):
        cands = [(self.weights.get(n, 1) * (3 if n not in self.used else 1), n)
                 for n, shp in self.env.items() if shp == shape]
        if cands and (self.s.coin(0.85) or not (self.allow_params or self.allow_targets)):
            n = self.s.weighted(cands)
            self.used.add(n)
            return ("n", n)
        return self.new_leaf(shape)

    def reduction(self) -> str:
        fn = self.s.choice(REDUCTIONS)
        if fn == "norm" and not self.g.spend():
            fn = self.s.choice(["sum", "mean"])
        return fn

    def expr_for_arg(self, shape: tuple):
        if self.s.coin(0.6):
            leaf = self.name_of(shape)
            if leaf is not None:
                return leaf
        return self.expr(shape, 1)

    def number(self, nonzero: bool = False) -> Fr:
        vals = [Fr(2), Fr(1, 2), Fr(-1), Fr(3), Fr(1, 4), Fr(-2), Fr(3, 2), Fr(1, 3)]
        if not nonzero:
            vals += [Fr(0), Fr(1)]
        return self.s.choice(vals)

    def positive(self, shape: tuple, depth: int):
        """An expression of this shape whose values are (nearly always) > 0."""
        e = self.expr(shape, depth)
        rational = [(2, ("b", "+", ("b", "*", e, e), ("c", Fr(1, 4)))), (2, ("b", "+", ("f", "abs", e), ("c", Fr(1, 2))))]
        if self.s.coin(0.4) and self.g.spend():
            return self.s.weighted([(1, ("f", "exp", e)), (1, ("f", "sigmoid", e))])
        return self.s.weighted(rational)

    def maybe_positive(self, shape: tuple, depth: int):
        return self.positive(shape, depth) if self.s.coin(0.8) else self.expr(shape, depth)

    def expr(self, shape: tuple, depth: int):
        s = self.s
        if depth <= 0 or s.coin(0.25):
            for call, shp in list(self.inline):
                if shp == shape and s.coin(0.7):
                    self.inline.remove((call, shp))
                    return call
            leaf = self.name_of(shape)
            if leaf is not None:
                return leaf
            if shape == ():
                inner = self.anything(0)
                if inner is not None:
                    return ("f", self.reduction(), inner)
            # nothing of this shape and no way to make a leaf: broadcast a scalar against a name
            raise _NoExpr()
        options = [(5, "unary"), (8, "binary"), (2, "neg"), (2, "pow"), (1, "rpow"), (1, "tpow"), (1, "kink")]
        if shape == ():
            options += [(5, "reduce"), (2, "matmul")]
        if len(shape) <= 2:
            options.append((1, "t"))
        if 1 <= len(shape) <= 3:
            options.append((3, "matmul"))
        kind = s.weighted(options)
        try:
            return self._expr(kind, shape, depth)
        except _NoExpr:
            return self.expr(shape, 0)

    def anything(self, depth: int):
        names = list(self.env.items())
        if names:
            n, shp = self.s.choice(names)
            self.used.add(n)
            return ("n", n) if depth <= 0 else self.expr(shp, depth)
        return None

    def _expr(self, kind: str, shape: tuple, depth: int):
        s = self.s
        d = depth - 1
        if kind in ("rpow", "tpow") and not self.g.spend():
            kind = "binary"
        if kind == "kink":  # exactly at a non-differentiable point: PyTorch's conventions
            e = self.expr(shape, d)
            zero = ("b", "-", e, e) if s.coin(0.5) else ("b", "*", e, ("c", Fr(0)))
            fn = s.choice(["relu", "abs", "sqrt", "norm", "pow0"] if self.g.spend() else ["relu", "abs", "pow0"])
            if fn == "pow0":
                return ("b", "**", zero, ("c", s.choice([Fr(0), Fr(1), Fr(2)])))
            if fn == "norm":
                return ("b", "+", ("f", "norm", zero), e) if shape == () else ("b", "*", e, ("f", "norm", zero))
            return ("f", fn, zero)
        if kind == "unary":
            fn = s.choice(UNARY_ELEMENTWISE)
            if fn not in RATIONAL_UNARY and not self.g.spend():
                fn = s.choice(RATIONAL_UNARY)
            if fn in ("log", "sqrt"):
                arg = self.maybe_positive(shape, d) if s.coin(0.9) else ("f", "relu", self.expr(shape, d))
            else:
                arg = self.expr(shape, d)
            return ("f", fn, arg)
        if kind == "neg":
            return ("neg", self.expr(shape, d))
        if kind == "reduce":
            shp = self.g.shape()
            return ("f", self.reduction(), self.expr(shp, d))
        if kind == "t":
            return ("f", "t", self.expr(tuple(reversed(shape)), d))
        if kind == "pow":
            n = s.choice([Fr(2), Fr(2), Fr(3), Fr(0), Fr(1), Fr(-1), Fr(1, 2), Fr(-2), Fr(3, 2)])
            if n.denominator != 1 and not self.g.spend():
                n = Fr(2)
            base = self.maybe_positive(shape, d) if (n < 1 or n.denominator != 1) else self.expr(shape, d)
            return ("b", "**", base, ("c", n))
        if kind == "rpow":
            n = s.choice([Fr(2), Fr(1, 2), Fr(3), Fr(3, 2), Fr(1)] + ([Fr(0)] if s.coin(0.1) else []))
            return ("b", "**", ("c", n), self.expr(shape, d))
        if kind == "tpow":
            a_shape, b_shape = self.split_broadcast(shape)
            return ("b", "**", self.positive(a_shape, d), self.expr(b_shape, d))
        if kind == "matmul":
            return self.matmul(shape, d)
        # binary elementwise
        op = s.weighted([(3, "+"), (3, "-"), (3, "*"), (2, "/")])
        form = s.weighted([(6, "tt"), (2, "tn"), (2, "nt")])
        if form == "tn":
            if op == "/":
                return ("b", op, self.expr(shape, d), ("c", self.number(nonzero=True)))
            return ("b", op, self.expr(shape, d), ("c", self.number()))
        if form == "nt":
            right = self.maybe_positive(shape, d) if op == "/" else self.expr(shape, d)
            return ("b", op, ("c", self.number()), right)
        a_shape, b_shape = self.split_broadcast(shape)
        left = self.expr(a_shape, d)
        right = self.maybe_positive(b_shape, d) if op == "/" else self.expr(b_shape, d)
        return ("b", op, left, right)

    def split_broadcast(self, shape: tuple):
        """Two shapes whose broadcast is exactly ``shape``."""
        s = self.s
        style = s.weighted([(5, "same"), (3, "one_small"), (1, "both")])
        if style == "same" or not shape:
            return shape, shape
        if style == "one_small":
            small = _sub_shape(shape, s)
            return (shape, small) if s.coin(0.5) else (small, shape)
        a, b = [], []
        rs = []
        for dim in shape:
            r = s.int(0, 2) if dim > 1 else 0
            rs.append(r)
            a.append(1 if r == 1 else dim)
            b.append(1 if r == 2 else dim)
        drop = 0  # b may lose leading dims where it is 1 anyway
        while drop < len(shape) and (rs[drop] == 2 or shape[drop] == 1) and s.coin(0.5):
            drop += 1
        a, b = tuple(a), tuple(b[drop:])
        return (a, b) if s.coin(0.5) else (b, a)

    def matmul(self, shape: tuple, d: int):
        s = self.s
        k = self.g.dim()
        if shape == ():
            return ("b", "@", self.expr((k,), d), self.expr((k,), d))
        if len(shape) == 1:
            if s.coin(0.5):
                return ("b", "@", self.expr((shape[0], k), d), self.expr((k,), d))
            return ("b", "@", self.expr((k,), d), self.expr((k, shape[0]), d))
        if len(shape) == 2:
            if s.coin(0.3):  # N-D @ 1-D
                return ("b", "@", self.expr(shape + (k,), d), self.expr((k,), d))
            return ("b", "@", self.expr((shape[0], k), d), self.expr((k, shape[1]), d))
        return ("b", "@", self.expr(shape[:-1] + (k,), d), self.expr((k, shape[-1]), d))

    def fold_in(self, tree, shape: tuple, names: list):
        """tree op name ... so that every name is used; names of another shape are reduced first."""
        for n in names:
            self.used.add(n)
            tree = self.fold_term(tree, shape, ("n", n), self.env[n])
        return tree

    def fold_term(self, tree, shape: tuple, term, shp: tuple):
        """tree op term, reducing term to a scalar first when it would change the shape."""
        s = self.s
        if shp != shape and not (len(shp) <= len(shape) and _broadcastable(shape, shp)
                                 and broadcast(shape, shp) == shape):
            term = ("f", self.reduction(), term)
        elif s.coin(0.3):
            fn = s.choice(["tanh", "relu", "sigmoid", "sin"])
            term = ("f", fn if fn == "relu" or self.g.spend() else "abs", term)
        op = s.weighted([(3, "+"), (2, "*"), (1, "-")])
        return ("b", op, tree, term) if s.coin(0.6) else ("b", op, term, tree)


class _NoExpr(Exception):
    pass


# ============================================================================ YAML

def _lit(shape: tuple, values: list) -> str:
    it = iter(values)

    def build(shp):
        if not shp:
            return _num_yaml(next(it))
        return "[" + ", ".join(build(shp[1:]) for _ in range(shp[0])) + "]"

    return build(tuple(shape))


def _num_yaml(v: Fr) -> str:
    t = num_text(v)
    return f'"{t}"' if "/" in t else t


def _q(text: str) -> str:
    return json.dumps(text)


def _leaf_yaml(leaf: Leaf, short_rg_false: bool) -> str:
    """An input (shorthand: requires_grad false) or a parameter (shorthand: true)."""
    lit = _lit(leaf.shape, leaf.values)
    if leaf.scale is not None:
        return "{" + f"value: {lit}, scale: {_q(num_text(leaf.scale))}, requires_grad: {str(leaf.rg).lower()}" + "}"
    if short_rg_false and not leaf.rg:
        return lit
    if not short_rg_false and leaf.rg:
        return lit
    return "{value: " + lit + f", requires_grad: {str(leaf.rg).lower()}" + "}"


def _key(name: str) -> str:
    return _q(name) if name.isdigit() else name


def _module_yaml(m: Mod, indent: int) -> list[str]:
    pad = " " * indent
    out = []
    if m.type is not None:
        out.append(f"{pad}type: {m.type}")
    if m.write_inputs or m.inputs != ["x"]:
        out.append(f"{pad}inputs: [{', '.join(m.inputs)}]")
    if m.params:
        out.append(f"{pad}params:")
        for p in m.params:
            out.append(f"{pad}  {p.name.rsplit('.', 1)[-1]}: {_leaf_yaml(p, short_rg_false=False)}")
        if m.type == "Linear" and not m.bias:
            out.append(f"{pad}  bias: false")
    elif m.type == "Linear":
        out.append(f"{pad}params: {{bias: false}}")
    if m.children:
        out.append(f"{pad}children:")
        for c in m.children:
            out.append(f"{pad}  {_key(c.name)}:")
            out.extend(_module_yaml(c, indent + 4))
    if m.type is None:
        if not m.lines:
            out.append(f"{pad}forward: {_q(src(m.ret))}")
        elif m.as_list:
            out.append(f"{pad}forward:")
            for name, tree in m.lines:
                out.append(f"{pad}  - {_q(f'{name} = {src(tree)}')}")
            out.append(f"{pad}  - {_q('return ' + src(m.ret))}")
        else:
            out.append(f"{pad}forward: |")
            for name, tree in m.lines:
                out.append(f"{pad}  {name} = {src(tree)}")
            out.append(f"{pad}  return {src(m.ret)}")
        if m.function is not None:
            out.append(f"{pad}function:")
            out.append(f"{pad}  name: {m.function.name}")
            if m.function.grads:
                out.append(f"{pad}  backward:")
                for slot, formula in m.function.grads.items():
                    out.append(f"{pad}    {slot}: {_q(formula)}")
            else:
                out.append(f"{pad}  backward: {{}}")
    return out


def _hook_yaml(h: HookSpec) -> str:
    parts = [f"{h.on}: {_q(h.target)}"]
    if not (h.on == "tensor" and h.kind == "hook" and h.implicit_kind):
        parts.append(f"kind: {h.kind}")
    if h.does:
        parts.append(f"does: {_q(chr(10).join(f'{n} = {src(t)}' for n, t in h.does))}")
    if h.returns is not None:
        parts.append(f"returns: {_q(src(h.returns))}")
    if h.remove:
        parts.append(f"remove: {h.remove}")
    if h.when:
        parts.append(f"when: {h.when}")
    if h.label:
        parts.append(f"label: {_q(h.label)}")
    return "{" + ", ".join(parts) + "}"


def _backward_yaml(b: BackwardSpec, indent: int) -> list[str]:
    pad = " " * indent
    out = []
    if b.method != "backward":
        out.append(f"{pad}method: {b.method}")
    if b.inputs:
        out.append(f"{pad}inputs: [{', '.join(_q(n) for n in b.inputs)}]")
    if b.grad_output is not None:
        out.append(f"{pad}grad_output: {_lit(*b.grad_output)}")
    return out


def to_yaml(p: ProblemSpec) -> str:
    out = [f"name: {p.name}", "description: generated by tests/gen_problems.py"]
    if p.dtype is not None:          # None: left out, float32 by default
        out.append(f"dtype: {p.dtype}")
    out.append("inputs:")
    for leaf in p.inputs:
        out.append(f"  {leaf.name}: {_leaf_yaml(leaf, short_rg_false=True)}")
    if p.targets:
        out.append("targets:")
        for leaf in p.targets:
            out.append(f"  {leaf.name}: {_lit(leaf.shape, leaf.values)}")
    out.append("model:")
    out.extend(_module_yaml(p.model, 2))
    if p.loss is not None:
        out.append(f"loss: {_q(src(p.loss))}")
    if p.hooks:
        out.append("hooks:")
        out.extend(f"  - {_hook_yaml(h)}" for h in p.hooks)
    if not p.backward.empty():
        out.append("backward:")
        out.extend(_backward_yaml(p.backward, 2))
    if p.variants is not None:
        out.append("variants:")
        for v in p.variants:
            if not v.inputs and v.hooks is None and v.backward is None:
                out.append(f"  {v.name}:")
                continue
            out.append(f"  {v.name}:")
            if v.inputs:
                out.append("    inputs:")
                for leaf in v.inputs.values():
                    out.append(f"      {leaf.name}: {_leaf_yaml(leaf, short_rg_false=True)}")
            if v.hooks is not None:
                if v.hooks:
                    out.append("    hooks:")
                    out.extend(f"      - {_hook_yaml(h)}" for h in v.hooks)
                else:
                    out.append("    hooks: []")
            if v.backward is not None and not v.backward.empty():
                out.append("    backward:")
                out.extend(_backward_yaml(v.backward, 6))
    return "\n".join(out) + "\n"


# ============================================================================ entry points

def build(s: Src, budget: int = TRANSCENDENTAL_BUDGET, attempts: int = 20) -> ProblemSpec:
    last = None
    for _ in range(attempts):
        try:
            return Gen(s, budget).problem()
        except _NoExpr as exc:  # pragma: no cover - a dead end; draw again
            last = exc
    raise RuntimeError("generator kept hitting dead ends") from last


def generate(rng: random.Random, budget: int = TRANSCENDENTAL_BUDGET) -> str:
    """One problem file (YAML text) from a ``random.Random``."""
    return to_yaml(build(Src(rng=rng), budget))


def generate_spec(rng: random.Random, budget: int = TRANSCENDENTAL_BUDGET) -> ProblemSpec:
    return build(Src(rng=rng), budget)


def problems(budget: int = TRANSCENDENTAL_BUDGET, shrinkable: bool = False):
    """Hypothesis strategy: YAML text of one random valid problem (``budget``: at most this
    many transcendental ops, which keeps exact solving fast).

    By default Hypothesis draws a seed and the problem is ``generate(random.Random(seed))``:
    the same (uniform) distribution as the sweep, whatever Hypothesis's preference for small
    draws. ``shrinkable=True`` routes every choice through Hypothesis instead, so a failure
    shrinks to a smaller problem, at the price of a distribution skewed toward the first
    option of each choice."""
    from hypothesis import strategies as st

    if not shrinkable:
        return st.integers(0, 2 ** 63 - 1).map(lambda seed: generate(random.Random(seed), budget))

    @st.composite
    def _problems(draw):
        return to_yaml(build(Src(draw=draw), budget))

    return _problems()


# ============================================================================ the differential check

#: Per-variant outcomes, worst first. The first four are disagreements between adjoint and
#: PyTorch (or a bug of the harness); the rest are fine.
BAD = ("crash", "harness", "invalid", "refused", "mismatch", "timeout")
GOOD = ("ok", "both_raise", "nonfinite", "f32_rounding", "f64_rounding", "overflow")
FLOAT_MAX = {"float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308}


@dataclass
class Outcome:
    """What one problem gave: per variant (name, status, detail), and the time it took."""

    variants: list = field(default_factory=list)
    seconds: float = 0.0
    solve_seconds: float = 0.0

    @property
    def status(self) -> str:
        found = {st for _, st, _ in self.variants}
        for st in BAD + ("overflow", "f64_rounding", "f32_rounding", "both_raise", "nonfinite", "ok"):
            if st in found:
                return st
        return "ok"

    @property
    def ok(self) -> bool:
        return all(st in GOOD for _, st, _ in self.variants)

    def report(self) -> str:
        return "\n".join(f"{name}: {st}" + (f": {detail}" if detail else "") for name, st, detail in self.variants)


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def check(text: str, timeout: float = 30.0) -> Outcome:
    """Solve every variant exactly, run it in real PyTorch (adjoint.torchside) and compare.

    Per variant: ``ok`` (every compared item within adjoint.compare's tolerance), ``mismatch``
    (some item differs, or PyTorch raised where the prediction runs), ``nonfinite`` (solve
    refuses a non-finite forward: PyTorch would carry inf/nan on, nothing to compare),
    ``both_raise`` (solve says PyTorch raises, and it does), ``f32_rounding`` /
    ``f64_rounding`` (a run is off by more than compare's tolerance for its dtype, and every
    such element is off at least 1000 times more in float32 than in float64: PyTorch's
    rounding through an ill-conditioned op, such as 1 - tanh(x)^2 at a saturated tanh, not a
    modelling error), ``overflow`` (the variant disagrees, and some exact forward value is
    finite but beyond the dtype's range: PyTorch overflowed to inf, then maybe nan),
    ``refused`` (solve raises a
    ProblemError but PyTorch runs), ``invalid`` (the file does not even load: a generator
    bug), ``crash`` (a traceback from adjoint), ``harness`` (a traceback from the torch side
    or the comparison), ``timeout`` (solve and compare took longer than ``timeout`` seconds)."""
    import signal
    import time
    import traceback
    import warnings

    import adjoint
    from adjoint.compare import compare
    from adjoint.errors import ProblemError
    from adjoint.torchside import run_variant

    out = Outcome()
    start = time.perf_counter()
    try:
        problem = adjoint.loads(text, name="<generated>")
    except ProblemError as exc:
        out.variants.append(("*", "invalid", str(exc)))
        return out
    except Exception:
        out.variants.append(("*", "crash", traceback.format_exc(limit=-4)))
        return out
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        for v in problem.variants:
            signal.setitimer(signal.ITIMER_REAL, timeout)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    out.variants.append((v.name,) + _check_variant(problem, v, compare, run_variant, out))
            except _Timeout:
                out.variants.append((v.name, "timeout", f"over {timeout:g}s"))
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, old)
    out.seconds = time.perf_counter() - start
    return out


def _beyond_range(tree, dtype: str) -> bool:
    """Does some exact VALUE in the predicted JSON fall outside the dtype's finite range?"""
    import math

    if isinstance(tree, dict):
        if "exact" in tree and "value" in tree:
            floats, exact = tree["value"], tree["exact"]

            def walk(f, e):
                if isinstance(f, list):
                    return any(walk(a, b) for a, b in zip(f, e))
                if f is None:
                    return False
                if e in ("inf", "-inf", "nan"):
                    return False
                return math.isinf(f) or math.isnan(f) or abs(f) > FLOAT_MAX[dtype]

            return walk(floats, exact)
        return any(_beyond_range(v, dtype) for v in tree.values())
    if isinstance(tree, list):
        return any(_beyond_range(v, dtype) for v in tree)
    return False


def _check_variant(problem, v, compare, run_variant, out: Outcome):
    import time
    import traceback

    from adjoint.errors import ProblemError

    t0 = time.perf_counter()
    try:
        vp = problem.solve(variant=v.name).variants[0]
        predicted = vp.to_json()
    except _Timeout:
        raise
    except ProblemError as exc:
        out.solve_seconds += time.perf_counter() - t0
        message = str(exc)
        if "forward pass stays finite" in message:
            return "nonfinite", message
        try:
            observed = run_variant(problem, v, problem.dtype)
        except ProblemError as torch_exc:
            return "invalid", f"solve: {message}; torch side: {torch_exc}"
        except _Timeout:
            raise
        except Exception:
            return "harness", traceback.format_exc(limit=-4)
        if observed.get("error"):
            return "both_raise", f"solve: {message}; PyTorch: {observed['error']}"
        return "refused", f"solve refuses ({message}) but PyTorch runs"
    except Exception:
        return "crash", traceback.format_exc(limit=-6)
    out.solve_seconds += time.perf_counter() - t0
    try:
        observed = run_variant(problem, v, problem.dtype)
        rows = compare(predicted, observed, problem.dtype)
    except _Timeout:
        raise
    except Exception:
        return "harness", traceback.format_exc(limit=-4)
    bad = [r for r in rows if not r.ok]
    if bad:
        detail = "; ".join(f"{r.item}: {r.detail}" for r in bad[:6])
        if _beyond_range(predicted, problem.dtype) or _forward_beyond_range(vp, problem.dtype):
            # an exact value (finite) is beyond the dtype's range: PyTorch's floats overflow to
            # inf and then make nan (inf - inf, 0 * inf), which no exact prediction can follow
            return "overflow", detail
        if not observed.get("error"):
            # The prediction is exact; PyTorch's rounding grows through ill-conditioned ops
            # (1 - tanh(x)^2 at a saturated tanh, sin of a large argument). Rerun in the other
            # precision: rounding error scales with it (~5e8 between float32 and float64), a
            # modelling error does not.
            other = "float64" if problem.dtype == "float32" else "float32"
            try:
                observed_other = run_variant(problem, v, other)
            except _Timeout:
                raise
            except Exception:
                return "harness", traceback.format_exc(limit=-4)
            lo, hi = (observed, observed_other) if problem.dtype == "float32" else (observed_other, observed)
            if _rounding_explains(predicted, observed, lo, hi, problem.dtype):
                return ("f32_rounding" if problem.dtype == "float32" else "f64_rounding"), detail
        return "mismatch", detail
    return "ok", ""


def _forward_beyond_range(vp, dtype: str) -> bool:
    """Does an exact forward value (named or not) fall beyond the dtype's finite range?"""
    import math

    fwd = getattr(vp, "forward", None)
    for value in getattr(fwd, "values", None) or []:
        if value is None:
            continue
        for f in _flat(value.floats()):
            if f is not None and (math.isinf(f) or math.isnan(f) or abs(f) > FLOAT_MAX[dtype]):
                return True
    return False


def _flat(x) -> list:
    if isinstance(x, list):
        out = []
        for y in x:
            out.extend(_flat(y))
        return out
    return [x]


def _aligned(p, o, path=""):
    """(where, predicted VALUE, observed VALUE) for every tensor both JSON sides hold at one place."""
    if isinstance(p, dict) and "shape" in p and "value" in p:
        if isinstance(o, dict) and "value" in o:
            yield path, p, o
        return
    if isinstance(p, dict) and isinstance(o, dict):
        for k in p:
            if k in o:
                yield from _aligned(p[k], o[k], f"{path}/{k}")
    elif isinstance(p, list) and isinstance(o, list) and len(p) == len(o):
        for i, (a, b) in enumerate(zip(p, o)):
            yield from _aligned(a, b, f"{path}/{i}")


def _rounding_explains(predicted: dict, observed: dict, lo: dict, hi: dict, dtype: str) -> bool:
    """Is every element ``observed`` gets wrong (beyond compare's tolerance for ``dtype``)
    wrong because of rounding: the float32 run (``lo``) at least 1000 times further from the
    exact value than the float64 run (``hi``)?"""
    import math

    from adjoint.compare import tolerance

    if len(predicted.get("hook_calls") or []) != len(observed.get("hook_calls") or []):
        return False
    rtol, atol = tolerance(dtype)
    lo_at = {w: o for w, _, o in _aligned(predicted, lo)}
    hi_at = {w: o for w, _, o in _aligned(predicted, hi)}
    found = False
    for where, p, o in _aligned(predicted, observed):
        pf, of = _flat(p["value"]), _flat(o["value"])
        if len(pf) != len(of) or any(x is None for x in pf):
            return False
        scale = max([abs(x) for x in pf if math.isfinite(x)], default=0.0)
        for i, (a, b) in enumerate(zip(pf, of)):
            if not (math.isfinite(a) and math.isfinite(b)):
                if a == b or (math.isnan(a) and math.isnan(b)):
                    continue
                return False          # inf vs -inf, nan vs a number: not rounding
            if abs(a - b) <= atol + rtol * scale:
                continue
            found = True
            if where not in lo_at or where not in hi_at:
                return False
            lv, hv = _flat(lo_at[where]["value"]), _flat(hi_at[where]["value"])
            if len(lv) != len(pf) or len(hv) != len(pf) or not (math.isfinite(lv[i]) and math.isfinite(hv[i])):
                return False
            if abs(lv[i] - a) < 1000 * abs(hv[i] - a):
                return False
    return found


# ============================================================================ coverage

def coverage(p: ProblemSpec) -> Counter:
    """Feature counts of one problem: module types, expression ops, hook kinds, backward forms."""
    c: Counter = Counter()
    for m in p.model.walk():
        if m.type == "Linear":
            ranks = {len(s) for s in m.in_shapes}
            c[f"module Linear{'' if m.bias else ' (no bias)'} {'/'.join(f'{r}-D' for r in sorted(ranks))}"] += 1
        elif m.type is not None:
            c[f"module {m.type}"] += 1
        elif m.function is not None:
            c[f"module Function ({'correct' if m.function.correct else 'wrong'})"] += 1
            op_names(m.ret, c)
        else:
            c["module custom" + (" multi-input" if len(m.inputs) > 1 else "") +
              (" multi-line" if m.lines else "")] += 1
            for _, t in m.lines:
                op_names(t, c)
            op_names(m.ret, c)
            calls = Counter(t[1] for _, t in m.lines if t[0] == "call")
            if any(v > 1 for v in calls.values()):
                c["child called twice"] += 1
        for prm in m.params:
            if not prm.rg:
                c["param requires_grad false"] += 1
    if p.loss is not None:
        c["loss"] += 1
        op_names(p.loss, c)
    else:
        c["no loss"] += 1
    if p.targets:
        c["targets"] += 1
    for leaf in p.inputs:
        c["input requires grad" if leaf.rg else "input no grad"] += 1
    hook_lists = [p.hooks] + [v.hooks for v in (p.variants or []) if v.hooks]
    backs = [p.backward] + [v.backward for v in (p.variants or []) if v.backward]
    if p.variants is not None:
        c["variants"] += 1
    a = Analysis(p, p.inputs, p.hooks)
    c.update(a.ops)
    leaves = {leaf.name for leaf in p.inputs} | {leaf.name for m in p.model.walk() for leaf in m.params}
    outputs = {ci.callid for ci in a.calls} | {"y", "model"}
    for hooks in hook_lists:
        for h in hooks:
            tag = f"hook {h.on}:{h.kind}"
            c[tag] += 1
            if h.on == "tensor":
                what = ("the loss" if h.target == "loss" else "a leaf" if h.target in leaves
                        else "a module output" if h.target in outputs else "an intermediate")
                c[f"{'retain_grad' if h.kind == 'retain_grad' else 'tensor hook'} on {what}"] += 1
            if h.returns is not None:
                c[tag + " returns"] += 1
                if "None" in src(h.returns):
                    c["hook returns None entries"] += 1
            if h.does:
                c["hook does:"] += 1
            if h.remove:
                c[f"hook remove {h.remove}"] += 1
            if h.when:
                c["hook when after_forward"] += 1
    for b in backs:
        if b.method == "grad":
            c["backward method grad"] += 1
        elif b.inputs:
            c["backward(inputs=...)"] += 1
        if b.grad_output is not None:
            c["backward grad_output"] += 1
    return c


if __name__ == "__main__":  # pragma: no cover
    import sys
    seed = sys.argv[1] if len(sys.argv) > 1 else "0"
    print(generate(random.Random(seed)))
