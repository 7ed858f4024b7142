"""Exact tensors.

An :class:`Exact` is an immutable n-d array whose elements are *all* rationals
(``flint.fmpq``, fast, vectorised through numpy object arrays and FLINT's ``fmpq_mat`` for
products) or *all* SymPy expressions (free symbols, ``tanh(3/10)``, ``sqrt(2)``, and the
IEEE specials ``oo``/``-oo``/``nan`` that PyTorch produces at kinks such as sqrt'(0)).
Every operation keeps that invariant and drops back to rationals as soon as a SymPy result
is a plain rational again, so the common case never pays for SymPy.

The element-level helpers (``s_*``) implement IEEE-754 conventions where PyTorch relies
on them: x/0 is +-inf (nan for 0/0), inf*0 is nan, sqrt of a negative is nan.
"""

from __future__ import annotations

from fractions import Fraction
from functools import reduce

import flint
import mpmath
import numpy as np
import sympy

fmpq = flint.fmpq
_Q0 = fmpq(0)
_Q1 = fmpq(1)
_S = sympy.S

REPR_ELEMENTS = 12  # repr() shows every element up to this many, then the shape and the first few


# ----------------------------------------------------------------------------- scalars

def q(value) -> fmpq:
    """An exact rational from int, Fraction or fmpq."""
    if type(value) is fmpq:
        return value
    if isinstance(value, Fraction):
        return fmpq(value.numerator, value.denominator)
    if isinstance(value, int):
        return fmpq(value)
    if isinstance(value, sympy.Rational):
        return fmpq(int(value.p), int(value.q))
    raise TypeError(f"not an exact rational: {value!r}")


def _element(e):
    t = type(e)
    if t is fmpq:
        return e
    if t is Fraction:
        return fmpq(e.numerator, e.denominator)
    if t is int:
        return fmpq(e)
    return s_norm(e)


def s_sym(x):
    """Element as a SymPy object."""
    if type(x) is fmpq:
        return sympy.Rational(int(x.p), int(x.q))
    return x


def s_norm(x):
    """Element back to fmpq when it is a plain rational."""
    if type(x) is fmpq:
        return x
    if isinstance(x, sympy.Rational):
        return fmpq(int(x.p), int(x.q))
    return x


_NONFINITE = (_S.Infinity, _S.NegativeInfinity, _S.ComplexInfinity, _S.NaN)


def s_mul(x, y):
    """x * y for two elements. Zero times a finite closed form is zero, decided structurally:
    SymPy's Mul would ask the other factor ``is_finite``, which on a large closed form can run
    its adaptive evalf for minutes (a hook's ``grad * 0``; sweep seed 4, problem 1141)."""
    if _is_exact_zero(x) and not _has_nonfinite(y) or _is_exact_zero(y) and not _has_nonfinite(x):
        return _S.Zero
    return s_sym(x) * s_sym(y)


def _is_exact_zero(x) -> bool:
    return x == 0 if type(x) is fmpq else x is _S.Zero


def _has_nonfinite(x) -> bool:
    return type(x) is not fmpq and x.has(*_NONFINITE)


def s_is_nan(x) -> bool:
    return x is _S.NaN


def s_is_nonfinite(x) -> bool:
    return x is _S.NaN or x is _S.Infinity or x is _S.NegativeInfinity


_MP_FUNCS = {sympy.exp: mpmath.exp, sympy.log: mpmath.log, sympy.sin: mpmath.sin, sympy.cos: mpmath.cos,
             sympy.tan: mpmath.tan, sympy.tanh: mpmath.tanh, sympy.Abs: abs, sympy.sign: mpmath.sign}


