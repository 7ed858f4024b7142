"""Built-in modules of the nn family: each forward as PyTorch's own (torch/nn/modules/conv.py,
pooling.py, batchnorm.py, normalization.py, dropout.py, sparse.py), calling the same
functions so the same nodes appear. MultiheadAttention is in :mod:`.attention`.

BatchNorm in training mode with ``track_running_stats`` first bumps ``num_batches_tracked``
in place (``add_(1)``: its version counter moves), then ``F.batch_norm`` updates
``running_mean`` / ``running_var`` inside the kernel (no version bump); ``momentum: null``
averages cumulatively (factor ``1 / num_batches_tracked``, exact here).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.errors import ProblemError
from adjoint.engine.torch_errors import TorchError
from adjoint.engine.bindings.conv import (adaptive_avg_pool, adaptive_avg_pool1d, avg_pool, conv_transpose, convolution,
                                          max_pool)
from adjoint.engine.bindings.upsample import interpolate
from adjoint.engine.bindings.rearrange import lower_pad, pad_by_copies
from adjoint.engine.bindings.norm import batch_norm, dropout, embedding, group_norm, layer_norm, rms_norm
from adjoint.engine.layers import attention


def _reversed_padding_repeated_twice(c, rank: int) -> tuple[int, ...]:
    """``_ConvNd._reversed_padding_repeated_twice``: the last dim's pads first; ``'same'`` splits
    ``dilation * (kernel - 1)`` with the smaller half on the left, ``'valid'`` pads nothing."""
    padding = c.arg("padding")
    if padding == "valid":
        return (0,) * (2 * rank)
    out = []
    for d in reversed(range(rank)):
        if padding == "same":
            total = c.arg("dilation")[d] * (c.arg("kernel_size")[d] - 1)
            out += [total // 2, total - total // 2]
        else:
            out += [padding[d]] * 2
    return tuple(out)


def _conv(rank: int):
    def forward(c):
        mode = c.arg("padding_mode")
        x, padding = c.args[0], c.arg("padding")
        if mode != "zeros":   # _conv_forward: F.pad(input, _reversed_padding_repeated_twice, mode), then no padding
            x = pad_by_copies(c.rt, x, _reversed_padding_repeated_twice(c, rank), mode, None, c.loc)
            padding = (0,) * rank
        return convolution(c.rt, x, c.params["weight"], c.params.get("bias"), c.arg("stride"),
                           padding, c.arg("dilation"), c.arg("groups"), rank, c.loc)
    forward.__name__ = f"conv{rank}d_forward"
    return forward


def _conv_transpose(rank: int):
    """ConvTranspose{rank}d.forward without output_size: F.conv_transpose{rank}d(input, weight, bias,
    stride, padding, output_padding, groups, dilation)."""
    def forward(c):
        size = c.args[1] if len(c.args) > 1 else c.kwargs.get("output_size")
        if size is not None:
            raise ProblemError(c.loc, f"ConvTranspose{rank}d.forward(input, output_size) is not modelled; leave "
                                      "output_size out (the output's size then follows stride, padding and "
                                      "output_padding), or pick output_padding for the size you want")
        return conv_transpose(c.rt, c.args[0], c.params["weight"], c.params.get("bias"), c.arg("stride"),
                              c.arg("padding"), c.arg("output_padding"), c.arg("groups"), c.arg("dilation"), rank,
                              c.loc)
    forward.__name__ = f"conv_transpose{rank}d_forward"
    return forward


def upsample_forward(c):
    """Upsample.forward: F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
    recompute_scale_factor=...); the constructor keeps a scale_factor of 0 as None."""
    return interpolate(c.rt, c.args[0], c.arg("size"), c.arg("scale_factor") or None, c.arg("mode"),
                       c.arg("align_corners"), c.arg("recompute_scale_factor"), False, c.loc)


def max_pool_forward(rank: int):
    """F.max_pool{rank}d(input, self.kernel_size, self.stride, self.padding, self.dilation, ...)."""
    def forward(c):
        return max_pool(rank, c.rt, c.args[0], c.arg("kernel_size"), c.arg("stride"), c.arg("padding"),
                        c.arg("dilation"), c.arg("ceil_mode"), c.arg("return_indices"), c.loc)
    forward.__name__ = f"max_pool{rank}d_forward"
    return forward


def avg_pool_forward(rank: int):
    """F.avg_pool{rank}d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, ...)."""
    def forward(c):
        return avg_pool(rank, c.rt, c.args[0], c.arg("kernel_size"), c.arg("stride"), c.arg("padding"),
                        c.arg("ceil_mode"), c.arg("count_include_pad"), c.arg("divisor_override"), c.loc)
    forward.__name__ = f"avg_pool{rank}d_forward"
    return forward


def adaptive_avg_pool_forward(rank: int):
    """F.adaptive_avg_pool{rank}d(input, self.output_size)."""
    def forward(c):
        size = c.arg("output_size")
        if rank == 1:
            return adaptive_avg_pool1d(c.rt, c.args[0], tuple(size) if isinstance(size, (tuple, list)) else size,
                                       c.loc)
        return adaptive_avg_pool(rank, c.rt, c.args[0], tuple(size) if isinstance(size, (tuple, list)) else size,
                                 c.loc)
    forward.__name__ = f"adaptive_avg_pool{rank}d_forward"
    return forward


def adaptive_max_pool_forward(rank: int):
    """F.adaptive_max_pool{rank}d(input, self.output_size, self.return_indices)."""
    def forward(c):
        from adjoint.engine.bindings.conv import adaptive_max_pool, adaptive_max_pool1d
        size = c.arg("output_size")
        if isinstance(size, (tuple, list)):
            size = tuple(size)
        if rank == 1:
            return adaptive_max_pool1d(c.rt, c.args[0], size, c.arg("return_indices"), c.loc)
        return adaptive_max_pool(rank, c.rt, c.args[0], size, c.arg("return_indices"), c.loc)
    forward.__name__ = f"adaptive_max_pool{rank}d_forward"
    return forward


def pool1d_forward(kind: str):
    """MaxPool1d / AvgPool1d: F.max_pool1d / F.avg_pool1d with the module's arguments."""
    def forward(c):
        from adjoint.engine.bindings.conv import avg_pool1d, max_pool1d
        if kind == "max":
            return max_pool1d(c.rt, c.args[0], c.arg("kernel_size"), c.arg("stride"), c.arg("padding"),
                              c.arg("dilation"), c.arg("ceil_mode"), c.arg("return_indices"), c.loc)
        return avg_pool1d(c.rt, c.args[0], c.arg("kernel_size"), c.arg("stride"), c.arg("padding"), c.arg("ceil_mode"),
                          c.arg("count_include_pad"), c.loc)
    forward.__name__ = f"{kind}_pool1d_forward"
    return forward


