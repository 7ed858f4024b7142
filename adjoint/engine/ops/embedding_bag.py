"""``_embedding_bag`` (``EmbeddingBagBackward0``): F.embedding_bag / nn.EmbeddingBag's node, as
PyTorch 2.13's CPU kernel (aten/src/ATen/native/EmbeddingBag.cpp) computes it, checked in real torch.

ATen's order is ``_embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse,
per_sample_weights, include_last_offset, padding_idx)``; ``indices`` and ``offsets`` are not
differentiable, so the node's edges are ``(weight, per_sample_weights)``. The op's tensor slots are
``(weight, per_sample_weights, indices, offsets)``: the engine gives a node edges for its leading
differentiable slots, as PyTorch's codegen collects the differentiable arguments' next edges. Bag ``b`` holds the
indices from ``offsets[b]`` to the next offset (the last bag to the end of ``indices``; with
``include_last_offset`` the last offset closes no bag: the bags are one fewer). An index equal to
``padding_idx`` takes no part. Per bag, over its other rows ``W[i]``:

* sum: ``sum psw[i] W[i]`` (psw: the per-sample weights, 1 without them);
* mean: the sum divided by the number of those rows (an empty bag: 0);
* max: per feature the largest, the first of equal ones (an empty bag: 0).

The node returns four tensors and saves them after ``indices``, ``offsets``, ``per_sample_weights``
(when given) and ``weight`` (only when the per-sample weights need a gradient): ``result1``
(offset2bag: each index's bag; empty in sum mode on the float32 fast path, which needs no
``padding_idx``), ``result2`` (bag_size: the bags' sizes without padding in mean and max modes,
zeros in sum mode), ``result3`` (max mode: per bag and feature the row index chosen, 0 for an
empty bag; otherwise a copy of ``result2``).

Backward (``_embedding_bag_dense_backward_cpu``): sum and mean add ``g[bag] * scale`` into row
``indices[i]`` for each index not ``padding_idx``, ``scale`` the per-sample weight, divided by the
bag's size in mean mode (when not 0) and with ``scale_grad_by_freq`` by a count (:func:`freq_divisors`:
PyTorch's kernel reads the count of a neighbouring index in sorted order); max adds
``g[b, d]`` into ``W[result3[b, d], d]`` for each non-empty bag. The per-sample weights' gradient
is ``g[bag] . W[indices[i]]`` (0 at ``padding_idx``).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from adjoint.values.mathtree import Fn, generic_vjp, layer, no_gradient
from adjoint.engine.ops.record import Check, Math, Op, Save

MODES = ("sum", "mean", "max")


@dataclass(frozen=True)
class BagSpec:
    """The node's parameters: ``mode`` 0, 1, 2 (sum, mean, max); ``padding_idx`` -1 for none;
    ``fast``: the float32 fast path (no offset2bag in sum mode)."""

    mode: int
    padding_idx: int = -1
    scale_grad_by_freq: bool = False
    include_last_offset: bool = False
    fast: bool = False


def num_bags(n_offsets: int, p: BagSpec) -> int:
    return n_offsets - (1 if p.include_last_offset else 0)


def offset2bag(offsets: np.ndarray, n: int, p: BagSpec) -> np.ndarray:
    """Each index's bag (make_offset2bag: the last offset dropped with include_last_offset)."""
    starts = offsets[:num_bags(len(offsets), p)]
    out = np.zeros(n + 1, dtype=np.int64)
    np.add.at(out, starts, 1)
    out[0] -= 1
    return np.cumsum(out)[:n]


def bag_sizes(indices: np.ndarray, bags: np.ndarray, count: int, p: BagSpec) -> np.ndarray:
    """Per bag, its indices that are not padding_idx."""
    keep = indices != p.padding_idx
    return np.bincount(bags[keep], minlength=count).astype(np.int64)[:count]


