"""The rounding-bound backend: how far PyTorch's floats may be from the exact answer, element by element.

``verify`` compares the exact prediction with PyTorch's float32 or float64 run. The difference
is PyTorch's rounding, and how large that may be depends on the computation: an exact 0 that
float64 PyTorch computes as 1.6e-8 after a cancellation (LayerNorm over one element of 1e6)
is within rounding, while the same 1.6e-8 on a value made by one multiplication is not. This
backend runs the same engine (every op rule, forward and backward, unchanged) on pairs: the
value (float64, as :class:`~adjoint.values.backends.float64.Float64Backend` computes it) and
``e``, a first-order bound on ``|computed - exact|`` for a run in the compared dtype, whose unit
roundoff is ``u`` (2**-24 for float32, 2**-53 for float64). Each method adds its own rounding
to the errors its operands carry (docs/verify.md states the rules):

* a literal or Python number: its own rounding into the dtype (0 when representable);
* ``x + y``, ``x - y``: ``e_x + e_y + u |x +- y|`` (exact in the subnormal range);
  ``x * y``: ``|y| e_x + |x| e_y + e_x e_y + u |x y| + eta``;
  ``x / y``: ``(e_x + |x / y| e_y) / (|y| - e_y) + u |x / y| + eta`` (unbounded when ``e_y >= |y|``),
  ``eta`` the spacing of the dtype's subnormals (2**-149, 2**-1074): an underflowed product is
  off by up to half of it, whatever its size;
* an elementwise ``f``: ``max |f'| e_x + k (u |f(x)| + eta)``, the slope's largest value over
  ``[x - e_x, x + e_x]`` (k = 1 for sqrt, 4 for the vectorized transcendental kernels; ``sqrt``'s
  term at most ``sqrt(e_x)``; erf's own error is 16 u absolute: GELU's kernel); 1-Lipschitz
  selections (``relu``, ``abs``, ``clamp``, ``max``, pooling, ``where``) carry their operands' bounds;
* a sum of ``m`` terms (``sum``, ``sum_to``, the scatter of index_add): ``sum e + (m - 1) u
  sum |terms|``, which holds in any summation order; a matrix product over ``K``:
  ``|A| e_B + e_A |B| + e_A e_B + K (u |A| |B| + eta)``.

A value whose bound is unknown (an operand no method of this backend made) has ``e`` NaN, and
so has whatever is computed from it: ``verify`` then falls back to its fixed tolerance for
that value and says so. The products and quotients keep their error products, so a value that
is (nearly) 0 in float64 and in the exact answer alike (``1 + tanh(z)`` at a saturated tanh,
times a gradient of 1e-22) still gets a bound; the bound is evaluated at the float64 values;
decisions taken on values (a relu's sign, the argmax) are assumed to be PyTorch's too.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from adjoint.values.backends.float64 import F64, Float64Backend

UNIT_ROUNDOFF = {"float32": 2.0 ** -24, "float64": 2.0 ** -53}
#: the spacing of the dtype's subnormals: a product or quotient whose exact value is below the
#: smallest normal number rounds with an absolute error up to half of it (gradual underflow), not
#: a relative one (5.5e-43 is -0 in a float32 run); sums and differences of floats are exact there
UNDERFLOW = {"float32": 2.0 ** -149, "float64": 2.0 ** -1074}
#: log of the dtype's largest finite number: exp overflows to inf above it
EXP_OVERFLOW = {"float32": math.log(3.4028234663852886e38), "float64": math.log(1.7976931348623157e308)}
#: oneDNN's float32 logistic (the fused LSTM's gates), in units of u: measured up to 6.2 (x near -80)
ONEDNN_LOGISTIC_ULPS = 8.0
#: and 0 below this input (as adjoint.values.backends.exact.ONEDNN_LOGISTIC_ZERO)
ONEDNN_LOGISTIC_ZERO = -86.9894
KERNEL_ULPS = 4.0   # a vectorized transcendental kernel's error, in units of u (SLEEF's are within 1 to 3.5 ulp)
#: the erf inside GELU's CPU kernel (Vectorized<float>::erf, a rational approximation, then ``1 + erf``)
#: is off by up to about 6.4e-7 in float32 (measured over [-10, 10]), an absolute error of about 11 u,
#: not a relative one: ``1 + erf(x / sqrt 2)`` at x = -3.5 keeps only that much of its few significant
#: bits. The bound takes 16 u, absolute, for every erf (|erf| <= 1, so it also covers 4 u |erf|).
ERF_ABS_ULPS = 16.0


class Bnd(F64):
    """A float64 value with ``e``, the bound on the dtype's rounding error of each element."""

    __slots__ = ("e",)

    def __init__(self, a, e=None):
        super().__init__(a)
        self.e = np.full(self.a.shape, np.nan) if e is None else np.broadcast_to(
            np.asarray(e, dtype=np.float64), self.a.shape)

    def bounds(self):
        """The bounds as nested lists (the shape of ``floats()``)."""
        return self.e.tolist() if self.e.ndim else float(self.e)

    def strings(self, printer=None):
        """In a bound run, the contract's ``exact`` field carries each element's bound (see :func:`bound_of`)."""
        return self.bounds()


def _undecided(x) -> np.ndarray:
    """Where a decision on ``x``'s sign may differ between PyTorch's float and the float64 value
    here: the element is within its own (positive) rounding bound of 0."""
    e = _e(x)
    return (e > 0) & (np.abs(x.a) <= e)


