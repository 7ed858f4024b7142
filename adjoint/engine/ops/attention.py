"""Attention's primitives: ``_scaled_dot_product_flash_attention_for_cpu``
(``ScaledDotProductFlashAttentionForCpuBackward0``, what ``F.scaled_dot_product_attention``
runs on the CPU, and ``MultiheadAttention`` with ``need_weights=False``), and ``baddbmm``
(``BaddbmmBackward0``, the masked scores of ``MultiheadAttention``).

``mean_dims`` normalizes ``mean(dim=...)`` arguments into the reductions family's
``mean_dim`` parameters, for the modules that average over fixed dims.

Flash attention: ``out = softmax(q k^T * scale + mask) v`` per batch and head, with
``scale = 1 / sqrt(E)`` (a closed form), and ``logsumexp`` of the scores, an output without a
gradient. The node saves ``attn_mask`` (when given), ``key``, ``query``, ``value``,
``logsumexp``, ``output``, in that pack order (probed on 2.13). With ``enable_gqa`` the key and
value may have fewer heads, one per group of query heads (they are saved as given; their
gradients sum over the group). The VJP is the softmax
chain rule: ``dS = P * (dO v^T - rowsum(dO * out))``, ``dq = dS k * scale``,
``dk = dS^T q * scale``, ``dv = P^T dO``, with ``P = exp(q k^T * scale + mask - logsumexp)``
from the saved (unpacked) tensors, as the CPU kernel recomputes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from adjoint.engine.torch_errors import TorchError
from adjoint.format.errors import ProblemError
from adjoint.values.mathtree import Fn, TBin, TFn, generic_vjp, layer, no_gradient
from adjoint.engine.ops.record import Check, Math, Op, Save
from adjoint.engine.ops.linalg import BMM
from adjoint.engine.ops.activations import finite_max


def _prod(xs) -> int:
    out = 1
    for v in xs:
        out *= v
    return out


def batched_matmul(B, a, b):
    """(..., m, k) @ (..., k, n) for equal leading dims, one exact product per batch entry."""
    sa, sb = B.shape(a), B.shape(b)
    lead = tuple(sa[:-2])
    n = _prod(lead)
    a3 = B.reshape(a, (n,) + tuple(sa[-2:]))
    b3 = B.reshape(b, (n,) + tuple(sb[-2:]))
    if n == 0:
        return B.zeros(lead + (sa[-2], sb[-1]))
    pieces = [B.matmul2d(B.index(a3, (i,)), B.index(b3, (i,))) for i in range(n)]
    return B.reshape(B.stack(pieces, 0), lead + (sa[-2], sb[-1]))


def transpose_last(B, x):
    nd = len(B.shape(x))
    return B.permute(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def softmax_last(B, x):
    e = B.exp(x)
    shape = B.shape(e)
    return B.div(e, B.sum_to(e, tuple(shape[:-1]) + (1,)))


# ----------------------------------------------------------------------------- flash attention

@dataclass(frozen=True)
class SdpaSpec:
    """``head_dim`` E (the scale is the closed form 1/sqrt(E) unless ``scale`` is given); ``is_causal``:
    key j > query i is masked out (top-left aligned, as the CPU kernel does)."""

    head_dim: int
    is_causal: bool = False
    scale: object = None          # F.scaled_dot_product_attention(scale=): a number; None: 1/sqrt(E)


def sdpa_shape(shapes, p: SdpaSpec, loc):
    q, k, v, mask = shapes
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        raise ProblemError(loc, "scaled_dot_product_attention on the CPU here takes 4-D query, key and value "
                                "(batch, heads, length, dim)")
    grouped = k[1] == v[1] and k[1] and q[1] % k[1] == 0   # enable_gqa: a key/value head per group of query heads
    if q[-1] != k[-1] or k[-2] != v[-2] or q[0] != k[0] or k[0] != v[0] or not grouped:
        # (the binding sends other head, batch or head-dim sizes down the math path, whose ops raise PyTorch's errors)
        raise ProblemError(loc, f"scaled_dot_product_attention: query {list(q)}, key {list(k)} and value {list(v)} "
                                "with a key length other than the value's are not modelled: PyTorch 2.13's fused CPU "
                                "kernel runs them without a check")
    # a mask here broadcasts: the fused kernel takes only a 2-D (L or 1, S or 1) or 4-D (B or 1, H or 1,
    # L or 1, S or 1) one; the binding sends any other down the math path, whose in-place add raises
    # PyTorch's broadcast error after that path's own packs (adjoint.engine.bindings.sdpa_math)
    out = tuple(q[:-1]) + (v[-1],)
    return (out, tuple(q[:-1]))


def _grouped(B, q, kv):
    """A key or value tensor read by the query's heads: with ``enable_gqa``, kv head h serves
    query heads h*r .. h*r + r - 1 (r = query heads / kv heads), as the CPU kernel indexes it."""
    sq, skv = B.shape(q), B.shape(kv)
    if sq[1] == skv[1]:
        return kv
    r = sq[1] // skv[1]
    wide = B.broadcast_to(B.reshape(kv, (skv[0], skv[1], 1) + tuple(skv[2:])), (skv[0], skv[1], r) + tuple(skv[2:]))
    return B.reshape(wide, (skv[0], sq[1]) + tuple(skv[2:]))


def _ungrouped(B, g, kv):
    """The gradient of a grouped key or value: each kv head's share summed over its query heads."""
    skv = B.shape(kv)
    sg = B.shape(g)
    if sg[1] == skv[1]:
        return g
    r = sg[1] // skv[1]
    split = B.reshape(g, (skv[0], skv[1], r) + tuple(sg[2:]))
    return B.reshape(B.sum_to(split, (skv[0], skv[1], 1) + tuple(sg[2:])), tuple(skv))


