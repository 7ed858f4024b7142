"""Gaussian rationals: exact complex numbers ``a + b*i`` with rational ``a`` and ``b``.

The number an imaginary literal of an expression is (``2j``, and ``1 + 2j`` folded as Python
folds it), in the format layer beside ``Fraction`` because the parser makes it. A complex
tensor's elements (:mod:`adjoint.values.complexes`) are pairs of real elements of the exact
backend: this is the scalar they are when both parts are rational, and :func:`complex_text`
is the one place that writes a complex element as text.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class Gaussian:
    """``re + im*i``, both exact rationals."""

    re: Fraction
    im: Fraction = Fraction(0)

    @staticmethod
    def of(x) -> "Gaussian":
        if isinstance(x, Gaussian):
            return x
        if isinstance(x, complex):
            return Gaussian(Fraction(x.real), Fraction(x.imag))
        return Gaussian(Fraction(x))

    def __add__(self, o):
        o = Gaussian.of(o)
        return Gaussian(self.re + o.re, self.im + o.im)

    __radd__ = __add__

    def __sub__(self, o):
        o = Gaussian.of(o)
        return Gaussian(self.re - o.re, self.im - o.im)

    def __rsub__(self, o):
        return Gaussian.of(o) - self

    def __neg__(self):
        return Gaussian(-self.re, -self.im)

    def __mul__(self, o):
        o = Gaussian.of(o)
        return Gaussian(self.re * o.re - self.im * o.im, self.re * o.im + self.im * o.re)

    __rmul__ = __mul__

    def __truediv__(self, o):
        o = Gaussian.of(o)
        d = o.re * o.re + o.im * o.im
        if d == 0:
            raise ZeroDivisionError("Gaussian division by zero")
        n = self * o.conj()
        return Gaussian(n.re / d, n.im / d)

    def __rtruediv__(self, o):
        return Gaussian.of(o) / self

    def __pow__(self, k: int):
        if not isinstance(k, int):
            raise TypeError("a Gaussian rational's power needs an integer exponent")
        base, out = (self, Gaussian(Fraction(1))) if k >= 0 else (Gaussian(Fraction(1)) / self, Gaussian(Fraction(1)))
        k = abs(k)
        while k:
            if k & 1:
                out = out * base
            base = base * base
            k >>= 1
        return out

    def conj(self) -> "Gaussian":
        return Gaussian(self.re, -self.im)

    def norm2(self) -> Fraction:
        """|z|^2, rational."""
        return self.re * self.re + self.im * self.im

    def __complex__(self) -> complex:
        return complex(float(self.re), float(self.im))

    def __str__(self) -> str:
        return complex_text(_q(self.re), _q(self.im))


def _q(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def complex_text(re: str, im: str) -> str:
    """``RE + IM*i`` from the parts' exact text: ``1/2 + 3*i``, ``1 - 2*i``, ``0 + 1/3*i``; a part
    that is a closed form with operators of its own is parenthesised (``(1 - tanh(2)**2)*i``)."""
    tilde = "~" if im.startswith("~") else ""
    bare = im[len(tilde):]
    neg = bare.startswith("-") and not _compound(bare[1:])
    mag = tilde + bare[1:] if neg else im
    if _compound(mag):
        mag = f"({mag})"
    return f"{re} {'-' if neg else '+'} {mag}*i"


def _compound(text: str) -> bool:
    depth = 0
    for k, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif depth == 0 and (ch == " " or (k > 0 and ch in "+-" and text[k - 1] not in "eE")):
            return True
    return False
