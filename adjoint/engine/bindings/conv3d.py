"""``conv3d`` and the 3-D pools, as PyTorch 2.13 runs them on the CPU.

* ``conv3d``: one ``ConvolutionBackward0`` as ``conv1d`` / ``conv2d`` (an unbatched 4-D input:
  ``UnsqueezeBackward0`` first, ``SqueezeBackward1`` last; ``padding="same"`` with uneven sides:
  ``ConstantPadNdBackward0`` first);
* ``max_pool3d``: ``MaxPool3DWithIndicesBackward0`` (``return_indices=True`` also returns the
  int64 indices, without a gradient); ``avg_pool3d``: ``AvgPool3DBackward0``;
  ``adaptive_avg_pool3d``: ``AdaptiveAvgPool3DBackward0``, except an output of 1 x 1 x 1, which
  ATen computes as ``mean(dim=(-1, -2, -3), keepdim=True)`` (``MeanBackward1``). An unbatched
  (4-D) input goes to the kernels as it is: no unsqueeze; ``adaptive_max_pool3d``:
  ``AdaptiveMaxPool3DBackward0`` (``return_indices=True`` also returns the int64 indices).

The implementations are :mod:`adjoint.engine.bindings.conv`'s, with the spatial rank 3; the
entries here are the names.
"""

from __future__ import annotations

from adjoint.engine.bindings.conv import (_conv_params, _lower_adaptive_avg_pool, _lower_adaptive_max_pool,
                                          _lower_avg_pool, _lower_conv, _lower_max_pool)
from adjoint.engine.bindings.signature import Function, Param

_IN = Param("input", "tensor")

FUNCTIONS = (
    Function("conv3d", _conv_params(), _lower_conv(3), where="function",
             doc="ConvolutionBackward0 (unbatched: UnsqueezeBackward0 first, SqueezeBackward1 last; "
                 "padding='same' with uneven sides: ConstantPadNdBackward0 first)"),
    Function("max_pool3d", (_IN, Param("kernel_size", "ints"), Param("stride", "ints", None),
                            Param("padding", "ints", (0,)), Param("dilation", "ints", (1,)),
                            Param("ceil_mode", "bool", False), Param("return_indices", "bool", False)),
             _lower_max_pool(3), where="function",
             doc="MaxPool3DWithIndicesBackward0 (return_indices=True: also the int64 indices)"),
    Function("avg_pool3d", (_IN, Param("kernel_size", "ints"), Param("stride", "ints", None),
                            Param("padding", "ints", (0,)), Param("ceil_mode", "bool", False),
                            Param("count_include_pad", "bool", True), Param("divisor_override", "int", None)),
             _lower_avg_pool(3), where="function", doc="AvgPool3DBackward0"),
    Function("adaptive_avg_pool3d", (_IN, Param("output_size", "any")), _lower_adaptive_avg_pool(3),
             where="function", doc="AdaptiveAvgPool3DBackward0; output 1 x 1 x 1: MeanBackward1 (mean over D, H, W)"),
    Function("adaptive_max_pool3d", (_IN, Param("output_size", "any"), Param("return_indices", "bool", False)),
             _lower_adaptive_max_pool(3), where="function",
             doc="AdaptiveMaxPool3DBackward0 (saves self, indices; return_indices=True: also the int64 indices)"),
)
