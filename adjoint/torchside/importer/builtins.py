"""A ``torch.nn`` module the format has a built-in type for, written as that type.

The type is the class's name when the module *is* that class (a subclass may override
``forward``: it is imported as a custom module). The constructor's arguments are read back
from the attributes PyTorch stores (``kernel_size``, ``eps``, ``normalized_shape``; ``bias``
from whether the bias parameter exists) and written only when they differ from the default;
parameters exactly, buffers when they differ from PyTorch's initial values.
"""

from __future__ import annotations

from fractions import Fraction

import torch
from torch import nn

from adjoint.format import module_signatures as nn_types
from adjoint.format import spectral_norm, weight_norm
from adjoint.torchside.importer.emit import Flow, flow_map
from adjoint.torchside.importer.numbers import nested
from adjoint.torchside.importer.refuse import refuse


def type_name(module: nn.Module) -> str | None:
    """The built-in type ``module`` is, or None (a custom module)."""
    name = type(module).__name__
    if name in _TRANSFORMER and _activation(module) is None:
        return None     # a callable activation: not a type the format has (refused as torch.nn)
    if name in _STACKS and not _stack_of_types(module, _STACKS[name][1]):
        return None     # a layer or norm the format's TransformerEncoder does not take: refused as torch.nn
    if name == "Transformer" and not _transformer_of_types(module):
        return None     # a custom_encoder / custom_decoder, or stacks nn.Transformer would not build
    if name in nn_types.TYPES and getattr(nn, name, None) is type(module):
        return name
    base = parametrized_base(module)
    if base is not None and base.__name__ in weight_norm.TYPES + spectral_norm.TYPES and \
            getattr(nn, base.__name__, None) is base:
        return base.__name__   # ParametrizedLinear: its weight_norm / spectral_norm is checked by check_reparametrized
    return None


def parametrized_base(module: nn.Module) -> type | None:
    """The class ``register_parametrization`` subclassed (``Linear`` of ``ParametrizedLinear``), or None."""
    from torch.nn.utils import parametrize
    if not parametrize.is_parametrized(module):
        return None
    bases = type(module).__bases__
    return bases[0] if len(bases) == 1 else None


def parametrize_is(module: nn.Module) -> bool:
    from torch.nn.utils import parametrize
    return parametrize.is_parametrized(module)


def weight_norm_dim(m: nn.Module, tname: str, path: str, at: str | None) -> int | None:
    """The ``dim`` of ``torch.nn.utils.parametrizations.weight_norm`` on ``m``'s weight (the file's
    ``weight_norm: {dim: D}``), None when ``m`` has no parametrization; any other parametrization,
    or a weight_norm adjoint does not model, is refused at ``at`` (the line that calls it, else the
    factory)."""
    from torch.nn.utils import parametrize
    from torch.nn.utils.parametrizations import _SpectralNorm, _WeightNorm
    if not parametrize.is_parametrized(m):
        return None
    where = f"'{path or 'model'}' ({tname})"
    plist = m.parametrizations["weight"] if list(m.parametrizations.keys()) == ["weight"] else None
    if plist is not None and len(plist) == 1 and type(plist[0]) is _SpectralNorm:
        return None   # spectral_norm_keys reads it
    if plist is None or len(plist) != 1 or type(plist[0]) is not _WeightNorm or tname not in weight_norm.TYPES:
        raise _parametrization_refused(m, tname, path, at)
    dim = plist[0].dim   # None was kept as -1
    if -plist.original1.dim() <= dim < -1:
        raise refuse(at, f"{where} has weight_norm with dim {dim}, a negative dim, which adjoint does not "
                                   "model yet (PyTorch transposes with the negative dim itself)",
                     f"give it as {dim + plist.original1.dim()}")
    hooked = [n for n, sub in m.parametrizations.named_modules()
              if sub._forward_hooks or sub._forward_pre_hooks or sub._backward_hooks or sub._backward_pre_hooks]
    if hooked:
        raise refuse(at, f"{where}: hooks on its weight_norm parametrization's modules "
                                   f"(parametrizations.{hooked[0] or ''}) are not modelled",
                     "register them on the module itself")
    return dim


