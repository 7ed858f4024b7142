"""Rational tensors as integer arrays over one common denominator.

A :class:`QArray` holds an n-d numpy object array of integers (the numerators: Python ints,
or FLINT ``fmpz`` as a matrix product leaves them, which numpy's object loops add and compare
just the same) and one positive int (the denominator), in lowest terms as a whole: ``gcd(den, *num) == 1`` (a zero
tensor has ``den == 1``), except a matrix product's result (:meth:`QArray.lazy`), which stays
over the product of the two denominators: reducing it would read every entry. One denominator for the whole tensor turns the hot paths into
integer work numpy and FLINT do in C: a sum of two tensors is one integer addition per
element, a comparison with zero is a sign test, a product of matrices is one ``fmpz_mat``
product (about 5x faster than ``fmpq_mat``, which reduces every entry), and a decimal is
one correctly rounded ``int / int``.

Elementwise division and negative powers give every element its own denominator; their
common denominator is the lcm, which for unrelated denominators grows with the tensor. A
result whose common denominator would exceed :data:`MAX_SHARED_BITS` more than the largest
element needs is not made (the caller keeps such a tensor as separate fractions, see
:mod:`adjoint.values.exact`).
"""

from __future__ import annotations

import math

import flint
import numpy as np
from adjoint.values.numbers.sizes import broadcast_shape
from adjoint.values.numbers.sizes import check_bits

fmpq = flint.fmpq
fmpz_mat = flint.fmpz_mat
_SLASH = "/"

#: Largest extra size (bits) a shared denominator may have over the largest single one.
MAX_SHARED_BITS = 4096


def _ints(shape, values) -> np.ndarray:
    # np.fromiter: numpy's slice assignment from a list inspects each FLINT integer as a possible
    # sequence, about ten times slower (the same array)
    return np.fromiter(values, dtype=object, count=len(values)).reshape(shape)


