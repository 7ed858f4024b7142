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

from fractions import Fraction

from adjoint.format.errors import ProblemError
from adjoint.engine.torch_errors import TorchError

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
    if all(t.dtype == "bool" for t in operands):   # (a wrapped Python bool too: python_bools)
        return "bool"
    return "int64"


def wrap(v: int) -> int:
    """``v`` as an int64 holds it: two's complement, modulo 2**64."""
    return (v + 2 ** 63) % _INT64 - 2 ** 63


def normalize(B, value, dtype: str, loc, what: str, operands=()):
    """``value``, computed as rational arithmetic over the operands' integers, as PyTorch's
    ``dtype`` tensor holds it: a bool is its operands' logical or / and (nonzero is True), an
    int64 wraps around. ``--float64``: an operand or a value at or beyond 2**53 is refused (it
    may have been rounded); ``--structure``: the value is shapes only and stays as it is."""
    if B.name == "structure":
        return value
    ints = B.ints(value)
    if B.name == "float64" and any(abs(v) >= _EXACT_DOUBLE for x in (value,) + tuple(operands)
                                   if x is not None for v in B.ints(x)):
        raise ProblemError(loc, f"{what} computes with an integer at or beyond 2**53, which a double may have rounded: "
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


ALPHA_FLOAT = "For integral input tensors, argument alpha must not be a floating point number."


def scaled_by_alpha(rt, name: str, x, other, alpha, alpha_type: str | None, loc):
    """``alpha * other`` of ``add(x, other, alpha=...)`` / ``sub`` with no float among the
    operands (an integral result): a float alpha is PyTorch's error (alpha_check); an int alpha
    multiplies an int64 result exactly (wrapping as the kernel does), and is cast to bool for a
    bool result (``m + n`` with any nonzero alpha is ``m + n``). Whether a whole alpha was written
    ``2`` or ``2.0`` decides PyTorch's answer: where the call does not tell (an in-place method),
    it is refused."""
    if name.startswith("sub"):   # sub_check comes first
        from adjoint.engine.ops.arith import sub_error
        refused = sub_error((x.dtype, getattr(other, "dtype", None)), None)
        if refused:
            raise TorchError("RuntimeError", refused, "dtype")
    if alpha_type == "float" or Fraction(alpha).denominator != 1:
        raise TorchError("RuntimeError", ALPHA_FLOAT, "dtype")
    if alpha_type != "int":
        raise ProblemError(loc, f"{name}(..., alpha={alpha}) of integer or bool tensors: whether alpha is a Python int "
                                "or float (2 or 2.0) decides PyTorch's answer, which adjoint cannot tell here; write "
                                f"x {'-' if name.startswith('sub') else '+'} {alpha} * y")
    if alpha == 1:
        return other
    bool_result = x.dtype == "bool" and getattr(other, "dtype", None) == "bool"
    if bool_result:
        if alpha == 0:
            raise ProblemError(loc, f"{name}(..., alpha=0) of bool tensors is not modelled; leave the term out")
        return other   # alpha cast to bool: True
    return rt.apply("mul", [other, alpha], None, loc) if hasattr(other, "dtype") else other * alpha


def python_bools(rt, op: str, a, b):
    """``a OP b`` (``+``, ``-``, ``*``) of an int64 or bool tensor with a Python bool (``m * False``,
    ``i + True``): PyTorch wraps the bool as a 0-d bool tensor, so ``m * False`` is a bool tensor
    and ``i + True`` an int64 one; ``-`` with a bool operand is sub_check's error."""
    from adjoint.engine.ops.arith import sub_error
    dtypes = tuple("bool" if isinstance(v, bool) else v.dtype for v in (a, b))
    if op == "-":
        raise TorchError("RuntimeError", sub_error(dtypes, None), "dtype")

    def wrapped(v):
        if not isinstance(v, bool):
            return v
        t = rt.wrapped_number(Fraction(int(v)))
        t.dtype = "bool"
        return t
    return wrapped(a), wrapped(b)
