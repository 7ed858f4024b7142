"""The floats an exact value is shown as, and the decimals of values too small for a float64.

An exact value's decimal (``value`` in ``--json``, the report's numbers) is the float64 nearest
it, as PyTorch float64 would hold it. Two things make that float differ from the plain
rounding of the exact number, and both are shown here:

* an exact zero that PyTorch holds as -0.0 (the -0.0 mask of :mod:`adjoint.values.signed_zero`)
  reads ``-0.0``, as ``--float64`` reads it;
* a nonzero exact value below float64's range (``-1/10**400``) rounds to a zero of its sign,
  which PyTorch float64 would hold too: the report then shows the exact value's own decimal
  next to that zero (:func:`underflow_decimals`), never a bare ``0`` or ``-0``.
"""

from __future__ import annotations

from decimal import Decimal

import flint
import numpy as np

from adjoint.values.exact import Exact

DIGITS = 7


def signed_floats(v: Exact):
    """``v.floats()`` (nested lists, a float for 0-d, None when symbolic) with -0.0 wherever
    PyTorch holds -0.0."""
    floats = v.floats()
    if floats is None or v.negzero is None or not np.any(v.negzero):
        return floats
    arr = np.array(floats, dtype=np.float64)
    arr = np.where(np.broadcast_to(v.negzero, arr.shape), -0.0, arr)
    return arr.tolist() if arr.ndim else float(arr)


def underflow_decimals(v: Exact, indices: list[int] | None = None) -> dict[int, str]:
    """Flat index -> the exact value's decimal (:data:`DIGITS` significant digits, ``-1e-400``)
    of every element (of ``indices``, or all) whose exact value is not zero while its float64
    is: too small for a float64."""
    if not isinstance(v, Exact):
        return {}
    flat = v.floats_flat()
    if flat is None:
        return {}
    look = range(len(flat)) if indices is None else indices
    zeros = [i for i in look if i < len(flat) and flat[i] == 0.0]
    if not zeros:
        return {}
    strings = v.strings_flat()
    out = {}
    for i in zeros:
        if strings[i] in ("0", "-0"):
            continue
        text = _decimal(v, i)
        if text is not None:
            out[i] = text
    return out


def _decimal(v: Exact, i: int) -> str | None:
    if v.kind == "rational":
        ball = flint.arb(flint.fmpq(int(v.qa.num.reshape(-1)[i]), v.qa.den))
    elif v.kind == "real":
        ball = v.ball_with_bits(np.unravel_index(i, v.shape) if v.ndim else (), 40)
    else:
        return None
    if not ball.is_finite() or ball.contains(0):
        return None
    d = Decimal(ball.mid().str(DIGITS + 5, radius=False)).normalize()
    return format(d, f".{DIGITS}g")
