"""3-D pooling: ``max_pool3d_with_indices`` (``MaxPool3DWithIndicesBackward0``), ``avg_pool3d``
(``AvgPool3DBackward0``), ``_adaptive_avg_pool3d`` (``AdaptiveAvgPool3DBackward0``), as the
2-D ones of :mod:`adjoint.engine.ops.pool` over (D, H, W) planes (ATen's ``max_pool3d_kernel``,
``avg_pool3d`` and ``adaptive_avg_pool3d`` CPU kernels): a max-pool window skips the padding,
its index is the flat position ``(d * H + h) * W + w`` in the input volume, the first maximum in
scan order (d, then h, then w) wins ties, a NaN wins; average pooling divides by
``divisor_override``, else by the window clipped to the padded input (``count_include_pad``) or
to the input itself; the adaptive windows are ``[floor(o * I / O), ceil((o + 1) * I / O))`` per
dimension. Each node saves ``self`` (and the max pool its indices, ``result1``), as in 2-D.
"""

from __future__ import annotations

from fractions import Fraction
from itertools import product

import numpy as np

from adjoint.format.errors import ProblemError
from adjoint.values.mathtree import Fn, generic_vjp, layer, no_gradient
from adjoint.engine.ops.pool import PoolSpec, _window_sum, pooling_output_size
from adjoint.engine.ops.record import Check, Math, Op, Save


def _check_volume(shape, what: str, loc) -> None:
    if len(shape) not in (4, 5) or any(s == 0 for s in shape[-4:]):
        raise ProblemError(loc, f"{what}: non-empty 4D or 5D (batch mode) tensor expected for input, got "
                                f"{list(shape)} (PyTorch raises this)")


def pool3d_shape(shapes, p: PoolSpec, loc, what: str = "max_pool3d"):
    x = shapes[0]
    _check_volume(x, what, loc)
    for k, pad, d in zip(p.kernel, p.padding, p.dilation):
        if pad > ((k - 1) * d + 1) // 2:
            raise ProblemError(loc, f"pad should be at most half of effective kernel size, but got pad={pad}, "
                                    f"kernel_size={k} and dilation={d} (PyTorch raises this)")
    out = [pooling_output_size(size, k, pad, s, d, p.ceil_mode)
           for size, k, s, pad, d in zip(x[-3:], p.kernel, p.stride, p.padding, p.dilation)]
    if min(out) < 1:
        if what == "avg_pool3d":
            raise ProblemError(loc, "input image (T: {} H: {} W: {}) smaller than kernel size (kT: {} kH: {} kW: {}) "
                                    "(PyTorch raises this)".format(*x[-3:], *p.kernel))
        raise ProblemError(loc, f"Given input size: ({'x'.join(map(str, x[-4:]))}). Calculated output size: "
                                f"({x[-4]}x{'x'.join(map(str, out))}). Output size is too small (PyTorch raises this)")
    return tuple(x[:-3]) + tuple(out)


def _volumes(B, x):
    """(..., D, H, W) -> (rows, D * H * W)."""
    shape = B.shape(x)
    rows = 1
    for s in shape[:-3]:
        rows *= s
    return B.reshape(x, (rows, shape[-3] * shape[-2] * shape[-1]))


def _flat(pos, sizes) -> int:
    d, h, w = pos
    return (d * sizes[1] + h) * sizes[2] + w


def max_windows3d(in_dhw, p: PoolSpec) -> list[np.ndarray]:
    """Per output position (row-major), the flat input positions of its window, in scan order."""
    outs = [pooling_output_size(size, k, pad, s, d, p.ceil_mode)
            for size, k, s, pad, d in zip(in_dhw, p.kernel, p.stride, p.padding, p.dilation)]
    wins = []
    for o in product(*(range(n) for n in outs)):
        axes = [[i for i in range(o[a] * p.stride[a] - p.padding[a],
                                  o[a] * p.stride[a] - p.padding[a] + p.kernel[a] * p.dilation[a], p.dilation[a])
                 if 0 <= i < in_dhw[a]] for a in range(3)]
        wins.append(np.array([_flat(pos, in_dhw) for pos in product(*axes)], dtype=np.int64))
    return wins


def max_pool3d_shape(shapes, p: PoolSpec, loc):
    out = pool3d_shape(shapes, p, loc)
    return (out, out)


