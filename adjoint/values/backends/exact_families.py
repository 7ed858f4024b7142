"""The op families' methods of the exact backend (:class:`adjoint.values.backends.exact.ExactBackend`
inherits them): the losses' clamps and integer contents, the activations' and reductions'
selections at kinks and reductions along dims, the nn layers' pooling selections and constants.
The float64 and structure backends have the same methods, each in its own terms."""

from __future__ import annotations

import flint
import numpy as np
from adjoint.values.numbers.float_held import float_holds
from adjoint.values.numbers.sizes import broadcast_arrays

from adjoint.values import exact as E
from adjoint.values import arith as A
from adjoint.values import pointwise as T
from adjoint.values import joins as J
from adjoint.values.exact import Exact
from adjoint.values.signed_zero import zero_mask
from adjoint.values.numbers.symbolic import sympy


# ----------------------------------------------------------------------------- losses
# What the loss primitives (adjoint/engine/ops/losses.py) need beyond the common methods: clamps,
# PyTorch's log clamped at -100 (binary_cross_entropy), integer contents (class indices).

def _clamp_one(e, lo, hi):
    """max(lo, min(hi, e)) for one element; lo / hi are rationals or None (no bound)."""
    if E.s_is_nan(e):
        return e
    if lo is not None and hi is not None and lo > hi:  # torch.clamp: max(min(x, hi), lo) is lo when lo > hi
        return lo
    sym = getattr(e, "free_symbols", None)
    if sym:
        out = E.s_sym(e)
        if hi is not None:
            out = sympy().Min(E.s_sym(hi), out)
        if lo is not None:
            out = sympy().Max(E.s_sym(lo), out)
        return out
    if lo is not None and E.s_sign(E.s_norm(E.s_sym(e) - E.s_sym(lo)) if type(e) is not E.fmpq else e - lo) == -1:
        return lo
    if hi is not None and E.s_sign(E.s_norm(E.s_sym(e) - E.s_sym(hi)) if type(e) is not E.fmpq else e - hi) == 1:
        return hi
    return e


#: log(x) >= -100 exactly when x >= exp(-100); compared to 60 digits (a rational input is never
#: within 1e-50 relative of exp(-100) unless it was made to be).
def _log_floor_at():
    return sympy().exp(-100)


def _clamped_log_one(e):
    """max(log(e), -100), as binary_cross_entropy's kernel computes each log (e in [0, 1])."""
    if getattr(e, "free_symbols", None):
        return sympy().Max(sympy().log(E.s_sym(e)), -100)
    if E.s_sign(e) == 0:
        return E.fmpq(-100)
    v = E.s_approx(e, 60)
    if v is not None and v < E.s_approx(_log_floor_at(), 60):
        return E.fmpq(-100)
    return E.s_log(e)


class ExactLosses:
    """The losses' backend methods."""

    def clamp(self, x, lo=None, hi=None):
        """Elementwise clamp to [lo, hi] (either bound None: open); free symbols give Max / Min."""
        lo = E.q(lo) if lo is not None else None
        hi = E.q(hi) if hi is not None else None
        if x.rational:
            return Exact.of([lo if lo is not None and e < lo else hi if hi is not None and e > hi else e
                             for e in x.flat()], x.shape)
        return x.map(lambda e: _clamp_one(e, lo, hi))

    def clamped_log(self, x):
        """max(log(x), -100) elementwise (binary_cross_entropy's kernel)."""
        return x.map(_clamped_log_one)

    def ints(self, x) -> list[int]:
        """The elements of an integer tensor (class indices) as Python ints, in order."""
        return [int(E.q(e).p) for e in x.flat()]

    def float_held(self, x, dtype: str) -> bool:
        """Every element is a rational number the float ``dtype`` holds exactly (no closed form,
        no certified irrational, no infinity: those are taken as not held)."""
        return all(type(e) is E.fmpq and float_holds(e, dtype) for e in x.flat())

    def integers(self, values, shape):
        """A tensor of the given integers (an index tensor's contents, a 0/1 mask)."""
        return Exact.of([E.fmpq(int(v)) for v in values], tuple(shape))

    def first_outside(self, x, lo, hi) -> int | None:
        """The row-major index of the first element outside [lo, hi] (nan is outside), or None.
        (An element with free symbols is taken as inside: its value is only known when verify
        binds the symbols.)"""
        lo, hi = E.q(lo), E.q(hi)
        for i, e in enumerate(x.flat()):
            if getattr(e, "free_symbols", None):
                continue
            if E.s_is_nan(e):
                return i
            d = e - lo if type(e) is E.fmpq else E.s_norm(E.s_sym(e) - E.s_sym(lo))
            u = e - hi if type(e) is E.fmpq else E.s_norm(E.s_sym(e) - E.s_sym(hi))
            if E.s_sign(d) == -1 or E.s_sign(u) == 1:
                return i
        return None



