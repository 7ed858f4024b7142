"""Exact literals as torch tensors, and torch values as the contract's JSON.

A problem's numbers are exact rationals. PyTorch holds them in its dtype, so each element is
rounded *once*, to the nearest value of that dtype (ties to even), as a user who wrote the
decimal in a float64 or float32 literal would get it. (Rounding to float64 first and then
to float32 would round twice, which differs from rounding once where the float64 value
lands exactly halfway between two float32 values.) ``int64`` literals stay integers.

:func:`snap` turns what a hook was handed or returned into the contract's JSON: a tensor is
``{"shape", "value"}`` (values converted exactly to float64, then to Python floats; an
integer tensor's values are ints), with ``"dtype"`` when it is not the run's float dtype
(``int64`` indices, a ``float64`` tensor in a ``float32`` run); tuples become lists, dicts
map their entries (a hook's ``kwargs``), numbers, strings and booleans stay themselves.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import torch

from adjoint.format.errors import ProblemError
from adjoint.format.problem import Literal, Sym

DTYPES = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64, "bool": torch.bool,
          "complex64": torch.complex64, "complex128": torch.complex128}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}

#: The float32 overflow threshold: rationals at least this large round to infinity (IEEE 754:
#: the largest finite float32 plus half of its last unit).
_F32_OVERFLOW = Fraction(2 ** 128) - Fraction(2 ** 103)


def number(value) -> int | float | bool | str | None | tuple:
    """An exact value as the Python value a user would type: an int when integral, else a float
    (rounded once); tuples element-wise; booleans, strings and None unchanged."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, tuple):
        return tuple(number(v) for v in value)
    if isinstance(value, Fraction):
        return int(value) if value.denominator == 1 else float(value)
    return value


def round_float32(q: Fraction) -> float:
    """The float32 nearest to ``q`` (ties to even), as a Python float; infinities beyond the range."""
    if abs(q) >= _F32_OVERFLOW:
        return math.copysign(math.inf, q)
    with np.errstate(over="ignore"):          # just below the threshold float64 may round up to it
        a = np.float32(float(q))              # within one float32 unit of the answer
    best = None
    for c in (np.nextafter(a, np.float32(-np.inf)), a, np.nextafter(a, np.float32(np.inf))):
        if not np.isfinite(c):
            continue
        d = abs(Fraction(float(c)) - q)
        if best is None or d < best[0] or (d == best[0] and _even(c) and not _even(best[1])):
            best = (d, c)
    return float(best[1])


def _even(c: np.float32) -> bool:
    return int(np.array(c, dtype=np.float32).view(np.uint32)) % 2 == 0


def exact_numbers(lit: Literal, symbols: dict[str, Fraction]) -> list[Fraction]:
    """The literal's elements, free symbols replaced by their ``symbols:`` values."""
    out = []
    for e in lit.items:
        if isinstance(e, Sym):
            if e.name not in symbols:
                raise ProblemError(lit.loc, f"this literal uses the free symbol '{e.name}', and verify needs numbers: "
                                            f"bind it under symbols: (e.g. symbols: {{{e.name}: 0.5}})")
            out.append(symbols[e.name] * e.coeff)
        else:
            out.append(e)
    return out


def _file_floats(lit: Literal, dtype: torch.dtype) -> torch.Tensor | None:
    """A side file's elements (``FileItems``: numerators over one denominator) in one numpy pass
    instead of a Fraction each: as float64 (each correctly rounded: an integer numerator, a
    power-of-two denominator), and as float32 when every float64 is a float32 too (else a second
    rounding could differ from rounding the exact value once: the slow path)."""
    from adjoint.format.sidefiles import FileItems

    items = lit.items
    if not isinstance(items, FileItems) or dtype not in (torch.float64, torch.float32):
        return None
    values = items.floats()
    if dtype == torch.float32:
        narrow = values.astype(np.float32)
        if not np.array_equal(narrow.astype(np.float64), values):
            return None
        values = narrow
    return torch.from_numpy(np.array(values, copy=True)).reshape(lit.shape)


