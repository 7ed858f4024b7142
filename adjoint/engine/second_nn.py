"""Backward formulas recorded as ops (see adjoint.engine.second_formulas) for the nn layers whose
backward is one ATen kernel of its own: the convolution (``convolution_backward``:
``ConvolutionBackwardBackward0``, adjoint.engine.ops.second_conv) and the batch norm
(``native_batch_norm_backward``: ``NativeBatchNormBackwardBackward0``, adjoint.engine.ops.second_norm), 2-D
average and max pooling (``avg_pool2d_backward``, ``max_pool2d_with_indices_backward``: adjoint.engine.ops.second_pool),
the 3-D and adaptive pools (``avg_pool3d_backward``, ``max_pool3d_with_indices_backward``,
``adaptive_{max,avg}_pool{2,3}d_backward``, the same module), upsampling (``upsample_*_backward``:
adjoint.engine.ops.second_upsample); and, for a third backward, those backward kernels (the forward pool or
upsample of the gradient; the max pools' max_pool_double_backward: view, gather, view). The group norm's plain ops are
adjoint.engine.second_group_norm's.
"""

from __future__ import annotations

from adjoint.engine.second_formulas import NotModelled
from adjoint.engine.second_group_norm import GROUP_NORM


def _convolution(rt, node, grads, saved, need):
    # ConvolutionBackward0: convolution_backward(grad, input, weight, bias_sizes, ..., grad_input_mask): one
    # ConvolutionBackwardBackward0 whose three outputs go to input, weight and bias
    from adjoint.engine.ops.second_conv import ConvBackwardSpec   # the convolution's modules, loaded when used
    bias = len(node.inputs) > 2 and node.inputs[2] is not None
    outs = rt.apply("convolution_backward", [grads[0], saved["input"], saved["weight"]],
                    ConvBackwardSpec(node.params, bias), node.loc)
    return [outs[0] if need[0] else None, outs[1] if len(need) > 1 and need[1] else None,
            outs[2] if bias and len(need) > 2 and need[2] else None]


def _batch_norm(rt, node, grads, saved, need):
    # NativeBatchNormBackward0: native_batch_norm_backward(grad, input, weight, running_mean, running_var, result1,
    # result2, training, eps, grad_input_mask): one NativeBatchNormBackwardBackward0 (edges grad_out, input, weight
    # and the two statistics, which need no grad; the running statistics are no edge)
    if saved.get("weight") is None and node.inputs[2] is not None:
        # batchnorm_double_backward multiplies by the weight's gradient's gradient it never made: torch 2.13 raises
        # "Expected a proper Tensor but got None" in the second backward; not built
        raise NotModelled("NativeBatchNormBackward0 with a bias and no weight")
    ins = [grads[0], saved["input"], saved.get("weight"), saved["result1"], saved["result2"],
           saved.get("running_mean"), saved.get("running_var")]
    outs = rt.apply("native_batch_norm_backward", ins, node.params, node.loc)
    return [outs[0] if need[0] else None, outs[1] if need[1] else None, outs[2] if need[2] else None, None, None]


def _avg_pool(rt, node, grads, saved, need):
    # AvgPool2DBackward0: avg_pool2d_backward(grad, self, kernel_size, ...): AvgPool2DBackwardBackward0
    return [rt.apply("avg_pool2d_backward", [grads[0], saved["self"]], node.params, node.loc)]


def _max_pool(rt, node, grads, saved, need):
    # MaxPool2DWithIndicesBackward0: max_pool2d_with_indices_backward(grad, self, ..., indices):
    # MaxPool2DWithIndicesBackwardBackward0 (the indices, result1, have no edge)
    return [rt.apply("max_pool2d_with_indices_backward", [grads[0], saved["self"], saved["result1"]], node.params,
                     node.loc)]


def _pool_backward(kernel: str, indices: bool):
    # AvgPool3DBackward0, AdaptiveAvgPool{2,3}DBackward0: KERNEL(grad, self, ...) (edges grad_output and self, no
    # saves); MaxPool3DWithIndicesBackward0, AdaptiveMaxPool{2,3}DBackward0: KERNEL(grad, self, ..., indices) (the
    # indices, result1, have no edge): one *BackwardBackward0 node
    def formula(rt, node, grads, saved, need):
        ins = [grads[0], saved["self"]] + ([saved["result1"]] if indices else [])
        return [rt.apply(kernel, ins, node.params, node.loc)]
    return formula