# ----------------------------------------------------------------------------- activations and reductions
# Selections at kinks (``choose``), reductions along dims, the arg-max / arg-min PyTorch's
# value-selecting reductions use, and batched products. Exact like everything above: a test
# whose sign depends on a free symbol becomes a SymPy Piecewise / Max rather than a guess.

_HOLDS = {">": lambda s: s == 1, ">=": lambda s: s in (0, 1), "<": lambda s: s == -1,
          "<=": lambda s: s in (0, -1), "==": lambda s: s == 0, "!=": lambda s: s != 0}
_RELATION = {">": "Gt", ">=": "Ge", "<": "Lt", "<=": "Le", "==": "Eq", "!=": "Ne"}  # SymPy's relation classes


class UndecidableOrder(ArithmeticError):
    """Which element is largest depends on free symbols (an arg-max cannot be a closed form)."""


def _holds(e, rel: str):
    """Does ``e REL 0`` hold: True, False, or None when it depends on free symbols."""
    s = E.s_sign(e)
    if s is None:
        return None
    if s == "nan":  # every comparison with nan is false, except !=
        return rel == "!="
    return _HOLDS[rel](s)


def _from_objects(out: np.ndarray) -> Exact:
    flat = out.reshape(-1)
    for i, e in enumerate(flat):
        flat[i] = E.s_norm(e)
    return Exact(out)


def _compare(p, q):
    """sign(p - q) with nan largest (max and argmax propagate nan); None when undecidable."""
    if type(p) is E.fmpq and type(q) is E.fmpq:
        return (p > q) - (p < q)
    p_nan, q_nan = E.s_is_nan(p), E.s_is_nan(q)
    if p_nan or q_nan:
        return 0 if p_nan and q_nan else (1 if p_nan else -1)
    return E.s_sign(E.s_norm(E.s_sym(p) - E.s_sym(q)))


def _grouped(x: Exact, dims: tuple[int, ...], keepdim: bool):
    """The elements of ``x`` grouped per output position of a reduction over ``dims`` (each
    row in C order of the reduced dims), and the output shape."""
    nd = x.ndim
    dims = tuple(d for d in dims if d < nd)   # a 0-d tensor reduces nothing over dim 0
    kept = [d for d in range(nd) if d not in dims]
    moved = np.transpose(x.a, kept + list(dims)) if nd else x.a.reshape(())
    n_out = 1
    for d in kept:
        n_out *= x.shape[d]
    n_red = 1
    for d in dims:
        n_red *= x.shape[d]
    rows = moved.reshape(n_out, n_red)
    shape = tuple(1 if d in dims else x.shape[d] for d in range(nd)) if keepdim else tuple(x.shape[d] for d in kept)
    return rows, shape


def _pick(row, largest: bool):
    """(index, element) of the first largest (smallest) element of a row; nan wins."""
    best = 0
    for i in range(1, len(row)):
        c = _compare(row[i], row[best])
        if c is None:
            raise UndecidableOrder("the order of these elements depends on free symbols")
        if E.s_is_nan(row[best]):
            break
        if E.s_is_nan(row[i]) or (c == 1 if largest else c == -1):
            best = i
    return best, row[best]


def _extreme(row, largest: bool):
    try:
        return _pick(row, largest)[1]
    except UndecidableOrder:
        return (sympy().Max if largest else sympy().Min)(*[E.s_sym(e) for e in row])


