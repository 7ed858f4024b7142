"""Expressions of a requested shape over the names of one forward (or the loss)."""

from __future__ import annotations

from fractions import Fraction as Fr
from typing import TYPE_CHECKING

from .analysis import broadcast
from .trees import POSITIVE_UNARY, RATIONAL_UNARY, REDUCTIONS, UNARY_ELEMENTWISE, NoExpr
from .cmpexprs import CmpExprs
from .mathexprs import MathExprs
from .viewexprs import V2Exprs

if TYPE_CHECKING:
    from .modules import Gen
    from .rand import Src
    from .specs import Mod

MAX_EXPR_DEPTH = 3
#: The weight of a v2 form (method, view, indexing...) among the other kinds (23 in all).
V2_WEIGHT = 16
#: The weight of a comparison form (a mask, where(), a bool tensor: cmpexprs) in v2 problems.
CMP_WEIGHT = 6
#: The weight of a stop-55 math form (addcmul ... scatter_reduce: mathexprs) in v2 problems.
MATH_WEIGHT = 4




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


class ExprCtx(V2Exprs, CmpExprs, MathExprs):
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
            if t.shape == shape and t.dtype is None and self.s.coin(0.5):
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
            raise NoExpr()
        options = [(5, "unary"), (8, "binary"), (2, "neg"), (2, "pow"), (1, "rpow"), (1, "tpow"), (1, "kink")]
        if shape == ():
            options += [(5, "reduce"), (2, "matmul")]
        if len(shape) <= 2:
            options.append((1, "t"))
        if 1 <= len(shape) <= 3:
            options.append((3, "matmul"))
        if self.g.v2:
            options += [(V2_WEIGHT, "v2"), (CMP_WEIGHT, "cmp"), (MATH_WEIGHT, "math")]
        kind = s.weighted(options)
        try:
            return self._expr(kind, shape, depth)
        except NoExpr:
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
            if fn == "reciprocal":   # 1 / 0 is refused (a non-finite forward): a positive argument
                arg = self.positive(shape, d)
            elif fn in POSITIVE_UNARY:
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
        if kind == "v2":
            return self.v2_expr(shape, depth)
        if kind == "cmp":
            return self.cmp_expr(shape, depth)
        if kind == "math":
            return self.math_expr(shape, depth)
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