def _within_bounds(a, ea, top, etop) -> np.ndarray:
    """Where ``a`` is within the two bounds of ``top`` and either is uncertain: PyTorch's floats
    may order them either way (exactly given equal values tie in PyTorch too)."""
    with np.errstate(invalid="ignore"):
        return (np.abs(a - top) <= ea + etop) & (ea + etop > 0)


def _e(x) -> np.ndarray:
    e = getattr(x, "e", None)
    return np.full(np.shape(x.a), np.nan) if e is None else e


def _nearest0(a, e):
    """The point of ``[a - e, a + e]`` nearest 0 (where tanh', sigmoid' and erf' are largest)."""
    return np.sign(a) * np.maximum(np.abs(a) - e, 0.0)


def _times(d, e):
    """``d * e`` with 0 wherever ``e`` is 0 (no error in, none out: an infinite slope at an exact point)."""
    with np.errstate(all="ignore"):
        return np.where(e == 0, 0.0, np.abs(d) * e)


def _sum_error(a, b, s) -> np.ndarray:
    """``a + b - s`` exactly (Knuth's TwoSum; 0 where the float64 sum ``s`` is exact)."""
    with np.errstate(all="ignore"):
        bb = s - a
        return (a - (s - bb)) + (b - bb)


def _product_error(a, b, p) -> np.ndarray:
    """``a * b - p`` exactly (Dekker's TwoProduct, by Veltkamp's split; 0 where the float64
    product ``p`` is exact), valid above the underflow range (callers check ``|p|``)."""
    def split(x):
        c = 134217729.0 * x   # 2**27 + 1
        hi = c - (c - x)
        return hi, x - hi
    with np.errstate(all="ignore"):
        ah, al = split(a)
        bh, bl = split(b)
        return ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _scalar_error(v, u: float, dtype: str) -> float:
    """How far the number ``v`` is from its nearest value of ``dtype`` (an infinity or NaN is itself)."""
    if not isinstance(v, (int, Fraction)):
        try:
            f = float(v)   # a float, or a special form (SymPy's infinity: masks, masked_fill)
        except (TypeError, ValueError, OverflowError):
            return math.nan
        if not math.isfinite(f):
            return 0.0
    try:
        q = v if isinstance(v, Fraction) else Fraction(v)
    except (TypeError, ValueError, OverflowError):
        return math.nan
    f = float(q)
    if math.isinf(f):
        return math.nan
    f_dtype = float(np.float32(f)) if dtype == "float32" else f
    if math.isinf(f_dtype):
        return math.nan
    return float(abs(Fraction(f_dtype) - q)) * (1 + 2.0 ** -50)


