"""The submodules PyTorch's built-in types own (``nn.MultiheadAttention().out_proj``).

They exist in PyTorch (``named_modules()`` lists them, hooks register on them), but whether a
hook on one fires depends on whether the built-in *calls* that submodule: MultiheadAttention
hands ``out_proj.weight`` and ``out_proj.bias`` to ``F.multi_head_attention_forward`` and never
calls ``out_proj`` as a module, so every hook registered on it is registered and never fires.
A problem file may name them as hook targets (``{module: attn.out_proj, kind: full_backward}``).
"""

from __future__ import annotations

#: built-in type -> the submodules it owns (relative names) that its forward never calls
UNCALLED = {"MultiheadAttention": ("out_proj",)}


def builtin_submodules(model) -> list[str]:
    """Labels of the built-ins' own submodules (``attn.out_proj``; a root MHA's: ``out_proj``)."""
    out = []
    for m in model.walk():
        for sub in UNCALLED.get(m.type, ()):
            out.append(f"{m.path}.{sub}" if m.path else sub)
    return out