def s_approx(x, dps: int = 50):
    """A constant element as an mpmath number accurate to about ``dps`` digits, or None when it
    has free symbols or is not a finite real.

    A memoised walk at fixed precision: SymPy's adaptive ``evalf`` can take minutes on the
    deeply nested tanh/sigmoid/sqrt expressions a forward pass produces."""
    if type(x) is fmpq:
        with mpmath.workdps(dps):
            return mpmath.mpf(int(x.p)) / int(x.q)
    if getattr(x, "free_symbols", None):
        return None
    memo: dict = {}

    def ev(e):
        if e in memo:
            return memo[e]
        if e.is_Rational:
            r = mpmath.mpf(int(e.p)) / int(e.q)
        elif e is sympy.pi:
            r = +mpmath.pi
        elif e is sympy.E:
            r = +mpmath.e
        elif e.is_Add:
            r = mpmath.fsum(ev(a) for a in e.args)
        elif e.is_Mul:
            r = mpmath.fprod(ev(a) for a in e.args)
        elif e.is_Pow:
            b, k = ev(e.base), ev(e.exp)
            if b < 0 and not e.exp.is_integer:
                raise ValueError("not real")
            r = mpmath.power(b, k)
        elif isinstance(e, sympy.Function) and e.func in _MP_FUNCS and len(e.args) == 1:
            r = _MP_FUNCS[e.func](ev(e.args[0]))
        else:
            r = mpmath.mpf(sympy.N(e, dps))
        if not isinstance(r, mpmath.mpf) or not mpmath.isfinite(r):
            raise ValueError("not finite")
        memo[e] = r
        return r

    try:
        with mpmath.workdps(dps + 10):
            return +ev(x)
    except (ValueError, TypeError, ZeroDivisionError, OverflowError):
        return None


def s_sign(x):
    """-1, 0 or 1 when decidable; 'nan' for NaN; None when it depends on free symbols."""
    if type(x) is fmpq:
        return (x > 0) - (x < 0)
    if x is _S.NaN:
        return "nan"
    if x is _S.Infinity:
        return 1
    if x is _S.NegativeInfinity:
        return -1
    if not x.free_symbols:
        # A constant: decided numerically, never by SymPy's assumption system (minutes on the
        # large closed forms a forward pass builds). One that is zero to 200 digits is taken
        # as exactly zero: exact zero-testing of such expressions is undecidable in general.
        for dps, tiny in ((50, 30), (250, 200)):
            v = s_approx(x, dps)
            if v is None:
                break
            if abs(v) > mpmath.mpf(10) ** -tiny:
                return 1 if v > 0 else -1
        else:
            return 0
    if x.is_zero:
        return 0
    if x.is_positive:
        return 1
    if x.is_negative:
        return -1
    if x.free_symbols:
        return None
    v = x.evalf(60)
    if v.is_Number and v != 0:
        return 1 if v > 0 else -1
    if x.equals(0):
        return 0
    return 1 if v > 0 else (-1 if v < 0 else 0)


def s_div(x, y):
    if type(x) is fmpq and type(y) is fmpq:
        if y != 0:
            return x / y
        return _ieee_div_by_zero(s_sign(x))
    sy = s_sign(y)
    if sy == 0:
        return _ieee_div_by_zero(s_sign(x))
    return s_norm(s_sym(x) / s_sym(y))


def _ieee_div_by_zero(sign_x):
    if sign_x is None:
        return _S.NaN  # symbolic numerator over an exact zero: no single answer
    return {1: _S.Infinity, -1: _S.NegativeInfinity}.get(sign_x, _S.NaN)


MAX_EXACT_EXPONENT = 4096


class ExactLimit(ArithmeticError):
    """An exact result would be astronomically large (e.g. 0.3 ** 10**8 has 10**8 digits)."""


def check_exponent(e) -> None:
    if type(e) is fmpq and e.q == 1 and abs(int(e.p)) > MAX_EXACT_EXPONENT:
        raise ExactLimit(f"the exponent {e.p} is too large to compute exactly (at most {MAX_EXACT_EXPONENT} in size)")


def s_pow(x, e):
    """x ** e with PyTorch's real semantics (negative base, fractional exponent: nan)."""
    if type(x) is fmpq and x not in (_Q0, _Q1, -_Q1):
        check_exponent(e)
    if type(x) is fmpq and type(e) is fmpq and e.q == 1:
        n = int(e.p)
        if n >= 0:
            return x ** n
        if x == 0:
            return _S.Infinity  # IEEE pow(+0, -n) = +inf
        return x ** n
    sx, se = s_sym(x), s_sym(e)
    if se.is_zero:
        return _Q1  # torch.pow(x, 0) == 1, even for x == 0, inf or nan
    if x is _S.NaN or e is _S.NaN:
        return _S.NaN
    sign = s_sign(x)
    if sign == 0:
        es = s_sign(e)
        if es == 1:
            return _Q0
        if es == -1:
            return _S.Infinity
    if sign == -1 and not se.is_integer:
        return _S.NaN
    return s_norm(sympy.Pow(sx, se))


