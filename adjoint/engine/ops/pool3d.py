"""3-D pooling: ``max_pool3d_with_indices`` (``MaxPool3DWithIndicesBackward0``), ``avg_pool3d``
(``AvgPool3DBackward0``), ``_adaptive_avg_pool3d`` (``AdaptiveAvgPool3DBackward0``),
``adaptive_max_pool3d`` (``AdaptiveMaxPool3DBackward0``: each adaptive window reduced like a
max-pool window, as ATen's ``cpu_adaptive_max_pool``; saves ``self``, ``result1``): the registry
entries of :mod:`adjoint.engine.ops.pool`'s pools over (D, H, W) volumes (ATen's
``max_pool3d_kernel``, ``avg_pool3d`` and ``adaptive_avg_pool3d`` CPU kernels): a max-pool window
skips the padding, its index is the flat position ``(d * H + h) * W + w`` in the input volume, the
first maximum in scan order (d, then h, then w) wins ties, a NaN wins; average pooling divides by
``divisor_override``, else by the window clipped to the padded input (``count_include_pad``) or
to the input itself; the adaptive windows are ``[floor(o * I / O), ceil((o + 1) * I / O))`` per
dimension. Each node saves ``self`` (and the max pool its indices, ``result1``), as in 2-D.
"""

from __future__ import annotations

from adjoint.values.mathtree import Fn, generic_vjp, layer, no_gradient
from adjoint.engine.ops.pool import (PoolSpec, _pool_sub, _sizes, adaptive_forward, adaptive_max_forward,
                                     adaptive_max_kink, adaptive_max_shape, adaptive_shape, adaptive_vjp,
                                     avg_pool_forward, avg_pool_shape, avg_pool_vjp, max_pool_forward, max_pool_kink,
                                     max_pool_shape, max_pool_vjp)
from adjoint.engine.ops.pool import avg_pool_refused, max_pool_refused, refused_error
from adjoint.engine.ops.pool import emptied_backward_error
from adjoint.engine.ops.record import Check, Math, Op, Save

# ----------------------------------------------------------------------------- how they read (adjoint.mathtree)

MAXPOOL3D = Fn("max_pool3d", "\\operatorname{maxpool}_{#s}\\left(#0\\right)", generic_vjp)
ARGMAX3D = Fn("max_pool3d_indices", "\\operatorname{argmaxpool}_{#s}\\left(#0\\right)", no_gradient)
AVGPOOL3D = Fn("avg_pool3d", "\\operatorname{avgpool}_{#s}\\left(#0\\right)", generic_vjp)
ADAPTIVE3D = Fn("adaptive_avg_pool3d", "\\operatorname{adaptiveavgpool}_{#s}\\left(#0\\right)", generic_vjp)


OPS = (
    Op("max_pool3d_with_indices", "MaxPool3DWithIndicesBackward0", max_pool_forward, max_pool_vjp,
       max_pool_shape, (Save("self", "in", 0), Save("result1", "out", 1)),
       "g added at each window's index (the first maximum, d/h/w order)", negzero="structural", grows=False,
       outputs=2, diff_outputs=1, out_dtypes=(None, "int64"), kink=max_pool_kink,
       kink_doc="ties in a window: the first maximum (d, h, w order) gets the gradient", value_error=max_pool_refused,
       checks=(Check(((1, 2, 3, 2),), PoolSpec((1, 2, 2), (1, 1, 1), (0, 0, 0), (1, 1, 1)), differences=True),
               Check(((1, 1, 3, 1, 2),), PoolSpec((2, 1, 2), (2, 1, 1), (1, 0, 1), (1, 1, 1), ceil_mode=True),
                     differences=True)),
       math=Math(layer((MAXPOOL3D, ARGMAX3D), _pool_sub)), integers="alone"),
    Op("avg_pool3d", "AvgPool3DBackward0", avg_pool_forward, avg_pool_vjp, avg_pool_shape,
       (Save("self", "in", 0),), "g / divisor spread over each window", grows=False, value_error=avg_pool_refused,
       checks=(Check(((1, 2, 3, 3),), PoolSpec((2, 2, 2), (1, 1, 1), (1, 1, 1), (1, 1, 1), count_include_pad=False)),
               Check(((1, 1, 3, 3, 2),), PoolSpec((2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), ceil_mode=True,
                                                  divisor_override=3))),
       math=Math(layer((AVGPOOL3D,), _pool_sub)), integers="refused"),
    Op("adaptive_avg_pool3d", "AdaptiveAvgPool3DBackward0", adaptive_forward, adaptive_vjp, adaptive_shape,
       (Save("self", "in", 0),), "g / window size spread over each (overlapping) window", grows=False,
       math=Math(layer((ADAPTIVE3D,), lambda out: _sizes(tuple(out)))), checks=(Check(((1, 3, 2, 5),), (2, 1, 3)),),
       value_error=refused_error, backward_error=emptied_backward_error, integers="refused"),
)


ADAPTIVE_MAX3D = Fn("adaptive_max_pool3d", "\\operatorname{adaptivemaxpool}_{#s}\\left(#0\\right)", generic_vjp)
ADAPTIVE_ARGMAX3D = Fn("adaptive_max_pool3d_indices", "\\operatorname{argadaptivemaxpool}_{#s}\\left(#0\\right)",
                       no_gradient)

OPS = OPS + (
    Op("adaptive_max_pool3d", "AdaptiveMaxPool3DBackward0", adaptive_max_forward, max_pool_vjp, adaptive_max_shape,
       (Save("self", "in", 0), Save("result1", "out", 1)),
       "g added at each adaptive window's index (the first maximum, d/h/w order)", negzero="structural", grows=False,
       outputs=2, diff_outputs=1, out_dtypes=(None, "int64"), kink=adaptive_max_kink,
       kink_doc="ties in a window: the first maximum (d, h, w order) gets the gradient", value_error=refused_error,
       backward_error=emptied_backward_error,
       checks=(Check(((1, 3, 1, 2),), (2, 1, 1), differences=True), Check(((1, 1, 3, 2, 1),), (2, 2, 1),
                                                                           differences=True)),
       math=Math(layer((ADAPTIVE_MAX3D, ADAPTIVE_ARGMAX3D), lambda out: _sizes(tuple(out)))), integers="refused"),
)
