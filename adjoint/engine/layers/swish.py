"""Built-in modules Hardtanh, ReLU6, Hardswish and Mish (torch/nn/modules/activation.py), each
forward as PyTorch's own: ``Hardtanh.forward`` is ``F.hardtanh(input, min_val, max_val,
inplace)`` and ``ReLU6`` is a ``Hardtanh(0.0, 6.0, inplace)`` (so its node is
``HardtanhBackward0``); ``Hardswish`` and ``Mish`` call ``F.hardswish`` / ``F.mish`` with
``inplace``."""

from __future__ import annotations

from fractions import Fraction

from adjoint.engine.bindings import call_function


def _call(c, name: str, *args):
    return call_function(c.rt, name, [c.args[0], *args], {}, c.module.loc)


def hardtanh_forward(c):
    return _call(c, "hardtanh", Fraction(c.arg("min_val")), Fraction(c.arg("max_val")), c.arg("inplace"))


def relu6_forward(c):
    return _call(c, "hardtanh", Fraction(0), Fraction(6), c.arg("inplace"))


def hardswish_forward(c):
    return _call(c, "hardswish", c.arg("inplace"))


def mish_forward(c):
    return _call(c, "mish", c.arg("inplace"))


FORWARDS = {
    "Hardtanh": hardtanh_forward,
    "ReLU6": relu6_forward,
    "Hardswish": hardswish_forward,
    "Mish": mish_forward,
}
