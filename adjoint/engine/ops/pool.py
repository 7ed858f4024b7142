"""2-D pooling: ``max_pool2d_with_indices`` (``MaxPool2DWithIndicesBackward0``),
``avg_pool2d`` (``AvgPool2DBackward0``), ``_adaptive_avg_pool2d``
(``AdaptiveAvgPool2DBackward0``).

Windows, output sizes and divisors follow ATen's CPU kernels (``pooling_output_shape``,
``cpu_max_pool``, ``cpu_avg_pool``, ``adaptive_avg_pool2d``): a max-pool window skips the
padding; its index is the flat position ``h * W + w`` in the input plane, the first maximum
in row-major scan order (ties: the first wins; a NaN wins). Average pooling divides by
``divisor_override``, else by the window clipped to the padded input (``count_include_pad``)
or to the input itself. Each pool is linear per plane (max pooling once its indices are
chosen), so the forward and the VJP are one exact matrix product with the plane.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from adjoint.format.errors import ProblemError
from adjoint.values.mathtree import Fn, generic_vjp, layer, no_gradient
from adjoint.engine.ops.record import Check, Math, Op, Save


@dataclass(frozen=True)
class PoolSpec:
    """The parameters of a 2-D pooling window."""

    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int] = (1, 1)
    ceil_mode: bool = False
    count_include_pad: bool = True
    divisor_override: int | None = None


def pooling_output_size(size: int, k: int, pad: int, stride: int, dilation: int, ceil_mode: bool) -> int:
    """ATen's pooling_output_shape."""
    num = size + 2 * pad - dilation * (k - 1) - 1 + (stride - 1 if ceil_mode else 0)
    out = num // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _check_plane(shape, what: str, loc) -> None:
    if len(shape) not in (3, 4) or any(s == 0 for s in shape[-3:]):
        raise ProblemError(loc, f"{what}: Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for "
                                f"input, but got: {list(shape)} (PyTorch raises this)")


def pool_shape(shapes, p: PoolSpec, loc, what: str = "max_pool2d"):
    x = shapes[0]
    _check_plane(x, what, loc)
    for k, pad in zip(p.kernel, p.padding):
        if pad > k // 2:
            raise ProblemError(loc, f"pad should be at most half of effective kernel size, but got pad={pad}, "
                                    f"kernel_size={k} (PyTorch raises this)")
    out = [pooling_output_size(size, k, pad, s, d, p.ceil_mode)
           for size, k, s, pad, d in zip(x[-2:], p.kernel, p.stride, p.padding, p.dilation)]
    if min(out) < 1:
        raise ProblemError(loc, f"Given input size: ({'x'.join(map(str, x[-3:]))}). Calculated output size: "
                                f"({x[-3]}x{'x'.join(map(str, out))}). Output size is too small (PyTorch raises this)")
    return tuple(x[:-2]) + tuple(out)


def max_pool_shape(shapes, p: PoolSpec, loc):
    out = pool_shape(shapes, p, loc)
    return (out, out)


def max_windows(in_hw, p: PoolSpec) -> list[np.ndarray]:
    """Per output position (row-major), the flat input positions of its window, in scan order."""
    (h, w), (kh, kw), (sh, sw), (ph, pw), (dh, dw) = in_hw, p.kernel, p.stride, p.padding, p.dilation
    oh = pooling_output_size(h, kh, ph, sh, dh, p.ceil_mode)
    ow = pooling_output_size(w, kw, pw, sw, dw, p.ceil_mode)
    wins = []
    for i in range(oh):
        rows = [r for r in range(i * sh - ph, i * sh - ph + kh * dh, dh) if 0 <= r < h]
        for j in range(ow):
            cols = [c for c in range(j * sw - pw, j * sw - pw + kw * dw, dw) if 0 <= c < w]
            wins.append(np.array([r * w + c for r in rows for c in cols], dtype=np.int64))
    return wins


def _planes(B, x):
    """(..., H, W) -> (rows, H * W)."""
    shape = B.shape(x)
    rows = 1
    for s in shape[:-2]:
        rows *= s
    return B.reshape(x, (rows, shape[-2] * shape[-1]))


#: the latest max_pool_forward's (input value, spec, whether a window held its maximum twice), for
#: max_pool_kink, which the runtime calls right after it on the same values: the window scan, an
#: exact comparison per element, is then made once
_LAST_SCAN: list = [None]