def legacy_weight_norm_dim(m: nn.Module, tname: str, path: str, at: str | None) -> int | None:
    """The ``dim`` of the older ``torch.nn.utils.weight_norm`` on ``m``'s weight (a ``WeightNorm``
    forward pre-hook; the file's ``weight_norm: {dim: D, legacy: true}``), None when ``m`` has none;
    one adjoint does not model is refused at ``at``."""
    from torch.nn.utils.weight_norm import WeightNorm
    found = [(i, h) for i, h in enumerate(m._forward_pre_hooks.values()) if isinstance(h, WeightNorm)]
    if not found:
        return None
    where = f"'{path or 'model'}' ({tname})"
    pos, fn = found[0]
    if len(found) > 1 or fn.name != "weight" or tname not in weight_norm.TYPES:
        raise refuse(at, f"{where} has the older torch.nn.utils.weight_norm "
                         + (f"of '{fn.name}'" if fn.name != "weight" else "more than once" if len(found) > 1
                            else f"on a {tname}") + ", which adjoint does not model yet "
                         f"(it models weight_norm of 'weight' on {', '.join(weight_norm.TYPES)})",
                     "torch.nn.utils.remove_weight_norm(module) before importing")
    v = m._parameters.get("weight_v")
    nd = v.dim() if v is not None else 0
    if -nd <= fn.dim < -1:
        raise refuse(at, f"{where} has weight_norm with dim {fn.dim}, a negative dim, which adjoint does not "
                         "model yet (PyTorch transposes with the negative dim itself)", f"give it as {fn.dim + nd}")
    from adjoint.torchside.importer.hooks import _entries
    before = [hid for hid, prepended, h in _entries(dict(m._forward_pre_hooks), {})[:pos] if not prepended]
    if before:
        raise refuse(at, f"{where} has a forward pre-hook registered before torch.nn.utils.weight_norm was "
                         "applied (it runs before weight_norm's), which is not modelled yet",
                     "register it after weight_norm, or with prepend=True")
    return fn.dim   # None was kept as -1


def spectral_norm_keys(m: nn.Module, tname: str, path: str, at: str | None) -> list | None:
    """The file's ``spectral_norm:`` entries of ``torch.nn.utils.parametrizations.spectral_norm`` on
    ``m``'s weight (adjoint.format.spectral_norm), None when ``m`` has none (weight_norm_dim refuses
    every other parametrization); one adjoint does not model is refused at ``at``."""
    from torch.nn.utils import parametrize
    from torch.nn.utils.parametrizations import _SpectralNorm
    if not parametrize.is_parametrized(m) or list(m.parametrizations.keys()) != ["weight"]:
        return None
    plist = m.parametrizations["weight"]
    if len(plist) != 1 or type(plist[0]) is not _SpectralNorm:
        return None
    where = f"'{path or 'model'}' ({tname})"
    if tname not in spectral_norm.TYPES:
        raise refuse(at, f"{where} has spectral_norm, which adjoint models on {', '.join(spectral_norm.TYPES)} only",
                     "make it a plain parameter before importing (parametrize.remove_parametrizations)")
    sn = plist[0]
    if sn.training != m.training or plist.training != m.training:
        raise refuse(at, f"{where}: its spectral_norm parametrization is in another training mode than the module "
                         "itself, which adjoint does not model", "call train() or eval() on the module")
    hooked = [n for n, sub in m.parametrizations.named_modules()
              if sub._forward_hooks or sub._forward_pre_hooks or sub._backward_hooks or sub._backward_pre_hooks]
    if hooked:
        raise refuse(at, f"{where}: hooks on its spectral_norm parametrization's modules "
                         f"(parametrizations.{hooked[0] or ''}) are not modelled", "register them on the module itself")
    return [("n_power_iterations", sn.n_power_iterations), ("eps", sn.eps), ("dim", sn.dim)]


