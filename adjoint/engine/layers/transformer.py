"""``nn.TransformerEncoderLayer``'s forward as torch 2.13 runs it when a gradient is needed
(torch/nn/modules/transformer.py): the slow path, calling its submodules as modules.

* ``F._canonical_mask`` of ``src_key_padding_mask`` (a bool mask becomes 0 / ``-inf``; a
  UserWarning when its dtype differs from ``src_mask``'s) and of ``src_mask``; no node;
* ``norm_first``: ``x = x + _sa_block(norm1(x))``, ``x = x + _ff_block(norm2(x))``; else
  ``x = norm1(x + _sa_block(x))``, ``x = norm2(x + _ff_block(x))``;
* ``_sa_block``: ``self_attn(x, x, x, attn_mask=, key_padding_mask=, need_weights=False,
  is_causal=)[0]`` then ``dropout1``; ``_ff_block``: ``linear2(dropout(activation(linear1(x))))``
  then ``dropout2``, the activation ``F.relu`` or ``F.gelu`` (a function, not a submodule).

The fast path (``torch._transformer_encoder_layer_fwd``, one fused call with no node and no
submodule called) runs only when nothing needs a gradient (or grad mode is off) and the layer
is in eval mode, batch_first, with biases and an even head count; such a call is refused.
"""

from __future__ import annotations

from adjoint.format.errors import ProblemError
from adjoint.engine.bindings import call_function
from adjoint.engine.bindings.core import binary
from adjoint.engine.bindings.views import getitem
from adjoint.engine.graph import Tensor
from adjoint.engine.pylist import sequence_name
from adjoint.engine.layers.masks import canonical_mask
from adjoint.engine.torch_errors import TorchError
from adjoint.engine.warns import warn

def bind_forward(c, what: str, names: tuple[str, ...], tensors: tuple[str, ...], masks: tuple[str, ...],
                 flags: tuple[str, ...], flag_default: bool | None = False) -> dict:
    """``what.forward``'s arguments by name, as Python binds them: ``tensors`` required tensors,
    ``masks`` tensors or None (their dtypes are :func:`canonical_masks`' to refuse), ``flags`` booleans defaulting to ``flag_default`` (None: also None allowed)."""
    if len(c.args) > len(names):
        raise ProblemError(c.loc, f"{what} takes at most {len(names)} arguments, got {len(c.args)}: Python raises "
                                  "TypeError in forward()")
    bound = dict(zip(names, c.args))
    for k, v in c.kwargs.items():
        if k not in names:
            raise ProblemError(c.loc, f"{what}.forward() got an unexpected keyword argument '{k}' "
                                      f"(it takes {', '.join(names)}): Python raises TypeError")
        if k in bound:
            raise ProblemError(c.loc, f"{what}.forward() got multiple values for argument '{k}'")
        bound[k] = v
    for k in tensors:
        if not isinstance(bound.get(k), Tensor):
            raise ProblemError(c.loc, f"{what} needs a tensor for '{k}'")
    for k in masks:
        v = bound.setdefault(k, None)
        if v is not None and not isinstance(v, Tensor):
            raise ProblemError(c.loc, f"{what}: '{k}' must be a tensor or None")
    for k in flags:
        v = bound.setdefault(k, flag_default)
        if flag_default is None and v is not None and not isinstance(v, bool):
            raise ProblemError(c.loc, f"{what}: '{k}' must be True, False or None")
        if flag_default is not None and not isinstance(v, bool):
            raise ProblemError(c.loc, f"{what}: '{k}' must be True or False")
    return bound


def canonical_masks(rt, src: Tensor, mask, kpm, mask_name: str, kpm_name: str = "src_key_padding_mask"):
    """``F._canonical_mask`` of the key padding mask then of the attention mask (named
    ``kpm_name`` and ``mask_name`` in PyTorch's words); no node. A mask neither bool nor floating
    is its AssertionError: the key padding mask's before the warning of mismatched dtypes, the
    attention mask's after it."""
    for name, m in ((kpm_name, kpm), (mask_name, mask)):
        if m is not None and m.dtype not in ("float32", "float64", "bool"):
            raise TorchError("AssertionError", f"only bool and floating types of {name} are supported")
        if m is kpm and kpm is not None and mask is not None and kpm.dtype != mask.dtype:
            warn(rt, "UserWarning", f"Support for mismatched {kpm_name} and {mask_name} is deprecated. Use same "
                                    "type for both instead.")
    kpm = canonical_mask(rt, kpm, src.dtype)
    return canonical_mask(rt, mask, src.dtype), kpm


def first_item(rt, out, loc):
    """``out[0]``, as ``_sa_block`` / ``_mha_block`` index what the attention module returned: its
    (output, weights) pair, or what a forward hook returned instead. A tuple's first item (Python's
    IndexError for an empty one); a tensor's first row (``select``: SelectBackward0, the residual
    add then broadcasting it); any other value (a number) is refused."""
    if isinstance(out, tuple):
        if not out:
            raise TorchError("IndexError", f"{sequence_name(out)} index out of range", "python")
        return out[0]
    if isinstance(out, Tensor):
        return getitem(rt, out, [0], loc, lone=True)
    raise ProblemError(loc, "an attention module's forward hook returns a number, which the layer indexes ([0]): "
                            "Python's TypeError names its type (int or float), not known here; return a tensor or a "
                            "tuple")