def max_pool_forward(B, ins, p: PoolSpec):
    x = ins[0]
    shape = B.shape(x)
    out_shape = pool_shape([shape], p, None)
    vals, idx, tied = B.window_max(_planes(B, x), max_windows(shape[-2:], p))
    _LAST_SCAN[0] = (x, p, tied)
    indices = B.constant(idx.reshape(-1).tolist(), out_shape)
    return B.reshape(vals, out_shape), indices


def max_pool_vjp(B, gs, ins, outs, p: PoolSpec, need):
    x, indices = ins[0], outs[1]
    shape = B.shape(x)
    idx = B.as_indices(indices)
    rows = idx.size // (idx.shape[-1] * idx.shape[-2])
    flat_idx = idx.reshape(rows, -1)
    g = B.reshape(gs[0], (rows, flat_idx.shape[1]))
    row_key = np.arange(rows)[:, None]
    grad = B.place_add((rows, shape[-2] * shape[-1]), (row_key, flat_idx), g)
    return [B.reshape(grad, shape)]


def max_pool_kink(B, ins, p: PoolSpec):
    x = ins[0]
    last, _LAST_SCAN[0] = _LAST_SCAN[0], None
    if last is not None and last[0] is x and last[1] is p:
        tied = last[2]
    else:
        _, _, tied = B.window_max(_planes(B, x), max_windows(B.shape(x)[-2:], p))
    if tied:
        return ("a max-pool window holds its maximum more than once: PyTorch routes the gradient to the first "
                "(row-major) of them")
    return None


# ----------------------------------------------------------------------------- average pooling

def avg_matrix(in_hw, p: PoolSpec) -> list[list[Fraction]]:
    """Row per output position: the weight of each input position (cpu_avg_pool's divisor)."""
    (h, w), (kh, kw), (sh, sw), (ph, pw) = in_hw, p.kernel, p.stride, p.padding
    oh = pooling_output_size(h, kh, ph, sh, 1, p.ceil_mode)
    ow = pooling_output_size(w, kw, pw, sw, 1, p.ceil_mode)
    rows = []
    for i in range(oh):
        for j in range(ow):
            h0, w0 = i * sh - ph, j * sw - pw
            h1, w1 = min(h0 + kh, h + ph), min(w0 + kw, w + pw)
            pool_size = (h1 - h0) * (w1 - w0)
            h0, w0, h1, w1 = max(h0, 0), max(w0, 0), min(h1, h), min(w1, w)
            row = [Fraction(0)] * (h * w)
            if h0 < h1 and w0 < w1:
                if p.divisor_override is not None:
                    div = p.divisor_override
                else:
                    div = pool_size if p.count_include_pad else (h1 - h0) * (w1 - w0)
                for r in range(h0, h1):
                    for c in range(w0, w1):
                        row[r * w + c] = Fraction(1, div)
            rows.append(row)
    return rows


def adaptive_matrix(in_hw, out_hw) -> list[list[Fraction]]:
    """adaptive_avg_pool2d: window [floor(o * I / O), ceil((o + 1) * I / O)) per dim, averaged."""
    (h, w), (oh, ow) = in_hw, out_hw
    rows = []
    for i in range(oh):
        h0, h1 = (i * h) // oh, -((-(i + 1) * h) // oh)
        for j in range(ow):
            w0, w1 = (j * w) // ow, -((-(j + 1) * w) // ow)
            row = [Fraction(0)] * (h * w)
            count = (h1 - h0) * (w1 - w0)
            for r in range(h0, h1):
                for c in range(w0, w1):
                    row[r * w + c] = Fraction(1, count)
            rows.append(row)
    return rows


def _window_sum(B, planes, matrix, forward: bool):
    """``planes @ M^T`` (forward: each output the weighted sum of its window) or ``planes @ M``
    (backward: each input the sum of the windows covering it) adding only the weights a window
    has, as PyTorch's kernels loop over windows: an infinite or NaN value reaches only the
    positions its windows cover (a matrix product would add ``nan * 0`` everywhere: an input no
    window covers gets 0 from avg_pool2d's backward, not nan). Without a zero weight the product
    itself (every position in every window)."""
    n_out, n_in = len(matrix), len(matrix[0]) if matrix else 0
    if all(v != 0 for row in matrix for v in row):
        m = B.constant([v for row in matrix for v in row], (n_out, n_in))
        return B.matmul2d(planes, B.t2(m) if forward else m)
    outs, ins, weights = [], [], []
    for o, row in enumerate(matrix):
        for i, v in enumerate(row):
            if v != 0:
                outs.append(o)
                ins.append(i)
                weights.append(v)
    src, dst, size = (ins, outs, n_out) if forward else (outs, ins, n_in)
    picked = B.index(planes, (slice(None), np.array(src, dtype=np.int64)))
    terms = B.mul(picked, B.constant(weights, (len(weights),)))
    return B.place_add((B.shape(planes)[0], size), (slice(None), np.array(dst, dtype=np.int64)), terms)


