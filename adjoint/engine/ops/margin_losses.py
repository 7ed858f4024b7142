"""Primitives of the margin losses: the one kernel among them PyTorch 2.13 differentiates as one node.

``SoftMarginLossBackward0`` (``soft_margin_loss``): the loss log(1 + exp(-y x)) per element
(ATen computes ``neg(input).mul_(target).exp_().log1p_()``), then ``apply_loss_reduction``;
derivatives.yaml differentiates it in ``self`` only (the target is no edge: VariableType refuses
a target that requires grad), and the backward is
``-norm * target * z / (1 + z) * grad`` with ``z = exp(-target * input)`` (norm: 1 / numel for
mean). It saves self, then target (probed with ``saved_tensors_hooks``). A bool target computes
the forward (``mul_`` by 0 / 1) and the backward's ``-target`` refuses it.

The other margin losses (margin_ranking, hinge_embedding, cosine_embedding,
multilabel_soft_margin) are composites: adjoint/engine/bindings/margin_losses.py. Also here,
apart at the end, the one general primitive cosine_embedding_loss needs that no family had:
``sub_scalar`` (``SubBackward1``, C++'s ``tensor - double``; nothing saved).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.values.mathtree import Fn, TBin, TConst, TFn, generic_vjp, number
from adjoint.engine.ops.record import Check, Math, Op, Save
from adjoint.engine.ops.arith import NEG_BOOL, same_shape
from adjoint.engine.ops.losses import Pointwise, reduce, reduced_shape, spread


def soft_margin_forward(B, ins, p):
    x, y = ins[0], ins[1]
    return reduce(B, B.log1p(B.exp(B.neg(B.mul(x, y)))), p.reduction)


def soft_margin_vjp(B, gs, ins, outs, p, need):
    x, y = ins[0], ins[1]
    g = spread(B, gs[0], B.shape(x), p.reduction)
    z = B.exp(B.neg(B.mul(y, x)))
    local = B.mul(B.div(B.neg(B.mul(y, z)), B.add(B.scalar(1), z)), g)
    return [local if need[0] else None, None]


def soft_margin_backward_error(dtypes, p, need=None):
    """soft_margin_loss_backward's ``-target``: a bool target is neg's error."""
    return NEG_BOOL if dtypes[1] == "bool" else None


SOFT_MARGIN = Fn("soft_margin_loss", "\\operatorname{soft\\_margin}_{#s}\\left(#0,\\ #1\\right)", generic_vjp)


def _soft_margin_formula(a, p, shape, k):
    return TFn(SOFT_MARGIN, (a[0], a[1]), tuple(shape), f"\\mathrm{{{p.reduction}}}", p)


_TARGET = ((1, -1, 1),)

# ----------------------------------------------------------------------------- sub by a C++ scalar

def sub_scalar_forward(B, ins, p):
    return B.sub(ins[0], B.scalar(p))


def sub_scalar_vjp(B, gs, ins, outs, p, need):
    return [gs[0]]


_SUB_SCALAR = Math(lambda a, p, shape, k: TBin("sub", a[0], TConst(number(p)), tuple(shape)))

OPS = (
    Op("soft_margin_loss", "SoftMarginLossBackward0", soft_margin_forward, soft_margin_vjp, reduced_shape,
       (Save("self", "in", 0), Save("target", "in", 1)),
       "-y exp(-y x) / (1 + exp(-y x)) g (/ n for mean); the target has no edge",
       differentiable=(True, False), math=Math(_soft_margin_formula), backward_error=soft_margin_backward_error,
       nonfinite="a mean over no element (0 / 0)",
       checks=tuple(Check(((3,),), Pointwise(r), fixed=_TARGET) for r in ("mean", "sum", "none"))),
    Op("sub_scalar", "SubBackward1", sub_scalar_forward, sub_scalar_vjp, same_shape, (), "g",
       math=_SUB_SCALAR, checks=(Check(((2,),), Fraction(1, 30)),)),
)


__all__ = ["OPS"]