def legacy_spectral_norm(m: nn.Module, tname: str, path: str, at: str | None) -> None:
    """The older ``torch.nn.utils.spectral_norm`` (a forward pre-hook computing ``weight`` from
    ``weight_orig``, ``weight_u``, ``weight_v``): not modelled yet, refused naming the modelled one."""
    from torch.nn.utils.spectral_norm import SpectralNorm
    if any(isinstance(h, SpectralNorm) for h in m._forward_pre_hooks.values()):
        raise refuse(at, f"'{path or 'model'}' ({tname}) has the older torch.nn.utils.spectral_norm (a forward "
                         "pre-hook recomputing weight from weight_orig, weight_u, weight_v), which is not modelled "
                         "yet", "use torch.nn.utils.parametrizations.spectral_norm (modelled), or "
                                "torch.nn.utils.remove_spectral_norm(module) before importing")


def spectral_norm_buffers(m: nn.Module, prefix: str, side=None) -> dict:
    """``_u`` and ``_v`` as they are now (drawn at random when the parametrization was registered)."""
    out = {}
    for name in (spectral_norm.U, spectral_norm.V):
        buf = m.get_buffer(name)
        out[name] = versioned(tensor_value(buf, f"buffer {prefix}{name}", side, prefix + name), buf)
    return out


#: the Transformer layers: their constructor arguments live on their submodules
_TRANSFORMER = ("TransformerEncoderLayer", "TransformerDecoderLayer")


def _activation(module: nn.Module) -> str | None:
    import torch.nn.functional as F
    return {id(F.relu): "relu", id(F.gelu): "gelu"}.get(id(getattr(module, "activation", None)))


#: the stacks of deep copies: their layer's argument and class
_STACKS = {"TransformerEncoder": ("encoder_layer", nn.TransformerEncoderLayer),
           "TransformerDecoder": ("decoder_layer", nn.TransformerDecoderLayer)}


def _layer_config(layer: nn.Module) -> dict:
    return {s.name: _transformer_arg(layer, s.name) for s in nn_types.TYPES["TransformerEncoderLayer"].args}


def _stack_of_types(module: nn.Module, layer_class: type) -> bool:
    """A TransformerEncoder (TransformerDecoder) over copies of one TransformerEncoderLayer
    (TransformerDecoderLayer; relu or gelu) -- every layer with the first one's arguments -- with no
    norm or a LayerNorm: the one the format writes by its layer's and its norm's arguments."""
    layers = list(getattr(module, "layers", []))
    norm = getattr(module, "norm", None)
    return bool(layers) and all(type(la) is layer_class and type_name(la) is not None for la in layers) \
        and all(_layer_config(la) == _layer_config(layers[0]) for la in layers) \
        and (norm is None or type(norm) is nn.LayerNorm)


def _transformer_of_types(module: nn.Module) -> bool:
    """An nn.Transformer as its constructor builds it from its own arguments: a TransformerEncoder
    (nested tensors enabled, mask_check) and a TransformerDecoder of layers with one configuration,
    each with a ``LayerNorm(d_model, eps=layer_norm_eps, bias=bias)``."""
    enc, dec = getattr(module, "encoder", None), getattr(module, "decoder", None)
    if type(enc) is not nn.TransformerEncoder or type(dec) is not nn.TransformerDecoder:
        return False
    if not (_stack_of_types(enc, nn.TransformerEncoderLayer) and _stack_of_types(dec, nn.TransformerDecoderLayer)):
        return False
    config = _layer_config(enc.layers[0])
    norms_fit = all(type(n) is nn.LayerNorm and tuple(n.normalized_shape) == (config["d_model"],)
                    and n.eps == config["layer_norm_eps"] and n.elementwise_affine
                    and (n.bias is not None) == config["bias"] for n in (enc.norm, dec.norm))
    return norms_fit and _layer_config(dec.layers[0]) == config and enc.enable_nested_tensor and enc.mask_check \
        and module.d_model == config["d_model"] and module.nhead == config["nhead"] \
        and module.batch_first == config["batch_first"]


def _stack_arg(module: nn.Module, tname: str, name: str):
    """A stack's constructor arguments: the layer and the norm by their own arguments."""
    layer_arg, layer_class = _STACKS[tname]
    if name == layer_arg:
        return flow_map(args(module.layers[0], layer_class.__name__))
    if name == "norm":
        return None if module.norm is None else flow_map(args(module.norm, "LayerNorm"))
    if name == "num_layers":
        return len(module.layers)
    return getattr(module, name)