def freq_divisors(idx: np.ndarray, n_w: int) -> dict:
    """scale_grad_by_freq's divisor per index, as the CPU backward reads it: over the sorted
    indices, the ``g``-th distinct index (ascending) is divided by ``counts[sorted[g]]``, the count
    of the index at position ``g`` of the sorted indices (``counts[indices_data[i]]`` with ``i`` the
    distinct index's number), not always its own count: [0, 1, 1, 2] divides 2's gradient by 2."""
    counts = np.bincount(idx, minlength=n_w)
    ordered = np.sort(idx)
    return {int(v): int(counts[ordered[g]]) for g, v in enumerate(np.unique(idx))}


def bag_shape(shapes, p: BagSpec, loc):
    w, idx, offs = shapes[0], shapes[2], shapes[3]
    count, d = num_bags(offs[0], p), w[1]
    r1 = (0,) if p.mode == 0 and p.fast else (idx[0],)
    return ((count, d), r1, (count,), (count, d) if p.mode == 2 else (count,))


def _layout(B, ins, p: BagSpec):
    idx = B.as_indices(ins[2]).reshape(-1)
    offs = B.as_indices(ins[3]).reshape(-1)
    bags = offset2bag(offs, idx.size, p)
    return idx, offs, bags, num_bags(offs.size, p)


def bag_forward(B, ins, p: BagSpec):
    w, psw = ins[0], ins[1]
    idx, offs, bags, count = _layout(B, ins, p)
    d = B.shape(w)[1]
    keep = np.nonzero(idx != p.padding_idx)[0]
    sizes = bag_sizes(idx, bags, count, p)
    rows = B.index(w, (idx[keep],)) if keep.size else B.zeros((0, d))
    if p.mode == 2:
        out, chosen = _bag_max(B, rows, idx[keep], bags[keep], count, d)
    else:
        if psw is not None and keep.size:
            rows = B.mul(rows, B.reshape(B.index(psw, (keep,)), (keep.size, 1)))
        out = B.place_add((count, d), (bags[keep],), rows) if keep.size else B.zeros((count, d))
        if p.mode == 1:
            out = B.div(out, B.constant([Fraction(max(int(s), 1)) for s in sizes], (count, 1)))
    r1 = B.integers([], (0,)) if p.mode == 0 and p.fast else B.integers(bags.tolist(), (idx.size,))
    size_out = [0] * count if p.mode == 0 else sizes.tolist()
    r2 = B.integers(size_out, (count,))
    r3 = B.integers(chosen.reshape(-1).tolist(), (count, d)) if p.mode == 2 else B.integers(size_out, (count,))
    return out, r1, r2, r3


def _bag_max(B, rows, words, bags, count: int, d: int):
    """Per bag and feature the first largest of its rows (rows: the bags' rows in index order)."""
    chosen = np.zeros((count, d), dtype=np.int64)
    filled = [b for b in range(count) if np.any(bags == b)]
    if not filled:
        return B.zeros((count, d)), chosen
    windows = [np.nonzero(bags == b)[0] for b in filled]
    vals, pos, _ = B.window_max(B.permute(rows, (1, 0)), windows)   # (d, filled)
    chosen[filled] = words[pos].T
    return B.place((count, d), (np.array(filled, dtype=np.int64),), B.permute(vals, (1, 0))), chosen


