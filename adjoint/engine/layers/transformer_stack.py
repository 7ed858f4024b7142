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

``nn.TransformerDecoder``'s forward: no mask canonicalization (each layer's attentions do it);
``tgt_is_causal = _detect_is_causal_mask(tgt_mask, tgt_is_causal, seq_len)`` on the mask as given
(a bool mask is compared with ``_generate_square_subsequent_mask`` made bool: True above the
diagonal; an int64 one is that call's RuntimeError); each ``layers.i`` called with every mask and
both flags, then ``norm``.

``nn.Transformer``'s forward: its two checks of the sizes (RuntimeError "the batch number of src
and tgt must be equal", "the feature number of src and tgt must be equal to d_model"), then
``encoder(src, mask=src_mask, src_key_padding_mask=..., is_causal=src_is_causal)`` and
``decoder(tgt, memory, ...)``, both called as modules.
"""

from __future__ import annotations

from adjoint.format.errors import ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.layers.transformer import bind_forward, canonical_masks
from adjoint.engine.torch_errors import TorchError

def _bind(c) -> dict:
    return bind_forward(c, "TransformerEncoder", ("src", "mask", "src_key_padding_mask", "is_causal"), ("src",),
                        ("mask", "src_key_padding_mask"), ("is_causal",), flag_default=None)


def _is_square_subsequent(rt, mask: Tensor, size: int) -> bool:
    """``mask == _generate_square_subsequent_mask(size, dtype=mask.dtype)`` everywhere (shapes
    first): a float mask ``-inf`` above the diagonal and 0 elsewhere, a bool one True above it
    (``torch.full(..., -inf, dtype=torch.bool)`` is True) and False elsewhere; an int64 one is
    ``torch.full``'s RuntimeError (-inf is no int64)."""
    if mask.dtype == "int64":
        raise TorchError("RuntimeError", "value cannot be converted to type int64_t without overflow")
    if tuple(mask.shape) != (size, size):
        return False
    if mask.dtype == "bool":   # True exactly where the float mask is -inf
        from adjoint.engine.layers.masks import canonical_mask
        mask = canonical_mask(rt, mask, rt.dtype)
    B = rt.B
    from adjoint.engine.ops.masking import infinity
    rows = []
    for i in range(size):
        parts = [B.zeros((i + 1,))]
        if size - i - 1:
            parts.append(infinity(B, True, (size - i - 1,)))
        rows.append(B.concat(parts, 0) if len(parts) > 1 else parts[0])
    return bool(B.equals(mask.value, B.stack(rows, 0)))


def _seq_len(src: Tensor, batch_first: bool) -> int:
    """``_get_seq_len``: an unbatched input's first size, else the one batch_first says."""
    shape = tuple(src.shape)
    return shape[0] if len(shape) == 2 else shape[1 if batch_first else 0]


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
    seq_len = _seq_len(src, dict(c.arg("encoder_layer"))["batch_first"])   # first_layer.self_attn.batch_first
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


_DECODER = ("tgt", "memory", "tgt_mask", "memory_mask", "tgt_key_padding_mask", "memory_key_padding_mask",
            "tgt_is_causal", "memory_is_causal")


def _flag(c, a: dict, name: str, default, what: str):
    v = a.setdefault(name, default)
    if not (isinstance(v, bool) or (v is None and default is None)):
        raise ProblemError(c.loc, f"{what}: '{name}' must be True, False{' or None' if default is None else ''}")
    return v


def decoder_forward(c):
    a = bind_forward(c, "TransformerDecoder", _DECODER, _DECODER[:2], _DECODER[2:6], ())
    _flag(c, a, "tgt_is_causal", None, "TransformerDecoder")
    _flag(c, a, "memory_is_causal", False, "TransformerDecoder")
    kids = {k.name: k for k in c.module.children}
    layers = kids["layers"].children
    tgt, mask = a["tgt"], a["tgt_mask"]
    seq_len = _seq_len(tgt, dict(c.arg("decoder_layer"))["batch_first"])   # self.layers[0].self_attn.batch_first
    is_causal = a["tgt_is_causal"] is True
    if a["tgt_is_causal"] is None and mask is not None:
        is_causal = _is_square_subsequent(c.rt, mask, seq_len)
    output = tgt
    for mod in layers:
        output = c.call_child(mod, [output, a["memory"]], {
            "tgt_mask": mask, "memory_mask": a["memory_mask"], "tgt_key_padding_mask": a["tgt_key_padding_mask"],
            "memory_key_padding_mask": a["memory_key_padding_mask"], "tgt_is_causal": is_causal,
            "memory_is_causal": a["memory_is_causal"]})
    if "norm" in kids:
        output = c.call_child(kids["norm"], [output], {})
    return output


_TRANSFORMER = ("src", "tgt", "src_mask", "tgt_mask", "memory_mask", "src_key_padding_mask", "tgt_key_padding_mask",
                "memory_key_padding_mask", "src_is_causal", "tgt_is_causal", "memory_is_causal")


def transformer_forward(c):
    a = bind_forward(c, "Transformer", _TRANSFORMER, _TRANSFORMER[:2], _TRANSFORMER[2:8], ())
    for name in ("src_is_causal", "tgt_is_causal"):
        _flag(c, a, name, None, "Transformer")
    _flag(c, a, "memory_is_causal", False, "Transformer")
    src, tgt = a["src"], a["tgt"]
    if len(src.shape) not in (2, 3) or len(tgt.shape) not in (2, 3):
        raise ProblemError(c.loc, "Transformer: give src and tgt of 2 or 3 dimensions (PyTorch's errors for others "
                                  "are not modelled)")
    s, t = tuple(src.shape), tuple(tgt.shape)
    batch = 0 if c.arg("batch_first") else 1
    if len(s) == 3 and s[batch] != t[batch]:
        raise TorchError("RuntimeError", "the batch number of src and tgt must be equal")
    if s[-1] != c.arg("d_model") or t[-1] != c.arg("d_model"):
        raise TorchError("RuntimeError", "the feature number of src and tgt must be equal to d_model")
    kids = {k.name: k for k in c.module.children}
    memory = c.call_child(kids["encoder"], [src], {"mask": a["src_mask"], "src_key_padding_mask": a["src_key_padding_mask"],
                                                   "is_causal": a["src_is_causal"]})
    return c.call_child(kids["decoder"], [tgt, memory], {
        "tgt_mask": a["tgt_mask"], "memory_mask": a["memory_mask"], "tgt_key_padding_mask": a["tgt_key_padding_mask"],
        "memory_key_padding_mask": a["memory_key_padding_mask"], "tgt_is_causal": a["tgt_is_causal"],
        "memory_is_causal": a["memory_is_causal"]})


FORWARDS = {
    "TransformerEncoder": encoder_forward,
    "TransformerDecoder": decoder_forward,
    "Transformer": transformer_forward,
}