class ExactSelections:
    """The activations' and reductions' backend methods: selections at kinks, reductions along
    dims, arg-max / arg-min, batched products."""

    def choose(self, test, rel: str, a, b):
        """Elementwise ``a if test REL 0 else b`` (broadcast), REL one of > >= < <= == !=; a
        chosen element keeps its -0.0 mark (clamp, maximum and where return an operand's float)."""
        t, p, q = broadcast_arrays(test.a, a.a, b.a)
        out = np.empty(t.shape, dtype=object)
        flat = out.reshape(-1)
        picked_a = np.zeros(t.shape, dtype=bool)
        pa = picked_a.reshape(-1)
        for i, (e, x, y) in enumerate(zip(t.reshape(-1), p.reshape(-1), q.reshape(-1))):
            holds = _holds(e, rel)
            if holds is None:
                flat[i] = sympy().Piecewise((E.s_sym(x), getattr(sympy(), _RELATION[rel])(E.s_sym(e), 0)), (E.s_sym(y), True))
            else:
                flat[i] = x if holds else y
                pa[i] = holds
        result = _from_objects(out)
        if a.negzero is not None or b.negzero is not None:
            za = np.broadcast_to(a.negzero if a.negzero is not None else False, t.shape)
            zb = np.broadcast_to(b.negzero if b.negzero is not None else False, t.shape)
            mask = np.where(picked_a, za, zb) & zero_mask(result)
            result.negzero = mask if mask.any() else None
        return result

    def erf(self, x):
        return T.unary("erf", x, self.closed)

    def pi(self):
        return Exact.scalar(sympy().pi)

    def ln(self, base: int):
        """The natural log of ``base`` (2 or 10): the constant PyTorch's log2 / log10 backward divides by."""
        return self.log(self.scalar(base))

    def sum_dims(self, x, dims, keepdim: bool):
        """Sum over ``dims`` (a tuple of non-negative dims; every dim when empty)."""
        dims = tuple(dims) if dims else tuple(range(x.ndim))
        rows, shape = _grouped(x, dims, keepdim)
        if x.rational:
            vals = [sum(row, E.fmpq(0)) for row in rows]
        else:
            vals = [sympy().Add(*[E.s_sym(e) for e in row]) for row in rows]
        return Exact.of(vals, shape)

    def amax(self, x, dims, keepdim: bool, largest: bool = True):
        """The largest (smallest) element over ``dims`` (every dim when empty); nan propagates."""
        dims = tuple(dims) if dims else tuple(range(x.ndim))
        rows, shape = _grouped(x, dims, keepdim)
        return Exact.of([_extreme(list(row), largest) for row in rows], shape)

    def argmax(self, x, dim: int, keepdim: bool, largest: bool = True):
        """(values, indices) over one dim, the first index among ties (as max.dim / min.dim on CPU);
        raises UndecidableOrder when free symbols leave the order open."""
        rows, shape = _grouped(x, (dim,), keepdim)
        picks = [_pick(list(row), largest) for row in rows]
        return Exact.of([v for _, v in picks], shape), Exact.of([E.fmpq(i) for i, _ in picks], shape)

    def sort_order(self, x, dim: int, descending: bool):
        """(indices, tied) of a sort along ``dim`` (at least 1-d): the positions in ascending
        (descending) order, equal elements in their index order (a stable sort; nan largest, as
        PyTorch's sort); ``tied`` (a numpy bool array of the indices' shape) is True at a sorted
        position whose element equals a neighbour's. Raises UndecidableOrder when free symbols
        leave the order open."""
        import functools
        n = x.shape[dim]
        moved = np.moveaxis(x.a, dim, -1)
        rows = moved.reshape(-1, n)
        order = np.zeros(rows.shape, dtype=np.int64)
        tied = np.zeros(rows.shape, dtype=bool)
        for r, row in enumerate(rows):
            def cmp(i, j, row=row):
                c = _compare(row[i], row[j])
                if c is None:
                    raise UndecidableOrder("the order of these elements depends on free symbols")
                return (-c if descending else c) or (i - j)
            order[r] = sorted(range(n), key=functools.cmp_to_key(cmp))
            for p in range(n - 1):
                if _compare(row[order[r, p]], row[order[r, p + 1]]) == 0:
                    tied[r, p] = tied[r, p + 1] = True
        idx = np.moveaxis(order.reshape(moved.shape), -1, dim)
        return Exact.of([E.fmpq(int(i)) for i in idx.reshape(-1)], idx.shape), np.moveaxis(
            tied.reshape(moved.shape), -1, dim)

    def place_along(self, shape, dim: int, indices, g, keepdim: bool):
        """zeros(shape) with ``g`` written at ``indices`` along ``dim`` (value_selecting_reduction_backward)."""
        shape = tuple(shape)
        if not shape:
            return g
        kept = tuple(1 if d == dim else n for d, n in enumerate(shape))
        idx = indices.reshape(kept) if not keepdim else indices
        gv = g.reshape(kept) if not keepdim else g
        out = Exact.zeros(shape) if gv.rational else Exact.zeros(shape).as_sym()
        a = np.array(out.a, copy=True)
        pos = np.array([int(i) for i in idx.a.reshape(-1)], dtype=np.int64).reshape(kept)
        np.put_along_axis(a, pos, gv.a, axis=dim)
        return Exact(a, True) if gv.rational else _from_objects(a)

    def bmm(self, a, b):
        """(n, p, q) @ (n, q, r), one exact matrix product per batch entry."""
        n = a.shape[0]
        if n == 0:
            return Exact.zeros((0, a.shape[1], b.shape[2]))
        pieces = [self.matmul2d(a.restructured(lambda v, i=i: v[i].copy()), b.restructured(lambda v, i=i: v[i].copy()),
                                  outer=False) for i in range(n)]
        return J.join(pieces, lambda arrs: np.stack(arrs, axis=0))