def _batch_norm(dims: tuple[int, ...]):
    def forward(c):
        x = c.args[0]
        if len(x.shape) not in dims:
            want = " or ".join(f"{d}D" for d in dims)
            raise TorchError("ValueError", f"expected {want} input (got {len(x.shape)}D input)")   # _check_input_dim
        momentum = c.arg("momentum")
        factor = Fraction(0) if momentum is None else momentum
        tracking = c.arg("track_running_stats")
        if c.training and tracking:
            count = c.buffers.get("num_batches_tracked")
            if count is not None:
                bump_count(c.rt, count)
                if momentum is None:
                    factor = Fraction(1, int(c.rt.B.as_indices(count.value).reshape(-1)[0]))
        use_stats = not c.training or tracking
        return batch_norm(c.rt, x, c.buffers.get("running_mean") if use_stats else None,
                          c.buffers.get("running_var") if use_stats else None, c.params.get("weight"),
                          c.params.get("bias"), c.training or not tracking, factor, c.arg("eps"), c.loc)
    forward.__name__ = f"batch_norm{max(dims) - 2}d_forward"
    return forward


def bump_count(rt, count) -> None:
    """``num_batches_tracked.add_(1)``: a buffer that needs no gradient, so no node; its version moves."""
    from adjoint.engine.inplace import write
    write(rt, count, rt.B.add(count.value, rt.B.scalar(1)))


def layer_norm_forward(c):
    return layer_norm(c.rt, c.args[0], c.arg("normalized_shape"), c.params.get("weight"), c.params.get("bias"),
                      c.arg("eps"), c.loc)


def _pad_module(mode: str, rank: int):
    """``ZeroPad{rank}d``, ``ConstantPad{rank}d``, ``ReflectionPad{rank}d``, ``ReplicationPad{rank}d``:
    ``F.pad(input, self.padding, mode, self.value)`` (the constant ones a ConstantPadNdBackward0)."""
    def forward(c):
        value = c.arg("value") if mode == "constant" else None   # ZeroPad has none: zeros
        return lower_pad(c.rt, {"input": c.args[0], "pad": c.arg("padding"), "mode": mode, "value": value}, c.loc)
    forward.__name__ = f"{mode}_pad{rank}d_forward"
    return forward


