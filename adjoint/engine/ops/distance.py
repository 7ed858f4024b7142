"""``norm`` with a number ``p`` over dims (``at::norm(self, p, dim, keepdim)``, ``NormBackward1``):
the node ATen's own composites make (``pairwise_distance``, hence ``triplet_margin_loss``);
Python's ``torch.norm`` / ``Tensor.norm`` go through ``linalg.vector_norm`` instead
(``LinalgVectorNormBackward0``, :mod:`adjoint.engine.ops.reductions`).

Its value and gradient are the vector norm's: derivatives.yaml gives ``norm_backward(grad, self,
p, result, dim, keepdim)``, the very function ``linalg_vector_norm_backward`` calls; the node
saves ``self`` and ``result`` (and p, dim, keepdim), checked in torch 2.13.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.engine.ops.reductions import _norm_formula, norm_forward, norm_kink, norm_shape, norm_vjp
from adjoint.engine.ops.record import Check, Math, Op, Save

OPS = (
    Op("norm_p", "NormBackward1", norm_forward, norm_vjp, norm_shape, (Save("self", "in", 0), Save("result", "out", 0)),
       "as linalg_vector_norm's: 2-norm g * (a / out), 0 where out = 0; p-norm: norm_backward", kink=norm_kink,
       kink_doc="0 at the zero vector; order < 1: 0 at zero elements; inf: ties split evenly",
       math=Math(_norm_formula), integers="refused",
       checks=(Check(((2, 3),), (Fraction(2), (1,), False)), Check(((2, 3),), (Fraction(1), (1,), True)),
               Check(((2, 3),), (Fraction(3), (0,), False)), Check(((2, 3),), ("inf", (1,), False)))),
)