def _whole_arg(module: nn.Module, name: str):
    """nn.Transformer's constructor arguments, read from its encoder (its layers' arguments, the
    stacks' lengths)."""
    if name == "num_encoder_layers":
        return len(module.encoder.layers)
    if name == "num_decoder_layers":
        return len(module.decoder.layers)
    return _transformer_arg(module.encoder.layers[0], name)


def _transformer_arg(module: nn.Module, name: str):
    attn = module.self_attn
    return {"d_model": attn.embed_dim, "nhead": attn.num_heads, "dim_feedforward": module.linear1.out_features,
            "dropout": module.dropout.p, "activation": _activation(module), "layer_norm_eps": module.norm1.eps,
            "batch_first": attn.batch_first, "norm_first": module.norm_first,
            "bias": module.linear1.bias is not None}[name]


def _bias_present(module: nn.Module, name: str) -> bool:
    if name == "MultiheadAttention":
        return module.in_proj_bias is not None or module.out_proj.bias is not None
    bias = getattr(module, "bias", None)
    if isinstance(bias, bool):   # RNN, LSTM, GRU and their cells keep the flag itself (their biases are bias_ih_l0, ...)
        return bias
    return bias is not None


def _read(module: nn.Module, tname: str, spec) -> object:
    if tname in _STACKS:
        return _stack_arg(module, tname, spec.name)
    if tname == "Transformer":
        return _whole_arg(module, spec.name)
    if tname in _TRANSFORMER:
        return _transformer_arg(module, spec.name)
    if spec.name == "bias":
        if not getattr(module, "affine", True) or not getattr(module, "elementwise_affine", True):
            return True     # no parameters at all: bias keeps its default
        return _bias_present(module, tname)
    if spec.name == "add_bias_kv":
        return module.bias_k is not None
    if tname == "PairwiseDistance" and spec.name == "p":
        return module.norm   # nn.PairwiseDistance keeps its p as ``norm``
    if tname == "MultiheadAttention" and spec.name in ("kdim", "vdim"):
        value = getattr(module, spec.name)
        return None if value == module.embed_dim else value
    return getattr(module, spec.name, spec.default)


def _same(value, default) -> bool:
    if isinstance(default, Fraction):
        return isinstance(value, (int, float)) and not isinstance(value, bool) and float(default) == value
    if isinstance(value, (list, tuple)) and isinstance(default, (list, tuple)):
        return tuple(value) == tuple(default)
    return type(value) is type(default) and value == default


def _arg_text(value, spec) -> Flow:
    if isinstance(value, (list, tuple)):
        items = list(value)
        if spec.kind in ("ints", "pool", "padding") and items and all(v == items[0] for v in items):
            return Flow(repr(items[0]))
        return Flow("[" + ", ".join("null" if v is None else repr(v) if not isinstance(v, str) else f'"{v}"'
                                    for v in items) + "]")
    if isinstance(value, bool):
        return Flow("true" if value else "false")
    if value is None:
        return Flow("null")
    if isinstance(value, str):
        return Flow(f'"{value}"')
    return Flow(repr(value))


def args(module: nn.Module, tname: str) -> list[tuple[str, Flow]]:
    """The constructor arguments that are required or differ from the default."""
    out = []
    for spec in nn_types.TYPES[tname].args:
        value = _read(module, tname, spec)
        if spec.name == "stride" and spec.kind == "opt_pool" and value == getattr(module, "kernel_size", None):
            continue    # the pools' stride defaults to kernel_size
        if not spec.required and _same(value, spec.default):
            continue
        out.append((spec.name, value if isinstance(value, Flow) else _arg_text(value, spec)))
    return out


