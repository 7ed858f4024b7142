"""Rounding to IEEE binary formats, exactly: what DDP's ``fp16_compress`` and
``bf16_compress`` comm hooks do to a bucket (``adjoint.engine.distributed``).

``default_hooks.fp16_compress_hook`` is ``buffer.to(torch.float16).div_(world_size)``, an
all-reduce (SUM) of that, and the result copied back into the buffer; ``bf16_compress_hook``
the same with bfloat16. On CPU each step rounds to nearest, ties to even:

* the cast goes through float32 when the buffer is float64 (``c10::Half`` and
  ``c10::BFloat16`` are built from a float);
* ``div_`` computes in float and rounds to the 16-bit format;
* gloo's SUM of 16-bit values converts each pair to float, adds (rounding to float32) and
  rounds back, element by element.

Checked against real gloo on 2 ranks: 2000 doubles of magnitudes 1e-6 to 1e2 (subnormal
float16 included), every element equal for both formats (tests/test_ddp.py pins a few).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from adjoint.format.errors import ProblemError

#: format -> (precision in bits, the implicit one included; minimum and maximum exponent)
FORMATS = {"float16": (11, -14, 15), "bfloat16": (8, -126, 127), "float32": (24, -126, 127)}
_HALF = Fraction(1, 2)


def round_to(v: Fraction, fmt: str) -> Fraction | None:
    """``v`` rounded to the nearest value of ``fmt`` (ties to even, subnormals included);
    None when it overflows to infinity."""
    if v == 0:
        return Fraction(0)
    p, emin, emax = FORMATS[fmt]
    a = abs(v)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    if Fraction(2) ** (e + 1) <= a:
        e += 1
    quantum = Fraction(2) ** (max(e, emin) - p + 1)
    n = a / quantum
    whole = n.numerator // n.denominator
    rest = n - whole
    if rest > _HALF or (rest == _HALF and whole % 2):
        whole += 1
    out = whole * quantum
    if out >= Fraction(2) ** (emax + 1):
        return None
    return out if v > 0 else -out


def compress_allreduce(B, flats: list, fmt: str, dtype: str, loc) -> object:
    """The reduced bucket ``fp16_compress`` / ``bf16_compress`` gives from every rank's
    buffer (in rank order; at most 2 ranks, where the sum is one addition)."""
    if B.name == "structure":
        return flats[0]
    ws = len(flats)
    per_rank = [_elements(B, f, loc) for f in flats]
    total = None
    for values in per_rank:
        parts = []
        for v in values:
            c = _rounded(round_to(v, "float32"), fmt, loc) if dtype == "float64" else _rounded(v, fmt, loc)
            parts.append(_rounded(c / ws, fmt, loc))
        if total is None:
            total = parts
        else:
            total = [_rounded(_rounded(a + b, "float32", loc), fmt, loc) for a, b in zip(total, parts)]
    shape = tuple(B.shape(flats[0]))
    if B.name == "float64":
        from adjoint.values.backends.float64 import F64
        return F64(np.array([float(x) for x in total], dtype=np.float64).reshape(shape))
    from adjoint.values.exact import Exact
    return Exact.of(total, shape)


def _rounded(v, fmt: str, loc) -> Fraction:
    if v is None:
        raise ProblemError(loc, f"a bucket value overflows {fmt} in the comm hook (PyTorch gives inf there): not "
                                "modelled yet")
    out = round_to(v, fmt)
    if out is None:
        raise ProblemError(loc, f"a bucket value overflows {fmt} in the comm hook (PyTorch gives inf there): not "
                                "modelled yet")
    return out


def _elements(B, x, loc) -> list[Fraction]:
    if B.name == "float64":
        return [Fraction(float(v)) for v in x.a.reshape(-1)]
    if not x.rational:
        raise ProblemError(loc, "a compressing comm hook on gradients that are not rational (transcendental "
                                "values) is not modelled yet: the rounding needs exact values")
    return [Fraction(int(e.p), int(e.q)) for e in x.qa.elements().reshape(-1)]