def _scores(B, q, k, mask, head_dim, given=None):
    scale = B.div(B.scalar(1), B.sqrt(B.scalar(head_dim))) if given is None else B.scalar(given)
    s = B.mul(batched_matmul(B, q, transpose_last(B, k)), scale)
    if mask is not None:
        s = B.add(s, mask)
    return s, scale


def _causal(B, s, kept: bool):
    """The causal mask over the scores' last two dims: 1 where query i keeps key j (j <= i), or
    (``kept`` False) 1 where it removes it."""
    shape = B.shape(s)
    lq, lk = shape[-2], shape[-1]
    return B.constant([int((j <= i) == kept) for i in range(lq) for j in range(lk)], (lq, lk))


def _causal_keep(B, s, p: SdpaSpec, top=None):
    """exp of the scores (less each row's ``top``, if given), zero where the causal mask removes a
    key (exp(-inf)); a removed key's exponent is taken as 0 first, so its exp cannot overflow."""
    x = s if top is None else B.sub(s, top)
    if not p.is_causal:
        return B.exp(x)
    keep = _causal(B, s, True)
    return B.mul(B.exp(x if top is None else B.mul(x, keep)), keep)


def _row_top(B, s, p: SdpaSpec, masked: bool = False):
    """Each row's largest score over the keys it keeps (the CPU kernel's running max skips the
    keys the causal mask removes: a removed score counts as the row's smallest; an attention mask
    removes a key with -inf, and a row it removes entirely is left unshifted)."""
    last = (len(B.shape(s)) - 1,)
    if masked:
        return finite_max(B, s, last[0])
    if not p.is_causal:
        return B.amax(s, last, True)
    low = B.amax(s, last, True, largest=False)
    return B.amax(B.add(B.mul(s, _causal(B, s, True)), B.mul(low, _causal(B, s, False))), last, True)


def _row_totals(B, e, masked: bool):
    """The rows' sums of exp; a row a mask removes entirely sums to 0, which the CPU kernel
    treats as 1: its output row is 0 and its logsumexp 0 (probed on 2.13), never nan."""
    total = B.sum_to(e, tuple(B.shape(e)[:-1]) + (1,))
    if not masked:
        return total
    return B.choose(total, "==", B.full(B.shape(total), 1), total)


def _shiftable(B, s, mask, p: SdpaSpec) -> bool:
    """Whether the scores are shifted by each row's max (over the keys it keeps) before exp, as the
    CPU kernel's running max does (the same exact values; in float64 exp of a large score would
    overflow where PyTorch's does not: nan where PyTorch is finite); not with free symbols (the
    max is open)."""
    return not B.is_symbolic(s)


def sdpa_forward(B, ins, p: SdpaSpec):
    q, k, v, mask = ins
    k, v = _grouped(B, q, k), _grouped(B, q, v)
    s, _ = _scores(B, q, k, mask, p.head_dim, p.scale)
    if _shiftable(B, s, mask, p):
        top = _row_top(B, s, p, mask is not None)
        e = _causal_keep(B, s, p, top)
        total = _row_totals(B, e, mask is not None)
        out = batched_matmul(B, B.div(e, total), v)
        return out, B.reshape(B.add(B.log(total), top), tuple(B.shape(s)[:-1]))
    e = _causal_keep(B, s, p)
    total = _row_totals(B, e, mask is not None)
    out = batched_matmul(B, B.div(e, total), v)
    return out, B.reshape(B.log(total), tuple(B.shape(s)[:-1]))


