"""Backward formulas recorded as ops (see adjoint.engine.second_formulas) for the nn layers whose
backward is one ATen kernel of its own: the convolution (``convolution_backward``:
``ConvolutionBackwardBackward0``, adjoint.engine.ops.second_conv).
"""

from __future__ import annotations

from adjoint.engine.ops.second_conv import ConvBackwardSpec


def _convolution(rt, node, grads, saved, need):
    # ConvolutionBackward0: convolution_backward(grad, input, weight, bias_sizes, ..., grad_input_mask): one
    # ConvolutionBackwardBackward0 whose three outputs go to input, weight and bias
    bias = len(node.inputs) > 2 and node.inputs[2] is not None
    outs = rt.apply("convolution_backward", [grads[0], saved["input"], saved["weight"]],
                    ConvBackwardSpec(node.params, bias), node.loc)
    return [outs[0] if need[0] else None, outs[1] if len(need) > 1 and need[1] else None,
            outs[2] if bias and len(need) > 2 and need[2] else None]


NN = {"convolution": _convolution}