def max_pool3d_forward(B, ins, p: PoolSpec):
    x = ins[0]
    shape = B.shape(x)
    out_shape = pool3d_shape([shape], p, None)
    vals, idx, _ = B.window_max(_volumes(B, x), max_windows3d(shape[-3:], p))
    indices = B.constant(idx.reshape(-1).tolist(), out_shape)
    return B.reshape(vals, out_shape), indices


def max_pool3d_vjp(B, gs, ins, outs, p: PoolSpec, need):
    x, indices = ins[0], outs[1]
    shape = B.shape(x)
    idx = B.as_indices(indices)
    per = idx.shape[-1] * idx.shape[-2] * idx.shape[-3]
    rows = idx.size // per
    flat_idx = idx.reshape(rows, per)
    g = B.reshape(gs[0], (rows, per))
    grad = B.place_add((rows, shape[-3] * shape[-2] * shape[-1]), (np.arange(rows)[:, None], flat_idx), g)
    return [B.reshape(grad, shape)]


def max_pool3d_kink(B, ins, p: PoolSpec):
    x = ins[0]
    _, _, tied = B.window_max(_volumes(B, x), max_windows3d(B.shape(x)[-3:], p))
    if tied:
        return ("a max-pool window holds its maximum more than once: PyTorch routes the gradient to the first "
                "(in d, h, w order) of them")
    return None


def avg_matrix3d(in_dhw, p: PoolSpec) -> list[list[Fraction]]:
    """Row per output position: the weight of each input position (avg_pool3d's divisor)."""
    outs = [pooling_output_size(size, k, pad, s, 1, p.ceil_mode)
            for size, k, s, pad in zip(in_dhw, p.kernel, p.stride, p.padding)]
    n_in = in_dhw[0] * in_dhw[1] * in_dhw[2]
    rows = []
    for o in product(*(range(n) for n in outs)):
        lo = [o[a] * p.stride[a] - p.padding[a] for a in range(3)]
        hi = [min(lo[a] + p.kernel[a], in_dhw[a] + p.padding[a]) for a in range(3)]
        pool_size = (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2])
        lo = [max(v, 0) for v in lo]
        hi = [min(hi[a], in_dhw[a]) for a in range(3)]
        row = [Fraction(0)] * n_in
        if all(lo[a] < hi[a] for a in range(3)):
            if p.divisor_override is not None:
                div = p.divisor_override
            else:
                div = pool_size if p.count_include_pad else (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2])
            for pos in product(*(range(lo[a], hi[a]) for a in range(3))):
                row[_flat(pos, in_dhw)] = Fraction(1, div)
        rows.append(row)
    return rows


