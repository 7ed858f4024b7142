"""What a built-in module does with an input that is not a tensor (``fc(gru(x))``: a tuple).

Its forward hands the input straight to an ATen function, whose argument parser raises
TypeError "linear(): argument 'input' (position 1) must be Tensor, not tuple", or first reads an
attribute of it, which Python refuses with AttributeError "'tuple' object has no attribute
'dim'". Either is raised inside the forward, after the forward pre-hooks, so no forward hook
runs. Measured in torch 2.13 for every module type below; a type not listed (a convolution,
whose parser lists its overloads) is refused instead.
"""

from __future__ import annotations

#: module type -> ("parser", the function and its argument) or ("attribute", the attribute read)
NOT_A_TENSOR: dict[str, tuple[str, str]] = {
    **{t: ("parser", f"{fn}(): argument 'input' (position 1)") for t, fn in (
        ("Linear", "linear"), ("Dropout", "dropout"), ("ELU", "elu"), ("GELU", "gelu"),
        ("Hardswish", "hardswish"), ("Hardtanh", "hardtanh"), ("ReLU6", "hardtanh"),
        ("LayerNorm", "layer_norm"), ("RMSNorm", "rms_norm"), ("LeakyReLU", "leaky_relu"), ("PReLU", "prelu"), ("PixelShuffle", "pixel_shuffle"), ("PixelUnshuffle", "pixel_unshuffle"), ("Mish", "mish"), ("ReLU", "relu"),
        ("SiLU", "silu"), ("Sigmoid", "sigmoid"), ("Softplus", "softplus"), ("Tanh", "tanh"),
        ("MaxPool1d", "max_pool1d"), ("MaxPool2d", "max_pool2d"), ("MaxPool3d", "max_pool3d"),
        ("AvgPool1d", "avg_pool1d"), ("AvgPool2d", "avg_pool2d"), ("AvgPool3d", "avg_pool3d"),
        ("AdaptiveMaxPool1d", "adaptive_max_pool1d"), ("AdaptiveAvgPool1d", "adaptive_avg_pool1d"))},
    "AlphaDropout": ("parser", "alpha_dropout(): argument 'input' (position 1)"),
    "FeatureAlphaDropout": ("parser", "feature_alpha_dropout(): argument 'input' (position 1)"),
    "Embedding": ("parser", "embedding(): argument 'indices' (position 2)"),
    "Bilinear": ("parser", "bilinear(): argument 'input1' (position 1)"),
    "EmbeddingBag": ("attribute", "dim"),
    **{f"{kind}Pad{rank}d": ("parser", "pad(): argument 'input' (position 1)")
       for kind in ("Zero", "Constant", "Reflection", "Replication") for rank in (1, 2, 3)},
    **{f"CircularPad{rank}d": ("attribute", "dim") for rank in (1, 2, 3)},   # _check_input_dim reads it first
    **{t: ("attribute", "dim") for t in ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d",
                                         "InstanceNorm2d", "InstanceNorm3d", "GroupNorm", "RNN", "LSTM", "GRU",
                                         "RNNCell", "LSTMCell", "GRUCell", "Dropout1d", "Dropout2d",
                                         "Dropout3d")},
    **{t: ("attribute", "size") for t in ("AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool2d")},
    "GLU": ("attribute", "dim"), "Softsign": ("attribute", "abs"), "Tanhshrink": ("attribute", "tanh"),
    "Flatten": ("attribute", "flatten"), "Unflatten": ("attribute", "unflatten"),
    "Softmax": ("attribute", "softmax"), "LogSoftmax": ("attribute", "log_softmax"),
    "TransformerEncoderLayer": ("attribute", "dtype"), "MultiheadAttention": ("attribute", "dim"),
}


def not_a_tensor_error(module_type: str, value) -> tuple[str, str] | None:
    """(type, message) of PyTorch's error when a ``module_type`` is handed ``value`` (a tuple, a
    list, None, or a forward_pre hook's number: a ReturnedNumber) as its input; None where it is
    not known here."""
    from adjoint.engine.pylist import PyList
    from adjoint.engine.returned_number import ReturnedNumber
    kind = NOT_A_TENSOR.get(module_type)
    name = "list" if isinstance(value, (PyList, list)) else value.name if isinstance(value, ReturnedNumber) else \
        {tuple: "tuple", type(None): "NoneType"}.get(type(value))
    if kind is None or name is None:
        return None
    if kind[0] == "parser":
        return "TypeError", f"{kind[1]} must be Tensor, not {name}"
    return "AttributeError", f"'{name}' object has no attribute '{kind[1]}'"