def _bind(c) -> dict:
    return bind_forward(c, "TransformerEncoderLayer", ("src", "src_mask", "src_key_padding_mask", "is_causal"),
                        ("src",), ("src_mask", "src_key_padding_mask"), ("is_causal",))


def _fast_path(c, src: Tensor) -> bool:
    """The conditions under which TransformerEncoderLayer.forward takes the fused fast path, in its
    order (the norms share one eps here): not when a module of the layer has a forward or
    forward_pre hook of its own (a feature extractor's)."""
    if len(src.shape) != 3 or c.training or not c.arg("batch_first") or not c.arg("bias") or c.arg("nhead") % 2:
        return False
    if c.forward_hooked():
        return False
    if not c.rt.grad_enabled:
        return True
    return not (src.requires_grad or any(p.requires_grad for kid in c.module.children for p in kid.params))


def encoder_layer_forward(c):
    a = _bind(c)
    rt, loc = c.rt, c.loc
    src = a["src"]
    mask, kpm = canonical_masks(rt, src, a["src_mask"], a["src_key_padding_mask"], "src_mask")
    if _fast_path(c, src):
        raise ProblemError(loc, f"'{c.module.label}' takes PyTorch's fast path here (torch._transformer_encoder_layer_fwd: "
                                "eval mode, batch_first, nothing requiring grad, no forward hooks on its modules), which adjoint "
                                "does not model yet")
    kids = {k.name: k for k in c.module.children}

    def call(name, *args, **kwargs):
        return c.call_child(kids[name], list(args), kwargs)

    def add(x, y):
        return binary(rt, "+", x, y, loc)

    def sa_block(x):
        out = call("self_attn", x, x, x, attn_mask=mask, key_padding_mask=kpm, need_weights=False,
                   is_causal=a["is_causal"])
        return call("dropout1", first_item(rt, out, loc))

    def ff_block(x):
        h = call_function(rt, c.arg("activation"), [call("linear1", x)], {}, loc)
        return call("dropout2", call("linear2", call("dropout", h)))

    x = src
    if c.arg("norm_first"):
        x = add(x, sa_block(call("norm1", x)))
        return add(x, ff_block(call("norm2", x)))
    x = call("norm1", add(x, sa_block(x)))
    return call("norm2", add(x, ff_block(x)))


_DECODER_NAMES = ("tgt", "memory", "tgt_mask", "memory_mask", "tgt_key_padding_mask", "memory_key_padding_mask",
                  "tgt_is_causal", "memory_is_causal")


def _bind_decoder(c) -> dict:
    return bind_forward(c, "TransformerDecoderLayer", _DECODER_NAMES, _DECODER_NAMES[:2], _DECODER_NAMES[2:6],
                        _DECODER_NAMES[6:])


def decoder_layer_forward(c):
    """nn.TransformerDecoderLayer.forward: no mask canonicalization of its own (the attentions
    do it), no fast path; self-attention, cross-attention on ``memory``, feed-forward."""
    a = _bind_decoder(c)
    rt, loc = c.rt, c.loc
    kids = {k.name: k for k in c.module.children}

    def call(name, *args, **kwargs):
        return c.call_child(kids[name], list(args), kwargs)

    def add(x, y):
        return binary(rt, "+", x, y, loc)

    def sa_block(x):
        out = call("self_attn", x, x, x, attn_mask=a["tgt_mask"], key_padding_mask=a["tgt_key_padding_mask"],
                   is_causal=a["tgt_is_causal"], need_weights=False)
        return call("dropout1", first_item(rt, out, loc))

    def mha_block(x):
        mem = a["memory"]
        out = call("multihead_attn", x, mem, mem, attn_mask=a["memory_mask"],
                   key_padding_mask=a["memory_key_padding_mask"], is_causal=a["memory_is_causal"],
                   need_weights=False)
        return call("dropout2", first_item(rt, out, loc))

    def ff_block(x):
        h = call_function(rt, c.arg("activation"), [call("linear1", x)], {}, loc)
        return call("dropout3", call("linear2", call("dropout", h)))

    x = a["tgt"]
    if c.arg("norm_first"):
        x = add(x, sa_block(call("norm1", x)))
        x = add(x, mha_block(call("norm2", x)))
        return add(x, ff_block(call("norm3", x)))
    x = call("norm1", add(x, sa_block(x)))
    x = call("norm2", add(x, mha_block(x)))
    return call("norm3", add(x, ff_block(x)))


FORWARDS = {
    "TransformerEncoderLayer": encoder_layer_forward,
    "TransformerDecoderLayer": decoder_layer_forward,
}
