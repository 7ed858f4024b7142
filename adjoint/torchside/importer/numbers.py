"""Exact text for the numbers an imported problem file holds.

Every finite float32 or float64 is a dyadic rational, so its decimal expansion ends: the
text written is that expansion, digit for digit (``0.1`` as a float32 is
``0.100000001490116119384765625``), which the problem format reads back as exactly the same
rational. A value whose expansion is short stays short (``0.5``, ``-2``). Python constants in
a forward (``x * 0.5``, ``dim=-1``) are written as Python writes them (``repr``), which is
what the user's own code says.
"""

from __future__ import annotations

import math
from decimal import Decimal

import torch

from adjoint.format.errors import ProblemError

#: The dtypes a problem file names (adjoint.engine.bindings.glue.DTYPE_NAMES), as torch prints them.
_DTYPES = ("torch.float64", "torch.float32", "torch.int64", "torch.bool")


def exact(x: float, what: str) -> str:
    """The exact decimal text of a float (``-0.0`` keeps its sign); ``-inf`` / ``inf`` as
    themselves (a mask buffer's: the loader refuses them where they are not modelled)."""
    if math.isinf(x):
        return "-inf" if x < 0 else "inf"
    if not math.isfinite(x):
        raise ProblemError(None, f"{what} holds {x!r}; a problem file holds numbers and -inf / inf only")
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0"
    text = format(Decimal(x), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def nested(values, what: str) -> str:
    """A nested list of floats (``tensor.tolist()``) as a flow-style literal."""
    if isinstance(values, list):
        return "[" + ", ".join(nested(v, what) for v in values) + "]"
    if isinstance(values, bool):
        return "1" if values else "0"
    if isinstance(values, int):
        return str(values)
    return exact(values, what)


def python_constant(value) -> str:
    """A constant argument as the user's Python would spell it."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if value is None or isinstance(value, (bool, int)):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f'float("{value!r}")'   # float("-inf"), as Python spells it
    if value is Ellipsis:
        return "..."
    if isinstance(value, torch.dtype) and str(value) in _DTYPES:   # dtype=torch.long
        return str(value)
    if isinstance(value, torch.device) and value.type == "cpu":   # device=idx.device, as traced
        return '"cpu"'
    if isinstance(value, (torch.dtype, torch.device)):
        raise TypeError(str(value))
    if isinstance(value, slice):
        parts = ["" if v is None else python_constant(v) for v in (value.start, value.stop)]
        text = ":".join(parts)
        return text + (":" + python_constant(value.step) if value.step is not None else "")
    if isinstance(value, (tuple, list)):
        inner = ", ".join(python_constant(v) for v in value)
        if isinstance(value, tuple):
            return "(" + inner + ("," if len(value) == 1 else "") + ")"
        return "[" + inner + "]"
    raise TypeError(type(value).__name__)
