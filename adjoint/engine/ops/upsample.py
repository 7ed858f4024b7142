"""Upsampling (``F.interpolate``'s kernels): ``upsample_nearest1d`` / ``2d``
(``UpsampleNearest1DBackward0`` / ``UpsampleNearest2DBackward0``) and ``upsample_linear1d`` /
``upsample_bilinear2d`` (``UpsampleLinear1DBackward0`` / ``UpsampleBilinear2DBackward0``). None
saves a tensor (only sizes and scales).

Each spatial dim is mapped on its own, as the CPU kernels compute their indices and weights
(ATen's ``UpSample.h``), in the float arithmetic PyTorch uses for them:

* nearest: output ``o`` reads input ``o`` when the sizes are equal, ``o >> 1`` when the output is
  twice the input, else ``min(floorf(o * scale), in - 1)`` with ``scale`` a float32: ``1 / s``
  for a given scale factor ``s`` (a double, cast), else ``in / out``; backward adds each output
  gradient onto the input it read;
* linear: equal sizes copy; else ``src = scale * o`` (``align_corners``; ``scale = (in - 1) /
  (out - 1)``) or ``max(scale * (o + 0.5) - 0.5, 0)`` (``scale`` as nearest's), in the input's
  opmath type (float32 for a float32 input, double for float64); ``i0 = min(floor(src), in - 1)``,
  ``i1 = i0 + 1`` (``i0`` at the last input: itself), ``l1 = clamp(src - i0, 0, 1)``, ``l0 = 1 - l1``;
  the output ``l0 * x[i0] + l1 * x[i1]``, exact from those rounded weights; backward ``g * l0``
  added at ``i0`` and ``g * l1`` at ``i1``. Two spatial dims: the products of both weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
import math

import numpy as np

from adjoint.engine.torch_errors import TorchError
from adjoint.values.mathtree import Fn, generic_vjp, layer
from adjoint.engine.ops.record import Check, Math, Op


@dataclass(frozen=True)
class UpsampleSpec:
    """The output's spatial sizes, the scale factors PyTorch's kernel is handed (a float each, or
    None when a size was given), ``align_corners`` (None for nearest) and whether the input is
    float32 (the linear weights' opmath type)."""

    output_size: tuple[int, ...]
    scales: tuple
    align_corners: bool | None = None
    single: bool = True


def _scales_value(T, scale, in_size: int, out_size: int):
    """compute_scales_value: ``1 / scale`` (double, cast) for a positive given scale, else in / out."""
    return T(1.0 / scale) if scale is not None and scale > 0 else T(in_size) / T(out_size)


def nearest_indices(in_size: int, out_size: int, scale) -> list[int]:
    """nearest_idx for each output index (float32 scale, floorf)."""
    if out_size == in_size:
        return list(range(out_size))
    if out_size == 2 * in_size:
        return [o >> 1 for o in range(out_size)]
    s = _scales_value(np.float32, scale, in_size, out_size)
    return [min(int(math.floor(np.float32(o) * s)), in_size - 1) for o in range(out_size)]


def linear_weights(in_size: int, out_size: int, align_corners: bool, scale, single: bool):
    """compute_source_index_and_lambda for each output index: (i0, i1, l0, l1), the weights as the
    exact values of PyTorch's rounded floats."""
    if out_size == in_size:
        return [(o, o, Fraction(1), Fraction(0)) for o in range(out_size)]
    T = np.float32 if single else np.float64
    if out_size > 1:
        ratio = T(in_size - 1) / T(out_size - 1) if align_corners else _scales_value(T, scale, in_size, out_size)
    else:
        ratio = T(0)
    out = []
    for o in range(out_size):
        if align_corners:
            src = ratio * T(o)
        else:
            src = ratio * (T(o) + T(0.5)) - T(0.5)
            src = T(0) if src < 0 else src
        i0 = min(int(math.floor(src)), in_size - 1)
        l1 = min(max(src - T(i0), T(0)), T(1))
        l0 = T(1) - l1
        out.append((i0, i0 + (1 if i0 < in_size - 1 else 0), Fraction(float(l0)), Fraction(float(l1))))
    return out


def upsample_shape(shapes, p: UpsampleSpec, loc):
    """The kernel's check (upsample_{1,2}d_shape_check), raised when the node is made: every size
    positive."""
    x = shapes[0]
    ins, outs = tuple(x[2:]), tuple(p.output_size)
    if any(n <= 0 for n in ins + outs):
        if len(ins) == 1:
            raise TorchError("RuntimeError", f"Input and output sizes should be greater than 0, but got input (W: "
                                             f"{ins[0]}) and output (W: {outs[0]})")
        raise TorchError("RuntimeError", f"Input and output sizes should be greater than 0, but got input (H: {ins[0]}, "
                                         f"W: {ins[1]}) output (H: {outs[0]}, W: {outs[1]})")
    return tuple(x[:2]) + outs


def _key(axis: int, idx) -> tuple:
    return (slice(None),) * axis + (np.asarray(idx, dtype=np.int64),)


def _column(B, values, axis: int, ndim: int):
    """The weights of one spatial dim as a tensor broadcasting along ``axis``."""
    shape = [1] * ndim
    shape[axis] = len(values)
    return B.constant(values, tuple(shape))


def _resized(shape, axis: int, n: int) -> tuple:
    shape = list(shape)
    shape[axis] = n
    return tuple(shape)


def nearest_forward(B, ins, p: UpsampleSpec):
    x = ins[0]
    for d, (out, scale) in enumerate(zip(p.output_size, p.scales)):
        x = B.index(x, _key(2 + d, nearest_indices(B.shape(x)[2 + d], out, scale)))
    return x


def nearest_vjp(B, gs, ins, outs, p: UpsampleSpec, need):
    g = gs[0]
    in_shape = B.shape(ins[0])
    for d in reversed(range(len(p.output_size))):
        idx = nearest_indices(in_shape[2 + d], p.output_size[d], p.scales[d])
        g = B.place_add(_resized(B.shape(g), 2 + d, in_shape[2 + d]), _key(2 + d, idx), g)
    return [g]


def _weights(B, x_shape, d: int, p: UpsampleSpec):
    return linear_weights(x_shape[2 + d], p.output_size[d], p.align_corners, p.scales[d], p.single)


def linear_forward(B, ins, p: UpsampleSpec):
    x = ins[0]
    for d in range(len(p.output_size)):
        w = _weights(B, B.shape(x), d, p)
        axis, nd = 2 + d, len(B.shape(x))
        a0 = B.mul(B.index(x, _key(axis, [t[0] for t in w])), _column(B, [t[2] for t in w], axis, nd))
        a1 = B.mul(B.index(x, _key(axis, [t[1] for t in w])), _column(B, [t[3] for t in w], axis, nd))
        x = B.add(a0, a1)
    return x


def linear_vjp(B, gs, ins, outs, p: UpsampleSpec, need):
    g = gs[0]
    in_shape = B.shape(ins[0])
    for d in reversed(range(len(p.output_size))):
        w = _weights(B, in_shape, d, p)
        axis, nd = 2 + d, len(B.shape(g))
        shape = _resized(B.shape(g), axis, in_shape[axis])
        g = B.add(B.place_add(shape, _key(axis, [t[0] for t in w]), B.mul(g, _column(B, [t[2] for t in w], axis, nd))),
                  B.place_add(shape, _key(axis, [t[1] for t in w]), B.mul(g, _column(B, [t[3] for t in w], axis, nd))))
    return [g]


# ----------------------------------------------------------------------------- how they read (adjoint.mathtree)

UPSAMPLE = Fn("upsample", "\\operatorname{upsample}_{#s}\\left(#0\\right)", generic_vjp)


def _sub(p: UpsampleSpec) -> str:
    if p.align_corners is None:
        return "\\mathrm{nearest}"
    return "\\mathrm{linear}" + (",\\,\\mathrm{align\\_corners}" if p.align_corners else "")


_MATH = Math(layer((UPSAMPLE,), _sub))
_TEXT_N = "g summed back onto the input element each output read"
_TEXT_L = "g * l0 added at i0 and g * l1 at i1, per spatial dim"

OPS = (
    Op("upsample_nearest1d", "UpsampleNearest1DBackward0", nearest_forward, nearest_vjp, upsample_shape, (), _TEXT_N,
       negzero="structural", grows=False, copies_values=True, integers="refused", math=_MATH, checks=(Check(((1, 2, 3),), UpsampleSpec((5,), (None,))),)),
    Op("upsample_nearest2d", "UpsampleNearest2DBackward0", nearest_forward, nearest_vjp, upsample_shape, (), _TEXT_N,
       negzero="structural", grows=False, copies_values=True, integers="refused", math=_MATH, checks=(Check(((1, 1, 2, 3),), UpsampleSpec((4, 6), (2.0, 2.0))),)),
    Op("upsample_linear1d", "UpsampleLinear1DBackward0", linear_forward, linear_vjp, upsample_shape, (), _TEXT_L,
       grows=False, integers="refused", math=_MATH, checks=(Check(((1, 2, 3),), UpsampleSpec((5,), (None,), True, False)),)),
    Op("upsample_bilinear2d", "UpsampleBilinear2DBackward0", linear_forward, linear_vjp, upsample_shape, (), _TEXT_L,
       grows=False, integers="refused", math=_MATH, checks=(Check(((1, 1, 2, 3),), UpsampleSpec((3, 5), (None, None), False, False)),)),
)
