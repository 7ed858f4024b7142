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

:func:`nested_tensor_warning` is the UserWarning the constructor issues when
``enable_nested_tensor`` is True but the layer rules the nested-tensor path out.
"""

from __future__ import annotations

from dataclasses import replace

from adjoint.format import module_signatures as nn_types
from adjoint.format.checks import suggest
from adjoint.format.composite import CHILDREN
from adjoint.format.errors import ProblemError, raise_all
from adjoint.format.loader import YMap, kind_name
from adjoint.format.problem import ROOT, Module
from adjoint.format.validate_args import read_args


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


def encoder(builder, m: YMap, t, path: str, name: str, what: str, prefix: str, training: bool, frozen: bool,
            builtin_inputs) -> Module:
    builder.allowed_only(m, t.name, ("args", "inputs", "params", "training", "requires_grad"))
    inputs = t.inputs
    if m.get("inputs") is not None:
        inputs = builtin_inputs(m.get("inputs"), t, what)
    args = read_args(m.get("args"), t, what, m.loc)
    layer_args = dict(args["encoder_layer"])
    if training and layer_args["dropout"] != 0:
        raise ProblemError(m.loc, f"{what} drops activations and attention weights at random in training mode, which "
                                  "no prediction can know; give encoder_layer: {dropout: 0} or training: false")
    leaves = _leaves(args)
    specs = [(rel, ct, cargs, s) for rel, ct, cargs in leaves for s in ct.params(cargs)]
    names = [f"{rel}.{s.name}" for rel, _, _, s in specs]
    given = {}
    pnode = m.get("params")
    if pnode is not None:
        if not isinstance(pnode, YMap):
            raise ProblemError(pnode.loc, f"the params of {what} must be a mapping NAME: tensor, not {kind_name(pnode)}")
        errors = []
        for key, value in pnode.entries:
            if key.text not in names:
                errors.append(ProblemError(key.loc, f"'{key.text}' is not a parameter of this {t.name}"
                                                    f"{suggest(key.text, names)} (its parameters: {', '.join(names)})"))
                continue
            spec = specs[names.index(key.text)][3]
            try:
                decl = builder.param_decl(prefix + key.text, value, key.loc, frozen)
            except ProblemError as err:
                errors.append(err)
                continue
            if decl.value.shape != spec.shape:
                errors.append(ProblemError(decl.value.loc, f"parameter '{decl.name}' has shape {list(decl.value.shape)}"
                                                           f" but this {t.name} has {list(spec.shape)}"))
                continue
            given[key.text] = decl
        raise_all(errors)

    def first_copy(full: str) -> str | None:
        parts = full.split(".")
        if parts[0] == "layers" and parts[1] != "0":
            return ".".join(["layers", "0"] + parts[2:])
        return None

    missing = [n for n in names if n not in given and (first_copy(n) is None or first_copy(n) not in given)]
    if missing and builder.init_seed is None and not builder.init_given:
        raise ProblemError(m.loc, f"{what} ({t.name}) has no values for {', '.join(missing)}; give them under params: "
                                  "or add a top-level init: {seed: 0} to generate them")
    decls = {}
    for rel, ct, cargs, s in specs:
        full = f"{rel}.{s.name}"
        source = first_copy(full)
        if full in given:
            decls[full] = given[full]
        elif source is not None:   # a deep copy of layers.0
            decls[full] = replace(decls[source], name=prefix + full, loc=m.loc)
        else:
            decls[full] = builder.generated(prefix + full, s.shape, m.loc, ct, cargs, frozen)

    def leaf(rel: str, ct, cargs) -> Module:
        params = tuple(decls[f"{rel}.{s.name}"] for s in ct.params(cargs))
        return Module(prefix + rel, rel.rsplit(".", 1)[-1], ct.name, params, (), tuple(ct.inputs), None, None, m.loc,
                      args=tuple(cargs.items()), training=training)

    lt = nn_types.lookup("TransformerEncoderLayer")
    layers = []
    for i in range(args["num_layers"]):
        kids = tuple(leaf(rel, ct, cargs) for rel, ct, cargs in leaves if rel.startswith(f"layers.{i}."))
        layers.append(Module(f"{prefix}layers.{i}", str(i), lt.name, (), kids, tuple(lt.inputs), None, None, m.loc,
                             args=tuple(layer_args.items()), training=training))
    ml = nn_types.lookup("ModuleList")
    children = [Module(f"{prefix}layers", "layers", "ModuleList", (), tuple(layers), tuple(ml.inputs), None, None,
                       m.loc, training=training, is_list=True)]
    children += [leaf(rel, ct, cargs) for rel, ct, cargs in leaves if rel == "norm"]
    return Module(path, name or ROOT, t.name, (), tuple(children), tuple(inputs), None, None, m.loc,
                  args=tuple(args.items()), training=training)


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
