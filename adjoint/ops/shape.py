"""Shape ops: t, view, _unsafe_view, unsqueeze, squeeze_ (the views matmul and linear create).

``p`` of the reshaping ops is the output shape. Their derivative reshapes the gradient back.
"""

from __future__ import annotations

from . import Check, Op


def t_shape(shapes, p, loc):
    return tuple(reversed(shapes[0]))


def given_shape(shapes, p, loc):
    return tuple(p)


def t_forward(B, ins, p):
    return B.t2(ins[0])


def t_vjp(B, gs, ins, outs, p, need):
    return [B.t2(gs[0])]


def reshape_forward(B, ins, p):
    return B.reshape(ins[0], tuple(p))


def reshape_vjp(B, gs, ins, outs, p, need):
    return [B.reshape(gs[0], B.shape(ins[0]))]


def _view(name, node, **kw):
    return Op(name, node, reshape_forward, reshape_vjp, given_shape, (), "g reshaped back", negzero="structural",
              grows=False, **kw)


OPS = (
    Op("t", "TBackward0", t_forward, t_vjp, t_shape, (), "g^T", negzero="structural", grows=False, view=True, checks=(Check(((2, 3),)),)),
    _view("view", "ViewBackward0", view=True, checks=(Check(((2, 3),), (3, 2)),)),
    _view("unsafe_view", "UnsafeViewBackward0", checks=(Check(((2, 3),), (6,)),)),
    _view("unsqueeze", "UnsqueezeBackward0", view=True, checks=(Check(((3,),), (1, 3)),)),
    _view("squeeze", "SqueezeBackward4", view=True, checks=(Check(((1, 3),), (3,)),)),
)
