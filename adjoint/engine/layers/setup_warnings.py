"""What PyTorch's module constructors do while the model is built, before any hook is
registered (``during: setup``): the error of one that refuses its arguments (``in_channels must be
divisible by groups``: the variant's answer), and the warnings: ``nn.TransformerEncoder``'s "enable_nested_tensor is True,
but self.use_nested_tensor is False because ..." (torch/nn/modules/transformer.py), one per
encoder, in the order the modules are built."""

from __future__ import annotations

from adjoint.engine.warns import warn
from adjoint.format.validate_encoder import nested_tensor_warning


def construct(rt, root) -> tuple[str, str] | None:
    """The model's built-in modules constructed in the file's order, depth first (as a script and
    the torch side construct them): the constructors' warnings up to the first constructor that
    raises, and what that one raises (exception class, message: ``Module.setup_error``), or None."""
    for decl in root.walk():
        if decl.setup_error is not None:
            return decl.setup_error
        if decl.type == "TransformerEncoder":
            text = nested_tensor_warning(decl.args)
            if text is not None:
                warn(rt, "UserWarning", text, "setup")
    return None
