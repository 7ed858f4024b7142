"""Pooling over 2 or 3 spatial dimensions, one implementation with the rank as a parameter (the
kernel's length, or an adaptive pool's output size's): ``max_pool2d_with_indices``
(``MaxPool2DWithIndicesBackward0``), ``avg_pool2d`` (``AvgPool2DBackward0``),
``_adaptive_avg_pool2d`` (``AdaptiveAvgPool2DBackward0``), ``adaptive_max_pool2d``
(``AdaptiveMaxPool2DBackward0``) here; their 3-D entries in :mod:`adjoint.engine.ops.pool3d`.

Windows, output sizes and divisors follow ATen's CPU kernels (``pooling_output_shape``,
``cpu_max_pool``, ``cpu_avg_pool``, ``adaptive_avg_pool2d``, ``max_pool3d_kernel``, ``avg_pool3d``):
a max-pool window skips the padding; its index is the flat position in the input plane or
volume (``h * W + w``, ``(d * H + h) * W + w``), the first maximum in row-major scan order
(ties: the first wins; a NaN wins). Average pooling divides by ``divisor_override``, else by the
window clipped to the padded input (``count_include_pad``) or to the input itself. Each pool is
linear per plane (max pooling once its indices are chosen), so the forward and the VJP are one
exact matrix product with the plane. Where the ranks' kernels differ (their complaints, the
padding check), the difference is data keyed by the rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from itertools import product
from math import prod

import numpy as np

from adjoint.engine.torch_errors import TorchError
from adjoint.values.mathtree import Fn, generic_vjp, layer, no_gradient
from adjoint.engine.ops.record import Check, Math, Op, Save
from adjoint.engine.ops.pool_checks import pool_refusal
from adjoint.engine.ops.pool_checks import pooling_output_size


@dataclass(frozen=True)
class PoolSpec:
    """The parameters of a pooling window, one entry per spatial dimension (2 or 3 of them)."""

    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int] = (1, 1)
    ceil_mode: bool = False
    count_include_pad: bool = True
    divisor_override: int | None = None


class Refused(tuple):
    """A pool's parameter (an adaptive pool's output size, a pool's PoolSpec) when PyTorch refuses
    the call only once the node has packed ``self`` and the binding decides it (in ATen's order):
    the shape rule gives ``shape``, the op's ``value_error`` the error, nothing is computed."""

    def __new__(cls, type_: str, message: str, shape):
        obj = super().__new__(cls, ())
        obj.error = (type_, message)
        obj.shape = tuple(max(n, 0) for n in shape)
        return obj


def refused_error(B, values, p):
    """``value_error`` of the adaptive pools: a :class:`Refused` parameter's error."""
    return p.error if isinstance(p, Refused) else None


class Emptied(tuple):
    """An adaptive pool's output size (the tuple itself) whose output has an empty non-batch
    dimension: PyTorch computes the empty output, and the node's backward refuses its
    grad_output (``backward_error``) with ``message``."""

    def __new__(cls, sizes, message: str):
        obj = super().__new__(cls, sizes)
        obj.message = message
        return obj


def emptied_backward_error(dtypes, p, need):
    """``backward_error`` of the adaptive pools: an :class:`Emptied` output size's error."""
    return ("RuntimeError", p.message, "other") if isinstance(p, Emptied) else None


def pool_shape(shapes, p: PoolSpec, loc, what: str | None = None):
    """The output shape of a ``rank``-d pool (rank: the kernel's length). A call PyTorch refuses
    (:func:`adjoint.engine.ops.pool_checks.pool_refusal`) gets a placeholder shape here: its error
    is the op's ``value_error``, raised once the node has packed ``self``, as ATen's kernel does."""
    rank = len(p.kernel)
    what = what or f"max_pool{rank}d"
    x = shapes[0]
    if pool_refusal(tuple(x), p, what) is not None:
        return tuple(x[:-rank]) + (0,) * rank
    out = [pooling_output_size(size, k, pad, s, d, p.ceil_mode)
           for size, k, s, pad, d in zip(x[-rank:], p.kernel, p.stride, p.padding, p.dilation)]
    return tuple(x[:-rank]) + tuple(out)


def max_pool_refused(B, values, p: PoolSpec):
    """PyTorch's error for this max pool (``value_error``), else None."""
    if isinstance(p, Refused):
        return p.error
    return pool_refusal(tuple(B.shape(values[0])), p, f"max_pool{len(p.kernel)}d")


def avg_pool_refused(B, values, p: PoolSpec):
    """PyTorch's error for this average pool (``value_error``), else None."""
    if isinstance(p, Refused):
        return p.error
    return pool_refusal(tuple(B.shape(values[0])), p, f"avg_pool{len(p.kernel)}d")


def max_pool_shape(shapes, p: PoolSpec, loc):
    if isinstance(p, Refused):
        return (p.shape, p.shape)
    out = pool_shape(shapes, p, loc)
    return (out, out)


def _rank(p) -> int:
    """The spatial rank of a pool's parameter: a PoolSpec, or an adaptive pool's output size."""
    return len(p.kernel) if isinstance(p, PoolSpec) else len(p)


def _flat_positions(axes, sizes) -> np.ndarray:
    """The flat (row-major) positions of the grid ``axes[0] x axes[1] x ...`` in an input of ``sizes``,
    in scan order (the last dimension fastest)."""
    flat = [0]
    for positions, size in zip(axes, sizes):
        flat = [f * size + i for f in flat for i in positions]
    return np.array(flat, dtype=np.int64)


def max_windows(in_sizes, p: PoolSpec) -> list[np.ndarray]:
    """Per output position (row-major), the flat input positions of its window, in scan order."""
    outs = [pooling_output_size(size, k, pad, s, d, p.ceil_mode)
            for size, k, s, pad, d in zip(in_sizes, p.kernel, p.stride, p.padding, p.dilation)]
    return [_flat_positions([[i for i in range(o * s - pad, o * s - pad + k * d, d) if 0 <= i < size]
                             for o, size, k, s, pad, d in zip(o, in_sizes, p.kernel, p.stride, p.padding,
                                                              p.dilation)], in_sizes)
            for o in product(*(range(n) for n in outs))]


def empty_window_dim(in_sizes, p: PoolSpec) -> int | None:
    """The first spatial dimension (0-based) in which some max-pool window holds no element of the
    input (a dilation stepping over the whole input from the padding), else None. ATen's kernel
    then starts the window's scan past its end (``while (ih0 < 0) ih0 += dilationH``): the output
    is -inf with the index ``ih0 * W + iw0``, and its backward adds the gradient there, past the
    plane for every such window of the last rows (outside the tensor for the last plane)."""
    for dim, (size, k, s, pad, d) in enumerate(zip(in_sizes, p.kernel, p.stride, p.padding, p.dilation)):
        out = pooling_output_size(size, k, pad, s, d, p.ceil_mode)
        if any(not any(0 <= o * s - pad + j * d < size for j in range(k)) for o in range(max(out, 0))):
            return dim
    return None


def _planes(B, x, rank: int):
    """(..., *spatial) -> (rows, prod(spatial)): one row per plane (2-D) or volume (3-D)."""
    shape = B.shape(x)
    return B.reshape(x, (prod(shape[:-rank]), prod(shape[-rank:])))


#: the latest max_pool_forward's (input value, spec, whether a window held its maximum twice), for
#: max_pool_kink, which the runtime calls right after it on the same values: the window scan, an
#: exact comparison per element, is then made once
_LAST_SCAN: list = [None]


def max_pool_forward(B, ins, p: PoolSpec):
    x = ins[0]
    rank = len(p.kernel)
    shape = B.shape(x)
    out_shape = pool_shape([shape], p, None)
    vals, idx, tied = B.window_max(_planes(B, x, rank), max_windows(shape[-rank:], p))
    _LAST_SCAN[0] = (x, p, tied)
    indices = B.constant(idx.reshape(-1).tolist(), out_shape)
    return B.reshape(vals, out_shape), indices


def max_pool_vjp(B, gs, ins, outs, p, need):
    """g added at each output's index (``p``: a PoolSpec, or an adaptive max pool's output size)."""
    x, indices = ins[0], outs[1]
    rank = _rank(p)
    shape = B.shape(x)
    idx = B.as_indices(indices)
    per = prod(idx.shape[-rank:])
    if idx.size == 0:   # an empty output (PyTorch's backward refuses it: this is the derivation's own VJP)
        return [B.zeros(shape)]
    rows = idx.size // per
    flat_idx = idx.reshape(rows, per)
    g = B.reshape(gs[0], (rows, per))
    grad = B.place_add((rows, prod(shape[-rank:])), (np.arange(rows)[:, None], flat_idx), g)
    spatial = shape[-rank:]
    windows = (lambda: max_windows(spatial, p)) if isinstance(p, PoolSpec) else (lambda: adaptive_windows(spatial, p))
    grad = B.max_routing(grad, g, _planes(B, x, rank), windows, flat_idx)
    return [B.reshape(grad, shape)]


#: which of a window's tied maxima gets the gradient, in each rank's words
_SCAN_ORDER = {2: "(row-major)", 3: "(in d, h, w order)"}


def max_pool_kink(B, ins, p: PoolSpec):
    x = ins[0]
    rank = len(p.kernel)
    last, _LAST_SCAN[0] = _LAST_SCAN[0], None
    if last is not None and last[0] is x and last[1] is p:
        tied = last[2]
    else:
        _, _, tied = B.window_max(_planes(B, x, rank), max_windows(B.shape(x)[-rank:], p))
    if tied:
        return ("a max-pool window holds its maximum more than once: PyTorch routes the gradient to the first "
                f"{_SCAN_ORDER[rank]} of them")
    return None


# ----------------------------------------------------------------------------- average pooling

def avg_matrix(in_sizes, p: PoolSpec) -> list[list[Fraction]]:
    """Row per output position: the weight of each input position (cpu_avg_pool's divisor)."""
    rank = len(in_sizes)
    outs = [pooling_output_size(size, k, pad, s, 1, p.ceil_mode)
            for size, k, s, pad in zip(in_sizes, p.kernel, p.stride, p.padding)]
    n_in = prod(in_sizes)
    rows = []
    for o in product(*(range(n) for n in outs)):
        lo = [o[a] * p.stride[a] - p.padding[a] for a in range(rank)]
        hi = [min(lo[a] + p.kernel[a], in_sizes[a] + p.padding[a]) for a in range(rank)]
        pool_size = prod(hi[a] - lo[a] for a in range(rank))
        lo = [max(v, 0) for v in lo]
        hi = [min(hi[a], in_sizes[a]) for a in range(rank)]
        row = [Fraction(0)] * n_in
        if all(lo[a] < hi[a] for a in range(rank)):
            if p.divisor_override is not None:
                div = p.divisor_override
            else:
                div = pool_size if p.count_include_pad else prod(hi[a] - lo[a] for a in range(rank))
            for i in _flat_positions([range(lo[a], hi[a]) for a in range(rank)], in_sizes):
                row[i] = Fraction(1, div)
        rows.append(row)
    return rows


def _adaptive_ranges(in_sizes, out_sizes) -> list[list[range]]:
    """Per output position (row-major), its window [floor(o * I / O), ceil((o + 1) * I / O)) per dim."""
    return [[range((o[a] * in_sizes[a]) // out_sizes[a], -((-(o[a] + 1) * in_sizes[a]) // out_sizes[a]))
             for a in range(len(in_sizes))] for o in product(*(range(n) for n in out_sizes))]


def adaptive_matrix(in_sizes, out_sizes) -> list[list[Fraction]]:
    """adaptive_avg_pool: each adaptive window averaged."""
    rows = []
    for axes in _adaptive_ranges(in_sizes, out_sizes):
        row = [Fraction(0)] * prod(in_sizes)
        count = prod(len(r) for r in axes)
        for i in _flat_positions(axes, in_sizes):
            row[i] = Fraction(1, count)
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


def _linear_pool(B, x, matrix, out_sizes):
    rank = len(out_sizes)
    shape = B.shape(x)
    if prod(tuple(shape[:-rank]) + tuple(out_sizes)) == 0:   # an empty output (a size of 0)
        return B.zeros(tuple(shape[:-rank]) + tuple(out_sizes))
    y = _window_sum(B, _planes(B, x, rank), matrix, forward=True)
    return B.reshape(y, tuple(shape[:-rank]) + tuple(out_sizes))


def _linear_pool_vjp(B, g, x, matrix, rank: int):
    return B.reshape(_window_sum(B, _planes(B, g, rank), matrix, forward=False), B.shape(x))


def avg_pool_shape(shapes, p: PoolSpec, loc):
    if isinstance(p, Refused):
        return p.shape
    return pool_shape(shapes, p, loc, f"avg_pool{len(p.kernel)}d")


def avg_pool_forward(B, ins, p: PoolSpec):
    x = ins[0]
    rank = len(p.kernel)
    out = avg_pool_shape([B.shape(x)], p, None)
    return _linear_pool(B, x, avg_matrix(B.shape(x)[-rank:], p), out[-rank:])


def avg_pool_vjp(B, gs, ins, outs, p: PoolSpec, need):
    x = ins[0]
    rank = len(p.kernel)
    return [_linear_pool_vjp(B, gs[0], x, avg_matrix(B.shape(x)[-rank:], p), rank)]


def adaptive_shape(shapes, out_sizes, loc):
    if isinstance(out_sizes, Refused):
        return out_sizes.shape
    x = shapes[0]
    rank = len(out_sizes)
    if len(x) not in (rank + 1, rank + 2):   # (the binding checks the rank and empty sizes first)
        raise TorchError("RuntimeError", f"adaptive_avg_pool{rank}d(): Expected {rank + 1}D or {rank + 2}D tensor, "
                                         f"but got {list(x)}")
    return tuple(x[:-rank]) + tuple(out_sizes)


def adaptive_forward(B, ins, out_sizes):
    x = ins[0]
    return _linear_pool(B, x, adaptive_matrix(B.shape(x)[-len(out_sizes):], out_sizes), out_sizes)


def adaptive_vjp(B, gs, ins, outs, out_sizes, need):
    x = ins[0]
    rank = len(out_sizes)
    return [_linear_pool_vjp(B, gs[0], x, adaptive_matrix(B.shape(x)[-rank:], out_sizes), rank)]


# ----------------------------------------------------------------------------- how they read (adjoint.mathtree)
# Each pool is one function of its input, its window as a subscript; max pooling's second output is the
# argmax indices (no gradient). J^T lambda is declared generic (the window matrices above).

MAXPOOL = Fn("max_pool2d", "\\operatorname{maxpool}_{#s}\\left(#0\\right)", generic_vjp)
ARGMAX = Fn("max_pool2d_indices", "\\operatorname{argmaxpool}_{#s}\\left(#0\\right)", no_gradient)
AVGPOOL = Fn("avg_pool2d", "\\operatorname{avgpool}_{#s}\\left(#0\\right)", generic_vjp)
ADAPTIVE = Fn("adaptive_avg_pool2d", "\\operatorname{adaptiveavgpool}_{#s}\\left(#0\\right)", generic_vjp)


def _sizes(v) -> str:
    """A window's sizes as a subscript: one number when they are all equal."""
    return str(v[0]) if len(set(v)) == 1 else "(" + ",".join(str(x) for x in v) + ")"


def _pool_sub(p: PoolSpec) -> str:
    parts = [f"{_sizes(p.kernel)}"]
    if p.stride != p.kernel:
        parts.append(f"\\mathrm{{stride}}={_sizes(p.stride)}")
    if any(p.padding):
        parts.append(f"\\mathrm{{padding}}={_sizes(p.padding)}")
    if any(d != 1 for d in p.dilation):
        parts.append(f"\\mathrm{{dilation}}={_sizes(p.dilation)}")
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
       kink_doc="ties in a window: the first maximum (row-major) gets the gradient", value_error=max_pool_refused,
       checks=(Check(((1, 2, 3),), PoolSpec((2, 2), (1, 1), (0, 0)), differences=True),
               Check(((1, 1, 3, 2),), PoolSpec((2, 2), (2, 2), (1, 1), ceil_mode=True), differences=True)),
       math=Math(layer((MAXPOOL, ARGMAX), _pool_sub)), integers="alone"),
    Op("avg_pool2d", "AvgPool2DBackward0", avg_pool_forward, avg_pool_vjp, avg_pool_shape, (Save("self", "in", 0),),
       "g / divisor spread over each window", grows=False, value_error=avg_pool_refused,
       checks=(Check(((1, 3, 3),), PoolSpec((2, 2), (1, 1), (1, 1), count_include_pad=False)),
               Check(((1, 1, 3, 3),), PoolSpec((2, 2), (2, 2), (0, 0), ceil_mode=True, divisor_override=3))),
       math=Math(layer((AVGPOOL,), _pool_sub)), integers="refused"),
    Op("adaptive_avg_pool2d", "AdaptiveAvgPool2DBackward0", adaptive_forward, adaptive_vjp, adaptive_shape,
       (Save("self", "in", 0),), "g / window size spread over each (overlapping) window", grows=False,
       math=Math(layer((ADAPTIVE,), lambda out: _sizes(tuple(out)))), checks=(Check(((1, 3, 5),), (2, 3)),),
       value_error=refused_error, backward_error=emptied_backward_error, integers="refused"),
)


