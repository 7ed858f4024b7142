"""``F.interpolate(input, size=None, scale_factor=None, mode='nearest', align_corners=None,
recompute_scale_factor=None, antialias=False)`` as torch/nn/functional.py runs it: its Python
checks first (ValueError / NotImplementedError, before any node, with its messages), then one
kernel: ``upsample_nearest1d`` / ``2d`` for ``mode='nearest'`` on a 3-D / 4-D input,
``upsample_linear1d`` for ``'linear'`` (3-D), ``upsample_bilinear2d`` for ``'bilinear'`` (4-D)
(:mod:`adjoint.engine.ops.upsample`). A given ``scale_factor`` is handed to the kernel (the
output size ``int(in * s)``); ``recompute_scale_factor=True`` hands it the size alone.

Refused (one line): the other modes' kernels (``nearest-exact``, ``area``, ``bicubic``,
``trilinear``, 5-D nearest, ``antialias=True``).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.return_types import TorchSize
from adjoint.engine.ops.upsample import UpsampleSpec
from adjoint.engine.torch_errors import TorchError
from adjoint.engine.bindings.signature import Function, Param

_MODES = "nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact"
#: the modes PyTorch's interpolate knows whose kernels adjoint does not model
_UNMODELLED = ("nearest-exact", "area", "bicubic", "trilinear", "lanczos")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) or (isinstance(v, Fraction) and v.denominator == 1)


def interpolate(rt, x: Tensor, size, scale_factor, mode: str, align_corners, recompute, antialias: bool, loc: Loc):
    """F.interpolate: its checks, in its order, then the kernel."""
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise TorchError("ValueError", "align_corners option can only be set with the interpolating modes: "
                                           "linear | bilinear | bicubic | trilinear", "forward")
    elif align_corners is None:
        align_corners = False
    dim = len(x.shape) - 2
    if size is not None and scale_factor is not None:
        raise TorchError("ValueError", "only one of size or scale_factor should be defined", "forward")
    if size is not None:
        scales = (None,) * max(dim, 0)
        if isinstance(size, (tuple, list)):
            if len(size) != dim and not isinstance(size, TorchSize):   # a list and a tuple print apart
                raise ProblemError(loc, f"F.interpolate with {len(size)} sizes for {dim} spatial dimensions: PyTorch's "
                                        "ValueError prints the sizes as a list or a tuple, which adjoint does not keep "
                                        "apart (not modelled); give one size per spatial dimension")
            if len(size) != dim:
                raise TorchError("ValueError", "Input and output must have the same number of spatial dimensions, but "
                                               f"got input with spatial dimensions of {list(x.shape[2:])} and output "
                                               f"size of torch.Size([{', '.join(str(int(n)) for n in size)}]). Please "
                                               "provide input tensor in (N, C, d1, d2, ...,dK) format and output size "
                                               "in (o1, o2, ...,oK) format.", "forward")
            if not all(_is_int(s) for s in size):
                raise ProblemError(loc, "F.interpolate with a size that is not ints: PyTorch's TypeError names the "
                                        "Python types, not modelled; give ints")
            output_size = tuple(int(s) for s in size)
        else:
            if not _is_int(size):
                raise ProblemError(loc, "F.interpolate with a size that is not an int is not modelled; give an int")
            output_size = (int(size),) * max(dim, 0)
    elif scale_factor is not None:
        if isinstance(scale_factor, (tuple, list)):
            if len(scale_factor) != dim:   # its message prints each factor as the call wrote it (2 or 2.0)
                raise ProblemError(loc, f"F.interpolate with {len(scale_factor)} scale factors for {dim} spatial "
                                        "dimensions: PyTorch's ValueError prints the factors as Python wrote them "
                                        "(int or float), not modelled; give one per spatial dimension")
            factors = tuple(scale_factor)
        else:
            factors = (scale_factor,) * max(dim, 0)
        if not all(isinstance(s, Fraction) and not isinstance(s, bool) for s in factors):
            raise ProblemError(loc, "F.interpolate with a scale_factor that is not a number is not modelled")
        scales = tuple(float(s) for s in factors)   # the doubles PyTorch is handed
        output_size = None
    else:
        raise TorchError("ValueError", "either size or scale_factor should be defined", "forward")
    if recompute and size is not None:
        raise TorchError("ValueError", "recompute_scale_factor is not meaningful with an explicit size.", "forward")
    if mode in _UNMODELLED:
        raise ProblemError(loc, f"F.interpolate with mode={mode!r} is not modelled yet (its kernel); use 'nearest', "
                                "'linear' or 'bilinear'")
    if output_size is None:   # int(in * s): Python's int * float in recompute, the C++ double product otherwise
        output_size = tuple(int(n * s) for n, s in zip(x.shape[2:], scales))
        if recompute:
            scales = (None,) * dim
    if antialias and not (mode in ("bilinear", "bicubic", "lanczos") and len(x.shape) == 4):
        raise TorchError("ValueError", "Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and "
                                       "requires a 4-D tensor as input", "forward")
    nd = len(x.shape)
    single = x.dtype != "float64"
    if mode == "nearest" and nd in (3, 4):
        return rt.apply(f"upsample_nearest{nd - 2}d", [x], UpsampleSpec(output_size, scales), loc)
    if mode == "nearest" and nd == 5:
        raise ProblemError(loc, "F.interpolate of a 5-D input (upsample_nearest3d) is not modelled yet; use a 3-D or "
                                "4-D input")
    if (mode, nd) in (("linear", 3), ("bilinear", 4)):
        if antialias:
            raise ProblemError(loc, "F.interpolate with antialias=True (_upsample_bilinear2d_aa) is not modelled yet")
        op = "upsample_linear1d" if nd == 3 else "upsample_bilinear2d"
        return rt.apply(op, [x], UpsampleSpec(output_size, scales, bool(align_corners), single), loc)
    needs = {"linear": 3, "bilinear": 4, "trilinear": 5}
    if mode in needs and nd in (3, 4, 5):
        raise TorchError("NotImplementedError", f"Got {nd}D input, but {mode} mode needs {needs[mode]}D input",
                         "forward")
    raise TorchError("NotImplementedError", f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {nd}D) for "
                                            f"the modes: {_MODES} (got {mode})", "forward")


def lower_interpolate(rt, a, loc):
    return interpolate(rt, a["input"], a["size"], a["scale_factor"], a["mode"], a["align_corners"],
                       a["recompute_scale_factor"], a["antialias"], loc)


FUNCTIONS = (
    Function("interpolate", (Param("input", "tensor"), Param("size", "any", None), Param("scale_factor", "any", None),
                             Param("mode", "str", "nearest"), Param("align_corners", "any", None),
                             Param("recompute_scale_factor", "any", None), Param("antialias", "bool", False)),
             lower_interpolate, where="function",
             doc="UpsampleNearest1DBackward0 / UpsampleNearest2DBackward0 ('nearest'), UpsampleLinear1DBackward0 "
                 "('linear'), UpsampleBilinear2DBackward0 ('bilinear')"),
)
