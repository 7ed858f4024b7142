"""Is a rational number one a float dtype holds exactly? (An integer times a power of two, in range.)

Used where PyTorch would round to a narrower float than the problem's and adjoint answers only
when that rounding changes nothing: a float32 tensor in a float64 problem
(:mod:`adjoint.engine.float32_tensors`), a fill value of a factory.
"""

from __future__ import annotations

from fractions import Fraction

#: dtype -> (significand bits, exponent of the smallest subnormal, exponent bound of the range)
_FORMATS = {"float16": (11, -24, 16), "bfloat16": (8, -133, 128), "float32": (24, -149, 128),
            "float64": (53, -1074, 1024)}


def float_holds(value: Fraction, dtype: str) -> bool:
    """``value`` (a Fraction, or anything with ``numerator`` / ``denominator``) is a finite number
    of the float ``dtype`` exactly."""
    num, den = abs(int(value.numerator)), int(value.denominator)
    if den & (den - 1):
        return False
    if num == 0:
        return True
    zeros = (num & -num).bit_length() - 1
    bits, low, high = _FORMATS[dtype]
    return (num >> zeros).bit_length() <= bits and zeros - (den.bit_length() - 1) >= low and \
        Fraction(num, den) < 2 ** high
