"""float32 tensors in a float64 problem: PyTorch's default dtype meeting the problem's.

A float64 problem's code often makes constants without ``dtype=`` (``torch.ones(2)``,
``torch.zeros(3)``, ``torch.tensor([1, 0.5])``, ``mask * 1.0``): PyTorch makes them float32, its
default dtype. adjoint follows them where PyTorch's float32 arithmetic rounds nothing, and
refuses (one line) where it would round:

* such a tensor never requires grad (a float32 gradient would be rounded at every node);
* an elementwise op promotes as TensorIterator does (``at::result_type``): among the operands
  with dims, the widest float; else among the 0-d tensors; else a Python float makes float32. A
  float64 result (``x * torch.ones(2)``) computes in doubles from the float32 values, exactly
  as the problem's other ops;
* a float32 result (``torch.ones(2) * 3``, ``torch.arange(3) * 0.5``) is answered when the op
  rounds once per element in PyTorch's kernel (:data:`ONE_ROUNDING`), each Python number in it
  is a float32 number (the kernel converts it to float32 first), and every exact result is a
  float32 number: then PyTorch's result is that number. Otherwise refused;
* views and copies keep the values, so the dtype too; other ops that mix the two dtypes
  (a matrix product, a reduction, a concatenation) are refused, as is a float32 result that
  would require grad (a float32 tensor times a 0-d float64 tensor that requires grad).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.errors import ProblemError
from adjoint.values.numbers.float_held import float_holds

FLOATS = ("float32", "float64")

#: elementwise ops whose float32 kernel rounds each element once (or not at all): a result
#: float32 holds exactly is then PyTorch's exactly
ONE_ROUNDING = ("add", "sub", "rsub", "mul", "div", "neg", "where", "maximum", "minimum", "clamp", "clamp_min",
                "clamp_max", "relu", "abs", "compare", "masked_fill", "fill_scalar")

_WAY_OUT = "make it float64 (dtype=torch.float64, or x.double() of a tensor that needs no grad)"


def lower(rt, t) -> bool:
    """``t`` is a float32 tensor of a float64 problem."""
    return rt.dtype == "float64" and t is not None and getattr(t, "dtype", None) == "float32"


def check_operand(rt, op, t, loc) -> None:
    """A float32 tensor as an operand of ``op`` in a float64 problem: refused where not followed."""
    if t.needs_grad:
        raise ProblemError(loc, f"{op.name} of a float32 tensor that requires grad in a float64 problem: its float32 "
                                f"gradients are not modelled; {_WAY_OUT}")
    if not (op.elementwise or op.view or op.copies_values):
        raise ProblemError(loc, f"{op.name} of a float32 tensor in a float64 problem (PyTorch's default dtype, a "
                                f"constant made without dtype=) is not modelled for this op; {_WAY_OUT}")


def promoted(tensors: list) -> str | None:
    """at::result_type over the float dtypes of ``tensors`` (operands, Python numbers excluded):
    the widest float among those with dims, else among the 0-d ones; None when none is a float."""
    dims = {t.dtype for t in tensors if t.shape and t.dtype in FLOATS}
    zero_d = {t.dtype for t in tensors if not t.shape and t.dtype in FLOATS}
    group = dims or zero_d
    if not group:
        return None
    return "float64" if "float64" in group else "float32"


def check_result(rt, op, value, ins: list, requires_grad: bool, loc) -> None:
    """A float32 result of ``op`` in a float64 problem: answered only where PyTorch's float32
    kernel rounds nothing (see the module docstring)."""
    if requires_grad:
        raise ProblemError(loc, f"{op.name} makes a float32 tensor that requires grad in a float64 problem (a float32 "
                                f"operand with dims beside a 0-d float64 one): not modelled; {_WAY_OUT}")
    if op.view or op.copies_values:
        return
    if op.name not in ONE_ROUNDING:
        raise ProblemError(loc, f"{op.name} computed in float32 (PyTorch's default dtype, a constant made without "
                                f"dtype=) in a float64 problem is not modelled; {_WAY_OUT}")
    for x in ins:
        if isinstance(x, (Fraction, int)) and not isinstance(x, bool) and not float_holds(Fraction(x), "float32"):
            raise ProblemError(loc, f"{op.name} in float32 of the Python number {float(x)!r}, which float32 does not "
                                    f"hold (PyTorch rounds it first): not modelled in a float64 problem; {_WAY_OUT}")
    if not rt.B.float_held(value, "float32"):
        raise ProblemError(loc, f"{op.name} computed in float32 (PyTorch's default dtype, a constant made without "
                                "dtype=) rounds its result here, which a float64 problem does not model; "
                                f"{_WAY_OUT}")