def _circular_pad_module(rank: int):
    """``CircularPad{rank}d``: ``_check_input_dim`` (a ValueError unless the input has rank + 1 or
    rank + 2 dims), then ``F.pad(input, self.padding, "circular")`` (at::_pad_circular's copies)."""
    def forward(c):
        x = c.args[0]
        if len(x.shape) not in (rank + 1, rank + 2):
            raise TorchError("ValueError", f"expected {rank + 1}D or {rank + 2}D input (got {len(x.shape)}D input)")
        return lower_pad(c.rt, {"input": x, "pad": c.arg("padding"), "mode": "circular", "value": None}, c.loc)
    forward.__name__ = f"circular_pad{rank}d_forward"
    return forward


def rms_norm_forward(c):
    return rms_norm(c.rt, c.args[0], c.arg("normalized_shape"), c.params.get("weight"), c.arg("eps"), c.loc)


def group_norm_forward(c):
    return group_norm(c.rt, c.args[0], c.arg("num_groups"), c.params.get("weight"), c.params.get("bias"), c.arg("eps"),
                      c.loc)


def dropout_forward(c):
    mask = c.rt.B.literal(c.module.mask) if c.module.mask is not None else None
    return dropout(c.rt, c.args[0], c.arg("p"), c.training, c.arg("inplace"), mask, c.loc)


def _dropout_nd_forward(n: int):
    def forward(c):
        from adjoint.engine.bindings.feature_dropout import dropout_nd
        mask = c.rt.B.literal(c.module.mask) if c.module.mask is not None else None
        return dropout_nd(c.rt, n, c.args[0], c.arg("p"), c.training, c.arg("inplace"), mask, c.loc,
                          kind=f"Dropout{n}d")
    return forward


def _alpha_dropout_forward(feature: bool):
    def forward(c):   # nn.AlphaDropout's forward passes no inplace
        from adjoint.engine.bindings.feature_dropout import alpha_dropout
        return alpha_dropout(c.rt, c.args[0], c.arg("p"), c.training, False, feature, c.loc)
    return forward


def embedding_forward(c):
    return embedding(c.rt, c.args[0], c.params["weight"], c.arg("padding_idx"), c.arg("max_norm"),
                     c.arg("scale_grad_by_freq"), c.arg("sparse"), c.loc, c.arg("norm_type"))


def embedding_bag_forward(c):
    from adjoint.engine.bindings.embedding_bag import embedding_bag
    offsets = c.args[1] if len(c.args) > 1 else c.kwargs.get("offsets")
    psw = c.args[2] if len(c.args) > 2 else c.kwargs.get("per_sample_weights")
    return embedding_bag(c.rt, c.args[0], c.params["weight"], offsets, c.arg("max_norm"), c.arg("norm_type"),
                         c.arg("scale_grad_by_freq"), c.arg("mode"), c.arg("sparse"), psw,
                         c.arg("include_last_offset"), c.arg("padding_idx"), c.loc)


def bilinear_forward(c):
    from adjoint.engine.bindings import call_function
    return call_function(c.rt, "bilinear", [c.args[0], c.args[1], c.params["weight"], c.params.get("bias")], {}, c.loc)


FORWARDS = {
    "Bilinear": bilinear_forward,
    "Conv1d": _conv(1),
    "Conv2d": _conv(2),
    "ConvTranspose1d": _conv_transpose(1),
    "ConvTranspose2d": _conv_transpose(2),
    "Upsample": upsample_forward,
    "MaxPool2d": max_pool_forward(2),
    "AvgPool2d": avg_pool_forward(2),
    "AdaptiveAvgPool2d": adaptive_avg_pool_forward(2),
    "BatchNorm1d": _batch_norm((2, 3)),
    "BatchNorm2d": _batch_norm((4,)),
    "LayerNorm": layer_norm_forward,
    "RMSNorm": rms_norm_forward,
    "GroupNorm": group_norm_forward,
    "Dropout": dropout_forward,
    **{f"Dropout{n}d": _dropout_nd_forward(n) for n in (1, 2, 3)},
    "AlphaDropout": _alpha_dropout_forward(False),
    "FeatureAlphaDropout": _alpha_dropout_forward(True),
    "Embedding": embedding_forward,
    "EmbeddingBag": embedding_bag_forward,
    "MultiheadAttention": attention.mha_forward,
    "AdaptiveMaxPool1d": adaptive_max_pool_forward(1),
    "AdaptiveMaxPool2d": adaptive_max_pool_forward(2),
    "MaxPool1d": pool1d_forward("max"),
    "AvgPool1d": pool1d_forward("avg"),
    "AdaptiveAvgPool1d": adaptive_avg_pool_forward(1),
    **{f"{kind}Pad{rank}d": _pad_module(mode, rank) for kind, mode in (("Zero", "constant"), ("Constant", "constant"),
                                                                        ("Reflection", "reflect"),
                                                                        ("Replication", "replicate"))
       for rank in (1, 2, 3)},
    **{f"CircularPad{rank}d": _circular_pad_module(rank) for rank in (1, 2, 3)},
}