def s_sqrt(x):
    sign = s_sign(x)
    if sign == -1 or sign == "nan":
        return _S.NaN
    return s_norm(sympy.sqrt(s_sym(x)))


def s_log(x):
    sign = s_sign(x)
    if sign == 0:
        return _S.NegativeInfinity
    if sign == -1 or sign == "nan":
        return _S.NaN
    return s_norm(sympy.log(s_sym(x)))


def s_float(x) -> float | None:
    """Decimal value; None when the element depends on free symbols."""
    if type(x) is fmpq:
        return _fmpq_float(x)
    if x is _S.NaN:
        return float("nan")
    if x is _S.Infinity:
        return float("inf")
    if x is _S.NegativeInfinity:
        return float("-inf")
    if x.free_symbols:
        return None
    v = s_approx(x, 30)
    if v is None:
        try:
            return float(x.evalf(30))
        except (TypeError, ValueError):
            return float("nan")
    return float(v)


def s_sci(x, digits: int = 3) -> str:
    """A constant element in scientific notation, at any magnitude (1e400 stays 1e400)."""
    v = s_approx(x, digits + 10)
    return s_str(x) if v is None else mpmath.nstr(v, digits, min_fixed=-4, max_fixed=6)


def _fmpq_float(x) -> float:
    try:
        return float(x)
    except OverflowError:  # beyond float64: what float arithmetic would give
        return float("inf") if x > 0 else float("-inf")


def s_str(x) -> str:
    if type(x) is fmpq:
        return str(x)
    if x is _S.Infinity:
        return "inf"
    if x is _S.NegativeInfinity:
        return "-inf"
    if x is _S.NaN:
        return "nan"
    # order="none": SymPy's default printer re-sorts every sum, which took minutes on the
    # few-thousand-node closed forms a forward pass can build; args are canonically ordered anyway
    return sympy.sstr(x, order="none")


# ----------------------------------------------------------------------------- arrays

