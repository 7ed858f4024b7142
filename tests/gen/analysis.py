"""Abstract interpretation of a problem: shapes, requires_grad, grad_fn edges."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from fractions import Fraction as Fr

from .specs import HookSpec, Leaf, Mod, ProblemSpec
from .trees import REDUCTIONS, tensor_items

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
    known: bool = True        # edges/nouts/nr modelled (False: v2 ops, in-place: observe-only node hooks)


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
        for target, regs in self.mhooks.items():   # the order they run in: prepend=True puts a hook first
            first = [h for h in regs if h.opts.get("prepend")]
            self.mhooks[target] = first[::-1] + [h for h in regs if not h.opts.get("prepend")]
        self.ghooks = [h for h in hooks if h.on == "global"]   # fire for every module call
        self.globals: dict[str, Info] = {}
        self.params: dict[str, Info] = {}
        self.root: Info | None = None
        self.ops: Counter = Counter()     # coverage: matmul ranks, broadcasting, mixed inputs
        self.grad_enabled = True          # False inside a ``with no_grad():`` block (and the calls it makes)
        self.inplace: set[str] = set()    # names written in place (the grad_fn they end with is not modelled)
        self.aliases: dict[str, set] = {}   # a local -> other names of the same tensor
        self.run()

    def leaf_info(self, leaf: Leaf, name: str) -> Info:
        return Info(leaf.shape, leaf.rg, False, (), 1, 0, frozenset([name]) if leaf.rg else frozenset(), True)

    def bind(self, name: str, info: Info) -> Info:
        if not self.grad_enabled:   # made under no_grad (a module called there too): no grad_fn
            info = Info(info.shape, False)
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
        if isinstance(out, tuple):   # a forward returning a tuple: y is the tuple, model[0]... its tensors
            self.root = out[0]
            env = dict(self.names)
            env["y"] = out
        else:
            if "y" not in self.names:
                out = self.bind("y", out)
            self.root = out
            env = dict(self.names)
        if self.p.loss is not None:
            self.root = self.bind("loss", self.eval(self.p.loss, env, self.p.model))   # a loss module is a root's child

    # ------------------------------------------------------------------ modules
    def call(self, mod: Mod, args: list) -> Info:
        self.counts[mod.label] += 1
        k = self.counts[mod.label]
        callid = mod.label if k == 1 else f"{mod.label}#{k}"
        regs = self.mhooks.get(mod.label, []) + self.ghooks
        args = list(args)
        for h in regs:
            if h.kind == "forward_pre" and h.returns is not None and not h.opts.get("with_kwargs"):
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
            if h.kind == "forward" and h.returns is not None and h.on == "module":
                out = self.eval(h.returns, {"input": tuple(args), "output": out}, None)
        if isinstance(out, tuple):   # module hooks are never put on it; one BackwardHookFunction when wrapped
            n_rg = sum(o.rg for o in out)
            out = tuple(self.bind(f"{callid}[{i}]", Info(o.shape, True, True, (True,) * n_rg, n_rg, i, o.deps,
                                                         known=False) if wrap and o.rg else o)
                        for i, o in enumerate(out))
            self.calls.append(CallInfo(mod.label, callid, args_rg, replace(out[0], known=False), False))
            return out
        wrapped_out = False
        if wrap and out.rg:
            out = Info(out.shape, True, True, (True,), 1, 0, out.deps)
            wrapped_out = True
        out = self.bind(callid, out)
        self.calls.append(CallInfo(mod.label, callid, args_rg, out, wrapped_out))
        return out

    def forward(self, mod: Mod, args: list, callid: str) -> Info:
        if getattr(mod, "layer", None) is not None:   # tests/gen/layers.py
            return mod.layer(self, args)
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
        for line in mod.lines:
            self.line(line, env, mod, prefix, grad=self.grad_enabled)
        out = self.eval(mod.ret, env, mod)
        if not isinstance(out, tuple):
            assert out.shape == tuple(mod.out_shape), (mod.label, out.shape, mod.out_shape)
        return out

    def line(self, line, env: dict, mod: Mod, prefix: str, grad: bool) -> None:
        """One line of a forward: ``(name, tree)`` or a v2 statement (``grad``: grad mode)."""
        if isinstance(line, tuple):
            name, tree = line
            n_calls = len(self.calls)
            info = self.eval(tree, env, mod)
            if not grad:
                info = Info(info.shape, False)
            env[name] = self.bind(prefix + name, info)
            # the same tensor under another name: a child's output, or a name assigned as is
            if tree[0] == "call" and len(self.calls) > n_calls:
                self.aliases.setdefault(prefix + name, set()).add(self.calls[-1].callid)
            elif tree[0] == "n":
                self.aliases.setdefault(prefix + name, set()).add(prefix + tree[1] if prefix + tree[1] in self.names
                                                                   else tree[1])
            return
        st = line
        if st.kind == "with":
            enabled, self.grad_enabled = self.grad_enabled, False
            for b in st.body:
                self.line(b, env, mod, prefix, grad=False)
            self.grad_enabled = enabled
            return
        if st.kind == "unpack":
            src = self.eval(st.tree, env, mod)
            for n, shp in zip(st.names, st.shapes):
                info = Info(tuple(shp), src.rg, src.rg, (), 1, 0, src.deps, known=False)
                env[n] = self.bind(prefix + n, info)
            return
        # in place: the target (and the base written through) may now require grad
        vals = [self.eval(st.tree, env, mod)] if st.tree is not None else []
        vals += [self.eval(a, env, mod) for a in st.args if a[0] not in ("lit", "kw")]
        vals = [v for v in vals if isinstance(v, Info)]
        self.inplace.add(prefix + st.target)
        for n in [st.target] + ([st.base] if st.base else []):
            old = env[n]
            rg = old.rg or (grad and any(v.rg for v in vals))
            deps = old.deps.union(*(v.deps for v in vals)) if rg else frozenset()
            env[n] = Info(old.shape, rg, rg and not old.leaf, (), 1, 0, deps, old.leaf, known=False)
            for full in {prefix + n} | self.aliases.get(prefix + n, set()):
                if full in self.names:
                    self.names[full] = replace(self.names[full], known=False)
                    self.inplace.add(full)

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
            args = [self.eval(a, env, mod) for a in t[2] if a[0] not in ("kw", "lit")]
            assert [a.shape for a in args] == [tuple(x) for x in child.in_shapes], (child.path, args)
            return self.call(child, args)
        if k in ("op", "sub", "attr"):
            args = [self.eval(a, env, mod) for a in tensor_items(t)]
            args = [a for a in args if isinstance(a, Info)]
            shape = t[6] if k == "op" else t[3]
            rg = any(a.rg for a in args) and not (k == "op" and t[7] == "detach")
            return Info(tuple(shape), rg, rg, (), 1, 0, frozenset().union(*(a.deps for a in args)) if rg else frozenset(),
                        known=False)
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
