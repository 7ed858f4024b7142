"""v2 statements of a custom forward: augmented assignment, in-place methods (on tensors and
on views: CopySlices), index assignment, tuple unpacking, ``with no_grad():`` blocks, and the
in-place writes PyTorch refuses (a leaf that requires grad, a view of one, a tensor saved for
backward, a module output that full backward hooks wrap): those are predicted errors.

:class:`ProgramGen` is a mixin of :class:`modules.Gen`; :func:`stmt_lines` writes a
statement as forward text.
"""

from __future__ import annotations

from fractions import Fraction as Fr

from .exprs import _sub_shape
from .specs import Stmt
from .trees import _item, src

#: Statement kinds and their weights.
STATEMENTS = {"aug": 4, "inplace": 4, "setitem": 3, "aug_index": 2, "view_inplace": 3, "unpack": 3,
              "no_grad": 3, "detach_inplace": 1, "leaf_inplace": 1}
RATIONAL_INPLACE = ("relu_", "neg_", "abs_", "zero_")
TRANSCENDENTAL_INPLACE = ("tanh_", "sigmoid_", "exp_", "sin_", "cos_")


def stmt_lines(st) -> list[str]:
    """A forward line ``(name, tree)`` or a :class:`Stmt` as lines of Python (a ``with``
    block: its header, then its body indented by four spaces)."""
    if isinstance(st, tuple):
        return [f"{st[0]} = {src(st[1])}"]
    if st.kind == "aug":
        tgt = f"{st.target}[{st.index}]" if st.index else st.target
        return [f"{tgt} {st.op}= {src(st.tree)}"]
    if st.kind == "inplace":
        return [f"{st.target}.{st.op}({', '.join(_item(a) for a in st.args)})"]
    if st.kind == "setitem":
        return [f"{st.target}[{st.index}] = {src(st.tree)}"]
    if st.kind == "unpack":
        return [f"{', '.join(st.names)} = {src(st.tree)}"]
    if st.kind == "with":
        out = ["with no_grad():"]
        for b in st.body:
            out.extend("    " + line for line in stmt_lines(b))
        return out
    raise TypeError(st)


def _index_for(shape: tuple, s) -> tuple[str, tuple] | None:
    """An index into a tensor of ``shape`` (a view: select or slice) and the shape it gives."""
    if not shape:
        return None
    kind = s.weighted([(3, "int"), (2, "slice"), (1, "slice1"), (1, "row_col")])
    if kind == "int":
        return str(s.int(-shape[0], shape[0] - 1)), shape[1:]
    if kind == "slice1" and len(shape) >= 2:
        a = s.int(0, shape[1] - 1)
        return f":, {a}:", (shape[0], shape[1] - a) + shape[2:]
    if kind == "row_col" and len(shape) >= 2:
        return f"{s.int(0, shape[0] - 1)}, {s.int(0, shape[1] - 1)}", shape[2:]
    a = s.int(0, shape[0] - 1)
    b = s.int(a + 1, shape[0])
    return f"{a}:{b}", (b - a,) + shape[1:]