def adaptive_matrix3d(in_dhw, out_dhw) -> list[list[Fraction]]:
    n_in = in_dhw[0] * in_dhw[1] * in_dhw[2]
    rows = []
    for o in product(*(range(n) for n in out_dhw)):
        lo = [(o[a] * in_dhw[a]) // out_dhw[a] for a in range(3)]
        hi = [-((-(o[a] + 1) * in_dhw[a]) // out_dhw[a]) for a in range(3)]
        count = (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2])
        row = [Fraction(0)] * n_in
        for pos in product(*(range(lo[a], hi[a]) for a in range(3))):
            row[_flat(pos, in_dhw)] = Fraction(1, count)
        rows.append(row)
    return rows


def _linear_pool3d(B, x, matrix, out_dhw):
    shape = B.shape(x)
    return B.reshape(_window_sum(B, _volumes(B, x), matrix, forward=True), tuple(shape[:-3]) + tuple(out_dhw))


def _linear_pool3d_vjp(B, g, x, matrix):
    return B.reshape(_window_sum(B, _volumes(B, g), matrix, forward=False), B.shape(x))


def avg_pool3d_shape(shapes, p: PoolSpec, loc):
    return pool3d_shape(shapes, p, loc, "avg_pool3d")


def avg_pool3d_forward(B, ins, p: PoolSpec):
    x = ins[0]
    out = avg_pool3d_shape([B.shape(x)], p, None)
    return _linear_pool3d(B, x, avg_matrix3d(B.shape(x)[-3:], p), out[-3:])


def avg_pool3d_vjp(B, gs, ins, outs, p: PoolSpec, need):
    x = ins[0]
    return [_linear_pool3d_vjp(B, gs[0], x, avg_matrix3d(B.shape(x)[-3:], p))]


def adaptive3d_shape(shapes, out_dhw, loc):
    x = shapes[0]
    if len(x) not in (4, 5):
        raise ProblemError(loc, f"adaptive_avg_pool3d(): Expected 4D or 5D tensor, but got {list(x)} "
                                "(PyTorch raises this)")
    return tuple(x[:-3]) + tuple(out_dhw)


def adaptive3d_forward(B, ins, out_dhw):
    x = ins[0]
    return _linear_pool3d(B, x, adaptive_matrix3d(B.shape(x)[-3:], out_dhw), out_dhw)


def adaptive3d_vjp(B, gs, ins, outs, out_dhw, need):
    x = ins[0]
    return [_linear_pool3d_vjp(B, gs[0], x, adaptive_matrix3d(B.shape(x)[-3:], out_dhw))]


# ----------------------------------------------------------------------------- how they read (adjoint.mathtree)

MAXPOOL3D = Fn("max_pool3d", "\\operatorname{maxpool}_{#s}\\left(#0\\right)", generic_vjp)
ARGMAX3D = Fn("max_pool3d_indices", "\\operatorname{argmaxpool}_{#s}\\left(#0\\right)", no_gradient)
AVGPOOL3D = Fn("avg_pool3d", "\\operatorname{avgpool}_{#s}\\left(#0\\right)", generic_vjp)
ADAPTIVE3D = Fn("adaptive_avg_pool3d", "\\operatorname{adaptiveavgpool}_{#s}\\left(#0\\right)", generic_vjp)


def _triple(v) -> str:
    return str(v[0]) if len(set(v)) == 1 else "(" + ",".join(str(x) for x in v) + ")"


def _pool3d_sub(p: PoolSpec) -> str:
    parts = [_triple(p.kernel)]
    if p.stride != p.kernel:
        parts.append(f"\\mathrm{{stride}}={_triple(p.stride)}")
    if any(p.padding):
        parts.append(f"\\mathrm{{padding}}={_triple(p.padding)}")
    if any(d != 1 for d in p.dilation):
        parts.append(f"\\mathrm{{dilation}}={_triple(p.dilation)}")
    if p.ceil_mode:
        parts.append("\\mathrm{ceil}")
    if not p.count_include_pad:
        parts.append("\\mathrm{exclude\\ pad}")
    if p.divisor_override is not None:
        parts.append(f"\\mathrm{{divisor}}={p.divisor_override}")
    return ",\\,".join(parts)


OPS = (
    Op("max_pool3d_with_indices", "MaxPool3DWithIndicesBackward0", max_pool3d_forward, max_pool3d_vjp,
       max_pool3d_shape, (Save("self", "in", 0), Save("result1", "out", 1)),
       "g added at each window's index (the first maximum, d/h/w order)", negzero="structural", grows=False,
       outputs=2, diff_outputs=1, out_dtypes=(None, "int64"), kink=max_pool3d_kink,
       kink_doc="ties in a window: the first maximum (d, h, w order) gets the gradient",
       checks=(Check(((1, 2, 3, 2),), PoolSpec((1, 2, 2), (1, 1, 1), (0, 0, 0), (1, 1, 1)), differences=True),
               Check(((1, 1, 3, 1, 2),), PoolSpec((2, 1, 2), (2, 1, 1), (1, 0, 1), (1, 1, 1), ceil_mode=True),
                     differences=True)),
       math=Math(layer((MAXPOOL3D, ARGMAX3D), _pool3d_sub))),
    Op("avg_pool3d", "AvgPool3DBackward0", avg_pool3d_forward, avg_pool3d_vjp, avg_pool3d_shape,
       (Save("self", "in", 0),), "g / divisor spread over each window", grows=False,
       checks=(Check(((1, 2, 3, 3),), PoolSpec((2, 2, 2), (1, 1, 1), (1, 1, 1), (1, 1, 1), count_include_pad=False)),
               Check(((1, 1, 3, 3, 2),), PoolSpec((2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), ceil_mode=True,
                                                  divisor_override=3))),
       math=Math(layer((AVGPOOL3D,), _pool3d_sub))),
    Op("adaptive_avg_pool3d", "AdaptiveAvgPool3DBackward0", adaptive3d_forward, adaptive3d_vjp, adaptive3d_shape,
       (Save("self", "in", 0),), "g / window size spread over each (overlapping) window", grows=False,
       math=Math(layer((ADAPTIVE3D,), lambda out: _triple(tuple(out)))), checks=(Check(((1, 3, 2, 5),), (2, 1, 3)),)),
)
