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
from adjoint.engine.ops.pool import (PoolSpec, _pool_sub, _rank, _sizes, adaptive_forward, adaptive_vjp,
                                     avg_pool_forward, avg_pool_vjp)
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


def _flat(B, go, x, indices, p):
    """The rows (batch and channel planes) of the output and the spatial size of the input (``p``: a
    PoolSpec, or an adaptive max pool's output size: its rank)."""
    shape = tuple(B.shape(x))
    rank = _rank(p)
    idx = B.as_indices(indices)
    per = int(np.prod(idx.shape[-rank:])) if idx.size else 0
    rows = idx.size // per if per else 0
    return shape, rank, idx.reshape(rows, per) if per else idx, rows, per


def max_pool_backward_forward(B, ins, p: PoolSpec):
    """max_pool2d_with_indices_backward: grad_output added at each window's index."""
    go, x, indices = ins
    shape, rank, flat_idx, rows, per = _flat(B, go, x, indices, p)
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
        shape, rank, flat_idx, rows, per = _flat(B, go, x, indices, p)
        if rows == 0:
            d_go = B.zeros(tuple(B.shape(go)))
        else:
            spatial = int(np.prod(shape[-rank:]))
            picked = B.index(B.reshape(gs[0], (rows, spatial)), (np.arange(rows)[:, None], flat_idx))
            d_go = B.reshape(picked, tuple(B.shape(go)))
    return [d_go, B.zeros(tuple(B.shape(x))) if len(need) > 1 and need[1] else None, None]


def adaptive_avg_backward_forward(B, ins, out_sizes):
    """_adaptive_avg_pool{2,3}d_backward: the gradient spread over each adaptive window."""
    go, x = ins
    return adaptive_vjp(B, [go], [x], None, out_sizes, [True])[0]


def adaptive_avg_backward_vjp(B, gs, ins, outs, out_sizes, need):
    """grad_output: _adaptive_avg_pool{2,3}d(grad, grad_output's spatial sizes); self: zeros_like(self)."""
    go, x = ins
    return [adaptive_forward(B, [gs[0]], out_sizes) if need[0] else None,
            B.zeros(tuple(B.shape(x))) if len(need) > 1 and need[1] else None]


AVGPOOL_BACKWARD = Fn("avg_pool2d_backward", "\\operatorname{avgpool}'_{#s}\\left(#*\\right)", generic_vjp)
MAXPOOL_BACKWARD = Fn("max_pool2d_backward", "\\operatorname{maxpool}'_{#s}\\left(#*\\right)", generic_vjp)

AVGPOOL3D_BACKWARD = Fn("avg_pool3d_backward", "\\operatorname{avgpool}'_{#s}\\left(#*\\right)", generic_vjp)
MAXPOOL3D_BACKWARD = Fn("max_pool3d_backward", "\\operatorname{maxpool}'_{#s}\\left(#*\\right)", generic_vjp)
ADAPTIVE_MAX_BACKWARD = tuple(
    Fn(f"adaptive_max_pool{r}d_backward", "\\operatorname{adaptivemaxpool}'_{#s}\\left(#*\\right)", generic_vjp)
    for r in (2, 3))
ADAPTIVE_AVG_BACKWARD = tuple(
    Fn(f"adaptive_avg_pool{r}d_backward", "\\operatorname{adaptiveavgpool}'_{#s}\\left(#*\\right)", generic_vjp)
    for r in (2, 3))
_MAX_TEXT = "g added at each window's index; the gradient read at each index, zeros_like(self)"
_ADAPTIVE_AVG_TEXT = "g spread over each adaptive window; _adaptive_avg_pool(grad), zeros_like(self)"


def _sizes_sub(out):
    return _sizes(tuple(out))


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
    # the 3-D pools and the adaptive ones (torch 2.13's derivatives.yaml: max_pool_double_backward(grad, indices,
    # dim) for the max pools' grad_output, avg_pool3d / _adaptive_avg_pool{2,3}d for the average ones, zeros_like(self))
    Op("avg_pool3d_backward", "AvgPool3DBackwardBackward0", avg_pool_backward_forward, avg_pool_backward_vjp,
       _self_shape, (), "g / divisor spread over each window; avg_pool3d(grad), zeros_like(self)", grows=False,
       math=Math(layer((AVGPOOL3D_BACKWARD,), _pool_sub)),
       checks=(Check(((1, 1, 1, 2), (1, 1, 2, 3)), PoolSpec((1, 2, 2), (1, 1, 1), (0, 0, 0), (1, 1, 1))),
               Check(((1, 1, 3, 4, 4), (1, 1, 2, 3, 3)), PoolSpec((2, 2, 2), (1, 1, 1), (1, 1, 1), (1, 1, 1),
                                                                 count_include_pad=False))),
       integers="refused"),
    Op("max_pool3d_with_indices_backward", "MaxPool3DWithIndicesBackwardBackward0", max_pool_backward_forward,
       max_pool_backward_vjp, _self_shape, (Save("indices", "in", 2),), _MAX_TEXT, negzero="structural",
       grows=False, differentiable=(True, True, False), math=Math(layer((MAXPOOL3D_BACKWARD,), _pool_sub)),
       checks=(Check(((1, 1, 1, 1, 2), (1, 1, 1, 2, 3), (1, 1, 1, 1, 2)),
                     PoolSpec((1, 2, 2), (1, 1, 1), (0, 0, 0), (1, 1, 1)), given=((2, (3, 5)),)),),
       integers="refused"),
    *(Op(f"adaptive_max_pool{r}d_backward", f"AdaptiveMaxPool{r}DBackwardBackward0", max_pool_backward_forward,
         max_pool_backward_vjp, _self_shape, (Save("indices", "in", 2),), _MAX_TEXT, negzero="structural",
         grows=False, differentiable=(True, True, False), math=Math(layer((fn,), _sizes_sub)),
         checks=(Check(((1,) * (r - 1) + (1, 2), (1,) * (r - 1) + (3, 3), (1,) * (r - 1) + (1, 2)), (1,) * (r - 1) + (2,),
                       given=((2, (3, 5)),)),),
         integers="refused") for r, fn in zip((2, 3), ADAPTIVE_MAX_BACKWARD)),
    *(Op(f"adaptive_avg_pool{r}d_backward", f"AdaptiveAvgPool{r}DBackwardBackward0", adaptive_avg_backward_forward,
         adaptive_avg_backward_vjp, _self_shape, (), _ADAPTIVE_AVG_TEXT, grows=False,
         math=Math(layer((fn,), _sizes_sub)),
         checks=(Check(((1,) * (r - 1) + (2, 2), (1,) * (r - 1) + (3, 5)), (1,) * (r - 2) + (2, 2)),),
         integers="refused") for r, fn in zip((2, 3), ADAPTIVE_AVG_BACKWARD)),
)