class Exact:
    """Immutable exact tensor. ``rational`` says every element is an fmpq."""

    __slots__ = ("a", "rational", "negzero")

    def __init__(self, a: np.ndarray, rational: bool | None = None):
        self.negzero = None  # bool mask of zeros PyTorch holds as -0.0 (see adjoint.signed_zero)
        if rational is None:
            rational = all(type(e) is fmpq for e in a.flat)
            if not rational:
                a = _to_sym_array(a)
        self.a = a
        self.rational = rational

    # construction ---------------------------------------------------------
    @staticmethod
    def of(elements, shape) -> "Exact":
        """From a flat sequence of elements (fmpq, Fraction, int or SymPy) and a shape."""
        flat = [_element(e) for e in elements]
        a = np.empty(len(flat), dtype=object)
        a[:] = flat
        return Exact(a.reshape(shape))

    @staticmethod
    def scalar(value) -> "Exact":
        return Exact.of([value], ())

    @staticmethod
    def full(shape, value) -> "Exact":
        value = s_norm(q(value) if isinstance(value, (int, Fraction)) else value)
        a = np.empty(shape, dtype=object)
        a.fill(value)
        return Exact(a, type(value) is fmpq)

    @staticmethod
    def zeros(shape) -> "Exact":
        return Exact.full(shape, _Q0)

    # inspection -----------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.a.shape)

    @property
    def ndim(self) -> int:
        return self.a.ndim

    @property
    def size(self) -> int:
        return int(self.a.size)

    def flat(self) -> list:
        return list(self.a.flat)

    def item(self):
        """The one element, exact: a ``flint.fmpq`` rational or a SymPy expression (``float()``
        gives its decimal). More than one element: PyTorch's own RuntimeError."""
        if self.a.size != 1:
            raise RuntimeError(f"a Tensor with {self.a.size} elements cannot be converted to Scalar")
        return self.a.reshape(-1)[0]

    # conversions, as a PyTorch tensor converts --------------------------------
    def __float__(self) -> float:
        """The decimal of a one-element value (the float64 nearest the exact value)."""
        if self.a.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return float(np.asarray(self._numbers(), dtype=np.float64).reshape(-1)[0])

    def tolist(self):
        """Nested Python floats (a 0-d value: one float), as ``Tensor.tolist()`` gives."""
        return self._numbers()

    def __array__(self, dtype=None, copy=None):
        """``numpy.asarray(value)``: float64 (the nearest double of every exact element)."""
        out = np.asarray(self._numbers(), dtype=np.float64)
        return out if dtype is None else out.astype(dtype)

    def _repr_latex_(self) -> str:
        """A notebook shows a value as exact mathematics (a matrix for 2-d, a column for 1-d)."""
        def cell(e):
            return sympy.latex(s_sym(e))
        if self.size > REPR_ELEMENTS * 4 or self.ndim > 2:
            return f"$\\text{{tensor of shape }}{list(self.shape)}$"
        if self.ndim == 0:
            return f"${cell(self.item())}$"
        rows = [[cell(e) for e in row] for row in (self.a if self.ndim == 2 else self.a.reshape(1, -1))]
        body = " \\\\ ".join(" & ".join(r) for r in rows)
        matrix = f"\\begin{{bmatrix}} {body} \\end{{bmatrix}}"
        return f"${matrix}" + ("^{\\top}$" if self.ndim == 1 and self.size > 1 else "$")

    def _numbers(self):
        floats = self.floats()
        if floats is None:
            names = sorted({str(s) for e in self.a.flat for s in getattr(e, "free_symbols", ())})
            raise TypeError(f"this value is a closed form in the free symbol(s) {', '.join(names)}, not a number; "
                            "solve with numeric=True (solve --numeric) to substitute the file's symbols:, or "
                            "use .item() / .strings() for the exact form")
        return floats

    def is_symbolic(self) -> bool:
        return not self.rational and any(getattr(e, "free_symbols", None) for e in self.a.flat)

    def has_nonfinite(self) -> bool:
        return not self.rational and any(s_is_nonfinite(e) for e in self.a.flat)

    def floats(self):
        """Nested list of floats, or None when any element is symbolic."""
        if self.rational:
            return _FLOAT(self.a).astype(float).tolist() if self.ndim else _fmpq_float(self.item())
        vals = [s_float(e) for e in self.a.flat]
        if any(v is None for v in vals):
            return None
        return _nest(vals, self.shape)

    def ints(self):
        """Nested list of Python ints (an integer tensor's values)."""
        vals = [int(e) if type(e) is fmpq else int(s_sym(e)) for e in self.a.flat]
        return _nest(vals, self.shape)

    def strings(self):
        if self.rational:  # fmpq prints as "p/q" or "p"
            return _STR(self.a).tolist() if self.ndim else str(self.item())
        return _nest([s_str(e) for e in self.a.flat], self.shape)

    def equals(self, other: "Exact") -> bool:
        if self.shape != other.shape:
            return False
        for x, y in zip(self.a.flat, other.a.flat):
            if type(x) is fmpq and type(y) is fmpq:
                if x != y:
                    return False
                continue
            sx, sy = s_sym(x), s_sym(y)
            if sx is _S.NaN or sy is _S.NaN:
                if not (sx is _S.NaN and sy is _S.NaN):
                    return False
                continue
            if sx == sy:
                continue
            if not _is_zero(sx - sy):
                return False
        return True

    def __repr__(self) -> str:
        if self.size <= REPR_ELEMENTS:
            return f"Exact({self.strings()!r})"
        first = ", ".join(s_str(e) for e in self.flat()[:4])
        return f"Exact(shape={list(self.shape)}, [{first}, ...])"

    # structure ------------------------------------------------------------
    def restructured(self, fn) -> "Exact":
        """The same elements rearranged by ``fn`` (a numpy reshaping / transposing / indexing
        function), the -0.0 mask rearranged with them."""
        out = Exact(np.asarray(fn(self.a), dtype=object), self.rational)
        if self.negzero is not None:
            out.negzero = np.asarray(fn(self.negzero), dtype=bool)
        return out

    def reshape(self, shape) -> "Exact":
        return self.restructured(lambda a: a.reshape(shape))

    def transpose(self) -> "Exact":
        return self.restructured(lambda a: a.T.copy() if a.ndim == 2 else a)

    def broadcast_to(self, shape) -> "Exact":
        return self.restructured(lambda a: np.broadcast_to(a, shape).copy())

    def with_negzero(self, mask) -> "Exact":
        """The same values, marking which zeros are -0.0 in PyTorch's floats."""
        if mask is None:
            return self
        out = Exact(self.a, self.rational)
        out.negzero = mask
        return out

    def as_sym(self) -> "Exact":
        if not self.rational:
            return self
        return Exact(_to_sym_array(self.a), False)

    def map(self, fn) -> "Exact":
        """Elementwise fn(x) -> element; result re-normalised."""
        out = np.empty(self.a.shape, dtype=object)
        flat = out.reshape(-1)
        for i, e in enumerate(self.a.flat):
            flat[i] = s_norm(fn(e))
        return Exact(out)

    def subs(self, mapping: dict) -> "Exact":
        if self.rational:
            return self
        return self.map(lambda e: s_sym(e).xreplace(mapping))


