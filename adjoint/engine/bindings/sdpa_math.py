"""``F.scaled_dot_product_attention`` on PyTorch 2.13's math path
(``at::_scaled_dot_product_attention_math``, aten/src/ATen/native/transformers/attention.cpp),
taken on the CPU when the fused kernel refuses its inputs (query, key or value not 4-D, batch or
head sizes that differ, head dims that differ, a mask that requires grad or is 3-D, a last dim of
stride other than 1: :func:`adjoint.engine.bindings.attention._flash_refusal`)::

    sf = sqrt(scale if given else 1 / sqrt(E))        # a double: calculate_scale(...).sqrt()
    query = query_ * sf                               # MulBackward1 (a negative scale: * (0 - sf))
    key, value = pre_process_group_query_attention_input(query_, key, value, enable_gqa)
    attn = matmul(query, key.transpose(-2, -1) * sf)  # TransposeBackward0, MulBackward1, at::matmul
    attn.add_(attn_mask)                              # AddBackward0, in place (is_causal: ones.tril())
    attn = _safe_softmax(attn, -1)                    # SafeSoftmaxBackward0: an all -inf row gives 0
    return matmul(attn, value)

A bool mask was turned into 0 / ``-inf`` before (no node). ``is_causal`` with an explicit mask
raises PyTorch's RuntimeError here (the fused kernel accepts both).
"""

from __future__ import annotations

import math
from fractions import Fraction

from adjoint.format.errors import Loc
from adjoint.engine.bindings.core import matmul
from adjoint.engine.graph import Tensor
from adjoint.engine.torch_errors import TorchError

CAUSAL_AND_MASK = "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True"


def scaling_factor(head_dim: int, scale) -> tuple[Fraction, bool]:
    """``sdp::calculate_scale(query, |scale|).sqrt()`` as the double PyTorch multiplies by, and
    whether the scale is negative."""
    negative = scale is not None and scale < 0
    base = abs(float(scale)) if scale is not None else 1.0 / math.sqrt(head_dim)
    return Fraction(math.sqrt(base)), negative


def _causal_mask(rt, lq: int, lk: int, dtype: str) -> Tensor:
    """``convert_boolean_attn_mask(ones(L, S, bool).tril())``: 0 on and below the diagonal, -inf above."""
    from adjoint.engine.ops.masking import infinity
    B = rt.B
    keep = B.constant([int(j <= i) for i in range(lq) for j in range(lk)], (lq, lk))
    return rt.tensor(B.choose(keep, "!=", B.zeros((lq, lk)), infinity(B, True, (lq, lk))), dtype=dtype)


def _mul_scalar(rt, x: Tensor, s: Fraction, loc: Loc) -> Tensor:
    """``x * s`` with a C++ double (mul.Scalar, ``MulBackward1``), laid out as TensorIterator lays it
    (a transposed key stays transposed, so the matmul then reshapes it with ``_reshape_alias``: the op's
    ``iterator_layout``)."""
    return rt.apply("mul_scalar", [x], s, loc)


GQA_HEADS = "Number of heads in key and value must divide the number of heads in "   # sic: PyTorch 2.13's words


def grouped_heads(rt, q: Tensor, k: Tensor, v: Tensor, loc: Loc) -> tuple[Tensor, Tensor]:
    """``pre_process_group_query_attention_input`` with ``enable_gqa``: the head counts read at dim
    -3 (an IndexError for 2-D tensors); unless all three are equal, key and value each
    ``repeat_interleave``d to the query's head count over dim -3 (by 1 too: its nodes all the same),
    or PyTorch's RuntimeError when one of them does not divide it."""
    from adjoint.engine.bindings.rearrange import lower_repeat_interleave
    from adjoint.engine.bindings.signature import dim_index
    heads = [t.shape[dim_index(-3, len(t.shape), loc)] for t in (q, k, v)]
    if heads[0] == heads[1] == heads[2]:
        return k, v
    if heads[1] == 0 or heads[2] == 0 or heads[0] % heads[1] or heads[0] % heads[2]:
        raise TorchError("RuntimeError", GQA_HEADS)
    return tuple(lower_repeat_interleave(rt, {"input": t, "repeats": Fraction(heads[0] // h), "dim": -3,
                                              "output_size": None}, loc) for t, h in ((k, heads[1]), (v, heads[2])))


def sdpa_math(rt, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool, scale, loc: Loc,
              gqa: bool = False) -> Tensor:
    from adjoint.engine.inplace import apply_inplace
    ap = rt.apply
    sf, negative = scaling_factor(q.shape[-1], scale)
    query = _mul_scalar(rt, q, -sf if negative else sf, loc)
    if is_causal:
        if mask is not None:
            raise TorchError("RuntimeError", CAUSAL_AND_MASK)
        mask = _causal_mask(rt, q.shape[-2], k.shape[-2], q.dtype)
    if gqa:
        k, v = grouped_heads(rt, q, k, v, loc)
    key_t = ap("transpose", [k], (len(k.shape) - 2, len(k.shape) - 1), loc)
    attn = matmul(rt, query, _mul_scalar(rt, key_t, sf, loc), loc)
    if mask is not None:
        attn = apply_inplace(rt, "add", attn, [mask], None, loc)
    attn = ap("safe_softmax", [attn], len(attn.shape) - 1, loc)
    return matmul(rt, attn, v, loc)
