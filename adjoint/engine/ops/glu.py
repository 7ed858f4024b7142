"""``glu``: ``F.glu`` / ``nn.GLU``'s node, ``GluBackward0``, as PyTorch 2.13's CPU kernel computes it,
checked in real torch.

The input is halved along ``dim`` (``a`` the first half, ``b`` the second): forward
``a * sigmoid(b)``; backward ``g * sigmoid(b)`` into the first half, ``g * a * sigmoid(b) *
(1 - sigmoid(b))`` into the second. The node saves ``self`` (and the dim).
"""

from __future__ import annotations

from adjoint.values.mathtree import Fn, generic_vjp, layer
from adjoint.engine.ops.record import Check, Math, Op, Save


def _halves(shape, dim: int):
    half = shape[dim] // 2
    first = (slice(None),) * dim + (slice(0, half),)
    second = (slice(None),) * dim + (slice(half, 2 * half),)
    return first, second


def glu_shape(shapes, p, loc):
    shape = list(shapes[0])
    shape[p] //= 2
    return tuple(shape)


def glu_forward(B, ins, p):
    x = ins[0]
    first, second = _halves(B.shape(x), p)
    return B.mul(B.index(x, first), B.sigmoid(B.index(x, second)))


def glu_vjp(B, gs, ins, outs, p, need):
    x, g = ins[0], gs[0]
    first, second = _halves(B.shape(x), p)
    a, s = B.index(x, first), B.sigmoid(B.index(x, second))
    grad_a = B.mul(g, s)
    grad_b = B.mul(B.mul(B.mul(g, a), s), B.sub(B.scalar(1), s))
    return [B.concat([grad_a, grad_b], p)]


GLU = Fn("glu", "\\operatorname{glu}_{#s}\\left(#0\\right)", generic_vjp)

OPS = (
    Op("glu", "GluBackward0", glu_forward, glu_vjp, glu_shape, (Save("self", "in", 0),),
       "first half: g * sigmoid(b); second half: g * a * sigmoid(b) * (1 - sigmoid(b))", grows=False,
       underflows=True, math=Math(layer((GLU,), lambda p: str(p))),
       checks=(Check(((2, 4),), 1), Check(((4, 3),), 0))),
)
