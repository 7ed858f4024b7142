"""How a value reads in a report: decimals at a glance, the exact form on request.

Decimals have :data:`DIGITS` significant digits (PyTorch's float32 carries about 7); a
tensor keeps its brackets, so a shape-(1,) value reads ``[-0.4079607]`` and a 0-d one
``-0.4079607``. The exact form is the prediction's own (``-3983991/9765625``, a SymPy closed
form); a value with free symbols has no decimal and always reads exactly. Tensors of more
than :data:`MAX_SHOWN` elements show their shape and first elements (``--json`` has all).
"""

from __future__ import annotations

import math

from adjoint.values.backends.float64 import F64
from adjoint.values.backends.structure import Shaped
from adjoint.values.exact import Exact
from adjoint.engine.graph import Typed
from adjoint.values.complexes import Cx
from adjoint.values.shown import signed_floats, underflow_decimals

#: the tensor types of the three answer modes (exact, --float64, --structure)
TENSORS = (Exact, F64, Shaped)

#: floating dtypes: a value of one that is not the problem's own is recorded with its dtype (``Typed``)
FLOATS = ("float16", "bfloat16", "float32", "float64")

DIGITS = 7
MAX_SHOWN = 12
FIRST = 6          # elements shown of a larger tensor


def number(x: float) -> str:
    """One decimal: ``-0.4079607``, ``2``, ``1e-08``, ``inf``, ``nan``."""
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.{DIGITS}g}"


def _nested(x, leaf) -> str:
    if isinstance(x, list):
        return "[" + ", ".join(_nested(i, leaf) for i in x) + "]"
    return leaf(x)


def _floats(v):
    """The decimals of ``v`` as PyTorch holds them (-0.0 included), and a leaf printer that
    writes an element too small for a float64 as its exact decimal and the zero PyTorch float64
    holds: ``-1e-400 (float64: -0)``."""
    if not isinstance(v, Exact):
        return v.floats(), number
    floats = signed_floats(v)
    tiny = underflow_decimals(v) if floats is not None else {}
    if not tiny:
        return floats, number
    position = iter(range(v.size))

    def leaf(x):
        i = next(position)
        return f"{tiny[i]} (float64: {number(x)})" if i in tiny else number(x)
    return floats, leaf


def tensor(v, exact: bool = False) -> str:
    """A tensor: decimals (or, with ``exact``, the exact form and its decimals beside it); in
    --structure mode (no values) its shape, in --float64 mode (no exact form) its decimals."""
    if v.size > MAX_SHOWN:   # only the first elements are shown: only they are converted (4M would take a minute)
        first = v.restructured(lambda a: a.reshape(-1)[:FIRST].copy()) if isinstance(v, Exact) else v
        (floats, leaf), exact_strings = _floats(first), first.strings()
        if floats is None and exact_strings is None:
            return f"tensor {'x'.join(map(str, v.shape))}"
        flat = _flat(floats) if floats is not None and (not exact or exact_strings is None) else _flat(exact_strings)
        head = ", ".join(leaf(e) if isinstance(e, float) else str(e) for e in flat[:FIRST])
        return f"tensor {'x'.join(map(str, v.shape))} [{head}, ...] ({v.size} elements)"
    floats, leaf = _floats(v)
    exact_strings = v.strings()
    if floats is None and exact_strings is None:
        return f"tensor {'x'.join(map(str, v.shape)) or '0-d'}"
    if exact_strings is None:
        exact = False
    if exact_strings is None:
        return _nested(floats, number)
    strings = _nested(exact_strings, str)
    if floats is None:
        return strings
    dec = _nested(floats, leaf)
    if not exact or dec == strings:
        return dec
    return f"{strings} (≈ {dec})"


def value(x, exact: bool = False) -> str:
    """Any value a hook is handed or returns: a tensor, None, a tuple or list of them, a dict of
    keyword arguments, a plain number."""
    if x is None:
        return "None"
    if isinstance(x, TENSORS):
        return tensor(x, exact)
    if isinstance(x, Cx):
        return complex_tensor(x, exact)
    if isinstance(x, Typed) and x.dtype in ("complex64", "complex128"):
        return complex_tensor(x.value, exact)
    if isinstance(x, Typed) and x.dtype in FLOATS:   # a float tensor not of the problem's dtype (a hook's .double())
        return f"{tensor(x.value, exact)} ({x.dtype})"
    if isinstance(x, Typed):   # an int64 or bool tensor: its integers (True / False), as PyTorch prints them
        elements = x.elements()
        return tensor(x.value) if elements is None else _nested(elements, str)
    if isinstance(x, tuple):
        inner = ", ".join(value(i, exact) for i in x)
        return f"({inner},)" if len(x) == 1 else f"({inner})"
    if isinstance(x, list):
        return "[" + ", ".join(value(i, exact) for i in x) + "]"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k}: {value(i, exact)}" for k, i in x.items()) + "}"
    return str(x)


def complex_tensor(v, exact: bool = False) -> str:
    """A complex tensor: ``[1+2i, 0.5-0.25i]`` (decimals), with ``exact`` its exact elements
    ``RE + IM*i`` beside them; a real value a complex tensor holds (zeros) has imaginary part 0."""
    pairs = v.floats() if isinstance(v, Cx) else _nested_pairs(v.floats())
    if pairs is None:
        return tensor(v) if not isinstance(v, Cx) else f"tensor {'x'.join(map(str, v.shape)) or '0-d'}"
    dec = _complex_nested(pairs)
    if not exact:
        return dec
    strings = v.strings() if isinstance(v, Cx) else None
    return dec if strings is None else f"{_nested(strings, str)} (≈ {dec})"


def _nested_pairs(x):
    if x is None:
        return None
    return [_nested_pairs(i) for i in x] if isinstance(x, list) else [x, 0.0]


def _complex_nested(x) -> str:
    if isinstance(x, list) and x and isinstance(x[0], list):
        return "[" + ", ".join(_complex_nested(i) for i in x) + "]"
    if isinstance(x, list) and not x:
        return "[]"
    re, im = x
    sign = "-" if (im < 0 or (im == 0 and math.copysign(1, im) < 0)) else "+"
    return f"{number(re)}{sign}{number(abs(im))}i"


def ratio(r) -> str:
    """``×2``, ``×1/2``, ``×-1``: a change by one factor."""
    return f"×{r}"


def _flat(x) -> list:
    if isinstance(x, list):
        out = []
        for i in x:
            out.extend(_flat(i))
        return out
    return [x]