def drops_at_random(m: nn.Module, tname: str) -> str | None:
    """What a built-in other than ``Dropout`` drops at random in training mode, as PyTorch's forward
    does (None when it drops nothing): ``MultiheadAttention`` its attention weights (``dropout``),
    the Transformer layers (and the copies in a ``TransformerEncoder``, ``TransformerDecoder`` or
    ``Transformer``) their activations too (their
    ``Dropout`` submodules), a stacked ``RNN``/``LSTM``/``GRU`` the outputs between its layers. A
    problem file cannot hold that draw (a ``Dropout``'s keep-mask is data; these are not)."""
    if tname == "MultiheadAttention":
        return "attention weights" if m.training and m.dropout > 0 else None
    if tname in ("AlphaDropout", "FeatureAlphaDropout"):   # its affine noise is not modelled yet
        return "elements (alpha dropout)" if m.training and 0 < m.p < 1 else None
    if tname in _TRANSFORMER or tname in _STACKS or tname == "Transformer":
        random = any(sub.training and (sub.p > 0 if isinstance(sub, nn.Dropout) else sub.dropout > 0)
                     for sub in m.modules() if isinstance(sub, (nn.Dropout, nn.MultiheadAttention)))
        return "activations and attention weights" if random else None
    if tname in ("RNN", "LSTM", "GRU"):
        return "the outputs between layers" if m.training and m.dropout > 0 and m.num_layers > 1 else None
    return None


def check_parametrized(m: nn.Module, path: str, at: str | None) -> None:
    """A module with a ``torch.nn.utils.parametrize`` parametrization
    (``parametrizations.weight_norm``, ``spectral_norm``, ``orthogonal``, ``register_parametrization``):
    PyTorch swaps its class for ``Parametrized<Class>`` and recomputes the tensor from
    ``parametrizations.NAME.original*`` at each access. Refused at the line that calls it, naming
    the parametrization and the way back to a plain parameter."""
    from torch.nn.utils import parametrize
    if not parametrize.is_parametrized(m) or type_name(m) is not None:
        return   # a built-in of adjoint.format.weight_norm.TYPES: weight_norm_dim checks its parametrization
    raise _parametrization_refused(m, type(m).__bases__[0].__name__, path, at)


def _parametrization_refused(m: nn.Module, base: str, path: str, at: str | None) -> Exception:
    """The refusal of a parametrization adjoint does not model (all but weight_norm of a built-in's
    weight), naming it and the way back to a plain parameter."""
    names = list(m.parametrizations.keys())
    which = ", ".join(f"{name} ({'+'.join(type(f).__name__ for f in fns)})"
                      for name, fns in m.parametrizations.items())
    return refuse(at, f"'{path or 'model'}' ({base}) has a parametrization (torch.nn.utils.parametrize) on "
                      f"{which}: PyTorch recomputes that tensor from parametrizations.*.original at each "
                      "access, which adjoint does not model (of the parametrizations, only "
                      "parametrizations.weight_norm and parametrizations.spectral_norm of a Linear's or a Conv's "
                      "weight are)",
                  "make it a plain parameter before importing "
                  f"(torch.nn.utils.parametrize.remove_parametrizations(module, {names[0]!r}) keeps its "
                  "current value)")


def check_reparametrized(m: nn.Module, tname: str, path: str, at: str | None) -> None:
    """A built-in whose weight torch.nn.utils.prune or weight_norm (or a parametrization) computes
    from other tensors (weight_orig and weight_mask, weight_g and weight_v): refused at ``at`` (the
    line that calls it, else the factory), with the way to make it a plain parameter again."""
    spec = nn_types.TYPES[tname]
    known = {p.name for p in spec.params(_resolved_args(m, tname))} if spec.has_params else set()
    inner = next((n for n, sub in m.named_modules() if n and parametrize_is(sub)), None)
    if inner is not None and not inner.startswith("parametrizations"):
        raise refuse(at, f"'{path or 'model'}' ({tname}) has a parametrization on its submodule '{inner}', "
                                   "which adjoint does not model inside a built-in",
                     "remove it before importing (parametrize.remove_parametrizations)")
    if weight_norm_dim(m, tname, path, at) is not None:   # checked there; its original0 / original1 are the params
        return
    if legacy_weight_norm_dim(m, tname, path, at) is not None:   # checked there; weight_g / weight_v are the params
        return
    if spectral_norm_keys(m, tname, path, at) is not None:   # its original is the param, _u and _v its buffers
        return
    legacy_spectral_norm(m, tname, path, at)
    extra = [n for n, _ in m.named_parameters() if n not in known and "." not in n]
    extra += [n for n, _ in m.named_buffers(recurse=False) if n.endswith(("_mask", "_orig"))]
    if hasattr(m, "parametrizations"):
        extra.append("parametrizations")
    if extra:
        raise refuse(at, f"'{path or 'model'}' ({tname}) holds {', '.join(extra)}: its weight is computed "
                                   "from them (torch.nn.utils.prune, weight_norm or a parametrization), which "
                                   "adjoint does not model", "make it a plain parameter before importing "
                                                             "(prune.remove(module, 'weight'), remove_weight_norm, or "
                                                             "parametrize.remove_parametrizations)")