class BoundBackend(Float64Backend):
    """Float64 values with rounding bounds for a PyTorch run in the ``compared`` dtype (its unit roundoff: :data:`UNIT_ROUNDOFF`)."""

    name = "bound"
    conv_patches = conv_fold = None   # the convolution's bounds follow the generic lowering (index, place_add)
    # the complex kernels' bounds likewise follow the complex backend's generic formulas (real
    # products, sums and square roots, each with its rule) instead of the float64 backend's numpy kernels
    complex_div = complex_abs = complex_exp = complex_function = None

    def __init__(self, dtype: str = "float32", symbols: dict | None = None, compared: str | None = None):
        super().__init__(dtype, symbols)
        self.compared = compared or dtype
        self.u = UNIT_ROUNDOFF[self.compared]
        self.eta = UNDERFLOW[self.compared]
        self.branch_points = 0   # decisions PyTorch's floats may take either way (see undecided)

    def undecided(self, x) -> np.ndarray:
        """:func:`_undecided`, counting the elements whose decision may go either way in
        :attr:`branch_points` (verify says so: their bounds cover both sides)."""
        mask = _undecided(x)
        self.branch_points += int(np.count_nonzero(mask))
        return mask

    def _b(self, a, e) -> Bnd:
        """A value and its bounds; an infinite or NaN element is itself (compared as such), its bound 0."""
        a = np.asarray(a, dtype=np.float64)
        with np.errstate(all="ignore"):
            e = np.broadcast_to(np.asarray(e, dtype=np.float64), a.shape)
            return Bnd(a, np.where(np.isfinite(a), e, 0.0))

    def _round(self, a) -> np.ndarray:
        """A sum's or difference's own rounding: ``u |a|`` (exact in the subnormal range)."""
        with np.errstate(all="ignore"):
            return np.where(np.isfinite(a), self.u * np.abs(a), 0.0)

    def _round_under(self, a, ops: float = 1.0) -> np.ndarray:
        """The rounding of ``ops`` products, quotients or kernel results: ``u |a|`` each, plus the
        subnormal spacing ``eta`` each (an underflowed result is off by up to half of it)."""
        with np.errstate(all="ignore"):
            return np.where(np.isfinite(a), ops * (self.u * np.abs(a) + self.eta), 0.0)

    # ------------------------------------------------------------------ construction
    def literal(self, lit):
        v = super().literal(lit)
        if lit.symbols or not isinstance(lit.items, tuple):
            a = v.a
            if isinstance(lit.items, tuple) or getattr(lit.items, "den", None) != 1:
                return self._b(a, self._round(a) * 2)
            exact = np.abs(a) < (2.0 ** 24 if self.compared == "float32" else 2.0 ** 53)
            return self._b(a, np.where(exact, 0.0, self._round(a)))
        e = lit.memo.get(("bound", self.compared))
        if e is None:
            e = np.array([_scalar_error(q, self.u, self.compared) for q in lit.items],
                         dtype=np.float64).reshape(v.a.shape)
            lit.memo[("bound", self.compared)] = e
        return self._b(v.a, e)

    def scalar(self, value):
        if isinstance(value, F64):
            return Bnd(float(value.item()), float(_e(value).reshape(-1)[0]) if value.size else 0.0)
        return Bnd(float(value), _scalar_error(value, self.u, self.compared))

    def zeros(self, shape):
        return Bnd(np.zeros(tuple(shape)), 0.0)

    def full(self, shape, value):
        return Bnd(np.full(tuple(shape), float(value)), _scalar_error(value, self.u, self.compared))

    def integers(self, values, shape):
        return Bnd(super().integers(values, shape).a, 0.0)

    def constant(self, values, shape):
        a = super().constant(values, shape).a
        e = np.array([_scalar_error(v, self.u, self.compared) for v in values], dtype=np.float64)
        return Bnd(a, e.reshape(a.shape))

    def pi(self):
        return Bnd(math.pi, self.u * math.pi)

    def ln(self, base: int):
        """PyTorch's literal for log(base) is within an ulp of it (2 u), and is rounded once more into
        a float32 run's dtype (u)."""
        c = super().ln(base).a
        return Bnd(c, 3 * self.u * abs(float(c)))

    # ------------------------------------------------------------------ arithmetic
    def fma(self, a, b, c):
        """Bounded as a product then a sum (two roundings: a superset of PyTorch's one)."""
        return self.add(self.mul(a, b), c)

    def add(self, x, y):
        r = super().add(x, y).a
        return self._b(r, _e(x) + _e(y) + self._round_sum(r, x, y, y.a))

    def sub(self, x, y):
        r = super().sub(x, y).a
        return self._b(r, _e(x) + _e(y) + self._round_sum(r, x, y, -y.a))

    def _round_sum(self, r, x, y, added) -> np.ndarray:
        """A sum's own rounding, none where an operand is exactly 0 in PyTorch's run too (value and
        bound 0): ``x + 0`` is ``x`` (a convolution's padded border is its bias exactly, so a pooling
        window there ties in PyTorch's floats as in the exact answer); none either where the sum
        of two exact operands is a number of the dtype (``0.5 + 1.5`` is 2 in PyTorch's floats)."""
        exact = ((x.a == 0) & (_e(x) == 0)) | ((y.a == 0) & (_e(y) == 0))
        exact |= self._exact(r, x, y, _sum_error(x.a, added, r))   # (``added``: y, or -y for a difference)
        return np.where(exact, 0.0, self._round(r))

    def _exact(self, r, x, y, err, product: bool = False) -> np.ndarray:
        """Where PyTorch's result of one correctly rounded operation is the exact one: both operands
        exact in its run too (bound 0), the float64 result exact (``err`` 0; a product's above the
        underflow range, where the error's own computation is exact, or 0 from an operand 0) and a
        number of the compared dtype. A value reached by exact
        operations (``x * 2`` of a given 1) then sits on a branch point exactly, as in PyTorch, and
        the decision there (clamp's, relu's at a tie) is checked, not covered both ways."""
        with np.errstate(all="ignore"):
            r = np.asarray(r, dtype=np.float64)
            ok = (_e(x) == 0) & (_e(y) == 0) & np.isfinite(r) & (err == 0)
            if product:
                ok &= (np.abs(r) >= 2.0 ** -969) | (x.a == 0) | (y.a == 0)
            if self.compared == "float32":
                ok &= r.astype(np.float32).astype(np.float64) == r
        return np.broadcast_to(ok, np.shape(r))

    def normalize(self, x, mean, rstd):
        """PyTorch's norm kernels compute ``x * rstd - mean * rstd`` (batch norm: ``x * alpha + beta``,
        ``beta = b - mean * alpha``): both products round before they cancel, so an element equal to
        its mean is 0 exactly and about ``u |x rstd|`` in PyTorch. The result carries that rounding,
        ``2 u (|x| + |mean|) |rstd|``, beside the formula's own bound."""
        y = super().normalize(x, mean, rstd)
        with np.errstate(all="ignore"):
            extra = 2.0 * self.u * (np.abs(x.a) + np.abs(mean.a)) * np.abs(rstd.a)
        return self._b(y.a, _e(y) + extra)

    def direction(self, x, n):
        """Where the 2-norm ``n`` is within its rounding bound of 0, PyTorch's ``n`` may be a tiny
        nonzero value where the exact one is 0 (a group norm's mean over one group, then a norm), so
        its ``x / n`` is some unit vector: each element within 1 of 0, so within ``1 + |r|`` of ours."""
        r = super().direction(x, n)
        loose = np.broadcast_to(self.undecided(n), np.shape(r.a))
        return self._b(r.a, np.where(loose, 1.0 + np.abs(r.a), _e(r)))

    def mul(self, x, y):
        r = super().mul(x, y).a
        ex, ey = _e(x), _e(y)
        # |x~ y~ - x y| <= |y| e_x + |x| e_y + e_x e_y: the product of the errors counts where both
        # values are (nearly) 0, as 1 + tanh(z) and 1 - tanh(z)^2 at a saturated tanh times a tiny gradient
        own = np.where(self._exact(r, x, y, _product_error(x.a, y.a, r), product=True), 0.0, self._round_under(r))
        return self._b(r, _times(y.a, ex) + _times(x.a, ey) + _times(ex, ey) + own)

    def div(self, x, y):
        r = super().div(x, y).a
        ex, ey = _e(x), _e(y)
        with np.errstate(all="ignore"):
            # |x~ / y~ - x / y| <= (e_x + |x / y| e_y) / (|y| - e_y), unbounded (inf: the fixed
            # tolerance) when the rounded divisor may be 0
            den = np.abs(y.a) - ey
            first = np.where((ex == 0) & (ey == 0), 0.0,
                             np.where(den > 0, (ex + _times(r, ey)) / np.where(den > 0, den, 1.0), np.inf))
            return self._b(r, first + self._round_under(r))

    def neg(self, x):
        return self._b(-x.a, _e(x))

    def float_pow(self, x, e):
        """A Python float power, bounded as ``pow`` is (not the float64 backend's C ``pow``)."""
        return self.pow(x, e)

    def pow(self, x, e):
        return self._power(x, e, super().pow(x, e).a)

    def pow_number(self, x, e):
        """A number power: the float64 backend's value (the CPU kernel's roads), bounded as ``pow``."""
        return self._power(x, e, super().pow_number(x, e).a)

    def _power(self, x, e, r):
        ex = np.broadcast_to(_e(x), np.shape(x.a))
        with np.errstate(all="ignore"):
            # the largest |d/dx x ** e| over [x - e_x, x + e_x] (the mean value theorem, so the bound
            # holds beyond first order: (0 + e_x) ** 2 is e_x ** 2, where the slope at 0 is 0):
            # |e| |x| ** (e - 1) grows with |x| for e >= 1 (taken at |x| + e_x) and shrinks for
            # e < 1 (taken at |x| - e_x, unbounded where that reaches 0); x ** 0 is exactly 1
            a = np.abs(x.a)
            lo = a - ex
            grows = np.abs(e.a) * np.power(a + ex, e.a - 1)
            shrinks = np.where(lo > 0, np.abs(e.a) * np.power(np.where(lo > 0, lo, 1.0), e.a - 1), np.inf)
            dx = np.where(e.a == 0, 0.0, np.where(e.a >= 1, grows, shrinks))
            de = r * np.log(np.abs(x.a))
        return self._b(r, _times(dx, _e(x)) + _times(de, _e(e)) + self._round_under(r, KERNEL_ULPS))

    # ------------------------------------------------------------------ elementwise functions
    def _elementwise(self, fn, x, slope, ulps: float = KERNEL_ULPS):
        """``f(x)``: ``slope(x, e_x)`` is the largest ``|f'|`` over ``[x - e_x, x + e_x]`` (the mean
        value theorem, so the bound holds beyond first order), plus the kernel's own ``ulps``."""
        r = Float64Backend._fn(self, fn, x).a
        ex = np.broadcast_to(_e(x), np.shape(x.a))
        with np.errstate(all="ignore"):
            d = slope(x.a, ex)
        return self._b(r, _times(d, ex) + self._round_under(r, ulps))

    def relu(self, x):
        """1-Lipschitz; exactly 0 (no error) where even the rounded ``x`` stays negative."""
        ex = _e(x)
        return self._b(super().relu(x).a, np.where(x.a < -ex, 0.0, ex))

    def tanh(self, x):
        return self._elementwise(np.tanh, x, lambda a, e: 1 - np.tanh(_nearest0(a, e)) ** 2)

    def sigmoid(self, x):
        """PyTorch's kernel is ``1 / (1 + exp(-x))``: where ``exp(-x)`` overflows (x below -88.72 in
        float32, -709.78 in float64) it is exactly 0, though the true value is a subnormal number
        there (sigmoid(-95) is about 5.5e-42): where PyTorch's x may be that low, the whole value."""
        def slope(a, e):
            s = 1.0 / (1.0 + np.exp(-_nearest0(a, e)))
            return s * (1 - s)
        y = self._elementwise(lambda a: 1.0 / (1.0 + np.exp(-a)), x, slope)
        with np.errstate(all="ignore"):
            zero = (x.a - _e(x)) < -EXP_OVERFLOW[self.compared]
        if not np.any(zero):
            return y
        with np.errstate(all="ignore"):
            whole = np.exp(x.a + _e(x))   # sigmoid(x) < exp(x): the true value, even where doubles flush it too
        return self._b(y.a, np.where(zero, _e(y) + np.abs(y.a) + whole, _e(y)))

    def exp(self, x):
        return self._elementwise(np.exp, x, lambda a, e: np.exp(a + e))

    def log(self, x):
        return self._elementwise(np.log, x, lambda a, e: np.where(np.abs(a) > e, 1.0 / (np.abs(a) - e), np.inf))

    def sin(self, x):
        return self._elementwise(np.sin, x, lambda a, e: np.minimum(1.0, np.abs(np.cos(a)) + e))

    def cos(self, x):
        return self._elementwise(np.cos, x, lambda a, e: np.minimum(1.0, np.abs(np.sin(a)) + e))

    def sqrt(self, x):
        r = Float64Backend._fn(self, np.sqrt, x).a
        ex = _e(x)
        with np.errstate(all="ignore"):
            first = np.minimum(_times(0.5 / r, ex), np.sqrt(ex))
        return self._b(r, first + self._round(r))

    def rsqrt(self, x):
        """``1 / sqrt(x)``: the slope ``|x|^(-3/2) / 2`` at the point nearest 0."""
        return self._elementwise(lambda a: 1.0 / np.sqrt(a), x,
                                 lambda a, e: np.where(np.abs(a) > e, 0.5 * (np.abs(a) - e) ** -1.5, np.inf))

    def log1p(self, x):
        return self._elementwise(np.log1p, x, lambda a, e: np.where(1 + a > e, 1.0 / (1 + a - e), np.inf))

    def expm1(self, x):
        return self._elementwise(np.expm1, x, lambda a, e: np.exp(a + e))

    def atan(self, x):
        return self._elementwise(np.arctan, x, lambda a, e: 1.0 / (1.0 + _nearest0(a, e) ** 2))

    def atan2(self, y, x):
        """``atan2(y, x)``: its gradient ``(x, -y) / (x^2 + y^2)`` is at most ``1 / r`` in size, ``r``
        the distance to 0, so ``e_y + e_x`` moves it by at most ``(e_y + e_x) / (r - e_y - e_x)``
        (unbounded where the disc reaches 0); where ``x < 0`` and ``y``'s sign is within its bound
        (the branch cut), PyTorch's float may be on the other side: up to ``2 pi`` more. Plus the
        kernel's own ``ulps``."""
        r = Float64Backend.atan2(self, y, x).a
        shape = np.shape(r)
        ya, xa = np.broadcast_to(y.a, shape), np.broadcast_to(x.a, shape)
        ey, ex = np.broadcast_to(_e(y), shape), np.broadcast_to(_e(x), shape)
        with np.errstate(all="ignore"):
            e = ey + ex
            dist = np.hypot(ya, xa) - e
            moved = np.where(e == 0, 0.0, np.where(dist > 0, e / dist, np.inf))
            cut = (xa - ex < 0) & (np.abs(ya) <= ey)
            moved = np.where(cut & (ey > 0), moved + 2 * math.pi, moved)
        return self._b(r, moved + self._round_under(r, KERNEL_ULPS))

    def _modulo(self, a, b, r, mode: str):
        """fmod / remainder: exact in doubles given their operands (no rounding of their own); the
        operands' errors move the result by ``e_a + |q| e_b`` (``q`` the rounded quotient), and where
        that may carry ``a / b`` across an integer (the result within it of 0 or of ``|b|``) PyTorch's
        float may have the other quotient: up to ``|b| + e_b`` more."""
        shape = np.shape(r)
        ea, eb = np.broadcast_to(_e(a), shape), np.broadcast_to(_e(b), shape)
        bb = np.broadcast_to(b.a, shape)
        q = np.asarray(Float64Backend.rounded_quotient(self, a, b, mode).a)
        with np.errstate(all="ignore"):
            moved = ea + _times(q, eb)
            near = (moved > 0) & ((np.abs(r) <= moved) | (np.abs(np.abs(bb) - np.abs(r)) <= moved))
            return self._b(r, np.where(near, moved + np.abs(bb) + eb, moved))

    def fmod(self, a, b):
        return self._modulo(a, b, Float64Backend.fmod(self, a, b).a, "trunc")

    def remainder(self, a, b):
        return self._modulo(a, b, Float64Backend.remainder(self, a, b).a, "floor")

    def rounded_quotient(self, a, b, mode: str):
        """An integer, exact unless ``a / b`` is within the operands' errors (and the division's
        rounding) of an integer: there PyTorch's float may round to the neighbour, 1 away."""
        q = Float64Backend.rounded_quotient(self, a, b, mode).a
        shape = np.shape(q)
        aa, bb = np.broadcast_to(a.a, shape), np.broadcast_to(b.a, shape)
        ea, eb = np.broadcast_to(_e(a), shape), np.broadcast_to(_e(b), shape)
        with np.errstate(all="ignore"):
            ratio = aa / bb
            spread = (ea + np.abs(ratio) * eb) / np.maximum(np.abs(bb) - eb, 0.0) + 2 * self.u * np.abs(ratio)
            near = np.abs(ratio - np.round(ratio)) <= spread
            return self._b(q, np.where(near & (spread > 0), 1.0, 0.0))

    def sinh(self, x):
        return self._elementwise(np.sinh, x, lambda a, e: np.cosh(np.abs(a) + e))

    def cosh(self, x):
        return self._elementwise(np.cosh, x, lambda a, e: np.sinh(np.abs(a) + e))

    def tan(self, x):
        """The slope ``1 + tan^2`` grows towards each pole (k + 1/2) pi: its largest value over
        ``[x - e, x + e]`` is at an end, or infinite when a pole is inside."""
        def slope(a, e):
            lo, hi = a - e, a + e
            pole = np.floor(lo / math.pi - 0.5) != np.floor(hi / math.pi - 0.5)
            return np.where(pole, np.inf, np.maximum(1.0 / np.cos(lo) ** 2, 1.0 / np.cos(hi) ** 2))
        return self._elementwise(np.tan, x, slope)

    def log2(self, x):
        return self._elementwise(np.log2, x, lambda a, e: np.where(np.abs(a) > e, 1.0 / ((np.abs(a) - e) * math.log(2)), np.inf))

    def log10(self, x):
        return self._elementwise(np.log10, x,
                                 lambda a, e: np.where(np.abs(a) > e, 1.0 / ((np.abs(a) - e) * math.log(10)), np.inf))

    def abs(self, x):
        return self._b(np.abs(x.a), _e(x))

    def sgn(self, x):
        """The sign is exact where it is decided; where the element is within its own bound of 0
        (``_undecided``) PyTorch's float may be 0 or of the other sign (a float32 gelu far below 0
        is -0 in PyTorch, about -1e-9 exactly), so the sign there may differ by up to ``1 + |s|``."""
        s = super().sgn(x).a
        return Bnd(s, np.where(self.undecided(x), 1.0 + np.abs(s), 0.0))

    def onednn_sigmoid(self, x):
        """oneDNN's float32 logistic (its fused LSTM's gates): within 6.2 u of the exact value
        (measured over [-87, 30] in torch 2.13; up to 4.5 u above -20), so :data:`ONEDNN_LOGISTIC_ULPS`;
        and 0 where its ``exp(x)`` flushes (x below -86.9894): where PyTorch's x may be that low, the
        whole value."""
        def slope(a, e):
            s = 1.0 / (1.0 + np.exp(-_nearest0(a, e)))
            return s * (1 - s)
        y = self._elementwise(lambda a: 1.0 / (1.0 + np.exp(-a)), x, slope, ONEDNN_LOGISTIC_ULPS)
        with np.errstate(all="ignore"):
            zero = (x.a - _e(x)) < ONEDNN_LOGISTIC_ZERO + 0.01
        if not np.any(zero):
            return y
        with np.errstate(all="ignore"):
            whole = np.exp(x.a + _e(x))   # sigmoid(x) < exp(x)
        return self._b(y.a, np.where(zero, _e(y) + np.abs(y.a) + whole, _e(y)))

    def erf(self, x):
        r = super().erf(x).a
        ex = np.broadcast_to(_e(x), np.shape(x.a))
        with np.errstate(all="ignore"):
            n = _nearest0(x.a, ex)
            d = 2 / math.sqrt(math.pi) * np.exp(-n * n)
            own = np.where(np.isfinite(r), ERF_ABS_ULPS * self.u + self.eta, 0.0)
        return self._b(r, _times(d, ex) + own)

    def clamp(self, x, lo=None, hi=None):
        return self._b(super().clamp(x, lo, hi).a, _e(x))

    def clamped_log(self, x):
        """``max(log x, -100)`` (binary_cross_entropy's). Where even the smallest ``x`` PyTorch's run
        may have, ``x - e_x``, keeps the log above -100, the slope rule; where it may not (a sigmoid
        saturated to 1.0 in floats, its exact ``1 - x`` 8e-26: the float64 value here is -100 too),
        both PyTorch's value and the exact one lie in ``[-100, log(x + e_x)]``, so the bound is that
        interval's width. Exactly -100 with no error in ``x`` (``x`` is 0): no error."""
        r = super().clamped_log(x).a
        ax = np.abs(x.a)
        ex = np.broadcast_to(_e(x), np.shape(x.a))
        own = self._round_under(r, KERNEL_ULPS)
        with np.errstate(all="ignore"):
            bites = ax - ex <= math.exp(-100.0)
            slope = np.where(bites, 0.0, 1.0 / (ax - ex))
            top = np.maximum(np.log(ax + ex), -100.0)
            e = np.where(bites, top + 100.0 + own, _times(slope, ex) + own)
        return self._b(r, np.where((ex == 0) & (r == -100.0), 0.0, e))

    # ------------------------------------------------------------------ selections
    def mask(self, x, predicate):
        """A 0/1 mask from each element's sign. Where the element is within its own bound of 0
        (``e > 0``, ``|x| <= e``), PyTorch's float may sit on the other side of 0 than the float64
        value here, so the mask there may be the other value: its bound is 1 (a product with it
        then carries ``|g| + e_g``); elsewhere the decision is PyTorch's too (bound 0)."""
        return Bnd(super().mask(x, predicate).a, np.where(self.undecided(x), 1.0, 0.0))

    def where(self, cond, x, y):
        shape = np.broadcast_shapes(cond.shape, x.shape, y.shape)
        c = np.broadcast_to(cond.a != 0, shape)
        ex, ey = np.broadcast_to(_e(x), x.shape), np.broadcast_to(_e(y), y.shape)
        e = np.where(c, ex, ey)
        ec = np.broadcast_to(_e(cond), cond.shape)
        with np.errstate(all="ignore"):   # a condition that may be the other value: either branch
            either = np.maximum(ex, ey) + np.abs(x.a - y.a)
        return self._b(np.where(c, x.a, y.a), np.where(np.broadcast_to(ec > 0, shape), either, e))

    def select_positive(self, x, g):
        r = super().select_positive(x, g).a
        eg = np.broadcast_to(_e(g), x.shape)
        e = np.where(x.a <= 0, 0.0, eg)
        return self._b(r, np.where(self.undecided(x), np.abs(np.broadcast_to(g.a, x.shape)) + eg, e))

    def choose(self, test, rel: str, a, b):
        r = super().choose(test, rel, a, b).a
        ea, eb = F64(np.broadcast_to(_e(a), a.shape)), F64(np.broadcast_to(_e(b), b.shape))
        e = Float64Backend.choose(self, test, rel, ea, eb).a
        with np.errstate(all="ignore"):   # a test within its bound of 0: either branch
            either = np.maximum(ea.a, eb.a) + np.abs(a.a - b.a)
        return self._b(r, np.where(np.broadcast_to(self.undecided(test), np.shape(r)), either, e))

    # ------------------------------------------------------------------ structure
    def _both(self, fn, x):
        return self._b(fn(x).a, fn(F64(_e(x))).a)

    def reshape(self, x, shape):
        return self._both(lambda v: Float64Backend.reshape(self, v, shape), x)

    def t2(self, x):
        return self._both(lambda v: Float64Backend.t2(self, v), x)

    def broadcast_to(self, x, shape):
        return self._both(lambda v: Float64Backend.broadcast_to(self, v, shape), x)

    def index(self, x, key):
        return self._both(lambda v: Float64Backend.index(self, v, key), x)

    def permute(self, x, perm):
        return self._both(lambda v: Float64Backend.permute(self, v, perm), x)

    def place(self, shape, key, g):
        return self.assign(self.zeros(shape), key, g)

    def assign(self, base, key, new):
        r = Float64Backend.assign(self, base, key, new).a
        e = Float64Backend.assign(self, F64(_e(base)), key, F64(_e(new))).a
        return self._b(r, e)

    def place_add(self, shape, key, g):
        r = Float64Backend.place_add(self, shape, key, g).a
        eg = Float64Backend.place_add(self, shape, key, F64(_e(g))).a
        mag = Float64Backend.place_add(self, shape, key, F64(np.abs(g.a))).a
        count = Float64Backend.place_add(self, shape, key, F64(np.ones(g.shape))).a
        return self._b(r, eg + np.maximum(count - 1, 0) * self.u * mag)

    def concat(self, xs, axis):
        return self._b(np.concatenate([x.a for x in xs], axis=axis),
                       np.concatenate([np.broadcast_to(_e(x), x.shape) for x in xs], axis=axis))

    def stack(self, xs, axis):
        return self._b(np.stack([x.a for x in xs], axis=axis),
                       np.stack([np.broadcast_to(_e(x), x.shape) for x in xs], axis=axis))

    # ------------------------------------------------------------------ sums and products
    def _summed(self, total, x, parts: int):
        """A sum of ``parts`` terms per output element: the terms' bounds summed plus ``(parts - 1) u sum |terms|``."""
        r = total(x).a
        e = total(F64(np.broadcast_to(_e(x), x.shape))).a
        if parts <= 1:   # one term: no rounding of a sum (and no 0 * inf when a term is infinite)
            return self._b(r, e)
        with np.errstate(invalid="ignore"):
            mag = total(F64(np.abs(x.a))).a
        return self._b(r, e + (parts - 1) * self.u * mag)

    def sum_to(self, x, shape):
        shape = tuple(shape)
        if x.shape == shape:
            return x
        parts = x.size // max(1, int(np.prod(shape))) if x.size else 0
        return self._summed(lambda v: Float64Backend.sum_to(self, v, shape), x, parts)

    def total(self, x):
        return self._summed(lambda v: Float64Backend.total(self, v), x, x.size)

    def sum_dims(self, x, dims, keepdim: bool):
        out = Float64Backend.sum_dims(self, x, dims, keepdim)
        parts = x.size // max(1, out.size) if x.size else 0
        return self._summed(lambda v: Float64Backend.sum_dims(self, v, dims, keepdim), x, parts)

    def _product(self, mm, x, y, inner: int):
        r = mm(x, y).a
        ax, ay = F64(np.abs(x.a)), F64(np.abs(y.a))
        ex, ey = F64(np.broadcast_to(_e(x), x.shape)), F64(np.broadcast_to(_e(y), y.shape))
        e = mm(ax, ey).a + mm(ex, ay).a + mm(ex, ey).a
        # eta (an underflowed product) only where some product may be nonzero: a row of exact zeros
        # (a padded position) times anything is 0 exactly (a row or a column with a nonzero value
        # may meet: counted, as is any element with an error)
        if ax.a.ndim >= 2 and ay.a.ndim >= 2:
            some = (ax.a > 0).any(axis=-1)[..., :, None] & (ay.a > 0).any(axis=-2)[..., None, :]
        else:   # a vector operand: which products meet, by the same product of 0/1 indicators
            some = mm(F64((ax.a > 0) * 1.0), F64((ay.a > 0) * 1.0)).a > 0
        e = e + inner * (self.u * mm(ax, ay).a + np.where(some | (e > 0), self.eta, 0.0))
        return self._b(r, e)

    def matmul2d(self, x, y):
        return self._product(lambda a, b: Float64Backend.matmul2d(self, a, b), x, y, x.shape[-1] if x.ndim else 1)

    def bmm(self, a, b):
        return self._product(lambda p, q: Float64Backend.bmm(self, p, q), a, b, a.shape[-1] if a.ndim else 1)

    def outer(self, x, y):
        r = Float64Backend.outer(self, x, y).a
        e = (np.outer(np.abs(x.a), _e(y)) + np.outer(_e(x), np.abs(y.a)) + np.outer(_e(x), _e(y))
             + self._round_under(r))
        return self._b(r, e)

    # ------------------------------------------------------------------ selections by value
    def amax(self, x, dims, keepdim: bool, largest: bool = True):
        r = super().amax(x, dims, keepdim, largest).a
        e = Float64Backend.amax(self, F64(np.broadcast_to(_e(x), x.shape)), dims, keepdim, True).a
        return self._b(r, e)

    def argmax(self, x, dim: int, keepdim: bool, largest: bool = True):
        vals, idx = super().argmax(x, dim, keepdim, largest)
        if x.ndim == 0:
            return Bnd(x.a, _e(x)), Bnd(0.0, 0.0)
        ex = np.broadcast_to(_e(x), x.shape)
        e = np.max(ex, axis=dim, keepdims=keepdim)
        # an index PyTorch's floats may put on another element within both bounds of the chosen one:
        # its bound is the farthest such element's distance along the dim (verify allows that much)
        chosen = idx.a if keepdim else np.expand_dims(idx.a, dim)
        chosen = np.asarray(chosen, dtype=np.int64)
        top = np.take_along_axis(x.a, chosen, axis=dim)
        etop = np.take_along_axis(ex, chosen, axis=dim)
        near = _within_bounds(x.a, ex, top, etop)
        shape = [1] * x.ndim
        shape[dim % x.ndim] = x.shape[dim]
        reach = np.max(np.where(near, np.abs(np.arange(x.shape[dim]).reshape(shape) - chosen), 0), axis=dim,
                       keepdims=keepdim)
        self.branch_points += int(np.count_nonzero(reach))   # a tie PyTorch's floats may break either way
        return self._b(vals.a, e), Bnd(idx.a, reach.astype(np.float64))

    def sort_order(self, x, dim: int, descending: bool):
        idx, tied = super().sort_order(x, dim, descending)
        order = np.asarray(idx.a, dtype=np.int64)
        v = np.take_along_axis(x.a, order, axis=dim)
        e = np.take_along_axis(np.broadcast_to(_e(x), x.shape), order, axis=dim)
        n = x.shape[dim]
        lo, hi = np.take(v, range(n - 1), axis=dim), np.take(v, range(1, n), axis=dim)
        elo, ehi = np.take(e, range(n - 1), axis=dim), np.take(e, range(1, n), axis=dim)
        with np.errstate(invalid="ignore"):
            near = (lo != hi) & (np.abs(hi - lo) <= elo + ehi)
        self.branch_points += int(np.count_nonzero(near))   # neighbours PyTorch's floats may order either way
        return Bnd(idx.a, np.zeros(idx.a.shape)), tied

    def place_along(self, shape, dim: int, indices, g, keepdim: bool):
        r = super().place_along(shape, dim, indices, g, keepdim)
        if not tuple(shape):
            return g
        e = Float64Backend.place_along(self, shape, dim, indices, F64(np.broadcast_to(_e(g), g.shape)), keepdim).a
        return self._b(r.a, e)

    def max_routing(self, grad, g, x, windows, idx):
        """Where another element of a window is within the two bounds of the one chosen (an exact tie
        of values PyTorch computes along different paths, or a near one), PyTorch's floats may route
        the window's gradient to either: each such element's bound grows by ``|g|`` (and its bound)."""
        a = x.a
        ex = np.broadcast_to(_e(x), a.shape)
        rows = np.arange(a.shape[0])
        ga = np.broadcast_to(np.abs(g.a) + _e(g), idx.shape)
        extra = np.zeros(np.shape(grad.a))
        for o, win in enumerate(windows()):
            win = np.asarray(win, dtype=np.int64)
            chosen = idx[:, o]
            top, etop = a[rows, chosen], ex[rows, chosen]
            near = _within_bounds(a[:, win], ex[:, win], top[:, None], etop[:, None])
            undecided = near.sum(axis=1) > 1
            if not undecided.any():
                continue
            self.branch_points += int(np.count_nonzero(undecided))
            r, k = np.nonzero(near & undecided[:, None])
            np.add.at(extra, (r, win[k]), ga[r, o])
        if not extra.any():
            return grad
        return self._b(grad.a, _e(grad) + extra)

    def max_routing_dim(self, grad, g, x, dim, indices, keepdim):
        shape = np.shape(x.a)
        if not shape:
            return grad
        dim = dim % len(shape)

        def last(a):   # dim moved last, then (rows, size of dim)
            return np.moveaxis(np.broadcast_to(a, shape), dim, -1).reshape(-1, shape[dim])

        def kept(a):   # a reduced tensor as (rows, 1)
            a = np.asarray(a)
            a = a if keepdim else np.expand_dims(a, dim)
            return np.moveaxis(np.broadcast_to(a, shape[:dim] + (1,) + shape[dim + 1:]), dim, -1).reshape(-1, 1)

        idx = kept(np.asarray(indices.a, dtype=np.int64))
        before = Bnd(last(grad.a), last(_e(grad)))
        flat = self.max_routing(before, Bnd(kept(g.a), kept(_e(g))), Bnd(last(x.a), last(_e(x))),
                                lambda: [np.arange(shape[dim])], idx)
        if flat is before:
            return grad
        moved = tuple(np.delete(np.array(shape), dim)) + (shape[dim],)
        e = np.moveaxis(np.asarray(flat.e).reshape(moved), -1, dim)
        return self._b(grad.a, e)

    def window_max(self, x, windows):
        vals, idx, tied = super().window_max(x, windows)
        ex = np.broadcast_to(_e(x), x.shape)
        e = np.stack([np.max(ex[:, np.asarray(w, dtype=np.int64)], axis=1) if len(w) else np.zeros(x.shape[0])
                      for w in windows], axis=1) if windows else np.zeros((x.shape[0], 0))
        return self._b(vals.a, e), idx, tied


def bound_of(value: dict) -> list | float | None:
    """The bounds a bound run's VALUE carries (its ``exact`` field), or None."""
    return value.get("exact") if isinstance(value, dict) else None
