"""hardswish and mish (``HardswishBackward0``, ``MishBackward0``), each one node that saves
``self``; ``relu6`` is ``hardtanh(x, 0, 6)`` in PyTorch (:mod:`adjoint.engine.bindings.swish`).

The kernels are ATen's CPU ones (``aten/src/ATen/native/cpu/Activation.cpp``), probed on 2.13:

* hardswish(x) = ``x * min(max(x + 3, 0), 6) / 6``: a product, so it is -0.0 wherever ``x``
  is negative (``x <= -3``) or -0.0; its backward is ``0`` where ``x <= -3``,
  ``g * (x / 3 + 1/2)`` where ``-3 < x < 3`` and ``g`` where ``x >= 3``: at ``x = -3`` the
  gradient is 0 and at ``x = 3`` it is ``g`` (the right-hand derivatives);
* mish(x) = ``x * tanh(log1p(exp(x)))`` (no threshold, unlike softplus); its backward is
  ``g * (t + x * sigmoid(x) * (1 - t^2))`` with ``t = tanh(log1p(exp(x)))``; it keeps a -0.0.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.values.mathtree import TFn, elementwise_named
from adjoint.engine.ops.record import Check
from adjoint.engine.ops.record import Math
from adjoint.engine.ops.record import Op
from adjoint.engine.ops.record import Save
from adjoint.engine.ops.activations import clamp_values
from adjoint.engine.ops.arith import same_shape


def _q(B, v):
    return B.scalar(Fraction(v))


def hardswish_forward(B, ins, p):
    x = ins[0]
    return B.div(B.mul(x, clamp_values(B, B.add(x, _q(B, 3)), _q(B, 0), _q(B, 6))), _q(B, 6))


def hardswish_vjp(B, gs, ins, outs, p, need):
    # self <= -3 ? 0 : (self < 3 ? grad * (self / 3 + 0.5) : grad)
    x, g = ins[0], gs[0]
    middle = B.mul(g, B.add(B.div(x, _q(B, 3)), _q(B, Fraction(1, 2))))
    inner = B.choose(B.sub(x, _q(B, 3)), "<", middle, g)
    return [B.choose(B.add(x, _q(B, 3)), "<=", B.zeros(B.shape(inner)), inner)]


def hardswish_kink(B, ins, p):
    x = ins[0]
    if B.any_zero(B.add(x, _q(B, 3))) or B.any_zero(B.sub(x, _q(B, 3))):
        return "hardswish'(-3) = 0 and hardswish'(3) = 1 in PyTorch (self <= -3 ? 0 : self < 3 ? ... : grad)"
    return None


def _tanh_softplus(B, x):
    return B.tanh(B.log(B.add(_q(B, 1), B.exp(x))))


def mish_forward(B, ins, p):
    x = ins[0]
    return B.mul(x, _tanh_softplus(B, x))


def mish_vjp(B, gs, ins, outs, p, need):
    # grad * (tanh_softplus + x * sigmoid(x) * (1 - tanh_softplus^2))
    x, g = ins[0], gs[0]
    t = _tanh_softplus(B, x)
    return [B.mul(g, B.add(t, B.mul(x, B.mul(B.sigmoid(x), B.sub(_q(B, 1), B.mul(t, t))))))]


HARDSWISH, HARDSWISH_PRIME = elementwise_named("hardswish", "\\operatorname{hardswish}")
MISH, MISH_PRIME = elementwise_named("mish", "\\operatorname{mish}")


def _named(fn) -> Math:
    return Math(lambda a, p, shape, k: TFn(fn, (a[0],), tuple(shape), "", p))


_SELF = (Save("self", "in", 0),)

OPS = (
    Op("hardswish", "HardswishBackward0", hardswish_forward, hardswish_vjp, same_shape, _SELF,
       "0 where a <= -3, g * (a / 3 + 1/2) where -3 < a < 3, else g", negzero="input_sign", kink=hardswish_kink,
       kink_doc="hardswish'(-3) = 0, hardswish'(3) = 1", elementwise=True, math=_named(HARDSWISH),
       checks=(Check(((2, 3),)),)),
    Op("mish", "MishBackward0", mish_forward, mish_vjp, same_shape, _SELF,
       "g * (t + a * sigmoid(a) * (1 - t^2)), t = tanh(log(1 + exp(a)))", negzero="keep", elementwise=True,
       math=_named(MISH), checks=(Check(((2, 3),)),)),
)
