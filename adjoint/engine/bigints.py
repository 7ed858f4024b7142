"""Python ints beyond what PyTorch's argument parser unpacks (measured in PyTorch 2.13).

A Python int is arbitrary precision, and stays one through Python's own arithmetic
(``2 ** 70``, ``10 ** 20``); PyTorch converts it where it hands it to a kernel:

* as a Scalar (``x * 2 ** 70``, ``x > 10 ** 20``, ``x += 2 ** 70``): int64, else uint64
  (``PyLong_AsUnsignedLongLong``), so from -2**63 to 2**64 - 1; beyond, OverflowError "int too
  big to convert", below, "can't convert negative int to unsigned";
* as an index (``x[2 ** 70]``): int64 only, ValueError "Overflow when unpacking long long";
* as a call's int, size or scalar argument: the error depends on the parameter (``dim=``:
  ValueError, ``view(2 ** 70)``: a TypeError quoting C++ frames), not modelled: refused.

A Python float (``2.0 ** 70``, ``2 ** 70 / 1``) converts to a double and is fine. Values are
exact Fractions here, so the int/float type is read from the expression
(:func:`adjoint.engine.pyerrors.number_type`); where it cannot be told (a name bound
elsewhere), such a value is refused.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format import syntax as S
from adjoint.format.errors import ProblemError
from adjoint.engine.pyerrors import number_type
from adjoint.engine.torch_errors import TorchError

INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1
UINT64_MAX = 2 ** 64 - 1


def _big(v, lo: int, hi: int) -> bool:
    return isinstance(v, Fraction) and not isinstance(v, bool) and v.denominator == 1 and not lo <= v <= hi


def _is_int(v, e: S.Expr) -> bool:
    """Whether the integral value ``v`` of ``e`` is a Python int (False: a float); refused when
    the expression does not tell."""
    kind = number_type(e)
    if kind is None:
        raise ProblemError(e.loc, f"'{S.to_source(e)}' is {v}, beyond int64, and whether it is a Python int "
                                  "(PyTorch raises OverflowError or ValueError converting it) or a float (converted) "
                                  "cannot be told from the expression: write it where it is used")
    return kind == "int"


def check_scalar(v, e: S.Expr) -> None:
    """``v`` (the value of ``e``) handed to PyTorch as a Scalar: its OverflowError for a Python
    int outside [-2**63, 2**64 - 1]."""
    if _big(v, INT64_MIN, UINT64_MAX) and _is_int(v, e):
        raise TorchError("OverflowError", "int too big to convert" if v > 0 else "can't convert negative int to unsigned",
                         "arguments")


def check_index(v, e: S.Expr) -> None:
    """``v`` used as an integer index: ValueError beyond int64."""
    if _big(v, INT64_MIN, INT64_MAX) and _is_int(v, e):
        raise TorchError("ValueError", "Overflow when unpacking long long", "arguments")


def refuse_in_call(values, exprs, what: str) -> None:
    """A Python int beyond int64 among a call's arguments (in a tuple or list too): PyTorch's error
    depends on the parameter; refused."""
    for v, e in zip(values, exprs):
        items = list(zip(v, e.items)) if isinstance(v, (tuple, list)) and isinstance(e, (S.Tup, S.ListLit)) \
            and len(v) == len(e.items) else [(v, e)]
        for item, src in items:
            if _big(item, INT64_MIN, INT64_MAX) and _is_int(item, src):
                raise ProblemError(src.loc, f"'{S.to_source(src)}' is a Python int beyond int64 passed to {what}(): "
                                            "PyTorch's error converting it depends on the parameter (OverflowError for "
                                            "a number, ValueError for a dim, TypeError for a size), not modelled here; "
                                            "as an operand of + - * / ** or a comparison it is")
