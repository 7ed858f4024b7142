"""``_weight_norm_interface(v, g, dim)`` (``WeightNormInterfaceBackward0``): the fused weight
normalisation ``torch._weight_norm`` dispatches to when ``dim`` is 0 or the last dim
(WeightNorm.cpp's ``can_use_fused``), as ``torch.nn.utils.parametrizations.weight_norm``'s
``_WeightNorm.forward`` calls it at each access of the parametrized weight.

Outputs ``(w, norms)``: ``norms`` the 2-norm of ``v`` over every dim but ``dim`` (kept, of ``g``'s
shape; not differentiable: no grad_fn), ``w = v * (g / norms)`` (the CPU kernel's order). The node
saves ``g``, ``v`` and ``result1`` (the norms), packed in that order, and ``dim`` (checked in
torch 2.13). Its backward is ``_weight_norm_interface_backward(grad.contiguous(), v, g, norms,
dim)``: ``s = sum(grad * v)`` over the same dims, ``grad_g = s / norms``, ``grad_v = (g / norms) *
grad - (g / norms) * (s / norms**2) * v``. A zero slice of ``v`` gives nan (0 / 0), as the kernel.

Every other ``dim`` runs ``v * (g / norm_except_dim(v, 2, dim))`` as ATen ops; its ``dim = -1``
(``weight_norm(..., dim=None)``) is ``v.norm(2)``, ``at::norm(Tensor, Scalar)``: ``NormBackward0``,
the 2-norm of every element, saving ``self`` and ``result`` (in that order, and ``p``; checked in
torch 2.13), here as ``norm_scalar``.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.values.mathtree import Fn, TFn, generic_vjp, no_gradient
from adjoint.engine.ops.reductions import _norm_formula, norm_forward, norm_kink, norm_shape, norm_vjp
from adjoint.engine.ops.record import Check, Math, Op, Save, if_needed


def _reduced(shape, dim: int) -> tuple:
    return tuple(n if i == dim else 1 for i, n in enumerate(shape))


def _dims(B, x, dim: int) -> tuple:
    return tuple(i for i in range(len(B.shape(x))) if i != dim)


def weight_norm_shape(shapes, p, loc):
    v, g = shapes
    return (tuple(v), _reduced(v, p))


def _norms(B, v, dim):
    return B.sqrt(B.sum_dims(B.mul(v, v), _dims(B, v, dim), True))


def weight_norm_forward(B, ins, p):
    v, g = ins
    norms = _norms(B, v, p)
    return (B.mul(v, B.div(g, norms)), norms)


def weight_norm_vjp(B, gs, ins, outs, p, need):
    v, g = ins
    norms = outs[1]
    grad = gs[0]
    s = B.sum_dims(B.mul(grad, v), _dims(B, v, p), True)
    a = B.div(g, norms)
    return [if_needed(need, 0, lambda: B.sub(B.mul(a, grad), B.mul(B.mul(a, B.div(s, B.mul(norms, norms))), v))),
            if_needed(need, 1, lambda: B.div(s, norms))]


WEIGHT_NORM = Fn("weight_norm", "\\operatorname{wn}_{#s}\\left(#0,\\, #1\\right)", generic_vjp, delimited=True)
NORM_EXCEPT_DIM = Fn("norm_except_dim", "\\left\\lVert #0\\right\\rVert_{2,\\,\\neg #s}", no_gradient, delimited=True)


def _formula(a, p, shape, k):
    """w = v * (g / ||v||) reads wn_dim(v, g); the saved norms ||v||_{2, not dim}."""
    if k == 0:
        return TFn(WEIGHT_NORM, (a[0], a[1]), tuple(shape), str(p), p)
    return TFn(NORM_EXCEPT_DIM, (a[0],), tuple(shape), str(p), p)


OPS = (
    Op("_weight_norm_interface", "WeightNormInterfaceBackward0", weight_norm_forward, weight_norm_vjp,
       weight_norm_shape, (Save("g", "in", 1), Save("v", "in", 0), Save("result1", "out", 1)),
       "v: (g / n) * grad - (g / n) * (sum(grad * v) / n^2) * v, g: sum(grad * v) / n, n = ||v|| over the dims but dim",
       outputs=2, diff_outputs=1, integers="refused", nonfinite="a zero slice of v (0 / 0)",
       math=Math(_formula),
       checks=(Check(((2, 3), (2, 1)), 0), Check(((2, 3), (1, 3)), 1), Check(((2, 2, 2), (2, 1, 1)), 0))),
    Op("norm_scalar", "NormBackward0", norm_forward, norm_vjp, norm_shape, (Save("self", "in", 0), Save("result", "out", 0)),
       "as linalg_vector_norm's over every element: g * (a / out), 0 where out = 0", kink=norm_kink,
       kink_doc="0 at the zero vector", math=Math(_norm_formula), integers="refused",
       checks=(Check(((2, 3),), (Fraction(2), (), False)),)),
)
