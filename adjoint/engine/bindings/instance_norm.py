"""``F.instance_norm`` as PyTorch 2.13 runs it on the CPU: no node of its own.

``F.instance_norm`` checks the spatial size when it normalizes with the input's statistics
(``_verify_spatial_size``: ValueError "Expected more than 1 spatial element when training, got
input size torch.Size([...])", whatever the mode the caller is in), then ATen's composite
``at::instance_norm`` (Normalization.cpp):

* the running statistics must both be given when ``use_input_stats`` is False (RuntimeError);
* ``b, c = input.size(0), input.size(1)`` (a 0-d or 1-d input: the IndexError of that dim);
* ``weight``, ``bias``, ``running_mean``, ``running_var`` each ``repeat(b)``, in that order
  (``RepeatBackward0`` for a weight or bias that requires grad);
* ``input.contiguous()`` (``CloneBackward0`` when it is not) ``.view(1, b * c, *spatial)``
  (``ViewBackward0``);
* ``at::batch_norm`` of that with the repeated tensors (``NativeBatchNormBackward0``, its checks:
  the element counts are ``b * c``), training mode being ``use_input_stats``: the kernel updates
  the repeated running statistics, not the caller's;
* with ``use_input_stats`` and running statistics, each of the caller's takes the mean over the
  batch of its updated repeats (``running_mean_.view(b, c).mean(0)``) by ``copy_``: one version
  bump each (in eval mode none: probed on 2.13);
* ``out.view(input.sizes())`` (``ViewBackward0``): the output's grad_fn.

An input of no elements goes through ``at::batch_norm``'s clone (``weight_[0]`` of an empty
repeat is select's IndexError); with a batch of 0 and running statistics the mean over the batch
is NaN, which is refused.
"""

from __future__ import annotations

import math
from fractions import Fraction

from adjoint.engine.bindings.norm import aten_batch_norm
from adjoint.engine.bindings.rearrange import lower_repeat
from adjoint.engine.bindings.signature import Function, Param
from adjoint.engine.graph import Tensor
from adjoint.engine.inplace import apply_inplace
from adjoint.engine.torch_errors import TorchError
from adjoint.format.errors import Loc, ProblemError
from adjoint.values.strides import is_contiguous


def verify_spatial_size(shape) -> None:
    """F._verify_spatial_size: more than one element per instance and channel (dims from 2 on)."""
    if math.prod(shape[2:]) == 1:
        raise TorchError("ValueError", f"Expected more than 1 spatial element when training, got input size "
                                       f"torch.Size({list(shape)})")


def instance_norm(rt, x: Tensor, running_mean, running_var, weight, bias, use_input_stats: bool, momentum, eps,
                  loc: Loc):
    """F.instance_norm; ``momentum`` an exact number."""
    if use_input_stats:
        verify_spatial_size(x.shape)
    if not use_input_stats and (running_mean is None or running_var is None):
        raise TorchError("RuntimeError", "Expected running_mean and running_var to be defined when use_input_stats "
                                         "is false")
    if not x.shape:
        raise TorchError("IndexError", "Dimension specified as 0 but tensor has no dimensions")
    if len(x.shape) < 2:
        raise TorchError("IndexError", "Dimension out of range (expected to be in range of [-1, 0], but got 1)")
    b, c = x.shape[0], x.shape[1]
    repeated = [None if t is None else lower_repeat(rt, {"self": t, "repeats": (b,)}, loc)
                for t in (weight, bias, running_mean, running_var)]
    w, bi, rm, rv = repeated
    flat = x if is_contiguous(x.shape, x.strides) else rt.apply("clone", [x], None, loc)
    flat = rt.apply("view", [flat], (1, b * c) + tuple(x.shape[2:]), loc)
    out = aten_batch_norm(rt, flat, rm, rv, w, bi, use_input_stats, momentum, eps, loc)
    if use_input_stats and b == 0 and c > 0 and (running_mean is not None or running_var is not None):
        raise ProblemError(loc, "instance_norm of a batch of 0 with running statistics is not modelled: PyTorch "
                                "writes the mean over the empty batch, NaN, into them; give a batch of at least one "
                                "sample, or no running statistics")
    if use_input_stats:
        for mine, theirs in ((running_mean, rm), (running_var, rv)):
            if mine is not None:
                per_sample = rt.apply("view", [theirs], (b, c), loc)
                apply_inplace(rt, "copy_", mine, [rt.apply("mean_dim", [per_sample], ((0,), False), loc)], None,
                              loc)
    return rt.apply("view", [out], tuple(x.shape), loc)


def lower_instance_norm(rt, a: dict, loc: Loc):
    return instance_norm(rt, a["input"], a["running_mean"], a["running_var"], a["weight"], a["bias"],
                         a["use_input_stats"], a["momentum"], a["eps"], loc)


FUNCTIONS = (
    Function("instance_norm", (Param("input", "tensor"), Param("running_mean", "tensor", None),
                               Param("running_var", "tensor", None), Param("weight", "tensor", None),
                               Param("bias", "tensor", None), Param("use_input_stats", "bool", True),
                               Param("momentum", "number", Fraction(1, 10)),
                               Param("eps", "number", Fraction(1, 100000))),
             lower_instance_norm, where="function",
             doc="no node of its own: (RepeatBackward0 for weight, bias), (CloneBackward0,) ViewBackward0 to "
                 "(1, N*C, ...), NativeBatchNormBackward0, ViewBackward0 back; training copies the batch's mean of "
                 "the repeated running stats into them"),
)
