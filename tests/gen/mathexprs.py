"""v2 expressions over the tensor math added in stop 55: scaled products and pointwise
arithmetic (addcmul addcdiv baddbmm addbmm addmv addr fmod remainder hypot heaviside), the
reductions and scans (std_mean nansum nanmean logcumsumexp) and the writes along a dim or
under a mask (index_fill index_copy masked_scatter scatter_reduce, scatter with ``reduce=``).

A mixin of :class:`exprs.ExprCtx`: :meth:`MathExprs.math_expr` builds a tree of a requested
shape whose top is one of these ops, working backward from the shape to its operands' (as
viewexprs does). Index tensors are int64 targets (in range; index_copy's distinct), masks bool
targets; the problem then saves integer tensors, so saved-tensor hooks keep to identities
(``Gen.int_saved``, as layers do). heaviside and scatter(reduce=) make PyTorch's
NotImplemented nodes: a backward that reaches them raises, which is an answer too. Each form
is a coverage key ``math NAME``.
"""

from __future__ import annotations

from fractions import Fraction as Fr

from .specs import Leaf
from .trees import NoExpr, draw_form

#: The forms, with weights.
MATH_FORMS = {
    "addcmul": 3, "addcdiv": 2, "baddbmm": 2, "addbmm": 2, "addmv": 2, "addr": 2, "fmod": 2, "remainder": 2,
    "hypot": 2, "heaviside": 1, "std_mean": 2, "nansum": 2, "nanmean": 2, "logcumsumexp": 2, "index_fill": 2,
    "index_copy": 2, "masked_scatter": 2, "scatter_reduce": 4, "scatter_reduce_op": 1,
}

APPLIES = {
    "baddbmm": lambda shp: len(shp) == 3, "addbmm": lambda shp: len(shp) == 2, "addmv": lambda shp: len(shp) == 1,
    "addr": lambda shp: len(shp) == 2, "logcumsumexp": lambda shp: len(shp) >= 1,
    "index_fill": lambda shp: len(shp) >= 1, "index_copy": lambda shp: len(shp) >= 1,
    "scatter_reduce": lambda shp: len(shp) >= 1, "scatter_reduce_op": lambda shp: len(shp) >= 1,
}


def _lit(v) -> tuple:
    return ("lit", str(v))


def _kw(k, v) -> tuple:
    return ("kw", k, v if isinstance(v, tuple) else _lit(v))


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


