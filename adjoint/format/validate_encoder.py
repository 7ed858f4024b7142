"""``nn.TransformerEncoder`` -> its :class:`adjoint.format.problem.Module` tree, as PyTorch 2.13's
constructor makes it (torch/nn/modules/transformer.py).

``TransformerEncoder(encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
mask_check=True)`` deep-copies ``encoder_layer`` into the ``ModuleList`` ``layers`` (``layers.0``
... ``layers.N-1``, each a ``TransformerEncoderLayer`` with its own ``self_attn``, ``linear1``, ...)
and keeps ``norm`` as its child ``norm``. A file gives the layer and the norm by their
constructors' args::

    enc:
      type: TransformerEncoder
      args:
        encoder_layer: {d_model: 4, nhead: 2, dim_feedforward: 8, dropout: 0, batch_first: true}
        num_layers: 2
        norm: {normalized_shape: 4}      # a LayerNorm; null (the default): none

Parameters go under ``params:`` by their ``named_parameters()`` names (``layers.1.linear1.weight``,
``norm.bias``). The copies start equal, as ``copy.deepcopy`` makes them: a parameter of
``layers.i`` the file leaves out takes ``layers.0``'s value (given or from ``init``).

The record is built by :func:`adjoint.format.validate_composite.composite`, as a layer's is;
:func:`encoder_layout` is what differs (the copies, the ModuleList).

:func:`nested_tensor_warning` is the UserWarning the constructor issues when
``enable_nested_tensor`` is True but the layer rules the nested-tensor path out.
"""

from __future__ import annotations

from adjoint.format import module_signatures as nn_types
from adjoint.format.composite import CHILDREN
from adjoint.format.problem import Module


def _leaves(args: dict):
    """``(relative module path, NNType, resolved args)`` of every module owning parameters, in
    ``named_modules()`` order."""
    layer_args = dict(args["encoder_layer"])
    out = []
    for i in range(args["num_layers"]):
        for cname, ctype, given in CHILDREN["TransformerEncoderLayer"](layer_args):
            ct = nn_types.lookup(ctype)
            out.append((f"layers.{i}.{cname}", ct, nn_types.resolved_args(ct, given)))
    if args["norm"] is not None:
        out.append(("norm", nn_types.lookup("LayerNorm"), dict(args["norm"])))
    return out


def _first_copy(full: str) -> str | None:
    """The parameter of ``layers.0`` a parameter of a later copy starts equal to."""
    parts = full.split(".")
    if parts[0] == "layers" and parts[1] != "0":
        return ".".join(["layers", "0"] + parts[2:])
    return None


def encoder_layout(args: dict):
    """What :func:`adjoint.format.validate_composite.composite` needs of a TransformerEncoder: the
    layer's dropout and where a file sets it, the parameter-owning modules, which parameter each
    copy's starts as, and the children (the ModuleList ``layers`` of TransformerEncoderLayers, then
    ``norm``) made of the leaf modules."""
    layer_args = dict(args["encoder_layer"])
    leaves = _leaves(args)

    def assemble(leaf, prefix: str, loc, training: bool) -> list[Module]:
        lt = nn_types.lookup("TransformerEncoderLayer")
        layers = []
        for i in range(args["num_layers"]):
            kids = tuple(leaf(rel, ct, cargs) for rel, ct, cargs in leaves if rel.startswith(f"layers.{i}."))
            layers.append(Module(f"{prefix}layers.{i}", str(i), lt.name, (), kids, tuple(lt.inputs), None, None, loc,
                                 args=tuple(layer_args.items()), training=training))
        ml = nn_types.lookup("ModuleList")
        children = [Module(f"{prefix}layers", "layers", "ModuleList", (), tuple(layers), tuple(ml.inputs), None, None,
                           loc, training=training, is_list=True)]
        return children + [leaf(rel, ct, cargs) for rel, ct, cargs in leaves if rel == "norm"]

    return layer_args["dropout"], "encoder_layer", leaves, _first_copy, assemble


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
