"""``F.relu6``, ``F.hardswish``, ``F.mish``: what PyTorch 2.13 runs for each (checked in real torch).

* ``F.relu6(input, inplace=False)`` is ``hardtanh(input, 0, 6)`` in ATen: one
  ``HardtanhBackward0`` (saves self; the gradient passes strictly inside (0, 6)); in place
  ``hardtanh_`` (self cloned and saved);
* ``F.hardswish(input, inplace=False)``: ``HardswishBackward0`` (saves self; in place a clone
  of self);
* ``F.mish(input, inplace=False)``: ``MishBackward0`` (saves self; in place a clone of self).

They are ``torch.nn.functional`` functions only (``torch.relu6`` does not exist).

Two more are Python in torch/nn/functional.py, made of ops adjoint has:

* ``F.softsign(input)`` is ``input / (input.abs() + 1)``: ``AbsBackward0`` (saves self; abs'(0)
  = sgn(0) = 0), ``AddBackward0`` (the Python 1 wrapped), ``DivBackward0`` (saves both);
* ``F.tanhshrink(input)`` is ``input - input.tanh()``: ``TanhBackward0`` (saves its result),
  ``SubBackward0``.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.engine.bindings.signature import Function
from adjoint.engine.bindings.signature import Param
from adjoint.engine.bindings.core import binary
_IN = Param("input", "tensor")
_INPLACE = Param("inplace", "bool", False)


def _lower(prim: str, params):
    def lower(rt, a, loc):
        if a["inplace"]:
            from adjoint.engine.inplace import apply_inplace
            return apply_inplace(rt, prim, a["input"], [], params, loc)
        return rt.apply(prim, [a["input"]], params, loc)
    lower.__name__ = f"lower_{prim}"
    return lower


RELU6_BOUNDS = (Fraction(0), Fraction(6))


def lower_softsign(rt, a, loc):
    """``input / (input.abs() + 1)`` (torch/nn/functional.py)."""
    x = a["input"]
    return binary(rt, "/", x, binary(rt, "+", rt.apply("abs", [x], None, loc), Fraction(1), loc), loc)


def lower_tanhshrink(rt, a, loc):
    """``input - input.tanh()`` (torch/nn/functional.py)."""
    x = a["input"]
    return binary(rt, "-", x, rt.apply("tanh", [x], None, loc), loc)

FUNCTIONS = (
    Function("relu6", (_IN, _INPLACE), _lower("hardtanh", RELU6_BOUNDS), where="function",
             doc="hardtanh(input, 0, 6): HardtanhBackward0 (saves self; in place a clone of self)"),
    Function("hardswish", (_IN, _INPLACE), _lower("hardswish", None), where="function",
             doc="HardswishBackward0 (saves self; in place a clone of self)"),
    Function("mish", (_IN, _INPLACE), _lower("mish", None), where="function",
             doc="MishBackward0 (saves self; in place a clone of self)"),
    Function("softsign", (_IN,), lower_softsign, where="function",
             doc="input / (input.abs() + 1): AbsBackward0, AddBackward0, DivBackward0"),
    Function("tanhshrink", (_IN,), lower_tanhshrink, where="function",
             doc="input - input.tanh(): TanhBackward0, SubBackward0"),
)
