"""``_prelu_kernel``: ``F.prelu`` / ``nn.PReLU``'s node, ``PreluKernelBackward0``, as PyTorch 2.13's
CPU kernels (Activation.cpp) compute it, checked in real torch.

The weight arrives already broadcastable to ``self`` (``at::prelu`` reshapes it first: the
binding's ``ViewBackward0``). Forward ``self > 0 ? self : weight * self``; backward (one
TensorIterator over ``self``, ``weight``, ``grad``): ``grad_self = self > 0 ? g : weight * g``,
``grad_weight = self > 0 ? 0 : self * g`` summed to the weight's shape. The node saves ``self``
then ``weight``.
"""

from __future__ import annotations

from adjoint.values.mathtree import Fn, applied, generic_vjp
from adjoint.engine.ops.arith import broadcast_shapes
from adjoint.engine.ops.record import Check, Math, Op, Save


def prelu_shape(shapes, p, loc):
    return tuple(shapes[0])


def prelu_forward(B, ins, p):
    x, w = ins
    return B.choose(x, ">", x, B.mul(B.broadcast_to(w, B.shape(x)), x))


def prelu_vjp(B, gs, ins, outs, p, need):
    x, w = ins
    g = gs[0]
    shape = broadcast_shapes(B.shape(x), B.shape(w), None)
    wide = B.broadcast_to(w, shape)
    grad_self = B.choose(x, ">", g, B.mul(wide, g)) if need[0] else None
    grad_weight = B.sum_to(B.choose(x, ">", B.zeros(shape), B.mul(x, g)), B.shape(w)) if need[1] else None
    return [grad_self, grad_weight]


def prelu_kink(B, ins, p):
    if B.any_zero(ins[0]):
        return "prelu'(0) = weight in PyTorch (self > 0 ? grad : weight * grad); weight's gradient there: self * grad"
    return None


PRELU = Fn("prelu", "\\operatorname{prelu}\\left(#0,\\ #1\\right)", generic_vjp)

OPS = (
    Op("_prelu_kernel", "PreluKernelBackward0", prelu_forward, prelu_vjp, prelu_shape,
       (Save("self", "in", 0), Save("weight", "in", 1)),
       "g where a > 0, else w * g; weight: sum of a * g where a <= 0", negzero="product", kink=prelu_kink,
       kink_doc="prelu'(0) = weight", math=Math(applied(PRELU)),
       checks=(Check(((2, 3, 2), (1, 3, 1))), Check(((2, 3), (1, 1))), Check(((3,), (1,))))),
)
