"""Exact values as the document shows them (docs/latex.md, "The number rule").

:func:`format_rational` is the number rule; :func:`exact_fraction` the exact fraction a result is
annotated with; :func:`decimal_value` the value of a constant closed form to ~50 digits (for rule 4);
:func:`same` and :func:`_ratio` decide when the document may say one value *is* another
(``= lambda_1``, ``lambda~_1 = 2 lambda_1``). Nothing is computed in floating point.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import flint
import numpy as np
import sympy

from ... import exact as E
from ...exact import Exact

fmpq = flint.fmpq

#: significant digits shown for a value that is not printed exactly
SIG_DIGITS = 10
#: a fraction is "short" when numerator and denominator are both below this
SHORT_FRACTION = 1000
#: an exact fraction longer than this (digits) is not repeated next to its decimal
MAX_FRACTION_DIGITS = 36


@dataclass(frozen=True)
class Num:
    """A formatted number: ``tex`` without its sign; ``exact`` says nothing was cut off."""

    tex: str
    negative: bool
    exact: bool
    kind: str          # int | dec | frac | approx | special | closed

    def signed(self) -> str:
        return ("-" if self.negative else "") + self.tex


def _terminating(q: int) -> tuple[bool, int]:
    """Does p/q have a finite decimal expansion; with how many decimals (q in lowest terms)."""
    a = b = 0
    while q % 2 == 0:
        q //= 2
        a += 1
    while q % 5 == 0:
        q //= 5
        b += 1
    return q == 1, max(a, b)


def _exp10(p: int, q: int) -> int:
    """floor(log10(p/q)) for p, q > 0, exactly."""
    e = len(str(p)) - len(str(q))

    def at_least(k: int) -> bool:   # p/q >= 10**k
        return p * 10 ** (-k) >= q if k < 0 else p >= q * 10 ** k

    while not at_least(e):
        e -= 1
    while at_least(e + 1):
        e += 1
    return e


def _truncated(p: int, q: int, negative: bool) -> Num:
    """The first SIG_DIGITS significant digits of p/q (truncated, never rounded), then an ellipsis."""
    e = _exp10(p, q)
    shift = SIG_DIGITS - 1 - e
    digits = str(p * 10 ** shift // q if shift >= 0 else p // (q * 10 ** (-shift)))
    if -5 <= e <= 9:
        if e >= 0:
            whole, frac = digits[:e + 1], digits[e + 1:]
        else:
            whole, frac = "0", "0" * (-e - 1) + digits
        frac = frac.rstrip("0") or "0"
        return Num(f"{whole}.{frac}\\ldots", negative, False, "approx")
    mant = digits[0] + "." + (digits[1:].rstrip("0") or "0")
    return Num(f"{mant}\\ldots\\times 10^{{{e}}}", negative, False, "approx")


def format_rational(x) -> Num:
    """The number rule (docs/latex.md).

    1. an integer below 10**12: as is;
    2. a terminating decimal with at most SIG_DIGITS significant digits (and 1e-5 <= |x| < 1e10):
       that decimal, which is exact (0.3, -1.847648, -0.4079606784);
    3. a fraction whose numerator and denominator are below SHORT_FRACTION: the fraction (1/3);
    4. anything else: its first SIG_DIGITS significant digits, truncated, followed by an ellipsis.
    """
    p, q = int(x.p), int(x.q)
    negative = p < 0
    p = abs(p)
    if p == 0:
        return Num("0", False, True, "int")
    if q == 1 and p < 10 ** 12:
        return Num(str(p), negative, True, "int")
    if q != 1:
        term, k = _terminating(q)
        if term:
            n = p * 10 ** k // q
            e = _exp10(p, q)
            if len(str(n)) <= SIG_DIGITS and -5 <= e <= 9:
                s = str(n).rjust(k + 1, "0")
                return Num(f"{s[:-k]}.{s[-k:]}", negative, True, "dec")
        if p < SHORT_FRACTION and q < SHORT_FRACTION:
            return Num(f"\\frac{{{p}}}{{{q}}}", negative, True, "frac")
    return _truncated(p, q, negative)


def exact_fraction(x, slash: bool = False) -> str | None:
    """The reduced fraction of a result, when its printed form is cut off (ends in an ellipsis) or is a
    decimal of more than 4 significant digits (-0.4079606784 = -3983991/9765625); None otherwise."""
    if type(x) is not fmpq or x.q == 1:
        return None
    shown = format_rational(x)
    if shown.kind in ("int", "frac"):
        return None
    if shown.kind == "dec" and len(shown.tex.replace(".", "").lstrip("0")) <= 4:
        return None
    p, q = abs(int(x.p)), int(x.q)
    if len(str(p)) + len(str(q)) > MAX_FRACTION_DIGITS:
        return None
    sign = "-" if x.p < 0 else ""
    return f"{sign}{p}/{q}" if slash else f"{sign}\\frac{{{p}}}{{{q}}}"


def decimal_value(e, dps: int = 50) -> Fraction | None:
    """A constant closed form as a Fraction accurate to ~``dps`` digits; None if it is not a real number."""
    v = E.s_approx(e, dps)
    if v is None:
        return None
    sign, man, exp, _ = v._mpf_
    value = Fraction(int(man)) * (Fraction(2) ** int(exp)) if man else Fraction(0)
    return -value if sign else value


_PROBE = (fmpq(7, 11), fmpq(-13, 17))


def same(p: Exact | None, q: Exact | None) -> bool:
    """Equal values, for labelling ("this is lambda_3"). Rationals compare exactly; closed forms
    structurally, else numerically at 30 digits (at two rational points when symbols are free):
    SymPy's simplify would be exact but can take minutes on nested tanh/exp expressions."""
    if p is None or q is None:
        return p is q
    if p.shape != q.shape:
        return False
    if p.rational and q.rational:
        return bool(np.all(p.a == q.a))
    for x, y in zip(p.flat(), q.flat()):
        if type(x) is fmpq and type(y) is fmpq:
            if x != y:
                return False
            continue
        sx, sy = E.s_sym(x), E.s_sym(y)
        if sx == sy:
            continue
        if sx is sympy.S.NaN or sy is sympy.S.NaN:
            return False
        free = sorted((sx - sy).free_symbols, key=str)
        points = [{}] if not free else [{s: E.s_sym(_PROBE[i % 2] * (k + 1)) for i, s in enumerate(free)}
                                         for k in range(2)]
        for pt in points:
            a = decimal_value(sx.xreplace(pt) if pt else sx, 30)
            b = decimal_value(sy.xreplace(pt) if pt else sy, 30)
            if a is None or b is None or abs(a - b) > Fraction(1, 10 ** 20) * (abs(a) + 1):
                return False
    return True


def _ratio(p: Exact, q: Exact):
    """c with q == c * p elementwise (p nonzero somewhere), else None."""
    if p.shape != q.shape or not (p.rational and q.rational):
        return None
    c = None
    for x, y in zip(p.flat(), q.flat()):
        if x == 0:
            if y != 0:
                return None
            continue
        r = y / x
        if c is None:
            c = r
        elif r != c:
            return None
    return c
