"""``at::_safe_softmax`` (``SafeSoftmaxBackward0``): softmax along ``dim``, except that a row whose
every element is ``-inf`` gives 0 instead of nan (``where(all(self == -inf, dim), 0, softmax)``,
one node: derivatives.yaml's ``_softmax_backward_data(grad, result, dim, ...)``, saving
``result``). The math path of ``F.scaled_dot_product_attention`` applies it to its scores.
"""

from __future__ import annotations

from adjoint.values.mathtree import Fn, TFn, dims_text, generic_vjp
from adjoint.engine.ops.activations import finite_max, softmax_vjp
from adjoint.engine.ops.arith import same_shape
from adjoint.engine.ops.record import Check, Math, Op, Save


def safe_softmax_forward(B, ins, dim):
    """exp(x - max) / sum(exp(x - max)) along ``dim``, as the kernel shifts (the same exact value;
    in float64 an unshifted exp of a score above about 709 would overflow where PyTorch's does
    not); a row of only ``-inf`` is not shifted, sums to 0 and is divided by 1: its exps are all 0."""
    x = ins[0]
    e = B.exp(x if B.is_symbolic(x) else B.sub(x, finite_max(B, x, dim)))
    total = B.sum_dims(e, (dim,), True)
    total = B.choose(total, "==", B.full(B.shape(total), 1), total)
    return B.div(e, total)


SAFE_SOFTMAX = Fn("safe_softmax", "\\operatorname{softmax}_{#s}\\left(#0\\right)", generic_vjp)

OPS = (
    Op("safe_softmax", "SafeSoftmaxBackward0", safe_softmax_forward, softmax_vjp, same_shape,
       (Save("result", "out", 0),), "out * (g - sum(g * out, dim)); a row of only -inf: out = 0, so 0",
       grows=False, math=Math(lambda a, p, shape, k: TFn(SAFE_SOFTMAX, (a[0],), tuple(shape), dims_text((p,)), p)),
       checks=(Check(((2, 3),), 1), Check(((2, 2),), 0)), integers="refused"),
)