def tensor_value(t: torch.Tensor, what: str, side=None, key: str | None = None) -> Flow:
    """The literal of ``t``; a big one (``side.wants`` it) as its side-file entry under ``key``."""
    if side is not None and key is not None and side.wants(t):
        return flow_map([("value", side.put(key, t))])
    return Flow(nested(t.detach().cpu().tolist(), what))


def param_entry(t: torch.Tensor, name: str, side=None):
    """A parameter's value (rows on lines of their own when it is a matrix or more); a big one
    in the side file (:mod:`.sidewrite`). ``version: N`` where its version counter is not 0 (a
    built-in's constructor initialises its parameters in place: 1), ``requires_grad: false``
    where it is frozen."""
    extra = ([("requires_grad", False)] if not t.requires_grad else []) + _version(t)
    if side is not None and side.wants(t):
        return flow_map([("value", side.put(name, t))] + extra)
    value = rows_value(t, f"parameter {name}")
    if not extra:
        return value
    return flow_map([("value", value)] + extra) if isinstance(value, Flow) else dict([("value", value)] + extra)


def rows_value(t: torch.Tensor, what: str):
    """``t``'s literal: a list of its rows (each on a line of its own) when it is a matrix or more."""
    rows = t.detach().cpu()
    if rows.dim() >= 2:
        return [Flow(nested(r.tolist(), what)) for r in rows]
    return tensor_value(rows, what)


def versioned(value: Flow, t: torch.Tensor) -> Flow:
    """A buffer's literal ``value``, with ``version: N`` when ``t``'s counter has moved."""
    if not t._version:
        return value
    if value.text.startswith("{"):   # already a mapping: {value: SIDE-FILE ENTRY}
        return Flow(value.text[:-1] + f", version: {t._version}}}")
    return flow_map([("value", value)] + _version(t))


def _version(t: torch.Tensor) -> list:
    """``[("version", N)]`` for a tensor whose version counter has moved (else nothing): the
    answer's version errors count from there, as the module's own run does."""
    return [("version", t._version)] if t._version else []


def buffer_entries(module: nn.Module, tname: str, prefix: str, side=None) -> dict:
    """Buffers that differ from the values the type starts with (``running_mean`` zeros, ...)."""
    specs = {s.name: s for s in nn_types.TYPES[tname].buffers(_resolved_args(module, tname))}
    out = {}
    for name, buf in module.named_buffers():
        spec = specs.get(name)
        if spec is None:
            continue
        # a buffer at its type's start values and at the version its constructor left (1: the
        # fill) is left out: the format's default is that buffer, counter and all
        if spec.default is not None:
            start = 1 if spec.default == "ones" else 0
            if bool(torch.all(buf == start)) and buf._version == spec.version:
                continue
        if buf.dtype == torch.int64:
            out[name] = flow_map([("value", Flow(nested(buf.tolist(), prefix + name))), ("dtype", Flow("int64"))]
                                 + _version(buf))
        else:
            out[name] = versioned(tensor_value(buf, f"buffer {prefix}{name}", side, prefix + name), buf)
    return out


def _resolved_args(module: nn.Module, tname: str) -> dict:
    t = nn_types.TYPES[tname]
    return nn_types.resolved_args(t, {s.name: _read(module, tname, s) for s in t.args})
