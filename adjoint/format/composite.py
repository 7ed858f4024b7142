"""Built-in types made of built-in types: ``nn.TransformerEncoderLayer`` owns a
``MultiheadAttention``, two ``Linear``, two ``LayerNorm`` and three ``Dropout`` submodules
(``nn.TransformerDecoderLayer`` a second attention ``multihead_attn``, ``norm3`` and
``dropout3`` too), made by its ``__init__`` in this order (``named_modules()``, ``named_parameters()`` and the
file's hook targets follow it: ``layer.self_attn``, ``layer.linear1``, ...).

:data:`CHILDREN` maps such a type to a function of its resolved constructor args giving
``(name, type, args)`` per submodule, the args as that submodule's constructor receives them
(torch/nn/modules/transformer.py). The layer's forward calls them as modules (so their hooks
fire, as in PyTorch); its parameters belong to them (``self_attn.in_proj_weight``, ...).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Callable, Mapping


def _encoder_layer(a: Mapping) -> tuple[tuple[str, str, dict], ...]:
    d, p, bias = a["d_model"], a["dropout"], a["bias"]
    norm = {"normalized_shape": (d,), "eps": a["layer_norm_eps"], "elementwise_affine": True, "bias": bias}
    drop = {"p": p, "inplace": False}
    return (
        ("self_attn", "MultiheadAttention", {"embed_dim": d, "num_heads": a["nhead"], "dropout": p, "bias": bias,
                                             "add_bias_kv": False, "add_zero_attn": False, "kdim": None,
                                             "vdim": None, "batch_first": a["batch_first"]}),
        ("linear1", "Linear", {"in_features": d, "out_features": a["dim_feedforward"], "bias": bias}),
        ("dropout", "Dropout", dict(drop)),
        ("linear2", "Linear", {"in_features": a["dim_feedforward"], "out_features": d, "bias": bias}),
        ("norm1", "LayerNorm", dict(norm)),
        ("norm2", "LayerNorm", dict(norm)),
        ("dropout1", "Dropout", dict(drop)),
        ("dropout2", "Dropout", dict(drop)),
    )


def _decoder_layer(a: Mapping) -> tuple[tuple[str, str, dict], ...]:
    enc = {name: (t, args) for name, t, args in _encoder_layer(a)}
    order = ("self_attn", "multihead_attn", "linear1", "dropout", "linear2", "norm1", "norm2", "norm3", "dropout1",
             "dropout2", "dropout3")
    twin = {"multihead_attn": "self_attn", "norm3": "norm2", "dropout3": "dropout2"}
    return tuple((name,) + tuple(dict(x) if isinstance(x, dict) else x for x in enc[twin.get(name, name)])
                 for name in order)


#: built-in type -> its submodules from its constructor args
CHILDREN: dict[str, Callable[[Mapping], tuple[tuple[str, str, dict], ...]]] = {
    "TransformerEncoderLayer": _encoder_layer,
    "TransformerDecoderLayer": _decoder_layer,
}


#: built-ins holding copies of a layer passed as an argument (adjoint/format/validate_encoder.py)
STACKS = ("TransformerEncoder", "TransformerDecoder", "Transformer")


def is_composite(type_name: str | None) -> bool:
    return type_name in CHILDREN or type_name in STACKS


def dropout_of(args: Mapping) -> Fraction:
    return args["dropout"]