def literal_tensor(lit: Literal, dtype: torch.dtype, symbols: dict[str, Fraction],
                   requires_grad: bool = False) -> torch.Tensor:
    """The literal as a new tensor of ``dtype``, each element rounded once: a fresh tensor, as
    ``torch.tensor(...)`` makes (no base, version 0), so version counters and views behave as in a
    user's script. An int64 or bool one is made as the script writes it, ``torch.tensor(VALUE,
    dtype=..., requires_grad=...)``, with PyTorch's own errors (an element beyond int64, a
    ``requires_grad`` it refuses); a float one gets ``requires_grad`` from its caller."""
    if dtype.is_complex:   # a complex literal (adjoint.format.complex_literals): its parts, each rounded once
        part = torch.float32 if dtype == torch.complex64 else torch.float64
        re = literal_tensor(Literal(lit.shape, lit.items, lit.loc), part, symbols)
        return torch.complex(re, literal_tensor(lit.imag, part, symbols)).clone()
    fast = _file_floats(lit, dtype)
    if fast is not None:
        return _signed_zeros(fast, lit)
    items = exact_numbers(lit, symbols)
    if dtype in (torch.int64, torch.bool):
        nested = np.array([int(v) for v in items], dtype=object).reshape(lit.shape).tolist()
        return torch.tensor(nested, dtype=dtype, requires_grad=requires_grad)
    elif dtype == torch.float32:   # an infinite element (a mask's -inf) is float(v) in either dtype
        flat = torch.tensor([round_float32(v) if isinstance(v, Fraction) else float(v) for v in items],
                            dtype=torch.float32)
    else:
        flat = torch.tensor([float(v) for v in items], dtype=dtype)
    return _signed_zeros(flat.reshape(lit.shape).clone(), lit)   # a tensor of its own (not a view of ``flat``), at version 0


def _signed_zeros(t: torch.Tensor, lit: Literal) -> torch.Tensor:
    """``t`` with the literal's written -0.0 (``torch.tensor([-0.0])`` keeps the sign bit)."""
    mask = lit.negzero_mask()
    if mask is not None:
        t[torch.from_numpy(mask)] = -0.0
    return t


def leaf_tensor(d, float_dtype: torch.dtype, symbols: dict[str, Fraction]) -> torch.Tensor:
    """An input's or a target's tensor as the script makes it: of its own dtype (int64, bool,
    complex) or else the run's float dtype, ``requires_grad`` as declared (PyTorch's error for an
    integer tensor that requires grad)."""
    t = literal_tensor(d.value, DTYPES[d.dtype] if d.dtype is not None else float_dtype, symbols, d.requires_grad)
    return t.requires_grad_(d.requires_grad) if t.is_floating_point() or t.is_complex() else t


def snap(x, float_dtype: torch.dtype):
    """``x`` as contract JSON (see the module docstring); ``float_dtype`` is the run's float dtype."""
    if x is None:
        return None
    if isinstance(x, torch.Tensor):
        if hasattr(x, "placements") and hasattr(x, "to_local"):   # a DTensor (fully_shard): this rank's rows
            x = x.to_local()
        t = x.detach()
        if t._is_zerotensor():   # an efficient zero tensor (sgn's, abs's gradients): zeros with no storage to read
            t = torch.zeros(t.shape, dtype=t.dtype)
        if t.is_complex():   # pairs [re, im] (adjoint.values.complexes)
            out = {"shape": list(t.shape), "value": torch.view_as_real(t.resolve_conj()).to(torch.float64).tolist()}
        elif t.is_floating_point():
            out = {"shape": list(t.shape), "value": t.to(torch.float64).tolist()}
        else:
            out = {"shape": list(t.shape), "value": t.tolist()}
        if t.dtype != float_dtype:
            out["dtype"] = DTYPE_NAMES.get(t.dtype, str(t.dtype).removeprefix("torch."))
        return out
    if isinstance(x, (tuple, list)):
        return [snap(i, float_dtype) for i in x]
    if isinstance(x, dict):
        return {str(k): snap(v, float_dtype) for k, v in x.items()}
    if isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, complex):   # a complex Python number: [re, im], as a complex VALUE's pairs
        return [x.real, x.imag]
    if x is Ellipsis:
        return "..."
    return {"shape": None, "value": None, "note": f"not a tensor: {type(x).__name__}"}
