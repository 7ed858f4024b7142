"""``embedding`` (``EmbeddingBackward0``): rows of ``weight`` picked by integer indices.

ATen's argument order is ``embedding(weight, indices, padding_idx, scale_grad_by_freq,
sparse)``; ``indices`` is not differentiable, so the node has one edge (``weight``) and saves
the indices only. The VJP (``embedding_dense_backward``) adds each gradient row into the row
its index names (repeated indices add up), nothing into ``padding_idx``'s row, and with
``scale_grad_by_freq`` divides each row's gradient by how often its index occurs.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from adjoint.engine.torch_errors import TorchError
from adjoint.values.mathtree import Fn, generic_vjp, layer
from adjoint.engine.ops.record import Check, Math, Op, Save


@dataclass(frozen=True)
class EmbeddingSpec:
    """The parameters of an embedding lookup as its node saves them."""

    padding_idx: int        # -1: none (as the node saves it)
    scale_grad_by_freq: bool = False


def embedding_shape(shapes, p, loc):
    w, idx = shapes
    if len(w) != 2:
        raise TorchError("RuntimeError", "'weight' must be 2-D")   # the kernel's (after the indices' pack)
    return tuple(idx) + (w[1],)


def embedding_forward(B, ins, p: EmbeddingSpec):
    w, idx = ins
    return B.index(w, (B.as_indices(idx),))


def embedding_vjp(B, gs, ins, outs, p: EmbeddingSpec, need):
    w, idx = ins
    n, d = B.shape(w)
    flat = B.as_indices(idx).reshape(-1)
    g = B.reshape(gs[0], (flat.size, d))
    keep = [Fraction(int(i != p.padding_idx)) for i in flat]
    if p.scale_grad_by_freq:
        counts = np.bincount(flat, minlength=n)
        keep = [k / int(counts[i]) for k, i in zip(keep, flat)]
    g = B.mul(g, B.constant(keep, (flat.size, 1)))
    return [B.place_add((n, d), (flat,), g), None]


#: how it reads (adjoint.mathtree): the rows of the weight at the indices; J^T lambda declared generic
EMBEDDING = Fn("embedding", "\\operatorname{embedding}_{#s}\\left(#0,\\ #1\\right)", generic_vjp)


def _embedding_sub(p: EmbeddingSpec) -> str:
    parts = ([f"\\mathrm{{padding\\_idx}}={p.padding_idx}"] if p.padding_idx >= 0 else []) + \
        (["\\mathrm{scale\\ by\\ freq}"] if p.scale_grad_by_freq else [])
    return ",\\,".join(parts)


OPS = (
    Op("embedding", "EmbeddingBackward0", embedding_forward, embedding_vjp, embedding_shape, (Save("indices", "in", 1),),
       "g rows added into weight's rows at the indices (none into padding_idx; / count with scale_grad_by_freq)",
       negzero="structural", grows=False, differentiable=(True, False),
       kink_doc="padding_idx's row gets no gradient; scale_grad_by_freq divides by the index's count (PyTorch's "
                "conventions, not derivatives)",
       math=Math(layer((EMBEDDING,), _embedding_sub)),
       checks=(Check(((4, 2), (3,)), EmbeddingSpec(-1), given=((1, (2, 0, 2)),)),
               Check(((3, 2), (2, 2)), EmbeddingSpec(-1), given=((1, (1, 0, 0, 2)),)))),
)
