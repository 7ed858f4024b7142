"""``embedding`` (``EmbeddingBackward0``): rows of ``weight`` picked by integer indices.

ATen's argument order is ``embedding(weight, indices, padding_idx, scale_grad_by_freq,
sparse)``; ``indices`` is not differentiable, so the node has one edge (``weight``) and saves
the indices only. The VJP (``embedding_dense_backward``) adds each gradient row into the row
its index names (repeated indices add up), nothing into ``padding_idx``'s row, and with
``scale_grad_by_freq`` divides each row's gradient by how often its index occurs.

``embedding_renorm`` (no node: F.embedding runs ``torch.embedding_renorm_`` under no_grad, in
place on the weight; adjoint.engine.bindings.embedding_renorm writes it): each distinct indexed
row whose ``norm_type``-norm exceeds ``max_norm`` scaled by ``max_norm / (norm + 1e-7)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from adjoint.engine.torch_errors import TorchError
from adjoint.values.mathtree import Fn, TFn, generic_vjp, layer, no_gradient
from adjoint.engine.ops.reductions import norm_forward
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


@dataclass(frozen=True)
class RenormSpec:
    """``embedding_renorm_``'s numbers (the kernel's doubles)."""

    max_norm: Fraction
    norm_type: Fraction


_RENORM_EPS = Fraction(1, 10 ** 7)   # the kernel's ``norm + 1e-7``


def renorm_shape(shapes, p, loc):
    return tuple(shapes[0])


def renorm_forward(B, ins, p: RenormSpec):
    """``embedding_renorm_cpu_``: the distinct indices in ascending order (those in range; the
    binding raises at the first one out of range), each row scaled where its norm exceeds
    ``max_norm`` (a nan norm does not). The negative indices come first and name rows distinct
    among themselves, then the others: a row named both ways is scaled twice, in that order."""
    w, idx = ins
    n = B.shape(w)[0]
    distinct = np.unique(B.as_indices(idx).reshape(-1))
    for rows in (distinct[(distinct < 0) & (distinct >= -n)] + n, distinct[(distinct >= 0) & (distinct < n)]):
        if rows.size:
            picked = B.index(w, (rows,))
            norms = norm_forward(B, [picked], (p.norm_type, (1,), True))
            over = B.mask(B.sub(norms, B.scalar(p.max_norm)), lambda s: s == 1)
            scale = B.div(B.scalar(p.max_norm), B.add(norms, B.scalar(_RENORM_EPS)))
            w = B.assign(w, (rows,), B.where(over, B.mul(picked, scale), picked))
    return w


def no_vjp(B, gs, ins, outs, p, need):
    """embedding_renorm_ runs under no_grad: no node asks this."""
    raise AssertionError("embedding_renorm has no node")


#: how it reads: the weight with its indexed rows over max_norm scaled down to it
RENORM = Fn("embedding_renorm", "\\operatorname{renorm}_{#s}\\left(#0,\\ #1\\right)", no_gradient)


def _num(q: Fraction) -> str:
    return str(q.numerator) if q.denominator == 1 else f"{float(q):g}"


def _renorm_sub(p: RenormSpec) -> str:
    return f"\\mathrm{{max\\_norm}}={_num(p.max_norm)},\\,p={_num(p.norm_type)}"


OPS = (
    Op("embedding", "EmbeddingBackward0", embedding_forward, embedding_vjp, embedding_shape, (Save("indices", "in", 1),),
       "g rows added into weight's rows at the indices (none into padding_idx; / count with scale_grad_by_freq)",
       negzero="structural", grows=False, differentiable=(True, False),
       kink_doc="padding_idx's row gets no gradient; scale_grad_by_freq divides by the index's count (PyTorch's "
                "conventions, not derivatives)",
       math=Math(layer((EMBEDDING,), _embedding_sub)),
       checks=(Check(((4, 2), (3,)), EmbeddingSpec(-1), given=((1, (2, 0, 2)),)),
               Check(((3, 2), (2, 2)), EmbeddingSpec(-1), given=((1, (1, 0, 0, 2)),)))),
    Op("embedding_renorm", "(none)", renorm_forward, no_vjp, renorm_shape, (),
       "not differentiable: F.embedding's in-place renorm under no_grad, no node", grows=False,
       differentiable=(False, False), kink_doc="-- (no node; a row exactly at max_norm is left alone)",
       math=Math(lambda a, p, shape, k: TFn(RENORM, (a[0], a[1]), tuple(shape), _renorm_sub(p), p))),
)
