"""The backward kernel a create_graph backward records for the convolution (adjoint.engine.second_nn
calls it), with its own derivative, as torch 2.13 records them:

``convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
output_padding, groups, output_mask)``: ``ConvolutionBackwardBackward0``, three outputs (grad_input,
grad_weight, grad_bias: the last only when the forward had a bias), edges to grad_output, input and
weight; it saves ``grad_output``, ``input``, ``weight`` in that order, whichever needs a gradient
(probed with saved_tensors_hooks). Its derivative (``_convolution_double_backward``) is the
convolution's bilinearity read twice, for the plain and the transposed convolution alike, with
``ggI``, ``ggW``, ``ggb`` the gradients reaching the three outputs:

* grad_output: ``conv(ggI, weight) + conv(input, ggW) + ggb`` (each term where its gradient came);
* input: the convolution's input gradient for the weight ``ggW`` and the output gradient ``grad_output``;
* weight: the convolution's weight gradient for the input ``ggI`` and the output gradient ``grad_output``.
"""

from __future__ import annotations

from dataclasses import dataclass

from adjoint.values.mathtree import Fn, generic_vjp, layer
from adjoint.engine.ops.conv import ConvSpec, _conv_sub, conv_forward, conv_vjp
from adjoint.engine.ops.record import Check, Math, Op, Save


@dataclass(frozen=True)
class ConvBackwardSpec:
    """The convolution's arguments and whether it had a bias (``bias_sizes`` given)."""

    conv: ConvSpec
    bias: bool


def conv_backward_shape(shapes, p: ConvBackwardSpec, loc):
    go, x, w = shapes[:3]
    return (tuple(x), tuple(w), (w[1] * p.conv.groups if p.conv.transposed else w[0],))


def conv_backward_forward(B, ins, p: ConvBackwardSpec):
    """The convolution's VJP at (input, weight) for the output gradient grad_output: grad_input,
    grad_weight and grad_bias (zeros when the forward had no bias: that output is never handed on)."""
    go, x, w = ins
    gx, gw, gb = conv_vjp(B, [go], [x, w, None], None, p.conv, [True, True, False])
    n_out = conv_backward_shape([B.shape(go), B.shape(x), B.shape(w)], p, None)[2]
    if p.bias:
        gb = B.reshape(B.sum_to(go, (1, n_out[0]) + (1,) * (len(B.shape(go)) - 2)), n_out)
    else:
        gb = B.zeros(n_out)
    return gx, gw, gb


def conv_backward_vjp(B, gs, ins, outs, p: ConvBackwardSpec, need):
    """_convolution_double_backward: grad_output = conv(ggI, w) + conv(x, ggW) + ggb; input = the input
    gradient of conv(., ggW) at grad_output; weight = the weight gradient of conv(ggI, .) at grad_output."""
    ggi, ggw, ggb = (list(gs) + [None, None, None])[:3]
    ggb = ggb if p.bias else None
    go, x, w = ins
    d_go = d_x = d_w = None
    if need[0]:
        d_go = B.zeros(tuple(B.shape(go)))
        if ggi is not None:
            d_go = B.add(d_go, conv_forward(B, [ggi, w, None], p.conv))
        if ggw is not None:
            d_go = B.add(d_go, conv_forward(B, [x, ggw, None], p.conv))
        if ggb is not None:
            d_go = B.add(d_go, B.broadcast_to(B.reshape(ggb, (B.shape(ggb)[0],) + (1,) * (len(B.shape(go)) - 2)),
                                              tuple(B.shape(go))))
    if len(need) > 1 and need[1]:
        d_x = (conv_vjp(B, [go], [x, ggw, None], None, p.conv, [True, False, False])[0] if ggw is not None
               else B.zeros(tuple(B.shape(x))))
    if len(need) > 2 and need[2]:
        d_w = (conv_vjp(B, [go], [ggi, w, None], None, p.conv, [False, True, False])[1] if ggi is not None
               else B.zeros(tuple(B.shape(w))))
    return [d_go, d_x, d_w]


CONV_BACKWARD = tuple(Fn(f"conv_backward_{k}", f"\\operatorname{{conv}}'_{{{k}}}\\left(#*\\right)", generic_vjp)
                      for k in ("input", "weight", "bias"))

OPS = (
    Op("convolution_backward", "ConvolutionBackwardBackward0", conv_backward_forward, conv_backward_vjp,
       conv_backward_shape, (Save("grad_output", "in", 0), Save("input", "in", 1), Save("weight", "in", 2)),
       "the convolution's VJP (grad_input, grad_weight, grad_bias); _convolution_double_backward: conv(ggI, w) + "
       "conv(x, ggW) + ggb, the input gradient of conv(., ggW), the weight gradient of conv(ggI, .)",
       grows=True, outputs=3, math=Math(layer(CONV_BACKWARD, lambda p: _conv_sub(p.conv))),
       checks=(Check(((1, 2, 2, 2), (1, 2, 3, 3), (2, 2, 2, 2)),
                     ConvBackwardSpec(ConvSpec((1, 1), (0, 0), (1, 1), 1), True)),
               Check(((2, 2, 4), (2, 4, 3), (2, 2, 2)), ConvBackwardSpec(ConvSpec((1,), (1,), (1,), 2), False)),
               Check(((1, 1, 3), (1, 2, 2), (2, 1, 2)),
                     ConvBackwardSpec(ConvSpec((1,), (0,), (1,), 1, True, (0,)), True))),
       integers="refused"),
)