class MathExprs:
    """Mixin of ExprCtx (``self.s``, ``self.g``, ``self.expr``, ``self._m``, ``self._f``)."""

    def math_expr(self, shape: tuple, depth: int):
        forms = [(w, f) for f, w in MATH_FORMS.items() if APPLIES.get(f, lambda shp: True)(shape)]
        return draw_form(self, forms, "_math_", "math", shape, depth)

    # ------------------------------------------------------------------ helpers
    def _int_target(self, shape: tuple, values: list, dtype: str = "int64"):
        g = self.g
        leaf = Leaf(g.fresh("ix" if dtype == "int64" else "m"), tuple(shape), [Fr(v) for v in values], False,
                    dtype=dtype)
        g.targets.append(leaf)
        self._int_saved()
        return ("n", leaf.name)

    def _int_saved(self):
        """Saved-tensor hooks stay identities (``x * 2`` of an int64 / bool tensor is integer
        arithmetic, which solve does not model)."""
        g = self.g
        g.int_saved = True
        if not hasattr(g, "int_paths"):
            g.int_paths = set()
        if self.mod is not None and self.mod.path:
            g.int_paths.add(self.mod.path)

    def _either(self, fn: str, recv, items, shape):
        """torch.fn(recv, items...) or recv.fn(items...)."""
        if self.s.coin(0.5):
            return self._f(f"torch.{fn}", [recv] + list(items), shape)
        return self._m(fn, recv, items, shape)

    def _small(self, shape: tuple):
        """A shape that broadcasts into ``shape`` (as split_broadcast's smaller side)."""
        from .exprs import _sub_shape
        return _sub_shape(shape, self.s) if self.s.coin(0.4) else shape

    def _scale_kws(self, names=("beta", "alpha")) -> list:
        s = self.s
        out = []
        for k in names:
            if s.coin(0.5):
                out.append(_kw(k, s.choice(["0.5", "2", "-1", "0"] if k == "beta" else ["0.5", "2", "-1", "0.25"])))
        return out

    # ------------------------------------------------------------------ pointwise
    def _math_addcmul(self, shape, d):
        s = self.s
        e = self.expr(shape, d)
        t1, t2 = self.expr(self._small(shape), d), self.expr(self._small(shape), d)
        kws = [_kw("value", s.choice(["0.5", "-1", "2", "-0.25"]))] if s.coin(0.6) else []
        return self._either("addcmul", e, [t1, t2] + kws, shape)

    def _math_addcdiv(self, shape, d):
        s = self.s
        e = self.expr(shape, d)
        t1, t2 = self.expr(self._small(shape), d), self.positive(self._small(shape), d)
        kws = [_kw("value", s.choice(["0.5", "-1", "2", "-0.25"]))] if s.coin(0.6) else []
        return self._either("addcdiv", e, [t1, t2] + kws, shape)

    def _rational(self, shape: tuple):
        """A tensor of this shape whose values stay rational whatever the problem does: a target
        (an earlier name may hold tanh's values, and a parameter or an input may be stepped by an
        irrational gradient or written by a hook), sometimes plus ``p - p.detach()`` (exactly 0:
        a gradient path into a parameter without its value; not in training loops, where a stepped
        parameter is a certified ball and ``p - p.detach()`` is no exact 0 to solve: sweep
        --kind train seed 89303, problems 19 and 44)."""
        s = self.s
        t = ("n", self.target(shape))
        if not self.g.train and s.coin(0.6):
            p = self.name_of(self._small(shape)) if s.coin(0.5) else self.new_leaf(self._small(shape))
            if p is not None:
                zero = ("b", "-", p, self._m("detach", p, [], self.env.get(p[1], shape), sem="detach"))
                return ("b", "+", t, zero)
        return t

    def _math_fmod(self, shape, d, fn="fmod"):
        """Of rational operands only (solve refuses fmod / remainder of an irrational element:
        the rounded quotient's sign against every integer nearby), by a number or by
        ``abs(t) + c``."""
        s = self.s
        e = self._rational(shape)
        if s.coin(0.3):
            e = ("b", "*", e, ("c", s.choice([Fr(3), Fr(-5, 2), Fr(1, 2)])))
        if s.coin(0.5):
            other = _lit(s.choice(["2", "-1.5", "0.75", "1", "-2"]))
        else:
            other = ("b", "+", ("f", "abs", self._rational(self._small(shape))),
                     ("c", s.choice([Fr(1, 2), Fr(1, 4), Fr(1)])))
            if s.coin(0.3):
                other = ("neg", other)
        return self._either(fn, e, [other], shape)

    def _math_remainder(self, shape, d):
        return self._math_fmod(shape, d, "remainder")

    def _math_hypot(self, shape, d):
        if not self.g.spend():
            raise NoExpr()
        a_shape, b_shape = self.split_broadcast(shape)
        return self._either("hypot", self.expr(a_shape, d), [self.expr(b_shape, d)], shape)

    def _math_heaviside(self, shape, d):
        """e * heaviside(x, values): a NotImplemented node where x requires grad (a backward
        that reaches it raises); x detached half the time."""
        from .analysis import broadcast
        s = self.s
        xs, vs = self._small(shape), self._small(shape)
        x = self.expr(xs, d)
        if s.coin(0.5):
            x = self._m("detach", x, [], xs, sem="detach")
        v = self.expr(vs, d if s.coin(0.5) else 0)
        h = self._either("heaviside", x, [v], broadcast(xs, vs))
        return ("b", "*", self.expr(shape, d), h)

    # ------------------------------------------------------------------ scaled products
    def _math_baddbmm(self, shape, d):
        b, n, m = shape
        k = self.g.dim()
        e = self.expr(self._small(shape), d)
        return self._either("baddbmm", e, [self.expr((b, n, k), d), self.expr((b, k, m), d)] + self._scale_kws(),
                            shape)

    def _math_addbmm(self, shape, d):
        n, m = shape
        b, k = self.s.int(1, 3), self.g.dim()
        e = self.expr(self._small(shape), d)
        return self._either("addbmm", e, [self.expr((b, n, k), d), self.expr((b, k, m), d)] + self._scale_kws(),
                            shape)

    def _math_addmv(self, shape, d):
        (n,) = shape
        k = self.g.dim()
        e = self.expr(self._small(shape), d)
        return self._either("addmv", e, [self.expr((n, k), d), self.expr((k,), d)] + self._scale_kws(), shape)

    def _math_addr(self, shape, d):
        n, m = shape
        e = self.expr(self._small(shape), d)
        return self._either("addr", e, [self.expr((n,), d), self.expr((m,), d)] + self._scale_kws(), shape)

    # ------------------------------------------------------------------ reductions and scans
    def _math_std_mean(self, shape, d):
        """torch.std_mean(e, dim)[0] (the std: a square root) or [1] (the mean)."""
        s = self.s
        which = 1
        if s.coin(0.6) and self.g.spend():
            which = 0
        i = s.int(0, len(shape))
        keep = i < len(shape) and shape[i] == 1 and s.coin(0.5)
        src_shape = shape[:i] + (s.int(2, 3),) + (shape[i + 1:] if keep else shape[i:])
        e = self.expr(src_shape, d)
        args = [_kw("dim", i) if s.coin(0.5) else _lit(i)]
        if keep:
            args.append(_kw("keepdim", "True"))
        if s.coin(0.2):
            args.append(_kw("correction", s.choice(["0", "1"])))
        return self._f("torch.std_mean", [e] + args, shape, post=f"[{which}]")

    def _math_nansum(self, shape, d, fn="nansum"):
        s = self.s
        if not shape and s.coin(0.5):
            e = self.expr(self.g.shape(), d)
            return self._either(fn, e, [], shape)
        i = s.int(0, len(shape))
        keep = i < len(shape) and shape[i] == 1 and s.coin(0.5)
        src_shape = shape[:i] + (s.int(1, 3),) + (shape[i + 1:] if keep else shape[i:])
        e = self.expr(src_shape, d)
        args = [_kw("dim", i) if s.coin(0.5) else _lit(i)]
        if keep:
            args.append(_kw("keepdim", "True"))
        return self._either(fn, e, args, shape)

    def _math_nanmean(self, shape, d):
        self._int_saved()     # nanmean divides by an int64 count, which DivBackward0 saves
        return self._math_nansum(shape, d, "nanmean")

    def _math_logcumsumexp(self, shape, d):
        s = self.s
        if not self.g.spend():
            raise NoExpr()
        n = len(shape)
        dim = s.int(0, n - 1) - (n if s.coin(0.3) else 0)
        return self._either("logcumsumexp", self.expr(shape, d), [_lit(dim) if s.coin(0.5) else _kw("dim", dim)],
                            shape)

    # ------------------------------------------------------------------ writes along a dim, under a mask
    def _math_index_fill(self, shape, d):
        s = self.s
        dim = s.int(0, len(shape) - 1)
        k = s.int(1, 3)
        idx = self._int_target((k,), [s.int(0, shape[dim] - 1) for _ in range(k)])
        value = self.expr((), d) if s.coin(0.3) else _lit(s.choice(["0", "0.5", "-1", "2"]))
        return self._either("index_fill", self.expr(shape, d), [_lit(dim), idx, value], shape)

    def _math_index_copy(self, shape, d):
        s = self.s
        dim = s.int(0, len(shape) - 1)
        size = shape[dim]
        k = s.int(1, size)
        pos = list(range(size))
        picked = []
        for _ in range(k):                # k distinct positions in a random order
            picked.append(pos.pop(s.int(0, len(pos) - 1)))
        idx = self._int_target((k,), picked)
        src = self.expr(shape[:dim] + (k,) + shape[dim + 1:], d)
        return self._either("index_copy", self.expr(shape, d), [_lit(dim), idx, src], shape)

    def _math_masked_scatter(self, shape, d):
        s = self.s
        mshape = self._small(shape)
        mask = self._int_target(mshape, [s.int(0, 1) for _ in range(_numel(mshape))], "bool")
        src = self.expr(shape if s.coin(0.5) else (_numel(shape),), d)
        return self._either("masked_scatter", self.expr(shape, d), [mask, src], shape)

    def _scatter_index(self, shape):
        s = self.s
        dim = s.int(0, len(shape) - 1)
        ishape = tuple(s.int(1, 3) if i == dim else s.int(1, n) for i, n in enumerate(shape))
        idx = self._int_target(ishape, [s.int(0, shape[dim] - 1) for _ in range(_numel(ishape))])
        return dim, ishape, idx

    def _math_scatter_reduce(self, shape, d):
        s = self.s
        dim, ishape, idx = self._scatter_index(shape)
        red = s.weighted([(3, "sum"), (2, "mean"), (2, "amax"), (2, "amin"), (2, "prod")])
        src = self.expr(ishape, d)
        args = [_lit(dim), idx, src, _lit(f"'{red}'") if s.coin(0.6) else _kw("reduce", f"'{red}'")]
        if s.coin(0.4):
            args.append(_kw("include_self", "False"))
        return self._either("scatter_reduce", self.expr(shape, d), args, shape)

    def _math_scatter_reduce_op(self, shape, d):
        """scatter(dim, index, src or value, reduce='add' / 'multiply'): a NotImplemented node."""
        s = self.s
        dim, ishape, idx = self._scatter_index(shape)
        src = self.expr(ishape, d) if s.coin(0.6) else _lit(s.choice(["2", "0.5", "-1"]))
        red = s.choice(["'add'", "'multiply'"])
        return self._m("scatter", self.expr(shape, d), [_lit(dim), idx, src, _kw("reduce", red)], shape)
