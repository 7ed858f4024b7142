"""A built-in type made of built-ins (:mod:`adjoint.format.composite`) -> its
:class:`adjoint.format.problem.Module` with the submodules PyTorch's constructor makes.

The file gives the type's ``args`` (its constructor's) and, optionally, ``params`` under the
names ``named_parameters()`` gives them (``self_attn.in_proj_weight``, ``linear1.weight``,
``norm1.bias``, ...); the rest come from ``init``. Each submodule is an ordinary built-in
module record (its own args, its parameters, the layer's training mode), so hooks name it
(``layer.linear1``) and the runtime calls it as the layer's forward does.
"""

from __future__ import annotations

from dataclasses import replace

from adjoint.format import module_signatures as nn_types
from adjoint.format.checks import suggest
from adjoint.format.composite import CHILDREN
from adjoint.format.errors import ProblemError, raise_all
from adjoint.format.loader import YMap, kind_name
from adjoint.format.problem import ROOT, Module
from adjoint.format.validate_args import constructor_error, read_args


def composite(builder, m: YMap, t, path: str, name: str, what: str, prefix: str, training: bool, frozen: bool,
              builtin_inputs):
    """The module record of a TransformerEncoderLayer (and the like), children included, or of a
    TransformerEncoder, TransformerDecoder or Transformer (copies of a layer: their layout is
    :mod:`adjoint.format.validate_encoder`'s)
    (``builtin_inputs``: the ``inputs:`` reader of :mod:`adjoint.format.validate_modules`)."""
    builder.allowed_only(m, t.name, ("args", "inputs", "params", "training", "requires_grad"))
    inputs = t.inputs
    if m.get("inputs") is not None:
        inputs = builtin_inputs(m.get("inputs"), t, what)
    args = read_args(m.get("args"), t, what, m.loc)
    written = tuple(key.text for key, _ in m.get("args").entries) if m.get("args") is not None else ()
    given = written if t.name in CHILDREN else None   # (an encoder's nested args: every one, as filled in)
    if t.name in CHILDREN:
        setup_error = constructor_error(t, args)
    else:   # a stack: the script (or nn.Transformer's constructor) builds its layer first
        from adjoint.format.validate_encoder import layer_args
        layer_type, layer = layer_args(t.name, args)
        setup_error = constructor_error(nn_types.lookup(layer_type), layer)
    if setup_error is not None:   # PyTorch raises in the constructor: nothing inside is built (the answer)
        builder.complete = False
        return Module(path, name or ROOT, t.name, (), (), tuple(inputs), None, None, m.loc,
                      args=tuple(args.items()), training=training, setup_error=setup_error, given=given)
    if t.name in CHILDREN:
        layout = _layer_layout(t.name, args)
    else:   # a stack: copies of a layer
        from adjoint.format.validate_encoder import stack_layout
        layout = stack_layout(t.name, args)
    dropout, where, leaves, copy_of, start_version, assemble = layout
    if training and dropout != 0:
        raise ProblemError(m.loc, f"{what} drops activations and attention weights at random in training mode, which "
                                  f"no prediction can know; give {where}: {{dropout: 0}} or training: false")
    specs = [(rel, ct, cargs, s) for rel, ct, cargs in leaves for s in ct.params(cargs)]
    names = [f"{rel}.{s.name}" for rel, _, _, s in specs]
    given_params = _given_params(builder, m, t, what, prefix, frozen, specs, names)
    drawn = builder.init_seed is not None or builder.init_given
    defaults = {f"{rel}.{s.name}": s.default for rel, _, _, s in specs}
    missing = [n for n in names if n not in given_params and (copy_of(n) is None or copy_of(n) not in given_params)
               and defaults[n] is None]
    if missing and not drawn:
        raise ProblemError(m.loc, f"{what} ({t.name}) has no values for {', '.join(missing)}; give them under params: "
                                  "or add a top-level init: {seed: 0} to generate them")
    decls = {}
    for rel, ct, cargs, s in specs:
        full = f"{rel}.{s.name}"
        source = copy_of(full)
        if full in given_params:
            decls[full] = given_params[full]
        elif source is not None:   # a deep copy of the first layer
            decls[full] = replace(decls[source], name=prefix + full, loc=m.loc)
        elif drawn:
            decls[full] = builder.generated(prefix + full, s.shape, m.loc, ct, cargs, frozen)
        else:   # PyTorch's own value, the same whatever the random state (a norm's ones, a bias's zeros)
            decls[full] = builder.constant(prefix + full, s.shape, s.default, m.loc, not frozen,
                                           version=start_version(full, s))

    def leaf(rel: str, ct, cargs) -> Module:
        params = tuple(decls[f"{rel}.{s.name}"] for s in ct.params(cargs))
        return Module(prefix + rel, rel.rsplit(".", 1)[-1], ct.name, params, (), tuple(ct.inputs), None, None, m.loc,
                      args=tuple(cargs.items()), training=training)

    children = assemble(leaf, prefix, m.loc, training)
    return Module(path, name or ROOT, t.name, (), tuple(children), tuple(inputs), None, None, m.loc,
                  args=tuple(args.items()), training=training, given=given)


def _layer_layout(type_name: str, args: dict):
    """A layer of built-ins (CHILDREN): its dropout and where a file sets it, its parameter-owning
    submodules ``(name, NNType, resolved args)`` in ``named_modules()`` order, no copies, and its
    children: those submodules."""
    leaves = []
    for cname, ctype, cargs in CHILDREN[type_name](args):
        ct = nn_types.lookup(ctype)
        leaves.append((cname, ct, nn_types.resolved_args(ct, cargs)))
    return (args["dropout"], "args", leaves, lambda full: None, lambda full, spec: spec.version,
            lambda leaf, prefix, loc, training: [leaf(rel, ct, cargs) for rel, ct, cargs in leaves])


def _given_params(builder, m: YMap, t, what: str, prefix: str, frozen: bool, specs, names) -> dict:
    """The file's ``params:`` of a composite, by ``named_parameters()`` name, each checked against
    its parameter's shape (every error of the block raised together)."""
    given = {}
    pnode = m.get("params")
    if pnode is None:
        return given
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
    return given
