"""``F.relu6``, ``F.hardswish``, ``F.mish``: what PyTorch 2.13 runs for each (checked in real torch).

* ``F.relu6(input, inplace=False)`` is ``hardtanh(input, 0, 6)`` in ATen: one
  ``HardtanhBackward0`` (saves self; the gradient passes strictly inside (0, 6)); in place
  ``hardtanh_`` (self cloned and saved);
* ``F.hardswish(input, inplace=False)``: ``HardswishBackward0`` (saves self; in place a clone
  of self);
* ``F.mish(input, inplace=False)``: ``MishBackward0`` (saves self; in place a clone of self).

They are ``torch.nn.functional`` functions only (``torch.relu6`` does not exist).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.engine.bindings.signature import Function
from adjoint.engine.bindings.signature import Param
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

FUNCTIONS = (
    Function("relu6", (_IN, _INPLACE), _lower("hardtanh", RELU6_BOUNDS), where="function",
             doc="hardtanh(input, 0, 6): HardtanhBackward0 (saves self; in place a clone of self)"),
    Function("hardswish", (_IN, _INPLACE), _lower("hardswish", None), where="function",
             doc="HardswishBackward0 (saves self; in place a clone of self)"),
    Function("mish", (_IN, _INPLACE), _lower("mish", None), where="function",
             doc="MishBackward0 (saves self; in place a clone of self)"),
)
