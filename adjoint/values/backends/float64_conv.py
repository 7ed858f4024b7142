"""The float64 backend's convolution kernels: im2col by strided windows, col2im by strided adds.

``engine/ops/conv.py`` lowers a convolution over any backend with ``index`` (a gather by
index arrays), ``permute`` and ``place_add`` (``np.bincount`` over every patch position).
On numpy doubles the same numbers come out of cheaper moves, and these kernels make them:

* the patches: the padded input seen as windows (``as_strided``: no copy, no index arrays),
  copied once into the layout the lowering's ``permute`` leaves, (N * L, Cg * K)
  C-contiguous, so ``matmul2d`` sees the very same matrix;
* the fold (col2im): one strided ``+=`` per kernel offset. ``place_add`` adds the patches into
  each position in the key's order, (out position, kernel offset) row-major; at one input
  position an output position fixes the kernel offset and a later output position has a
  smaller offset in every dim, so adding the kernel offsets from the last to the first, row
  by row, adds every position's terms in the same order, from the same +0.0: the same doubles.
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.lib.stride_tricks import as_strided


def _outs(spatial, k_shape, stride, padding, dilation) -> tuple[int, ...]:
    return tuple((size + 2 * p - d * (k - 1) - 1) // s + 1
                 for size, k, s, p, d in zip(spatial, k_shape, stride, padding, dilation))


def padded(a: np.ndarray, padding) -> np.ndarray:
    """The input with zeros around its spatial dims (itself without padding)."""
    if not any(padding):
        return a
    shape = a.shape[:2] + tuple(s + 2 * p for s, p in zip(a.shape[2:], padding))
    out = np.zeros(shape)
    out[(slice(None), slice(None)) + tuple(slice(p, p + s) for s, p in zip(a.shape[2:], padding))] = a
    return out


def windows(xp: np.ndarray, k_shape, stride, dilation, outs) -> np.ndarray:
    """(N, C, *outs, *kernel) view of the padded input ``xp``: element (n, c, o, k) is
    ``xp[n, c, o * stride + k * dilation]`` (read only: a view of overlapping windows)."""
    sn, sc = xp.strides[:2]
    sp = xp.strides[2:]
    shape = xp.shape[:2] + tuple(outs) + tuple(k_shape)
    strides = (sn, sc) + tuple(st * s for st, s in zip(sp, stride)) + tuple(st * d for st, d in zip(sp, dilation))
    return as_strided(xp, shape=shape, strides=strides, writeable=False)


def patches(a: np.ndarray, k_shape, stride, padding, dilation, groups: int, group: int) -> np.ndarray:
    """One group's patches (N * L, Cg * K), C-contiguous: row (n, o), column (c, k)."""
    n, c = a.shape[:2]
    cg = c // groups
    outs = _outs(a.shape[2:], k_shape, stride, padding, dilation)
    view = windows(padded(a, padding), k_shape, stride, dilation, outs)[:, group * cg:(group + 1) * cg]
    nd = len(k_shape)
    perm = (0,) + tuple(range(2, 2 + nd)) + (1,) + tuple(range(2 + nd, 2 + 2 * nd))
    rows = n * int(np.prod(outs, dtype=np.int64))
    return np.ascontiguousarray(view.transpose(perm)).reshape(rows, cg * int(np.prod(k_shape, dtype=np.int64)))


def fold(gcols, x_shape, k_shape, stride, padding, dilation) -> np.ndarray:
    """col2im: each group's (N * L, Cg * K) patch gradients added back into the padded input
    (kernel offsets from the last to the first, see the module's note), cropped to ``x_shape``."""
    groups = len(gcols)
    n, c = x_shape[:2]
    cg = c // groups
    nd = len(k_shape)
    outs = _outs(x_shape[2:], k_shape, stride, padding, dilation)
    total = np.zeros(x_shape[:2] + tuple(s + 2 * p for s, p in zip(x_shape[2:], padding)))
    # (N, *O, Cg, *K) -> (N, Cg, *K, *O), one copy: one kernel offset's terms [:, :, k] are contiguous
    perm = (0, 1 + nd) + tuple(range(2 + nd, 2 + 2 * nd)) + tuple(range(1, 1 + nd))
    for gi, g in enumerate(gcols):
        terms = np.ascontiguousarray(g.reshape((n,) + tuple(outs) + (cg,) + tuple(k_shape)).transpose(perm))
        for k in itertools.product(*(range(kk - 1, -1, -1) for kk in k_shape)):
            at = (slice(None), slice(gi * cg, (gi + 1) * cg)) + tuple(
                slice(ki * d, ki * d + (o - 1) * s + 1, s) for ki, d, o, s in zip(k, dilation, outs, stride))
            with np.errstate(all="ignore"):   # inf - inf is nan, as in PyTorch
                total[at] += terms[(slice(None), slice(None)) + k]
    if any(padding):
        crop = (slice(None), slice(None)) + tuple(slice(p, p + s) for s, p in zip(x_shape[2:], padding))
        return np.array(total[crop], dtype=np.float64, copy=True)
    return total
