"""The backward kernels a create_graph backward records for 2-D average and max pooling
(adjoint.engine.second_nn calls them; avg_pool1d / max_pool1d run them on an unsqueezed input), with
their own derivatives, as torch 2.13 records them:

* ``avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
  divisor_override)``: ``AvgPool2DBackwardBackward0``, edges to grad_output and self, saves no tensor;
  its derivative: grad_output ``avg_pool2d(grad, ...)``, self ``zeros_like(self)``;
* ``max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation,
  ceil_mode, indices)``: ``MaxPool2DWithIndicesBackwardBackward0``, edges to grad_output and self (the
  indices have none), saves ``indices``; its derivative: grad_output ``max_pool_double_backward(grad,
  indices, 2)`` (the gradient read back at each window's index), self ``zeros_like(self)``.
"""

from __future__ import annotations

import numpy as np

from adjoint.values.mathtree import Fn, generic_vjp, layer
from adjoint.engine.ops.pool import PoolSpec, _pool_sub, avg_pool_forward, avg_pool_vjp
from adjoint.engine.ops.record import Check, Math, Op, Save


def _self_shape(shapes, p, loc):
    return tuple(shapes[1])


def avg_pool_backward_forward(B, ins, p: PoolSpec):
    go, x = ins
    return avg_pool_vjp(B, [go], [x], None, p, [True])[0]


def avg_pool_backward_vjp(B, gs, ins, outs, p: PoolSpec, need):
    go, x = ins
    return [avg_pool_forward(B, [gs[0]], p) if need[0] else None,
            B.zeros(tuple(B.shape(x))) if len(need) > 1 and need[1] else None]


def _flat(B, go, x, indices):
    """The rows (batch and channel planes) of the output and the spatial size of the input."""
    shape = tuple(B.shape(x))
    rank = 2
    idx = B.as_indices(indices)
    per = int(np.prod(idx.shape[-rank:])) if idx.size else 0
    rows = idx.size // per if per else 0
    return shape, rank, idx.reshape(rows, per) if per else idx, rows, per


def max_pool_backward_forward(B, ins, p: PoolSpec):
    """max_pool2d_with_indices_backward: grad_output added at each window's index."""
    go, x, indices = ins
    shape, rank, flat_idx, rows, per = _flat(B, go, x, indices)
    if rows == 0:
        return B.zeros(shape)
    spatial = int(np.prod(shape[-rank:]))
    grad = B.place_add((rows, spatial), (np.arange(rows)[:, None], flat_idx), B.reshape(go, (rows, per)))
    return B.reshape(grad, shape)


def max_pool_backward_vjp(B, gs, ins, outs, p: PoolSpec, need):
    """max_pool_double_backward(grad, indices, 2): the incoming gradient read at each window's index;
    self: zeros_like(self)."""
    go, x, indices = ins
    d_go = None
    if need[0]:
        shape, rank, flat_idx, rows, per = _flat(B, go, x, indices)
        if rows == 0:
            d_go = B.zeros(tuple(B.shape(go)))
        else:
            spatial = int(np.prod(shape[-rank:]))
            picked = B.index(B.reshape(gs[0], (rows, spatial)), (np.arange(rows)[:, None], flat_idx))
            d_go = B.reshape(picked, tuple(B.shape(go)))
    return [d_go, B.zeros(tuple(B.shape(x))) if len(need) > 1 and need[1] else None, None]


AVGPOOL_BACKWARD = Fn("avg_pool2d_backward", "\\operatorname{avgpool}'_{#s}\\left(#*\\right)", generic_vjp)
MAXPOOL_BACKWARD = Fn("max_pool2d_backward", "\\operatorname{maxpool}'_{#s}\\left(#*\\right)", generic_vjp)

OPS = (
    Op("avg_pool2d_backward", "AvgPool2DBackwardBackward0", avg_pool_backward_forward, avg_pool_backward_vjp,
       _self_shape, (), "g / divisor spread over each window; avg_pool2d(grad), zeros_like(self)", grows=False,
       math=Math(layer((AVGPOOL_BACKWARD,), _pool_sub)),
       checks=(Check(((1, 4, 4), (1, 3, 3)), PoolSpec((2, 2), (1, 1), (1, 1), count_include_pad=False)),
               Check(((1, 1, 2, 2), (1, 1, 3, 3)), PoolSpec((2, 2), (2, 2), (0, 0), ceil_mode=True, divisor_override=3))),
       integers="refused"),
    Op("max_pool2d_with_indices_backward", "MaxPool2DWithIndicesBackwardBackward0", max_pool_backward_forward,
       max_pool_backward_vjp, _self_shape, (Save("indices", "in", 2),),
       "g added at each window's index; the gradient read at each index, zeros_like(self)", negzero="structural",
       grows=False, differentiable=(True, True, False), math=Math(layer((MAXPOOL_BACKWARD,), _pool_sub)),
       checks=(Check(((1, 1, 1, 2), (1, 1, 2, 3), (1, 1, 1, 2)), PoolSpec((2, 2), (1, 1), (0, 0)),
                     given=((2, (3, 5)),)),),
       integers="refused"),
)