def _linear_pool(B, x, matrix, out_hw):
    shape = B.shape(x)
    y = _window_sum(B, _planes(B, x), matrix, forward=True)
    return B.reshape(y, tuple(shape[:-2]) + tuple(out_hw))


def _linear_pool_vjp(B, g, x, matrix):
    return B.reshape(_window_sum(B, _planes(B, g), matrix, forward=False), B.shape(x))


def avg_pool_shape(shapes, p: PoolSpec, loc):
    return pool_shape(shapes, p, loc, "avg_pool2d")


def avg_pool_forward(B, ins, p: PoolSpec):
    x = ins[0]
    out = avg_pool_shape([B.shape(x)], p, None)
    return _linear_pool(B, x, avg_matrix(B.shape(x)[-2:], p), out[-2:])


def avg_pool_vjp(B, gs, ins, outs, p: PoolSpec, need):
    x = ins[0]
    return [_linear_pool_vjp(B, gs[0], x, avg_matrix(B.shape(x)[-2:], p))]


def adaptive_shape(shapes, out_hw, loc):
    x = shapes[0]
    _check_plane(x, "adaptive_avg_pool2d", loc)
    return tuple(x[:-2]) + tuple(out_hw)


def adaptive_forward(B, ins, out_hw):
    x = ins[0]
    return _linear_pool(B, x, adaptive_matrix(B.shape(x)[-2:], out_hw), out_hw)


def adaptive_vjp(B, gs, ins, outs, out_hw, need):
    x = ins[0]
    return [_linear_pool_vjp(B, gs[0], x, adaptive_matrix(B.shape(x)[-2:], out_hw))]


# ----------------------------------------------------------------------------- how they read (adjoint.mathtree)
# Each pool is one function of its input, its window as a subscript; max pooling's second output is the
# argmax indices (no gradient). J^T lambda is declared generic (the window matrices above).

MAXPOOL = Fn("max_pool2d", "\\operatorname{maxpool}_{#s}\\left(#0\\right)", generic_vjp)
ARGMAX = Fn("max_pool2d_indices", "\\operatorname{argmaxpool}_{#s}\\left(#0\\right)", no_gradient)
AVGPOOL = Fn("avg_pool2d", "\\operatorname{avgpool}_{#s}\\left(#0\\right)", generic_vjp)
ADAPTIVE = Fn("adaptive_avg_pool2d", "\\operatorname{adaptiveavgpool}_{#s}\\left(#0\\right)", generic_vjp)


def _pair(v) -> str:
    return str(v[0]) if v[0] == v[1] else f"({v[0]},{v[1]})"


def _pool_sub(p: PoolSpec) -> str:
    parts = [f"{_pair(p.kernel)}"]
    if p.stride != p.kernel:
        parts.append(f"\\mathrm{{stride}}={_pair(p.stride)}")
    if any(p.padding):
        parts.append(f"\\mathrm{{padding}}={_pair(p.padding)}")
    if p.dilation != (1, 1):
        parts.append(f"\\mathrm{{dilation}}={_pair(p.dilation)}")
    if p.ceil_mode:
        parts.append("\\mathrm{ceil}")
    if not p.count_include_pad:
        parts.append("\\mathrm{exclude\\ pad}")
    if p.divisor_override is not None:
        parts.append(f"\\mathrm{{divisor}}={p.divisor_override}")
    return ",\\,".join(parts)


