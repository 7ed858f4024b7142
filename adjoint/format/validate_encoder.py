"""``nn.TransformerEncoder``, ``nn.TransformerDecoder`` and ``nn.Transformer`` -> their
:class:`adjoint.format.problem.Module` trees, as PyTorch 2.13's constructors make them
(torch/nn/modules/transformer.py).

``TransformerEncoder(encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
mask_check=True)`` deep-copies ``encoder_layer`` into the ``ModuleList`` ``layers`` (``layers.0``
... ``layers.N-1``, each a ``TransformerEncoderLayer`` with its own ``self_attn``, ``linear1``, ...)
and keeps ``norm`` as its child ``norm``; ``TransformerDecoder(decoder_layer, num_layers,
norm=None)`` the same with a ``TransformerDecoderLayer``. A file gives the layer and the norm by
their constructors' args::

    enc:
      type: TransformerEncoder
      args:
        encoder_layer: {d_model: 4, nhead: 2, dim_feedforward: 8, dropout: 0, batch_first: true}
        num_layers: 2
        norm: {normalized_shape: 4}      # a LayerNorm; null (the default): none

Parameters go under ``params:`` by their ``named_parameters()`` names (``layers.1.linear1.weight``,
``norm.bias``). The copies start equal, as ``copy.deepcopy`` makes them: a parameter of
``layers.i`` the file leaves out takes ``layers.0``'s value (given or from ``init``).

``nn.Transformer(d_model, nhead, num_encoder_layers, num_decoder_layers, ...)`` builds one of
each (``encoder``, ``decoder``, each with a final ``LayerNorm``) from its own args, then redraws
every parameter of more than one dimension (``xavier_uniform_``): there only the 1-D parameters
of a copy start as ``layers.0``'s.

The record is built by :func:`adjoint.format.validate_composite.composite`, as a layer's is;
:func:`stack_layout` is what differs (the copies, the ModuleList, the stacks).

:func:`nested_tensor_warning` is the UserWarning TransformerEncoder's constructor issues when
``enable_nested_tensor`` is True but the layer rules the nested-tensor path out (nn.Transformer's
encoder included).
"""

from __future__ import annotations

from adjoint.format import module_signatures as nn_types
from adjoint.format.composite import CHILDREN
from adjoint.format.problem import Module


#: a stack type -> (the constructor argument holding its layer, the layer's type)
STACK_LAYER = {"TransformerEncoder": ("encoder_layer", "TransformerEncoderLayer"),
               "TransformerDecoder": ("decoder_layer", "TransformerDecoderLayer")}

#: the layer arguments nn.Transformer passes to both of its layers, in its order
_LAYER_ARGS = ("d_model", "nhead", "dim_feedforward", "dropout", "activation", "layer_norm_eps", "batch_first",
               "norm_first", "bias")


def transformer_stacks(args: dict) -> tuple[tuple[str, str, dict], ...]:
    """``nn.Transformer``'s ``encoder`` and ``decoder``: ``(name, stack type, stack args)``, the stacks'
    args as its constructor passes them (``TransformerEncoder(encoder_layer, num_encoder_layers,
    encoder_norm)``: ``enable_nested_tensor`` and ``mask_check`` at their defaults; each norm a
    ``LayerNorm(d_model, eps=layer_norm_eps, bias=bias)``)."""
    layer = {k: args[k] for k in _LAYER_ARGS}
    norm = nn_types.resolved_args(nn_types.lookup("LayerNorm"), {"normalized_shape": (args["d_model"],),
                                                                   "eps": args["layer_norm_eps"], "bias": args["bias"]})
    enc_layer = tuple(nn_types.resolved_args(nn_types.lookup("TransformerEncoderLayer"), layer).items())
    dec_layer = tuple(nn_types.resolved_args(nn_types.lookup("TransformerDecoderLayer"), layer).items())
    return (("encoder", "TransformerEncoder", {"encoder_layer": enc_layer, "num_layers": args["num_encoder_layers"],
                                               "norm": tuple(norm.items()), "enable_nested_tensor": True,
                                               "mask_check": True}),
            ("decoder", "TransformerDecoder", {"decoder_layer": dec_layer, "num_layers": args["num_decoder_layers"],
                                               "norm": tuple(norm.items())}))


def layer_args(type_name: str, args: dict) -> tuple[str, dict]:
    """The layer type a stack (or nn.Transformer: its encoder's) deep-copies, and its args (the
    constructor that raises first when they are refused)."""
    if type_name == "Transformer":
        return "TransformerEncoderLayer", dict(transformer_stacks(args)[0][2]["encoder_layer"])
    arg, layer = STACK_LAYER[type_name]
    return layer, dict(args[arg])


def _leaves(type_name: str, args: dict, prefix: str = ""):
    """``(relative module path, NNType, resolved args)`` of every module owning parameters, in
    ``named_modules()`` order."""
    if type_name == "Transformer":
        return [leaf for name, stack, sargs in transformer_stacks(args) for leaf in _leaves(stack, sargs, f"{name}.")]
    arg, layer_type = STACK_LAYER[type_name]
    layer = dict(args[arg])
    out = []
    for i in range(args["num_layers"]):
        for cname, ctype, given in CHILDREN[layer_type](layer):
            ct = nn_types.lookup(ctype)
            out.append((f"{prefix}layers.{i}.{cname}", ct, nn_types.resolved_args(ct, given)))
    if args["norm"] is not None:
        out.append((f"{prefix}norm", nn_types.lookup("LayerNorm"), dict(args["norm"])))
    return out


