"""``F.scaled_dot_product_attention``: what PyTorch 2.13 runs on the CPU (probed in real torch).

``at::scaled_dot_product_attention`` first validates its inputs (``validate_sdpa_input``:
query, key and value of one dtype; a mask bool or floating; a RuntimeError otherwise, before
any node), turns a bool mask into an additive one (``convert_boolean_attn_mask``: 0 where
True, ``-inf`` where False, in the query's dtype; no node), then picks a kernel
(``sdp_utils_cpp.cpp``). The fused CPU kernel, one ``ScaledDotProductFlashAttentionForCpuBackward0``
(:mod:`adjoint.engine.ops.attention`), runs when query, key and value are 4-D
``(batch, heads, length, E)`` with equal batch and head counts, one head dim E for all three,
nonzero lengths, a last dim of stride 1, ``dropout_p == 0``, and a mask (if any) that needs no
gradient and is 2-D ``(L or 1, S or 1)`` or 4-D ``(B or 1, H or 1, L or 1, S or 1)``; a mask
and ``is_causal=True`` together are allowed there (both apply). The node saves the converted
mask as it was given (not broadcast). A row every key of which is masked out gives an output
row of 0 and a logsumexp of 0 (no nan), in the forward and the backward.

Anything else takes the math path (``_scaled_dot_product_attention_math``: ``mul``, ``matmul``,
``_safe_softmax`` (``SafeSoftmaxBackward0``), ``matmul``): :mod:`adjoint.engine.bindings.sdpa_math`.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.bindings.signature import Function, Param
from adjoint.engine.graph import Tensor
from adjoint.engine.ops.attention import SdpaSpec
from adjoint.engine.torch_errors import TorchError

_C10 = {"int64": "long int", "float32": "float", "float64": "double", "bool": "bool"}
_FLOATS = ("float32", "float64")


def _validate(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> None:
    """``validate_sdpa_input``: PyTorch's RuntimeErrors, raised before any node."""
    if not (q.dtype == k.dtype == v.dtype):
        raise TorchError("RuntimeError", f"Expected query, key, and value to have the same dtype, but got query.dtype: "
                                         f"{_C10[q.dtype]} key.dtype: {_C10[k.dtype]} and value.dtype: "
                                         f"{_C10[v.dtype]} instead.", "dtype")
    if mask is not None and mask.dtype not in ("bool",) + _FLOATS and mask.dtype != q.dtype:
        raise TorchError("RuntimeError", f"Expected attn_mask dtype to be bool or float or to match query dtype, but got "
                                         f"attn_mask.dtype: {_C10[mask.dtype]} and  query.dtype: {_C10[q.dtype]} "
                                         "instead.", "dtype")
    if min(len(q.shape), len(k.shape), len(v.shape)) < 2:
        raise TorchError("RuntimeError", f"Expected query, key, and value to all be  at least 2 dimensional, but got "
                                         f"query.dim: {len(q.shape)} key.dim: {len(k.shape)} and value.dim: "
                                         f"{len(v.shape)} instead.")


def _flash_refusal(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, gqa: bool = False) -> str | None:
    """Why ``use_flash_attention_cpp`` says no, or None when the fused kernel runs; its checks in
    its order. With ``enable_gqa`` the kernel takes grouped heads (``check_grouped_query_attention``):
    key and value with one head count that divides the query's. ``check_attn_mask_shape`` reads a mask's ``size(-2)`` once it needs no gradient: a
    0-d or 1-D mask is that call's IndexError, before any node (even one that would broadcast;
    not when a tensor has no element, where PyTorch 2.13 takes another path, not followed here)."""
    if not (len(q.shape) == len(k.shape) == len(v.shape) == 4):
        return "query, key and value are not all 4-D"
    if not (q.shape[0] == k.shape[0] == v.shape[0]):
        return "their batch sizes differ"
    if gqa:
        if k.shape[1] != v.shape[1] or q.shape[1] % k.shape[1]:
            return "the key's and value's head counts differ or do not divide the query's"
    elif not (q.shape[1] == k.shape[1] == v.shape[1]):
        return "their head counts differ"
    if mask is not None:
        if mask.requires_grad:
            return "the mask requires grad"
        m = mask.shape
        if len(m) < 2 and all(0 not in t.shape for t in (q, k, v)):
            raise TorchError("IndexError", "Dimension specified as -2 but tensor has no dimensions" if not m else
                                           "Dimension out of range (expected to be in range of [-1, 0], but got -2)")
        if len(m) not in (2, 4) or m[-2] not in (q.shape[2], 1) or m[-1] not in (k.shape[2], 1):
            return f"a mask of shape {list(m)}"
        if len(m) == 4 and (m[0] not in (1, q.shape[0]) or m[1] not in (1, q.shape[1])):
            return f"a mask of shape {list(m)}"
    if not (q.shape[-1] == k.shape[-1] == v.shape[-1]):
        return "their head dims differ"
    if 0 in (q.shape[-2], k.shape[-2], v.shape[-2]):
        return "a length is 0"
    for t in (q, k, v):
        strides = getattr(t, "strides", None)
        if strides is not None and len(strides) == 4 and strides[-1] != 1:
            return "a last dim of stride other than 1"
    return None