_FLOAT = np.frompyfunc(_fmpq_float, 1, 1)
_STR = np.frompyfunc(str, 1, 1)


def _is_zero(d) -> bool:
    """Is a SymPy difference identically zero? Exact when it is a plain number; otherwise
    decided numerically to 50 digits at the given constants and at two pseudo-random rational
    points for its free symbols (the test SymPy's own ``equals`` relies on, without the
    ``simplify`` that grows super-linearly with expression size)."""
    d = sympy.expand(d) if d.is_polynomial(*d.free_symbols) and len(d.args) < 200 else d
    if d == 0:
        return True
    symbols = sorted(d.free_symbols, key=str)
    points = [{}] if not symbols else [
        {s: sympy.Rational(7 + 3 * i + 5 * k, 11 + 2 * i + k) for i, s in enumerate(symbols)} for k in (1, 2)]
    for point in points:
        v = s_approx(d.xreplace(point) if point else d)
        if v is None:
            return bool(sympy.simplify(d) == 0)
        if abs(v) > mpmath.mpf(10) ** -40:
            return False
    return True


def _nest(vals: list, shape: tuple[int, ...]):
    if not shape:
        return vals[0]
    step = len(vals) // shape[0] if shape[0] else 0
    return [_nest(vals[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def _to_sym_array(a: np.ndarray) -> np.ndarray:
    out = np.empty(a.shape, dtype=object)
    flat = out.reshape(-1)
    for i, e in enumerate(a.flat):
        flat[i] = s_sym(e)
    return out


def _pair(x: Exact, y: Exact) -> tuple[np.ndarray, np.ndarray, bool]:
    if x.rational and y.rational:
        return x.a, y.a, True
    return x.as_sym().a, y.as_sym().a, False


def _wrap(a, rational: bool) -> Exact:
    if not isinstance(a, np.ndarray):
        b = np.empty((), dtype=object)
        b[()] = a
        a = b
    if rational:
        return Exact(a, True)
    out = np.empty(a.shape, dtype=object)
    flat = out.reshape(-1)
    for i, e in enumerate(a.flat):
        flat[i] = s_norm(e)
    return Exact(out)


# ----------------------------------------------------------------------------- arithmetic

def add(x: Exact, y: Exact) -> Exact:
    a, b, r = _pair(x, y)
    return _wrap(a + b, r)


def sub(x: Exact, y: Exact) -> Exact:
    a, b, r = _pair(x, y)
    return _wrap(a - b, r)


def mul(x: Exact, y: Exact) -> Exact:
    a, b, r = _pair(x, y)
    if r:
        return _wrap(a * b, True)
    return binary(s_mul, x, y)


def neg(x: Exact) -> Exact:
    return _wrap(-x.a, x.rational)


def div(x: Exact, y: Exact) -> Exact:
    if y.rational and x.rational and all(e != 0 for e in y.a.flat):
        return _wrap(x.a / y.a, True)
    return binary(s_div, x, y)


def binary(fn, x: Exact, y: Exact) -> Exact:
    """Elementwise fn over broadcast x, y (element helpers such as s_div, s_pow)."""
    a, b = np.broadcast_arrays(x.a, y.a)
    out = np.empty(a.shape, dtype=object)
    flat = out.reshape(-1)
    for i, (e1, e2) in enumerate(zip(a.flat, b.flat)):
        flat[i] = s_norm(fn(e1, e2))
    return Exact(out)


def where(cond: Exact, x: Exact, y: Exact) -> Exact:
    """Elementwise choice on a 0/1 mask (an Exact of fmpq zeros and ones)."""
    c, a, b = np.broadcast_arrays(cond.a, x.a, y.a)
    out = np.empty(c.shape, dtype=object)
    flat = out.reshape(-1)
    for i, (m, e1, e2) in enumerate(zip(c.flat, a.flat, b.flat)):
        flat[i] = e1 if m != 0 else e2
    return Exact(out)


def total(x: Exact) -> Exact:
    """Sum of all elements, 0-d."""
    if x.rational:
        return Exact.scalar(reduce(lambda s, e: s + e, x.a.flat, _Q0))
    return Exact.scalar(s_norm(sympy.Add(*x.a.flat)))


def sum_to(x: Exact, shape: tuple[int, ...]) -> Exact:
    """Reduce a broadcast gradient back to ``shape`` (torch's sum_to)."""
    if x.shape == tuple(shape):
        return x
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and x.shape[lead + i] != 1)
    a = x.a
    if x.rational:
        r = np.sum(a, axis=axes, keepdims=True) if axes else a
    else:
        r = np.apply_over_axes(_sym_sum_axis, a, axes) if axes else a
    r = r.reshape(r.shape[lead:]) if lead else r
    return _wrap(np.asarray(r, dtype=object).reshape(shape), x.rational)


def _sym_sum_axis(a: np.ndarray, axis: int) -> np.ndarray:
    moved = np.moveaxis(a, axis, -1)
    out = np.empty(moved.shape[:-1], dtype=object)
    flat = out.reshape(-1)
    for i, row in enumerate(moved.reshape(-1, moved.shape[-1])):
        flat[i] = sympy.Add(*row)
    return np.expand_dims(out, axis)


def matmul2d(x: Exact, y: Exact) -> Exact:
    """(m, k) @ (k, n), exact."""
    (m, k), (k2, n) = x.shape, y.shape
    assert k == k2
    if x.rational and y.rational:
        if m * k * n == 0:
            return Exact.zeros((m, n))
        prod = flint.fmpq_mat(m, k, list(x.a.flat)) * flint.fmpq_mat(k, n, list(y.a.flat))
        out = np.empty(m * n, dtype=object)
        out[:] = prod.entries()
        return Exact(out.reshape(m, n), True)
    a, b = x.as_sym().a, y.as_sym().a
    out = np.empty((m, n), dtype=object)
    for i in range(m):
        for j in range(n):
            out[i, j] = s_norm(sympy.Add(*[s_mul(a[i, t], b[t, j]) for t in range(k)]))
    return Exact(out)


def outer(x: Exact, y: Exact) -> Exact:
    return matmul2d(x.reshape((x.size, 1)), y.reshape((1, y.size)))


def negate_where(x: Exact, mask) -> Exact:
    """-x where ``mask`` (a bool array broadcastable to x), else x."""
    if mask is None or not np.any(mask):
        return x
    m = np.broadcast_to(mask, x.shape)
    return where(Exact.of([1 if b else 0 for b in m.flat], x.shape), neg(x), x)


def mask(x: Exact, predicate) -> Exact:
    """0/1 rational mask from a predicate on element signs (for relu, abs, norm kinks)."""
    return Exact.of([_Q1 if predicate(s_sign(e)) else _Q0 for e in x.a.flat], x.shape)