def _in_copy(full: str) -> tuple[str, str, str] | None:
    """``(stack prefix, copy index, rest)`` of a parameter of one of the deep copies, else None."""
    parts = full.split(".")
    at = parts.index("layers") if "layers" in parts else -1
    if at < 0 or at > 1:
        return None
    return ".".join(parts[:at + 1]), parts[at + 1], ".".join(parts[at + 2:])


def stack_layout(type_name: str, args: dict):
    """What :func:`adjoint.format.validate_composite.composite` needs of a TransformerEncoder, a
    TransformerDecoder or a Transformer: the layer's dropout and where a file sets it, the
    parameter-owning modules, which parameter each copy's starts as, the version counter a
    parameter the file does not write starts at, and the children (the ModuleList ``layers`` of
    layers, then ``norm``; a Transformer's ``encoder`` and ``decoder`` stacks) made of the leaf
    modules.

    The copies are ``copy.deepcopy``'s: a parameter of ``layers.i`` the file leaves out takes
    ``layers.0``'s value, and one PyTorch made (a norm's ones, an attention's zero biases) is a
    fresh tensor at version 0. ``nn.Transformer`` then redraws every parameter of more than one
    dimension (``_reset_parameters``: ``xavier_uniform_``), so its copies share only their 1-D
    parameters' values; its stacks' ``norm`` keeps ``LayerNorm``'s own version (1)."""
    leaves = _leaves(type_name, args)
    rank = {f"{rel}.{s.name}": len(s.shape) for rel, ct, cargs in leaves for s in ct.params(cargs)}

    def first_copy(full: str) -> str | None:
        where = _in_copy(full)
        if where is None or where[1] == "0" or (type_name == "Transformer" and rank[full] > 1):
            return None
        return f"{where[0]}.0.{where[2]}"

    def start_version(full: str, spec) -> int:
        return 0 if _in_copy(full) is not None else spec.version

    def stack_children(stack: str, sargs: dict, root: str, prefix: str, leaf, loc, training: bool) -> list[Module]:
        """``layers`` and ``norm`` of one stack: ``prefix`` its path under the type's (``decoder.``),
        ``root`` the type's own (``model.tf.``)."""
        arg, layer_type = STACK_LAYER[stack]
        lt = nn_types.lookup(layer_type)
        layers = []
        for i in range(sargs["num_layers"]):
            kids = tuple(leaf(rel, ct, cargs) for rel, ct, cargs in leaves if rel.startswith(f"{prefix}layers.{i}."))
            layers.append(Module(f"{root}{prefix}layers.{i}", str(i), lt.name, (), kids, tuple(lt.inputs), None, None,
                                 loc, args=tuple(dict(sargs[arg]).items()), training=training))
        ml = nn_types.lookup("ModuleList")
        children = [Module(f"{root}{prefix}layers", "layers", "ModuleList", (), tuple(layers), tuple(ml.inputs), None,
                           None, loc, training=training, is_list=True)]
        return children + [leaf(rel, ct, cargs) for rel, ct, cargs in leaves if rel == f"{prefix}norm"]

    def assemble(leaf, prefix: str, loc, training: bool) -> list[Module]:
        if type_name != "Transformer":
            return stack_children(type_name, args, prefix, "", leaf, loc, training)
        out = []
        for name, stack, sargs in transformer_stacks(args):
            st = nn_types.lookup(stack)
            out.append(Module(f"{prefix}{name}", name, stack, (),
                              tuple(stack_children(stack, sargs, prefix, f"{name}.", leaf, loc, training)), tuple(st.inputs),
                              None, None, loc, args=tuple(sargs.items()), training=training))
        return out

    dropout = args["dropout"] if type_name == "Transformer" else dict(args[STACK_LAYER[type_name][0]])["dropout"]
    where = "args" if type_name == "Transformer" else STACK_LAYER[type_name][0]
    return dropout, where, leaves, first_copy, start_version, assemble


def nested_tensor_warning(args) -> str | None:
    """The constructor's UserWarning: ``enable_nested_tensor`` True while ``why_not_sparsity_fast_path``
    is set by the layer (its tests in PyTorch's order); None when it issues none."""
    a = dict(args)
    if not a["enable_nested_tensor"]:
        return None
    layer = dict(a["encoder_layer"])
    enc = "encoder_layer"
    why = ""
    if layer["norm_first"]:
        why = f"{enc}.norm_first was True"
    elif not layer["batch_first"]:
        why = f"{enc}.self_attn.batch_first was not True(use batch_first for better inference performance)"
    elif not layer["bias"]:
        why = f"{enc}.self_attn was passed bias=False"
    elif layer["nhead"] % 2 == 1:
        why = f"{enc}.self_attn.num_heads is odd"
    if not why:
        return None
    return f"enable_nested_tensor is True, but self.use_nested_tensor is False because {why}"
