"""What PyTorch's module constructors do while the model is built, before any hook is
registered (``during: setup``): the error of one that refuses its arguments (``in_channels must be
divisible by groups``: the variant's answer), and the warnings: ``nn.TransformerEncoder``'s "enable_nested_tensor is True,
but self.use_nested_tensor is False because ..." (torch/nn/modules/transformer.py), one per
encoder, and ``nn.RNN`` / ``LSTM`` / ``GRU``'s "dropout option adds dropout after all but last recurrent
layer, ..." for a ``dropout`` above 0 with ``num_layers=1`` (torch/nn/modules/rnn.py, ``RNNBase.__init__``:
after its dropout-range check, before its ``proj_size`` checks), in the order the modules are built."""

from __future__ import annotations

from adjoint.engine.warns import warn
from adjoint.format.validate_encoder import nested_tensor_warning


def construct(rt, root) -> tuple[str, str] | None:
    """The model's built-in modules constructed in the file's order, depth first (as a script and
    the torch side construct them): the constructors' warnings up to the first constructor that
    raises, and what that one raises (exception class, message: ``Module.setup_error``), or None."""
    for decl in root.walk():
        if decl.type in RECURRENT:
            text = recurrent_dropout_warning(decl.args)
            if text is not None:
                warn(rt, "UserWarning", text, "setup")
        if decl.weight_norm_legacy:   # WeightNorm.apply warns first (its dim error comes after)
            warn(rt, "FutureWarning", LEGACY_WEIGHT_NORM, "setup")
        if decl.setup_error is not None:
            return decl.setup_error
        if decl.type == "TransformerEncoder":
            text = nested_tensor_warning(decl.args)
            if text is not None:
                warn(rt, "UserWarning", text, "setup")
    return None


#: ``torch.nn.utils.weight_norm``'s deprecation (weight_norm: {legacy: true}), when it is applied
LEGACY_WEIGHT_NORM = ("`torch.nn.utils.weight_norm` is deprecated in favor of "
                      "`torch.nn.utils.parametrizations.weight_norm`.")


#: the types built on ``RNNBase``, whose constructor warns about a dropout that cannot act
RECURRENT = ("RNN", "LSTM", "GRU")


def recurrent_dropout_warning(args) -> str | None:
    """``RNNBase.__init__``'s warning for ``dropout > 0`` with ``num_layers == 1`` (the dropout acts only
    between layers, so none is drawn): its f-string prints the argument as passed, which the torch
    side passes as a Python float (``dropout=0.25``, ``dropout=1.0``); None when it does not warn
    (no dropout, several layers, or a dropout outside [0, 1], which raises first)."""
    a = dict(args)
    dropout, layers = a["dropout"], a["num_layers"]
    if not 0 < dropout <= 1 or layers != 1:
        return None
    return ("dropout option adds dropout after all but last recurrent layer, so non-zero dropout expects "
            f"num_layers greater than 1, but got dropout={float(dropout)!r} and num_layers={layers}")