# ----------------------------------------------------------------------------- nn (convolution, pooling, norms)

class ExactNN:
    """Convolution, pooling and norms' backend methods."""

    def constant(self, values, shape):
        """A tensor of exact rationals the op's structure fixes (pooling weights 1/count, a
        dropout keep-mask scaled by 1/(1-p)), from Fractions or ints."""
        return Exact.of([E.q(v) for v in values], tuple(shape))


    def as_indices(self, x) -> np.ndarray:
        """An integer tensor's elements as a numpy int64 array (embedding and pooling indices)."""
        return np.array([int(e.p) for e in x.a.reshape(-1)], dtype=np.int64).reshape(x.shape)


    def window_max(self, x, windows):
        """Max pooling's selection: ``x`` is (rows, positions); ``windows`` one int array of flat
        positions per output, in PyTorch's scan order. Per row and window, the CPU kernel's
        choice: the first element strictly greater than every earlier one (ties: the first),
        and a NaN wins (the last NaN). Returns (values (rows, outputs), indices ndarray, whether
        some window holds its maximum twice)."""
        rows = x.shape[0]
        a = x.a
        vals = np.empty((rows, len(windows)), dtype=object)
        idx = np.zeros((rows, len(windows)), dtype=np.int64)
        tied = False
        for r in range(rows):
            for o, win in enumerate(windows):
                best = None
                for pos in win:
                    e = a[r, pos]
                    if best is None or E.s_is_nan(e):
                        best, count = int(pos), 1
                        continue
                    order = _nn_compare(e, a[r, best])
                    if order == 1:
                        best, count = int(pos), 1
                    elif order == 0:
                        count += 1
                tied = tied or count > 1
                vals[r, o] = a[r, best]
                idx[r, o] = best
        out = Exact(vals, x.rational)
        if x.negzero is not None:
            out.negzero = np.take_along_axis(x.negzero, idx, axis=1)
        return out, idx, tied


def _nn_compare(e, best) -> int | None:
    """1 if e > best, 0 if equal, -1 if less (None: best is NaN), for decidable elements
    (free symbols are refused before pooling)."""
    if E.s_is_nan(best):
        return None
    if type(e) is E.fmpq and type(best) is E.fmpq:
        return (e > best) - (e < best)
    if E.s_is_nonfinite(e) or E.s_is_nonfinite(best):
        rank = {sympy().S.NegativeInfinity: -1, sympy().S.Infinity: 1}
        a, b = rank.get(e, 0), rank.get(best, 0)
        return (a > b) - (a < b)
    a, b = _nn_ball(e), _nn_ball(best)
    if a is not None and b is not None:     # disjoint balls decide it (certified: each holds its value)
        if a > b:
            return 1
        if a < b:
            return -1
    sign = E.s_sign(A.sub(Exact.scalar(e), Exact.scalar(best)).item())
    if sign is None:
        raise ValueError("max pooling compared values with free symbols")
    return sign


def _nn_ball(e):
    """A certified element's ball, a rational's exact ball; None for anything else."""
    if type(e) is E.fmpq:
        return flint.arb(e)
    if isinstance(e, E.Real):
        return e.ball
    return None