def sdpa_vjp(B, gs, ins, outs, p: SdpaSpec, need):
    q, k0, v0, mask = ins
    k, v = _grouped(B, q, k0), _grouped(B, q, v0)
    g, out = gs[0], outs[0]
    s, scale = _scores(B, q, k, mask, p.head_dim, p.scale)
    lse_given = outs[1] if len(outs) > 1 and outs[1] is not None else None
    if lse_given is not None and _shiftable(B, s, mask, p):   # P = exp(scores - logsumexp), as the kernel
        e = _causal_keep(B, s, p, B.reshape(lse_given, tuple(B.shape(lse_given)) + (1,)))
    else:
        e = _causal_keep(B, s, p)
    # the CPU kernel (cpu_flash_attention_backward) recomputes P = exp(scores - logsumexp) from the
    # saved logsumexp, not by normalizing again: under saved-tensor hooks whose unpack changes the
    # values, the unpacked q, k and logsumexp give P (tests/data/regressions/sdpa_backward_uses_saved_logsumexp.yaml)
    lse = outs[1] if len(outs) > 1 and outs[1] is not None else None
    if lse is None:
        prob = B.div(e, _row_totals(B, e, mask is not None))
    elif _shiftable(B, s, mask, p):
        prob = e
    else:
        prob = B.div(e, B.exp(B.reshape(lse, tuple(B.shape(lse)) + (1,))))
    gq = gk = gv = None
    if need[2]:
        gv = batched_matmul(B, transpose_last(B, prob), g)
    if need[0] or need[1]:
        dp = batched_matmul(B, g, transpose_last(B, v))
        row = B.sum_to(B.mul(g, out), tuple(B.shape(out)[:-1]) + (1,))
        ds = B.mul(prob, B.sub(dp, row))
        if need[0]:
            gq = B.mul(batched_matmul(B, ds, k), scale)
        if need[1]:
            gk = B.mul(batched_matmul(B, transpose_last(B, ds), q), scale)
    return [gq, None if gk is None else _ungrouped(B, gk, k0), None if gv is None else _ungrouped(B, gv, v0), None]


# ----------------------------------------------------------------------------- baddbmm

def baddbmm_shape(shapes, p, loc):
    s, b1, b2 = shapes
    if len(b1) != 3 or len(b2) != 3 or b1[0] != b2[0] or b1[2] != b2[1]:
        raise ProblemError(loc, f"baddbmm: batch1 {list(b1)} and batch2 {list(b2)} cannot be multiplied: an internal "
                                "error (adjoint makes baddbmm only inside MultiheadAttention, whose shapes fit)")
    out = (b1[0], b1[1], b2[2])
    from adjoint.engine.ops.views import expand_shape
    expand_shape([s], out, loc)   # baddbmm expands self to the product's sizes: expand's error, with its wording
    return out


def baddbmm_forward(B, ins, p):
    s, b1, b2 = ins
    return B.add(s, batched_matmul(B, b1, b2))


def baddbmm_vjp(B, gs, ins, outs, p, need):
    g = gs[0]
    s, b1, b2 = ins
    return [B.sum_to(g, B.shape(s)) if need[0] else None,
            batched_matmul(B, g, transpose_last(B, b2)) if need[1] else None,
            batched_matmul(B, transpose_last(B, b1), g) if need[2] else None]


# ----------------------------------------------------------------------------- how they read (adjoint.mathtree)
# Flash attention reads as one function of (q, k, v[, mask]) (J^T lambda declared generic: the softmax chain
# rule above); its logsumexp output has no gradient. baddbmm is the algebra's own: s + bmm(b1, b2).

ATTENTION = Fn("attention", "\\operatorname{attention}_{#s}\\left(#*\\right)", generic_vjp)
LOGSUMEXP = Fn("attention_logsumexp", "\\operatorname{lse}_{#s}\\left(#*\\right)", no_gradient)


def _sdpa_sub(p: SdpaSpec) -> str:
    return "\\mathrm{causal}" if p.is_causal else ""


