"""``F._canonical_mask``: a bool attention mask as the float mask PyTorch makes of it.

``torch.zeros_like(mask, dtype=query.dtype).masked_fill_(mask, float("-inf"))``: 0 where the
mask is False, ``-inf`` where it is True. Nothing requires grad there, so no node is made; the
result is a plain float tensor the attention adds to its scores (``exp(-inf)`` is exactly 0).
A float mask is returned as it is. (A key_padding_mask and an attn_mask of different dtypes: the
callers issue PyTorch's deprecation warning.)
"""

from __future__ import annotations

from adjoint.engine.graph import Tensor


def canonical_mask(rt, mask: Tensor | None, dtype: str) -> Tensor | None:
    if mask is None or mask.dtype != "bool":
        return mask
    from adjoint.engine.ops.masking import infinity
    B = rt.B
    shape = B.shape(mask.value)
    value = B.choose(mask.value, "!=", infinity(B, True, shape), B.zeros(shape))
    return rt.tensor(value, dtype=dtype)
