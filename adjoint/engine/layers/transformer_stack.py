"""``nn.TransformerEncoder``'s forward as torch 2.13 runs it when a gradient is needed
(torch/nn/modules/transformer.py):

* ``F._canonical_mask`` of ``src_key_padding_mask`` (a bool mask becomes 0 / ``-inf``; the
  UserWarning "Support for mismatched src_key_padding_mask and mask is deprecated..." when its
  dtype differs from ``mask``'s) and of ``mask``; no node;
* the nested-tensor ("sparsity") fast path: only in eval mode, with a 3-D ``src``, a
  ``src_key_padding_mask``, no ``mask`` and nothing requiring grad (or grad mode off) -- then
  the layers run on a nested tensor; such a call is refused;
* ``is_causal = _detect_is_causal_mask(mask, is_causal, seq_len)``: with ``is_causal`` not given
  and a ``mask`` of shape ``(seq_len, seq_len)``, True when it equals
  ``_generate_square_subsequent_mask`` (``-inf`` above the diagonal, 0 elsewhere); no node;
* each ``layers.i`` called as a module, ``mod(output, src_mask=mask, is_causal=is_causal,
  src_key_padding_mask=...)`` (so its hooks and its submodules' hooks fire), then ``norm``.
"""

from __future__ import annotations

from adjoint.format.errors import ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.layers.transformer import bind_forward, canonical_masks

def _bind(c) -> dict:
    return bind_forward(c, "TransformerEncoder", ("src", "mask", "src_key_padding_mask", "is_causal"), ("src",),
                        ("mask", "src_key_padding_mask"), ("is_causal",), flag_default=None)


def _is_square_subsequent(rt, mask: Tensor, size: int) -> bool:
    """``mask == _generate_square_subsequent_mask(size)`` everywhere (shapes first)."""
    if tuple(mask.shape) != (size, size):
        return False
    from adjoint.engine.ops.masking import infinity
    B = rt.B
    rows = []
    for i in range(size):
        parts = [B.zeros((i + 1,))]
        if size - i - 1:
            parts.append(infinity(B, True, (size - i - 1,)))
        rows.append(B.concat(parts, 0) if len(parts) > 1 else parts[0])
    return bool(B.equals(mask.value, B.stack(rows, 0)))


def _sparsity_fast_path(c, src: Tensor, kpm, mask, first) -> bool:
    """PyTorch's conditions for running the layers on a nested tensor (torch.backends.mha's fast
    path enabled, no torch function, the CPU; mask_check's left alignment aside: a mask that is not
    left aligned sends each layer to its own fast path, refused there)."""
    from adjoint.format.validate_encoder import nested_tensor_warning
    if not c.arg("enable_nested_tensor") or nested_tensor_warning(c.module.args) is not None:
        return False   # use_nested_tensor is False
    if first.training or len(src.shape) != 3 or kpm is None or mask is not None:
        return False
    if not c.rt.grad_enabled:
        return True
    params = [p for kid in first.children for p in kid.params]
    return not (src.requires_grad or any(p.requires_grad for p in params))


def encoder_forward(c):
    a = _bind(c)
    rt, loc = c.rt, c.loc
    src = a["src"]
    mask, kpm = canonical_masks(rt, src, a["mask"], a["src_key_padding_mask"], "mask")
    kids = {k.name: k for k in c.module.children}
    layers = kids["layers"].children
    if _sparsity_fast_path(c, src, kpm, mask, layers[0]):
        raise ProblemError(loc, f"'{c.module.label}' takes PyTorch's nested-tensor fast path here (eval mode, "
                                "src_key_padding_mask, nothing requiring grad), which adjoint does not model yet; let the input or "
                                "a parameter require grad, or give training: true")
    shape = tuple(src.shape)
    batch_first = dict(c.arg("encoder_layer"))["batch_first"]   # first_layer.self_attn.batch_first
    seq_len = shape[0] if len(shape) == 2 else shape[1 if batch_first else 0]   # _get_seq_len
    is_causal = a["is_causal"] is True
    if a["is_causal"] is None and mask is not None:
        is_causal = _is_square_subsequent(rt, mask, seq_len)
    output = src
    for mod in layers:
        output = c.call_child(mod, [output], {"src_mask": mask, "is_causal": is_causal,
                                              "src_key_padding_mask": kpm})
    if "norm" in kids:
        output = c.call_child(kids["norm"], [output], {})
    return output


FORWARDS = {
    "TransformerEncoder": encoder_forward,
}
