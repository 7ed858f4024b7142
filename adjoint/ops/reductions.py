"""Reductions over every element: sum, mean and the 2-norm (``torch.linalg.vector_norm``)."""

from __future__ import annotations

from fractions import Fraction

import sympy

from ..derivation.mathtree import Fn, TBin, TConst, TOnes, applied, numel
from . import Check, Math, Op, Save


def scalar_shape(shapes, p, loc):
    return ()


def sum_forward(B, ins, p):
    return B.total(ins[0])


def sum_vjp(B, gs, ins, outs, p, need):
    return [B.broadcast_to(gs[0], B.shape(ins[0]))]


def mean_forward(B, ins, p):
    return B.div(B.total(ins[0]), B.scalar(B.numel(ins[0])))


def mean_vjp(B, gs, ins, outs, p, need):
    return [B.broadcast_to(B.div(gs[0], B.scalar(B.numel(ins[0]))), B.shape(ins[0]))]


def norm_forward(B, ins, p):
    x = ins[0]
    return B.sqrt(B.total(B.mul(x, x)))


def norm_vjp(B, gs, ins, outs, p, need):
    # linalg_vector_norm_backward, ord 2: self * (grad / norm).masked_fill_(norm == 0, 0)
    x, out = ins[0], outs[0]
    return [B.where(B.mask(out, lambda s: s == 0), B.zeros(B.shape(x)), B.mul(x, B.div(gs[0], out)))]


def norm_kink(B, ins, p):
    if B.all_zero(ins[0]):
        return "the 2-norm at the zero vector has gradient 0 in PyTorch (masked_fill where norm == 0)"
    return None


# ----------------------------------------------------------------------------- how they read (adjoint.mathtree)

SUM = Fn("sum", "\\operatorname{sum}\\left(#0\\right)",
         lambda lam, n: (TBin("had", lam, TOnes(n.a.shape), n.a.shape),), lambda x: x)
MEAN = Fn("mean", "\\operatorname{mean}\\left(#0\\right)",
          lambda lam, n: (TBin("had", TBin("div", lam, TConst(Fraction(numel(n.a.shape))), ()), TOnes(n.a.shape),
                               n.a.shape),), lambda x: x)
NORM = Fn("norm", "\\left\\lVert #0\\right\\rVert",
          lambda lam, n: (TBin("had", lam, TBin("div", n.a, n, n.a.shape), n.a.shape),), sympy.Abs, delimited=True)

OPS = (
    Op("sum", "SumBackward0", sum_forward, sum_vjp, scalar_shape, (), "g broadcast to a's shape", math=Math(applied(SUM)), checks=(Check(((2, 2),)),)),
    Op("mean", "MeanBackward0", mean_forward, mean_vjp, scalar_shape, (), "g / numel, broadcast", grows=False, math=Math(applied(MEAN)), checks=(Check(((2, 2),)),)),
    Op("norm", "LinalgVectorNormBackward0", norm_forward, norm_vjp, scalar_shape,
       (Save("self", "in", 0), Save("result", "out", 0)), "a * g / out (0 when out = 0)", kink=norm_kink,
       kink_doc="gradient 0 at the zero vector", math=Math(applied(NORM)), checks=(Check(((3,),)),)),
)