# ----------------------------------------------------------------------------- adaptive max pooling
# adaptive_max_pool2d (AdaptiveMaxPool2DBackward0): the adaptive windows [floor(o * I / O), ceil((o + 1) * I / O))
# per dim, each reduced like a max-pool window (cpu_adaptive_max_pool: row-major scan, the first maximum wins, a
# NaN wins); saves self and the indices (result1); adaptive_max_pool1d is unsqueeze(-2), this, squeeze(-2).

def adaptive_windows(in_sizes, out_sizes) -> list[np.ndarray]:
    """Per output position (row-major), the flat input positions of its adaptive window, in scan order."""
    return [_flat_positions(axes, in_sizes) for axes in _adaptive_ranges(in_sizes, out_sizes)]


def adaptive_max_shape(shapes, out_sizes, loc):
    if isinstance(out_sizes, Refused):
        return (out_sizes.shape, out_sizes.shape)
    x = shapes[0]
    rank = len(out_sizes)   # (the binding checks the rank and empty sizes first: a Refused)
    out = tuple(x[:-rank]) + tuple(out_sizes)
    return (out, out)


def adaptive_max_forward(B, ins, out_sizes):
    x = ins[0]
    rank = len(out_sizes)
    shape = B.shape(x)
    out_shape = tuple(shape[:-rank]) + tuple(out_sizes)
    if prod(out_shape) == 0:   # an empty output (a size of 0, or an empty batch)
        return B.zeros(out_shape), B.constant([], out_shape)
    vals, idx, _ = B.window_max(_planes(B, x, rank), adaptive_windows(shape[-rank:], out_sizes))
    return B.reshape(vals, out_shape), B.constant(idx.reshape(-1).tolist(), out_shape)