def _upsample(kernel: str):
    # Upsample{Nearest,Linear}{1,2}DBackward0 / UpsampleBilinear2DBackward0: KERNEL(grad, output_size, input_size,
    # ...): one *BackwardBackward0 node, its one edge the gradient
    def formula(rt, node, grads, saved, need):
        from adjoint.engine.ops.second_upsample import UpsampleBackwardSpec   # loaded when used
        spec = UpsampleBackwardSpec(node.params, tuple(node.inputs[0].shape))
        return [rt.apply(kernel, [grads[0]], spec, node.loc)]
    return formula


def _upsample_again(forward_op: str):
    # Upsample*BackwardBackward0 (a third backward): upsample_*(grad, output_size, ...): the forward upsample's node
    def formula(rt, node, grads, saved, need):
        return [rt.apply(forward_op, [grads[0]], node.params.spec, node.loc)]
    return formula


def _avg_pool_again(forward_op: str):
    # AvgPool{2,3}DBackwardBackward0, AdaptiveAvgPool{2,3}DBackwardBackward0 (a third backward): grad_output: the
    # forward pool of the gradient (its node); self: zeros_like(self), no node
    def formula(rt, node, grads, saved, need):
        x = node.inputs[1]
        pooled = rt.apply(forward_op, [grads[0]], node.params, node.loc) if need[0] else None
        return [pooled, rt.tensor(rt.B.zeros(tuple(x.shape)), dtype=x.dtype) if len(need) > 1 and need[1] else None]
    return formula


def _max_pool_again(rank: int):
    # MaxPool{2,3}DWithIndicesBackwardBackward0, AdaptiveMaxPool{2,3}DBackwardBackward0 (a third backward):
    # grad_output: max_pool_double_backward(grad, indices, rank) -- grad.contiguous().view(rows, -1) (CloneBackward0
    # when not contiguous, ViewBackward0), gather(-1, indices.view(rows, -1)) (GatherBackward0), view(indices' sizes)
    # (ViewBackward0); self: zeros_like(self), no node
    def formula(rt, node, grads, saved, need):
        from adjoint.values.strides import is_contiguous
        indices, x = saved["indices"], node.inputs[1]
        shape = tuple(indices.shape)
        out = None
        if need[0]:
            numel = 1
            for d in shape:
                numel *= d
            if numel == 0:
                raise NotModelled(f"{node.name} of an empty output")
            lead = shape[:len(shape) - rank]
            rows = 1
            for d in lead:
                rows *= d
            flat = lead + (numel // rows,)
            g = grads[0]
            if not is_contiguous(g.shape, g.strides):
                g = rt.apply("clone", [g], None, node.loc)
            g_flat = rt.apply("view", [g], lead + (_numel(g.shape) // rows,), node.loc)
            idx = rt.tensor(rt.B.reshape(indices.value, flat), dtype=indices.dtype)
            out = rt.apply("view", [rt.apply("gather", [g_flat, idx], len(flat) - 1, node.loc)], shape, node.loc)
        return [out, rt.tensor(rt.B.zeros(tuple(x.shape)), dtype=x.dtype) if len(need) > 1 and need[1] else None, None]
    return formula


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


NN = {"convolution": _convolution, "native_batch_norm": _batch_norm, "avg_pool2d": _avg_pool,
      "max_pool2d_with_indices": _max_pool, "avg_pool3d": _pool_backward("avg_pool3d_backward", False),
      "max_pool3d_with_indices": _pool_backward("max_pool3d_with_indices_backward", True),
      **{f"adaptive_max_pool{r}d": _pool_backward(f"adaptive_max_pool{r}d_backward", True) for r in (2, 3)},
      **{f"adaptive_avg_pool{r}d": _pool_backward(f"adaptive_avg_pool{r}d_backward", False) for r in (2, 3)},
      **{name: _upsample(f"{name}_backward") for name in ("upsample_nearest1d", "upsample_nearest2d",
                                                            "upsample_linear1d", "upsample_bilinear2d")},
      **{f"{name}_backward": _upsample_again(name) for name in ("upsample_nearest1d", "upsample_nearest2d",
                                                                "upsample_linear1d", "upsample_bilinear2d")},
      **{f"{name}_backward": _avg_pool_again(name) for name in ("avg_pool2d", "avg_pool3d", "adaptive_avg_pool2d",
                                                                "adaptive_avg_pool3d")},
      **{name: _max_pool_again(rank) for name, rank in (("max_pool2d_with_indices_backward", 2),
                                                        ("max_pool3d_with_indices_backward", 3),
                                                        ("adaptive_max_pool2d_backward", 2),
                                                        ("adaptive_max_pool3d_backward", 3))},
      **GROUP_NORM}