class ProgramGen:
    """Mixin of Gen: statements appended to a custom forward's lines."""

    def statements(self, mod, ctx, unused: list, local_trees: dict) -> None:
        """Append 1-3 v2 statements to ``mod.lines``: targets are locals of this forward
        (``local_trees``: name -> the tree assigned; a bare name would alias an argument)."""
        s = self.s
        for _ in range(s.weighted([(2, 1), (2, 2), (1, 3)])):
            kind = s.weighted([(w, k) for k, w in STATEMENTS.items()])
            writable = [n for n, t in local_trees.items() if t[0] != "n" and n in ctx.env]
            st = getattr(self, "_st_" + kind)(mod, ctx, unused, writable, local_trees)
            if st is None:
                continue
            mod.lines.extend(st if isinstance(st, list) else [st])
            self.v2_used[f"v2 statement {kind}"] += 1

    # ------------------------------------------------------------------ helpers
    def _operand(self, ctx, shape: tuple, tensor_p: float = 0.6):
        s = self.s
        if s.coin(tensor_p):
            return ctx.expr(_sub_shape(shape, s) if s.coin(0.3) else shape, 1)
        return ("c", s.choice([Fr(2), Fr(1, 2), Fr(-1), Fr(3), Fr(1, 4)]))

    def _inplace_method(self, ctx, shape: tuple):
        """(method, args) of an in-place method that keeps ``shape``."""
        s = self.s
        m = s.weighted([(3, "mul_"), (2, "add_"), (1, "sub_"), (1, "div_"), (3, "unary"), (1, "clamp_"), (1, "pow_")])
        if m == "unary":
            m = s.choice(TRANSCENDENTAL_INPLACE) if s.coin(0.4) and self.spend() else s.choice(RATIONAL_INPLACE)
            return m, ()
        if m == "div_":
            return m, (("c", s.choice([Fr(2), Fr(4), Fr(-2)])),)
        if m == "pow_":
            return m, (("c", Fr(2)),)
        if m == "clamp_":
            return m, (("kw", "min", ("lit", s.choice(["0", "-0.5"]))),)
        return m, (self._operand(ctx, shape),)

    def _local(self, writable: list, ctx):
        if not writable:
            return None
        return self.s.choice(writable)

    def _bind(self, ctx, unused: list, name: str, shape: tuple, w: int = 6) -> None:
        ctx.env[name] = shape
        ctx.weights[name] = w
        unused.append(name)

    # ------------------------------------------------------------------ the statements
    def _st_aug(self, mod, ctx, unused, writable, trees):
        h = self._local(writable, ctx)
        if h is None:
            return None
        op = self.s.weighted([(3, "+"), (2, "-"), (3, "*"), (1, "/")])
        val = (("c", self.s.choice([Fr(2), Fr(4), Fr(-2)])) if op == "/" else self._operand(ctx, ctx.env[h]))
        return Stmt("aug", h, val, op=op, label=f"{op}=")

    def _st_inplace(self, mod, ctx, unused, writable, trees):
        h = self._local(writable, ctx)
        if h is None:
            return None
        m, args = self._inplace_method(ctx, ctx.env[h])
        return Stmt("inplace", h, op=m, args=args, label=m)

    def _st_setitem(self, mod, ctx, unused, writable, trees):
        h = self._local([n for n in writable if ctx.env[n]], ctx)
        if h is None:
            return None
        idx, shp = _index_for(ctx.env[h], self.s)
        val = ctx.expr(_sub_shape(shp, self.s) if self.s.coin(0.3) else shp, 1) if self.s.coin(0.8) else ("c", Fr(1, 2))
        return Stmt("setitem", h, val, index=idx, label="x[i] = v")

    def _st_aug_index(self, mod, ctx, unused, writable, trees):
        h = self._local([n for n in writable if ctx.env[n]], ctx)
        if h is None:
            return None
        idx, shp = _index_for(ctx.env[h], self.s)
        op = self.s.choice(["+", "*", "-"])
        return Stmt("aug", h, self._operand(ctx, shp), op=op, index=idx, label="x[i] op= v")

    def _st_view_inplace(self, mod, ctx, unused, writable, trees):
        s = self.s
        h = self._local([n for n in writable if ctx.env[n]], ctx)
        if h is None:
            return None
        shape = ctx.env[h]
        v = self.fresh("v")
        form = s.weighted([(3, "index"), (1, "view"), (1, "t"), (1, "unsqueeze")])
        if form == "view":
            tree, shp = ("op", "method", "view", ("n", h), (("lit", "-1"),), "", (_numel(shape),), "node"), (_numel(shape),)
        elif form == "t" and len(shape) == 2:
            tree, shp = ("op", "method", "t", ("n", h), (), "", (shape[1], shape[0]), "node"), (shape[1], shape[0])
        elif form == "unsqueeze":
            tree, shp = ("op", "method", "unsqueeze", ("n", h), (("lit", "0"),), "", (1,) + shape, "node"), (1,) + shape
        else:
            idx, shp = _index_for(shape, s)
            tree = ("sub", ("n", h), idx, shp, "view of a local")
        line = (v, tree)
        ctx.env[v] = shp
        if s.coin(0.5):
            m, args = self._inplace_method(ctx, shp)
            st = Stmt("inplace", v, op=m, args=args, base=h, label=f"view {m}")
        else:
            op = s.choice(["+", "*", "-"])
            st = Stmt("aug", v, self._operand(ctx, shp), op=op, base=h, label=f"view {op}=")
        self._bind(ctx, unused, v, shp, 3)
        return [line, st]

    def _st_unpack(self, mod, ctx, unused, writable, trees):
        s = self.s
        shp = self.shape()
        k = 2 if s.coin(0.7) else 3
        form = s.choice(["chunk", "unbind", "split"])
        i = s.int(0, len(shp)) if form == "unbind" else (s.int(0, len(shp) - 1) if shp else None)
        if form != "unbind" and i is None:
            form, i = "unbind", 0
        if form == "unbind":
            src_shape = shp[:i] + (k,) + shp[i:]
            items = (("lit", str(i)),) if i or s.coin(0.3) else ()
        else:
            src_shape = shp[:i] + (shp[i] * k,) + shp[i + 1:]
            first = ("lit", str(k if form == "chunk" else shp[i]))
            items = (first,) + ((("kw", "dim", ("lit", str(i))),) if i or s.coin(0.3) else ())
        e = ctx.expr(src_shape, 1)
        tree = ("op", "method", form, e, items, "", src_shape, "node")
        names = tuple(self.fresh("q") for _ in range(k))
        for n in names:
            self._bind(ctx, unused, n, shp, 5)
        return Stmt("unpack", tree=tree, names=names, shapes=(shp,) * k, label=f"a, b = x.{form}()")

    def _st_no_grad(self, mod, ctx, unused, writable, trees):
        s = self.s
        body = []
        if writable and s.coin(0.3):
            h = s.choice(writable)
            m, args = self._inplace_method(ctx, ctx.env[h])
            body.append(Stmt("inplace", h, op=m, args=args, label=f"no_grad {m}"))
        c = self.fresh("n")
        shp = self.shape() if s.coin(0.5) else s.choice(list(ctx.env.values()) or [()])
        body.append((c, ctx.expr(shp, 1)))
        self._bind(ctx, unused, c, shp, 4)
        return Stmt("with", body=body, label="with no_grad()")

    def _st_detach_inplace(self, mod, ctx, unused, writable, trees):
        h = self._local(writable, ctx)
        if h is None:
            return None
        d = self.fresh("d")
        line = (d, ("op", "method", "detach", ("n", h), (), "", ctx.env[h], "detach"))
        m, args = self._inplace_method(ctx, ctx.env[h])
        self._bind(ctx, unused, d, ctx.env[h], 2)
        return [line, Stmt("inplace", d, op=m, args=args, base="", label="detached in place")]

    def _st_leaf_inplace(self, mod, ctx, unused, writable, trees):
        """In place on an argument or a parameter: a leaf that requires grad makes PyTorch raise."""
        names = [a for a in mod.inputs] + [p.name.rsplit(".", 1)[-1] for p in mod.params]
        names = [n for n in names if n in ctx.env]
        if not names:
            return None
        h = self.s.choice(names)
        m, args = self._inplace_method(ctx, ctx.env[h])
        return Stmt("inplace", h, op=m, args=args, label="leaf or argument in place")


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n

