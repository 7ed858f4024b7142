"""``conv3d`` and the 3-D pools, as PyTorch 2.13 runs them on the CPU.

* ``conv3d``: one ``ConvolutionBackward0`` as ``conv1d`` / ``conv2d`` (an unbatched 4-D input:
  ``UnsqueezeBackward0`` first, ``SqueezeBackward1`` last; ``padding="same"`` with uneven sides:
  ``ConstantPadNdBackward0`` first);
* ``max_pool3d``: ``MaxPool3DWithIndicesBackward0`` (``return_indices=True`` also returns the
  int64 indices, without a gradient); ``avg_pool3d``: ``AvgPool3DBackward0``;
  ``adaptive_avg_pool3d``: ``AdaptiveAvgPool3DBackward0``, except an output of 1 x 1 x 1, which
  ATen computes as ``mean(dim=(-1, -2, -3), keepdim=True)`` (``MeanBackward1``). An unbatched
  (4-D) input goes to the kernels as it is: no unsqueeze.
"""

from __future__ import annotations

from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.ops.attention import mean_dims
from adjoint.engine.ops.pool import PoolSpec
from adjoint.engine.bindings.conv import _ints_or_str, _output_size, _refuse_symbolic, convolution, expand_arg
from adjoint.engine.bindings.signature import Function, Param


def _lower_conv3d(rt, a: dict, loc: Loc):
    padding = _ints_or_str(a["padding"], loc, "conv3d")
    return convolution(rt, a["input"], a["weight"], a["bias"], a["stride"], padding, a["dilation"], a["groups"], 3,
                       loc)


def pool3d_spec(kernel, stride, padding, loc: Loc, what: str, **extra) -> PoolSpec:
    """F.max_pool3d / F.avg_pool3d arguments: ``stride=None`` (or ``[]``) is the kernel size."""
    k = expand_arg(kernel, 3, "kernel_size", what, loc, 1)
    empty = stride is None or (isinstance(stride, (tuple, list)) and not stride)
    s = k if empty else expand_arg(stride, 3, "stride", what, loc, 1)
    p = expand_arg(padding, 3, "padding", what, loc, 0)
    extra.setdefault("dilation", (1, 1, 1))
    return PoolSpec(k, s, p, **extra)


def max_pool3d(rt, x: Tensor, kernel, stride, padding, dilation, ceil_mode: bool, return_indices: bool, loc: Loc):
    spec = pool3d_spec(kernel, stride, padding, loc, "max_pool3d",
                       dilation=expand_arg(dilation, 3, "dilation", "max_pool3d", loc, 1), ceil_mode=ceil_mode)
    _refuse_symbolic(rt, x, loc, "max_pool3d")
    out, indices = rt.apply("max_pool3d_with_indices", [x], spec, loc)
    return (out, indices) if return_indices else out


def _lower_max_pool3d(rt, a: dict, loc: Loc):
    return max_pool3d(rt, a["input"], a["kernel_size"], a["stride"], a["padding"], a["dilation"], a["ceil_mode"],
                      a["return_indices"], loc)


def avg_pool3d(rt, x: Tensor, kernel, stride, padding, ceil_mode: bool, count_include_pad: bool, divisor_override,
               loc: Loc):
    if divisor_override is not None and divisor_override == 0:
        raise ProblemError(loc, "divisor must be not zero (PyTorch raises this)")
    spec = pool3d_spec(kernel, stride, padding, loc, "avg_pool3d", ceil_mode=ceil_mode,
                       count_include_pad=count_include_pad, divisor_override=divisor_override)
    return rt.apply("avg_pool3d", [x], spec, loc)


def _lower_avg_pool3d(rt, a: dict, loc: Loc):
    return avg_pool3d(rt, a["input"], a["kernel_size"], a["stride"], a["padding"], a["ceil_mode"],
                      a["count_include_pad"], a["divisor_override"], loc)


def adaptive_avg_pool3d(rt, x: Tensor, output_size, loc: Loc):
    """F.adaptive_avg_pool3d; ``None`` in output_size keeps that input size."""
    if len(x.shape) not in (4, 5):
        raise ProblemError(loc, f"adaptive_avg_pool3d(): Expected 4D or 5D tensor, but got {list(x.shape)} "
                                "(PyTorch raises this)")
    sizes = (output_size,) * 3 if output_size is None or isinstance(output_size, int) else tuple(output_size)
    if len(sizes) != 3:
        raise ProblemError(loc, f"adaptive_avg_pool3d: output_size must be 3, got {len(sizes)} entries "
                                "(PyTorch raises this)")
    out = tuple(x.shape[-3 + i] if s is None else int(s) for i, s in enumerate(sizes))
    if any(s < 0 for s in out):
        raise ProblemError(loc, f"adaptive_avg_pool3d: elements of output_size must be greater than or equal to 0 but "
                                f"received {list(out)} (PyTorch raises this)")
    if out == (1, 1, 1):
        return rt.apply("mean_dim", [x], mean_dims(len(x.shape), (-1, -2, -3), True, loc), loc)
    return rt.apply("adaptive_avg_pool3d", [x], out, loc)


def _lower_adaptive_avg_pool3d(rt, a: dict, loc: Loc):
    return adaptive_avg_pool3d(rt, a["input"], _output_size(a["output_size"], loc), loc)


_IN = Param("input", "tensor")

FUNCTIONS = (
    Function("conv3d", (_IN, Param("weight", "tensor"), Param("bias", "tensor", None), Param("stride", "ints", (1,)),
                        Param("padding", "any", (0,)), Param("dilation", "ints", (1,)), Param("groups", "int", 1)),
             _lower_conv3d, where="function",
             doc="ConvolutionBackward0 (unbatched: UnsqueezeBackward0 first, SqueezeBackward1 last; "
                 "padding='same' with uneven sides: ConstantPadNdBackward0 first)"),
    Function("max_pool3d", (_IN, Param("kernel_size", "ints"), Param("stride", "ints", None),
                            Param("padding", "ints", (0,)), Param("dilation", "ints", (1,)),
                            Param("ceil_mode", "bool", False), Param("return_indices", "bool", False)),
             _lower_max_pool3d, where="function",
             doc="MaxPool3DWithIndicesBackward0 (return_indices=True: also the int64 indices)"),
    Function("avg_pool3d", (_IN, Param("kernel_size", "ints"), Param("stride", "ints", None),
                            Param("padding", "ints", (0,)), Param("ceil_mode", "bool", False),
                            Param("count_include_pad", "bool", True), Param("divisor_override", "int", None)),
             _lower_avg_pool3d, where="function", doc="AvgPool3DBackward0"),
    Function("adaptive_avg_pool3d", (_IN, Param("output_size", "any")), _lower_adaptive_avg_pool3d,
             where="function", doc="AdaptiveAvgPool3DBackward0; output 1 x 1 x 1: MeanBackward1 (mean over D, H, W)"),
)