def _additive(rt, mask: Tensor, dtype: str) -> Tensor:
    """``convert_boolean_attn_mask``: 0 where the mask is True (attend), ``-inf`` where False; no node."""
    from adjoint.engine.ops.masking import infinity
    B = rt.B
    shape = B.shape(mask.value)
    return rt.tensor(B.choose(mask.value, "!=", B.zeros(shape), infinity(B, True, shape)), dtype=dtype)


def scaled_dot_product_attention(rt, a: dict, loc: Loc):
    q, k, v, mask = a["query"], a["key"], a["value"], a["attn_mask"]
    dropout_p = a["dropout_p"]
    if dropout_p != 0:
        raise ProblemError(loc, "scaled_dot_product_attention with dropout_p > 0 drops attention weights at random, "
                                "which no prediction can know; give dropout_p=0")
    for name in ("query", "key", "value"):
        if a[name].dtype not in _FLOATS:
            raise ProblemError(loc, f"scaled_dot_product_attention of a {a[name].dtype} {name} is not modelled")
    _validate(q, k, v, mask)
    if mask is not None and mask.dtype not in ("bool", q.dtype):
        raise ProblemError(loc, f"a {mask.dtype} attn_mask with a {q.dtype} query is not modelled yet; give the mask "
                                "the query's dtype")
    if mask is not None and mask.dtype == "bool":
        mask = _additive(rt, mask, q.dtype)
    return sdpa_kernel(rt, q, k, v, mask, bool(a["is_causal"]), a["scale"], loc, bool(a["enable_gqa"]))


def sdpa_kernel(rt, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool, scale, loc: Loc,
                gqa: bool = False) -> Tensor:
    """The kernel ``at::scaled_dot_product_attention`` picks for validated inputs and an additive
    (float) mask: the fused CPU one, or the math path when ``use_flash_attention_cpp`` says no (a
    mask that requires grad among its reasons). ``F.multi_head_attention_forward`` with
    ``need_weights=False`` calls the same function, so its learned float ``attn_mask`` gets a
    gradient through the math path too. ``enable_gqa`` (``gqa``): the fused kernel reads each key
    and value head for its group of query heads itself (one node, saving key and value as given);
    the math path repeats them first (:func:`adjoint.engine.bindings.sdpa_math.grouped_heads`)."""
    if _flash_refusal(q, k, v, mask, gqa) is not None:   # the math path (adjoint.engine.bindings.sdpa_math)
        from adjoint.engine.bindings.sdpa_math import sdpa_math
        return sdpa_math(rt, q, k, v, mask, is_causal, scale, loc, gqa)
    spec = SdpaSpec(q.shape[-1], is_causal, None if scale is None else Fraction(scale))
    out, _ = rt.apply("sdpa_flash_cpu", [q, k, v, mask], spec, loc)
    out.strides = q.strides   # the CPU kernel lays its output out like the query
    return out


FUNCTIONS = (
    Function("scaled_dot_product_attention",
             (Param("query", "tensor"), Param("key", "tensor"), Param("value", "tensor"),
              Param("attn_mask", "tensor", None), Param("dropout_p", "number", Fraction(0)),
              Param("is_causal", "bool", False), Param("scale", "number", None, keyword_only=True),
              Param("enable_gqa", "bool", False, keyword_only=True)),
             scaled_dot_product_attention, where="function",
             doc="ScaledDotProductFlashAttentionForCpuBackward0 (4-D query, key, value; saves attn_mask, key, query, "
                 "value, logsumexp, output); a bool mask turned into 0 / -inf first (no node); enable_gqa: key and "
                 "value heads shared by groups of query heads (the math path: repeat_interleave over dim -3 first)"),
)
