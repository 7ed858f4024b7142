"""The warnings PyTorch's module constructors issue while the model is built, before any hook
is registered (``during: setup``): ``nn.TransformerEncoder``'s "enable_nested_tensor is True,
but self.use_nested_tensor is False because ..." (torch/nn/modules/transformer.py), one per
encoder, in the order the modules are built."""

from __future__ import annotations

from adjoint.engine.warns import warn
from adjoint.format.validate_encoder import nested_tensor_warning


def construction_warnings(rt, root) -> None:
    for decl in root.walk():
        if decl.type == "TransformerEncoder":
            text = nested_tensor_warning(decl.args)
            if text is not None:
                warn(rt, "UserWarning", text, "setup")