OPS = (
    Op("max_pool2d_with_indices", "MaxPool2DWithIndicesBackward0", max_pool_forward, max_pool_vjp, max_pool_shape,
       (Save("self", "in", 0), Save("result1", "out", 1)),
       "g added at each window's index (the first maximum)", negzero="structural", grows=False, outputs=2,
       diff_outputs=1, out_dtypes=(None, "int64"), kink=max_pool_kink,
       kink_doc="ties in a window: the first maximum (row-major) gets the gradient",
       checks=(Check(((1, 2, 3),), PoolSpec((2, 2), (1, 1), (0, 0)), differences=True),
               Check(((1, 1, 3, 2),), PoolSpec((2, 2), (2, 2), (1, 1), ceil_mode=True), differences=True)),
       math=Math(layer((MAXPOOL, ARGMAX), _pool_sub))),
    Op("avg_pool2d", "AvgPool2DBackward0", avg_pool_forward, avg_pool_vjp, avg_pool_shape, (Save("self", "in", 0),),
       "g / divisor spread over each window", grows=False,
       checks=(Check(((1, 3, 3),), PoolSpec((2, 2), (1, 1), (1, 1), count_include_pad=False)),
               Check(((1, 1, 3, 3),), PoolSpec((2, 2), (2, 2), (0, 0), ceil_mode=True, divisor_override=3))),
       math=Math(layer((AVGPOOL,), _pool_sub))),
    Op("adaptive_avg_pool2d", "AdaptiveAvgPool2DBackward0", adaptive_forward, adaptive_vjp, adaptive_shape,
       (Save("self", "in", 0),), "g / window size spread over each (overlapping) window", grows=False,
       math=Math(layer((ADAPTIVE,), lambda out: _pair(tuple(out)))), checks=(Check(((1, 3, 5),), (2, 3)),)),
)


# ----------------------------------------------------------------------------- adaptive max pooling
# adaptive_max_pool2d (AdaptiveMaxPool2DBackward0): the adaptive windows [floor(o * I / O), ceil((o + 1) * I / O))
# per dim, each reduced like a max-pool window (cpu_adaptive_max_pool: row-major scan, the first maximum wins, a
# NaN wins); saves self and the indices (result1); adaptive_max_pool1d is unsqueeze(-2), this, squeeze(-2).

def adaptive_windows(in_hw, out_hw) -> list[np.ndarray]:
    (h, w), (oh, ow) = in_hw, out_hw
    wins = []
    for i in range(oh):
        h0, h1 = (i * h) // oh, -((-(i + 1) * h) // oh)
        for j in range(ow):
            w0, w1 = (j * w) // ow, -((-(j + 1) * w) // ow)
            wins.append(np.array([r * w + c for r in range(h0, h1) for c in range(w0, w1)], dtype=np.int64))
    return wins


def adaptive_max_shape(shapes, out_hw, loc):
    x = shapes[0]
    _check_plane(x, "adaptive_max_pool2d", loc)
    out = tuple(x[:-2]) + tuple(out_hw)
    return (out, out)


def adaptive_max_forward(B, ins, out_hw):
    x = ins[0]
    shape = B.shape(x)
    out_shape = tuple(shape[:-2]) + tuple(out_hw)
    vals, idx, _ = B.window_max(_planes(B, x), adaptive_windows(shape[-2:], out_hw))
    return B.reshape(vals, out_shape), B.constant(idx.reshape(-1).tolist(), out_shape)


def adaptive_max_kink(B, ins, out_hw):
    x = ins[0]
    _, _, tied = B.window_max(_planes(B, x), adaptive_windows(B.shape(x)[-2:], out_hw))
    if tied:
        return ("an adaptive max-pool window holds its maximum more than once: PyTorch routes the gradient to the "
                "first (row-major) of them")
    return None


ADAPTIVE_MAX = Fn("adaptive_max_pool2d", "\\operatorname{adaptivemaxpool}_{#s}\\left(#0\\right)", generic_vjp)
ADAPTIVE_ARGMAX = Fn("adaptive_max_pool2d_indices", "\\operatorname{argadaptivemaxpool}_{#s}\\left(#0\\right)",
                     no_gradient)

OPS = OPS + (
    Op("adaptive_max_pool2d", "AdaptiveMaxPool2DBackward0", adaptive_max_forward, max_pool_vjp, adaptive_max_shape,
       (Save("self", "in", 0), Save("result1", "out", 1)),
       "g added at each adaptive window's index (the first maximum)", negzero="structural", grows=False, outputs=2,
       diff_outputs=1, out_dtypes=(None, "int64"), kink=adaptive_max_kink,
       kink_doc="ties in a window: the first maximum (row-major) gets the gradient",
       checks=(Check(((1, 3, 2),), (2, 1), differences=True), Check(((1, 1, 3, 3),), (2, 2), differences=True)),
       math=Math(layer((ADAPTIVE_MAX, ADAPTIVE_ARGMAX), lambda out: _pair(tuple(out))))),
)
