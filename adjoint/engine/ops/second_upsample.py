"""The backward kernels a create_graph backward records for upsampling (adjoint.engine.second_nn calls
them), with their own derivatives, as torch 2.13 records them: ``upsample_nearest1d_backward`` /
``upsample_nearest2d_backward`` / ``upsample_linear1d_backward`` / ``upsample_bilinear2d_backward``
(grad_output, output_size, input_size, [align_corners,] scales): one
``Upsample{Nearest1D,Nearest2D,Linear1D,Bilinear2D}BackwardBackward0`` node, its one edge the gradient,
saving no tensor; its derivative is the forward upsample of the incoming gradient with the same sizes,
scales and ``align_corners`` (derivatives.yaml: ``grad_output: upsample_*(grad, output_size, ...)``).
"""

from __future__ import annotations

from dataclasses import dataclass

from adjoint.values.mathtree import Fn, generic_vjp, layer
from adjoint.engine.ops.record import Check, Math, Op
from adjoint.engine.ops.upsample import UpsampleSpec, linear_forward, linear_vjp, nearest_forward, nearest_vjp


@dataclass(frozen=True)
class UpsampleBackwardSpec:
    """The forward upsample's parameters and its input's sizes (the backward kernel's ``input_size``)."""

    spec: UpsampleSpec
    input_size: tuple


def _shape(shapes, p: UpsampleBackwardSpec, loc):
    return tuple(p.input_size)


def _backward(vjp):
    def forward(B, ins, p: UpsampleBackwardSpec):
        # the first-order VJP reads only its input's shape
        return vjp(B, [ins[0]], [B.zeros(tuple(p.input_size))], None, p.spec, [True])[0]
    return forward


def _double(forward):
    def vjp(B, gs, ins, outs, p: UpsampleBackwardSpec, need):
        return [forward(B, [gs[0]], p.spec)]
    return vjp


def _sub(p: UpsampleBackwardSpec) -> str:
    if p.spec.align_corners is None:
        return "\\mathrm{nearest}"
    return "\\mathrm{linear}" + (",\\,\\mathrm{align\\_corners}" if p.spec.align_corners else "")


UPSAMPLE_BACKWARD = Fn("upsample_backward", "\\operatorname{upsample}'_{#s}\\left(#0\\right)", generic_vjp)
_MATH = Math(layer((UPSAMPLE_BACKWARD,), _sub))
_TEXT_N = "g summed back onto the input element each output read; upsample_nearest(grad)"
_TEXT_L = "g * l0 added at i0 and g * l1 at i1, per spatial dim; upsample_linear(grad)"

OPS = (
    Op("upsample_nearest1d_backward", "UpsampleNearest1DBackwardBackward0", _backward(nearest_vjp),
       _double(nearest_forward), _shape, (), _TEXT_N, negzero="structural", grows=False, integers="refused",
       math=_MATH, checks=(Check(((1, 2, 5),), UpsampleBackwardSpec(UpsampleSpec((5,), (None,)), (1, 2, 3))),)),
    Op("upsample_nearest2d_backward", "UpsampleNearest2DBackwardBackward0", _backward(nearest_vjp),
       _double(nearest_forward), _shape, (), _TEXT_N, negzero="structural", grows=False, integers="refused",
       math=_MATH, checks=(Check(((1, 1, 4, 6),), UpsampleBackwardSpec(UpsampleSpec((4, 6), (2.0, 2.0)), (1, 1, 2, 3))),)),
    Op("upsample_linear1d_backward", "UpsampleLinear1DBackwardBackward0", _backward(linear_vjp),
       _double(linear_forward), _shape, (), _TEXT_L, grows=False, integers="refused", math=_MATH,
       checks=(Check(((1, 2, 5),), UpsampleBackwardSpec(UpsampleSpec((5,), (None,), True, False), (1, 2, 3))),)),
    Op("upsample_bilinear2d_backward", "UpsampleBilinear2DBackwardBackward0", _backward(linear_vjp),
       _double(linear_forward), _shape, (), _TEXT_L, grows=False, integers="refused", math=_MATH,
       checks=(Check(((1, 1, 3, 5),), UpsampleBackwardSpec(UpsampleSpec((3, 5), (None, None), False, False),
                                                           (1, 1, 2, 3))),)),
)