def bag_vjp(B, gs, ins, outs, p: BagSpec, need):
    w, psw = ins[0], ins[1]
    g = gs[0]
    idx, offs, bags, count = _layout(B, ins, p)
    n_w, d = B.shape(w)
    keep = np.nonzero(idx != p.padding_idx)[0]
    grads = [None, None, None, None]
    if need[0]:
        if p.mode == 2:
            sizes = B.as_indices(outs[2]).reshape(-1)
            chosen = B.as_indices(outs[3]).reshape(count, d)
            filled = np.nonzero(sizes > 0)[0]
            if filled.size:
                cols = np.broadcast_to(np.arange(d), (filled.size, d))
                grads[0] = B.place_add((n_w, d), (chosen[filled], cols), B.index(g, (filled,)))
            else:
                grads[0] = B.zeros((n_w, d))
        elif keep.size:
            scale = [Fraction(1)] * keep.size
            if p.scale_grad_by_freq:
                divisor = freq_divisors(idx, n_w)
                scale = [s / divisor[int(idx[i])] for s, i in zip(scale, keep)]
            if p.mode == 1:
                sizes = B.as_indices(outs[2]).reshape(-1)
                scale = [s / int(sizes[bags[i]]) if sizes[bags[i]] else s for s, i in zip(scale, keep)]
            rows = B.mul(B.index(g, (bags[keep],)), B.constant(scale, (keep.size, 1)))
            if psw is not None:
                rows = B.mul(rows, B.reshape(B.index(psw, (keep,)), (keep.size, 1)))
            grads[0] = B.place_add((n_w, d), (idx[keep],), rows)
        else:
            grads[0] = B.zeros((n_w, d))
    if need[1]:
        grad = B.zeros((idx.size,))
        if keep.size:
            dots = B.sum_dims(B.mul(B.index(g, (bags[keep],)), B.index(w, (idx[keep],))), (1,), False)
            grad = B.place((idx.size,), (keep,), dots)
        grads[1] = grad
    return grads


def _bag_sub(p: BagSpec) -> str:
    parts = [f"\\mathrm{{{MODES[p.mode]}}}"] + ([f"\\mathrm{{padding\\_idx}}={p.padding_idx}"]
                                               if p.padding_idx >= 0 else [])
    return ",\\,".join(parts + (["\\mathrm{scale\\ by\\ freq}"] if p.scale_grad_by_freq else []))


#: how it reads (adjoint.mathtree): each bag's rows reduced; J^T lambda declared generic; the bookkeeping outputs
#: (offset2bag, bag_size, max_indices) carry no gradient
EMBEDDING_BAG = Fn("embedding_bag", "\\operatorname{embedding\\_bag}_{#s}\\left(#0,\\ #1,\\ #2\\right)", generic_vjp)
OFFSET2BAG = Fn("offset2bag", "\\operatorname{offset2bag}\\left(#0,\\ #1,\\ #2\\right)", no_gradient)
BAG_SIZE = Fn("bag_size", "\\operatorname{bag\\_size}\\left(#0,\\ #1,\\ #2\\right)", no_gradient)
MAX_INDICES = Fn("max_indices", "\\operatorname{max\\_indices}\\left(#0,\\ #1,\\ #2\\right)", no_gradient)

_GIVEN = ((2, (2, 0, 2, 1)), (3, (0, 1, 1)))

OPS = (
    Op("embedding_bag", "EmbeddingBagBackward0", bag_forward, bag_vjp, bag_shape,
       (Save("indices", "in", 2), Save("offsets", "in", 3), Save("per_sample_weights", "in", 1),
        Save("weight", "in", 0, if_need=1), Save("result1", "out", 1), Save("result2", "out", 2),
        Save("result3", "out", 3)),
       "sum / mean: g[bag] * psw (/ bag size; / count with scale_grad_by_freq) added into the indexed rows (none "
       "into padding_idx); max: g into each non-empty bag's chosen rows; psw: g[bag] . W[index]",
       negzero="structural", grows=True, outputs=4, diff_outputs=1, out_dtypes=(None, "int64", "int64", "int64"),
       differentiable=(True, True, False, False),
       kink_doc="max: the first of equal rows gets the gradient; padding_idx's rows get none; an empty bag is 0; "
                "scale_grad_by_freq divides by the count PyTorch's kernel reads (PyTorch's conventions, not derivatives)",
       math=Math(layer((EMBEDDING_BAG, OFFSET2BAG, BAG_SIZE, MAX_INDICES), _bag_sub)),
       checks=(Check(((3, 2), None, (4,), (3,)), BagSpec(0), given=_GIVEN),
               Check(((3, 2), None, (4,), (3,)), BagSpec(1, padding_idx=1), given=_GIVEN),
               Check(((3, 2), (4,), (4,), (3,)), BagSpec(0), given=_GIVEN),
               Check(((3, 2), None, (4,), (3,)), BagSpec(2), given=_GIVEN, differences=True))),
)
