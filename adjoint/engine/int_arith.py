"""Integer and bool tensor arithmetic as PyTorch 2.13 CPU computes it.

With no float tensor and no Python float among its operands, ``add``, ``sub``, ``rsub``, ``mul``
and ``neg`` of int64 and bool tensors (and Python ints) give an integer tensor: TensorIterator's
common dtype is bool when every operand is a bool tensor (``m + m`` is a logical or, ``m * m``
a logical and), else int64 (``m * 2``, ``i + m``, ``1 - i``); ``sum`` and ``prod`` of a bool or
int64 tensor are int64. An int64 result wraps around modulo 2**64, as the C++ kernels' two's
complement arithmetic does (``2**62 * 2`` is ``-2**63``). ``-`` of a bool operand stays PyTorch's
own error (the ops' ``forward_error``), and so does an in-place write whose result type cannot
be cast to the written tensor's (``adjoint.engine.inplace.check_cast``).

Values are exact integers in the exact mode (Python ints). In ``--float64`` mode an integer is a
double: a value at or beyond 2**53 might have been rounded, so it is refused rather than wrapped
or rounded. In ``--structure`` mode only the integers a file gives are known; a computed one
stays unknown (shapes only).
"""

from __future__ import annotations

from adjoint.format.errors import ProblemError

#: elementwise primitives modelled on integer and bool operands
ELEMENTWISE = frozenset({"add", "sub", "rsub", "mul", "neg"})
#: reductions of a bool or int64 tensor that give int64
REDUCTIONS = frozenset({"sum", "sum_dim", "prod", "prod_dim"})

_INT64 = 2 ** 64
_EXACT_DOUBLE = 2 ** 53


def elementwise_dtype(opname: str, operands: list) -> str | None:
    """The result dtype of ``opname`` over ``operands`` (tensors, a Python int wrapped as a 0-d
    tensor) with no float among them: bool when every operand is a bool tensor, else int64; None
    for an op this module does not model."""
    if opname not in ELEMENTWISE:
        return None
    if all(not t.wrapped and t.dtype == "bool" for t in operands):
        return "bool"
    return "int64"


def wrap(v: int) -> int:
    """``v`` as an int64 holds it: two's complement, modulo 2**64."""
    return (v + 2 ** 63) % _INT64 - 2 ** 63


def normalize(B, value, dtype: str, loc, what: str):
    """``value``, computed as rational arithmetic over the operands' integers, as PyTorch's
    ``dtype`` tensor holds it: a bool is its operands' logical or / and (nonzero is True), an
    int64 wraps around. ``--float64``: a value at or beyond 2**53 is refused (it may have been
    rounded); ``--structure``: the value is shapes only and stays as it is."""
    if B.name == "structure":
        return value
    ints = B.ints(value)
    if B.name == "float64" and any(abs(v) >= _EXACT_DOUBLE for v in ints):
        raise ProblemError(loc, f"{what} gives an integer at or beyond 2**53, which a double may have rounded: "
                                "integer arithmetic beyond 2**53 is modelled in the exact mode only (drop --float64)")
    if dtype == "bool":
        out = [int(v != 0) for v in ints]
    else:
        out = [wrap(v) for v in ints]
    return B.integers(out, B.shape(value))


def check_float64_reduction(B, opname: str, value, loc) -> None:
    """``--float64``: a sum or product of integers whose partial results may pass 2**53 (and be
    rounded on the way) is refused."""
    if B.name != "float64":
        return
    ints = B.ints(value)
    bound = 0
    if opname.startswith("sum"):
        bound = sum(abs(v) for v in ints)
    else:
        bound = 1
        for v in ints:
            bound *= max(abs(v), 1)
            if bound >= _EXACT_DOUBLE:
                break
    if bound >= _EXACT_DOUBLE:
        raise ProblemError(loc, f"{opname} of an integer tensor whose partial results may pass 2**53, which a double "
                                "may round: modelled in the exact mode only (drop --float64)")
