"""Exact values as the document shows them (docs/latex.md, "The number rule").

:func:`format_rational` is the number rule; :func:`exact_fraction` the exact fraction a result is
annotated with. Nothing is computed in floating point. (A closed form's decimals and when one
value *is* another are the derivation's: ``adjoint.derivation.values``.)
"""

from __future__ import annotations

from dataclasses import dataclass

import flint

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


def _ndigits(n: int) -> int:
    """The number of decimal digits of ``n`` > 0; past a few thousand digits (which Python will
    not turn into a string) an estimate within one, from its bit length: those numbers are only
    compared with short limits, or corrected step by step (:func:`_exp10`)."""
    bits = n.bit_length()
    return len(str(n)) if bits < 10_000 else int(bits * 0.30102999566398120) + 1


def _exp10(p: int, q: int) -> int:
    """floor(log10(p/q)) for p, q > 0, exactly."""
    e = _ndigits(p) - _ndigits(q)

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
            if _ndigits(n) <= SIG_DIGITS and -5 <= e <= 9:
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
    if _ndigits(p) + _ndigits(q) > MAX_FRACTION_DIGITS:
        return None
    sign = "-" if x.p < 0 else ""
    return f"{sign}{p}/{q}" if slash else f"{sign}\\frac{{{p}}}{{{q}}}"