class QArray:
    """``num / den``, elementwise; immutable by convention (never write into ``num``). A matrix
    product's result keeps FLINT's matrix and makes its numerator array only when asked
    (:meth:`lazy`): a weight's gradient is often never read again before the output."""

    __slots__ = ("_num", "den", "_zmat", "_transposed", "_balls")

    def __init__(self, num: np.ndarray, den: int = 1, reduced: bool = False):
        if type(num) is not np.ndarray:  # numpy gives 0-d results as scalars
            num = _ints((), [num])
        if not reduced and den != 1:
            num, den = _reduce(num, den)
            if type(num) is not np.ndarray:
                num = _ints((), [num])
        self._num = num
        self.den = den
        self._zmat = None
        self._transposed = None  # the QArray this is the transpose of (its matrix serves both)
        self._balls = None       # (kind, precision) -> its balls (see balls_at, arb_matrix); ("ints", 0) -> flat_ints

    @staticmethod
    def lazy(zmat, den: int) -> "QArray":
        """``zmat / den`` (not reduced), its numerator array made on first use."""
        out = QArray.__new__(QArray)
        out._num, out.den, out._zmat, out._transposed, out._balls = None, den, zmat, None, None
        return out

    @property
    def lazy_numerators(self) -> bool:
        """A matrix product's result whose numerator array is not made yet (:meth:`lazy`)."""
        return self._num is None

    def _ball_memo(self) -> dict:
        if self._balls is None:
            self._balls = {}
        return self._balls

    def flat_ints(self) -> list[int]:
        """The numerators as Python ints, row-major, made once: a matrix product leaves FLINT
        integers, and turning each into a Python int (0.5-1 us) is most of what writing the
        tensor's exact text and its decimals costs; both use this one list."""
        memo = self._ball_memo()
        ints = memo.get(("ints", 0))
        if ints is None:
            if self._num is None:   # a product's FLINT matrix: straight to ints, no object array between
                ints = list(map(int, self._zmat.entries()))
            else:
                ints = self.num.reshape(-1).tolist()
                if set(map(type, ints)) - {int}:
                    ints = list(map(int, ints))
            memo[("ints", 0)] = ints
        return ints

    def arb_matrix(self, prec: int):
        """The values as an ``arb_mat`` at ``prec`` bits (2-D), made once per precision: the
        rational operand of a product with certified values (a weight), converted in C."""
        memo = self._ball_memo()
        key = ("mat", prec)
        if key not in memo:
            if self._transposed is not None:
                memo[key] = self._transposed.arb_matrix(prec).transpose()
            else:
                with flint.ctx.workprec(prec):
                    memo[key] = flint.arb_mat(self.zmat()) / self.den
        return memo[key]

    @property
    def num(self) -> np.ndarray:
        if self._num is None:
            m, n = self._zmat.nrows(), self._zmat.ncols()
            self._num = _ints((m, n), self._zmat.entries())  # fmpz entries, kept as they are
        return self._num

    # ------------------------------------------------------------------ construction
    @staticmethod
    def from_fractions(values, shape) -> "QArray":
        """From a flat sequence of Fractions / ints."""
        pairs = [v.as_integer_ratio() for v in values]
        dens = {d for _, d in pairs}
        den = math.lcm(*dens) if dens else 1
        if den == 1:
            return QArray(_ints(shape, [n for n, _ in pairs]), 1, True)
        return QArray(_ints(shape, [n * (den // d) for n, d in pairs]), den)

    @staticmethod
    def from_fmpq(values, shape) -> "QArray | None":
        """From a flat sequence of fmpq; None when the shared denominator would be too large."""
        dens = [int(v.q) for v in values]
        den = math.lcm(*dens) if dens else 1
        if den.bit_length() > max(dens, default=1).bit_length() + MAX_SHARED_BITS:
            return None
        return QArray(_ints(shape, [int(v.p) * (den // d) for v, d in zip(values, dens)]), den, True)

    @staticmethod
    def full(shape, value: fmpq) -> "QArray":
        a = np.empty(shape, dtype=object)
        a.fill(int(value.p))
        return QArray(a, int(value.q), True)

    # ------------------------------------------------------------------ views
    @property
    def shape(self) -> tuple[int, ...]:
        if self._num is None:
            return (self._zmat.nrows(), self._zmat.ncols())
        return self._num.shape

    def restructured(self, fn) -> "QArray":
        """The same elements rearranged by ``fn`` (numpy reshaping, transposing, indexing)."""
        num = np.asarray(fn(self.num), dtype=object)
        return QArray(num, self.den, num.size >= self.num.size)  # a part may have a smaller denominator

    def elements(self) -> np.ndarray:
        """An object array of fmpq (for code that walks elements)."""
        den = self.den
        flat = [fmpq(n, den) for n in self.num.reshape(-1).tolist()]
        return np.fromiter(flat, dtype=object, count=len(flat)).reshape(self.num.shape)

    def zmat(self):
        """The numerators as an ``fmpz_mat`` (2-D), made once."""
        if self._zmat is None:
            if self._transposed is not None:
                self._zmat = self._transposed.zmat().transpose()
            else:
                m, n = self.num.shape
                self._zmat = fmpz_mat(m, n, self.num.reshape(-1).tolist())
        return self._zmat

    # ------------------------------------------------------------------ queries
    def signs(self) -> np.ndarray:
        """-1, 0, 1 per element (an int8 array)."""
        return np.asarray(np.asarray(self.num > 0, dtype=np.int8) - np.asarray(self.num < 0, dtype=np.int8))

    def zeros(self) -> np.ndarray:
        return np.asarray(self.num == 0, dtype=bool)

    def max_abs_num(self) -> int:
        """The largest |numerator|."""
        if self.num.size == 0:
            return 0
        return max(abs(int(self.num.max())), abs(int(self.num.min())))

    def max_abs(self) -> fmpq:
        if self.num.size == 0:
            return fmpq(0)
        return fmpq(max(abs(int(self.num.max())), abs(int(self.num.min()))), self.den)

    def floats(self) -> np.ndarray:
        """Correctly rounded float64 per element; beyond float64's range, +-inf as float
        arithmetic would give. Python's int -> float and FLINT's fmpz -> float both round to
        nearest, and dividing by a power of two is then exact (outside the subnormal range), so
        a power-of-two denominator (every dyadic problem) needs one conversion per element."""
        flat = self.num.reshape(-1).tolist()
        den = self.den
        if den & (den - 1) == 0 and den.bit_length() < 1000:
            try:   # int -> float rounds as fmpz -> float does (to nearest)
                vals = np.array(list(map(float, self.flat_ints())), dtype=float) / float(den)
            except OverflowError:
                vals = None
            if vals is not None and not np.any((vals != 0) & (np.abs(vals) < 2.0 ** -1021)):
                return vals.reshape(self.num.shape)
        try:
            vals = [n / den if type(n) is int else float(fmpq(n, den)) for n in flat]
        except OverflowError:
            vals = [_float(n, den) for n in flat]
        return np.array(vals, dtype=float).reshape(self.num.shape)

    def strings(self) -> list[str]:
        """``"p/q"`` or ``"p"`` per element, in lowest terms, row-major (flat list). Large
        integers are written by FLINT: Python's own int-to-text is quadratic in the digits
        and refuses more than 4300 of them.

        The reduction of each element by the shared denominator is done in int64 when every
        numerator and the denominator fit, by trailing zeros when the denominator is a power of
        two (every dyadic problem: no gcd of long integers), by gcd otherwise; each distinct
        reduced denominator is written once."""
        den = self.den
        values = self.flat_ints()  # FLINT integers as Python ints: gcd, shifts and // on Python ints
        largest = max(den, self.max_abs_num())
        text = _text_of(largest)
        if den == 1:
            return list(map(text, values))
        if largest.bit_length() < 63:
            a = np.array(values, dtype=np.int64)
            g = np.gcd(a, np.int64(den))
            ps, qs = (a // g).tolist(), (np.int64(den) // g).tolist()
        elif den & (den - 1) == 0:
            k = den.bit_length() - 1
            shifts = [min(k, (n & -n).bit_length() - 1) if n else k for n in values]
            ps = list(map(int.__rshift__, values, shifts))
            qs = [den >> s for s in shifts]
        else:
            flat = _ints(len(values), values)
            g = np.gcd(flat, den)
            ps, qs = (flat // g).tolist(), (den // g).tolist()
        suffix = {q: _SLASH + text(q) for q in set(qs)}
        suffix[1] = ""
        return [p + suffix[q] for p, q in zip(map(text, ps), qs)]

    def item(self) -> fmpq:
        return fmpq(int(self.num.reshape(-1)[0]), self.den)


# ----------------------------------------------------------------------------- normal form

def _float(n, den: int) -> float:
    try:
        return float(fmpq(n, den))
    except OverflowError:
        return math.inf if n > 0 else -math.inf


def _text_of(largest: int):
    """str for integers up to ``largest`` in size (FLINT's for long ones: from about 2,000 bits
    on, FLINT's text is the faster, 2x at 3,000 bits)."""
    if largest.bit_length() < 2000:
        return str
    return _fmpz_text


def _fmpz_text(n: int) -> str:
    return str(flint.fmpz(n))


def _reduce(num: np.ndarray, den: int) -> tuple[np.ndarray, int]:
    if den < 0:
        num, den = -num, -den
    if den & (den - 1) == 0:  # 2**k (every dyadic problem): the gcd is 2**(fewest trailing zeros), no long gcd
        k = den.bit_length() - 1
        t = k
        for n in num.reshape(-1).tolist():
            if n:
                n = int(n)
                t = min(t, (n & -n).bit_length() - 1)
                if t == 0:
                    return num, den
        return num // (1 << t), den >> t
    g = den
    for n in num.reshape(-1).tolist():  # usually 1 after a few elements: stop there
        if n:
            g = math.gcd(g, int(n))
            if g == 1:
                return num, den
    if g == 0:
        return num, 1
    if g != 1:
        num = num // g
        den //= g
    return num, den


def _common(x: QArray, y: QArray) -> tuple[np.ndarray, np.ndarray, int]:
    if x.den == y.den:
        return x.num, y.num, x.den
    lcm = math.lcm(x.den, y.den)
    a = x.num if lcm == x.den else x.num * (lcm // x.den)
    b = y.num if lcm == y.den else y.num * (lcm // y.den)
    return a, b, lcm


# ----------------------------------------------------------------------------- arithmetic

def add(x: QArray, y: QArray) -> QArray:
    a, b, d = _common(x, y)
    return QArray(a + b, d)


def sub(x: QArray, y: QArray) -> QArray:
    a, b, d = _common(x, y)
    return QArray(a - b, d)


def neg(x: QArray) -> QArray:
    return QArray(-x.num, x.den, True)


def mul(x: QArray, y: QArray) -> QArray:
    check_bits(x.den.bit_length() + y.den.bit_length())
    return QArray(x.num * y.num, x.den * y.den)


def scale(x: QArray, c: fmpq) -> QArray:
    check_bits(x.den.bit_length() + int(c.q).bit_length())
    return QArray(x.num * int(c.p), x.den * int(c.q))


def where(cond: np.ndarray, x: QArray, y: QArray) -> QArray:
    a, b, d = _common(x, y)
    return QArray(np.where(cond, a, b).astype(object), d)


def div(x: QArray, y: QArray) -> QArray | None:
    """x / y for y without zeros; None when the shared denominator would be too large."""
    check_bits(x.den.bit_length() + max(y.den.bit_length(), y.max_abs_num().bit_length()))
    if y.num.size == 1:
        n = int(y.num.reshape(-1)[0])
        num = x.num * (y.den if n > 0 else -y.den)
        shape = broadcast_shape(x.num.shape, y.num.shape)
        if np.shape(num) != shape:
            num = np.broadcast_to(num, shape).copy()
        return QArray(num, x.den * abs(n))
    p, q = x.num * y.den, y.num * x.den
    return from_pairs(p, q)


def from_pairs(p: np.ndarray, q: np.ndarray) -> QArray | None:
    """Elementwise p / q (ints, q nonzero) as one QArray; None when the shared denominator
    would be too large."""
    shape = broadcast_shape(np.shape(p), np.shape(q))
    p = np.broadcast_to(p, shape).reshape(-1)
    q = np.broadcast_to(q, shape).reshape(-1)
    neg_q = q < 0
    if neg_q.any():
        p = np.where(neg_q, -p, p).astype(object)
        q = np.where(neg_q, -q, q).astype(object)
    g = np.gcd(p, q)
    g[g == 0] = 1
    ps, qs = (p // g).tolist(), (q // g).tolist()
    den = math.lcm(*qs) if qs else 1
    if den.bit_length() > max(qs, default=1).bit_length() + MAX_SHARED_BITS:
        return None
    return QArray(_ints(shape, [a * (den // b) for a, b in zip(ps, qs)]), den, True)


def power(x: QArray, n: int) -> QArray | None:
    """x ** n for an integer n (x without zeros when n < 0)."""
    check_bits(abs(n) * max(x.den.bit_length(), x.max_abs_num().bit_length() if n < 0 else 0))
    if n >= 0:
        return QArray(x.num ** n, x.den ** n, True)  # lowest terms stay lowest terms
    k = -n
    return from_pairs(np.full(x.num.shape, x.den ** k, dtype=object), x.num ** k)


def total(x: QArray) -> QArray:
    s = int(sum(x.num.reshape(-1).tolist()))
    return QArray(_ints((), [s]), x.den)


def sum_axes(x: QArray, axes: tuple[int, ...]) -> QArray:
    return QArray(np.asarray(np.sum(x.num, axis=axes, keepdims=True), dtype=object), x.den)


def matmul(x: QArray, y: QArray) -> QArray:
    """(m, k) @ (k, n): one fmpz_mat product over the two denominators."""
    check_bits(x.den.bit_length() + y.den.bit_length())
    return QArray.lazy(x.zmat() * y.zmat(), x.den * y.den)


def transpose(x: QArray) -> QArray:
    """The transpose; its fmpz_mat, when one is needed, is the transpose of x's (so a weight's
    matrix is converted once, for ``W.t()`` in the forward and ``W`` in the backward alike).
    A product not yet made into numerators (a weight's gradient, transposed back by
    ``TBackward0``) stays one: FLINT's matrix is transposed instead."""
    if x._num is None:
        return QArray.lazy(x._zmat.transpose(), x.den)
    out = QArray(x.num.T, x.den, True)  # a view: nothing ever writes into numerators
    out._transposed = x
    return out