def _baddbmm_formula(a, p, shape, k):
    return TBin("add", a[0], TFn(BMM, (a[1], a[2]), tuple(shape)), tuple(shape))


OPS = (
    Op("sdpa_flash_cpu", "ScaledDotProductFlashAttentionForCpuBackward0", sdpa_forward, sdpa_vjp, sdpa_shape,
       (Save("attn_mask", "in", 3), Save("key", "in", 1), Save("query", "in", 0), Save("value", "in", 2),
        Save("logsumexp", "out", 1), Save("output", "out", 0)),
       "P = softmax(q k^T / sqrt(E) + mask); dS = P * (g v^T - rowsum(g * out)); dq = dS k / sqrt(E), "
       "dk = dS^T q / sqrt(E), dv = P^T g", grows=True, outputs=2, diff_outputs=1,
       differentiable=(True, True, True, False),
       checks=(Check(((1, 1, 2, 1), (1, 1, 2, 1), (1, 1, 2, 1), None), SdpaSpec(1)),
               Check(((1, 1, 2, 1), (1, 1, 2, 1), (1, 1, 2, 1), (1, 1, 2, 2)), SdpaSpec(1, True)),
               Check(((1, 2, 2, 1), (1, 1, 2, 1), (1, 1, 2, 1), None), SdpaSpec(1))),
       math=Math(layer((ATTENTION, LOGSUMEXP), _sdpa_sub))),
    Op("baddbmm", "BaddbmmBackward0", baddbmm_forward, baddbmm_vjp, baddbmm_shape,
       (Save("batch1", "in", 1, if_need=2), Save("batch2", "in", 2, if_need=1)),
       "g (summed back to self), g b2^T, b1^T g, per batch", math=Math(_baddbmm_formula), checks=(Check(((1, 2, 2), (2, 2, 1), (2, 1, 2))),), integers="alone"),
)


def mean_dims(ndim: int, dims, keepdim: bool, loc) -> tuple[tuple[int, ...], bool]:
    """``mean(dim=...)``'s dims normalized (negative counted from the end), refusing out of range."""
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    out = []
    for d in dims:
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise TorchError("IndexError", f"Dimension out of range (expected to be in range of [{-max(ndim, 1)}, "
                                           f"{max(ndim, 1) - 1}], but got {d})")
        out.append(d % ndim if ndim else 0)   # a 0-d tensor's dim 0 or -1
    return tuple(sorted(set(out))), keepdim



# ----------------------------------------------------------------------------- repeat (bias_k / bias_v)

def repeat_shape(shapes, reps, loc):
    shape = tuple(shapes[0])
    if len(reps) < len(shape):
        raise TorchError("RuntimeError", "Number of dimensions of repeat dims can not be smaller than number of "
                                         "dimensions of tensor")
    padded = (1,) * (len(reps) - len(shape)) + shape
    return tuple(s * r for s, r in zip(padded, reps))


def repeat_forward(B, ins, reps):
    x = ins[0]
    shape = B.shape(x)
    padded = (1,) * (len(reps) - len(shape)) + tuple(shape)
    x = B.reshape(x, padded)
    # tile: (r0, s0, r1, s1, ...) then merged, as np.tile lays it out
    inter = tuple(v for r, s in zip(reps, padded) for v in (r, s))
    expanded = B.broadcast_to(B.reshape(x, tuple(v for s in padded for v in (1, s))), inter)
    return B.reshape(expanded, repeat_shape([shape], reps, None))


def repeat_vjp(B, gs, ins, outs, reps, need):
    x = ins[0]
    shape = B.shape(x)
    padded = (1,) * (len(reps) - len(shape)) + tuple(shape)
    inter = tuple(v for r, s in zip(reps, padded) for v in (r, s))
    summed = B.sum_to(B.reshape(gs[0], inter), tuple(v for s in padded for v in (1, s)))
    return [B.reshape(summed, shape)]


#: how repeat reads; J^T lambda declared generic (the copies summed back)
REPEAT = Fn("repeat", "\\operatorname{repeat}_{#s}\\left(#0\\right)", generic_vjp)

OPS = OPS + (
    Op("repeat", "RepeatBackward0", repeat_forward, repeat_vjp, repeat_shape, (),
       "g summed over the repeated copies", negzero="structural", grows=False,
       math=Math(layer((REPEAT,), lambda reps: "(" + ",".join(str(r) for r in reps) + ")")), checks=(Check(((1, 2),), (3, 2)), Check(((2,),), (2, 1, 2))), copies_values=True),
)