def adaptive_max_kink(B, ins, out_sizes):
    x = ins[0]
    rank = len(out_sizes)
    _, _, tied = B.window_max(_planes(B, x, rank), adaptive_windows(B.shape(x)[-rank:], out_sizes))
    if tied:
        return ("an adaptive max-pool window holds its maximum more than once: PyTorch routes the gradient to the "
                f"first {_SCAN_ORDER[rank]} of them")
    return None


ADAPTIVE_MAX = Fn("adaptive_max_pool2d", "\\operatorname{adaptivemaxpool}_{#s}\\left(#0\\right)", generic_vjp)
ADAPTIVE_ARGMAX = Fn("adaptive_max_pool2d_indices", "\\operatorname{argadaptivemaxpool}_{#s}\\left(#0\\right)",
                     no_gradient)

OPS = OPS + (
    Op("adaptive_max_pool2d", "AdaptiveMaxPool2DBackward0", adaptive_max_forward, max_pool_vjp, adaptive_max_shape,
       (Save("self", "in", 0), Save("result1", "out", 1)),
       "g added at each adaptive window's index (the first maximum)", negzero="structural", grows=False, outputs=2,
       diff_outputs=1, out_dtypes=(None, "int64"), kink=adaptive_max_kink,
       kink_doc="ties in a window: the first maximum (row-major) gets the gradient", value_error=refused_error,
       backward_error=emptied_backward_error,
       checks=(Check(((1, 3, 2),), (2, 1), differences=True), Check(((1, 1, 3, 3),), (2, 2), differences=True)),
       math=Math(layer((ADAPTIVE_MAX, ADAPTIVE_ARGMAX), lambda out: _sizes(tuple(out)))), integers="refused"),
)
