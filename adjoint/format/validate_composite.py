"""A built-in type made of built-ins (:mod:`adjoint.format.composite`) -> its
:class:`adjoint.format.problem.Module` with the submodules PyTorch's constructor makes.

The file gives the type's ``args`` (its constructor's) and, optionally, ``params`` under the
names ``named_parameters()`` gives them (``self_attn.in_proj_weight``, ``linear1.weight``,
``norm1.bias``, ...); the rest come from ``init``. Each submodule is an ordinary built-in
module record (its own args, its parameters, the layer's training mode), so hooks name it
(``layer.linear1``) and the runtime calls it as the layer's forward does.
"""

from __future__ import annotations

from adjoint.format import module_signatures as nn_types
from adjoint.format.checks import suggest
from adjoint.format.composite import CHILDREN
from adjoint.format.errors import ProblemError, raise_all
from adjoint.format.loader import YMap, kind_name
from adjoint.format.problem import ROOT, Module
from adjoint.format.validate_args import read_args


def composite(builder, m: YMap, t, path: str, name: str, what: str, prefix: str, training: bool, frozen: bool,
              builtin_inputs):
    """The module record of a TransformerEncoderLayer (and the like), children included
    (``builtin_inputs``: the ``inputs:`` reader of :mod:`adjoint.format.validate_modules`)."""
    if t.name not in CHILDREN:   # TransformerEncoder: copies of a layer
        from adjoint.format.validate_encoder import encoder
        return encoder(builder, m, t, path, name, what, prefix, training, frozen, builtin_inputs)
    builder.allowed_only(m, t.name, ("args", "inputs", "params", "training", "requires_grad"))
    inputs = t.inputs
    if m.get("inputs") is not None:
        inputs = builtin_inputs(m.get("inputs"), t, what)
    args = read_args(m.get("args"), t, what, m.loc)
    if training and args["dropout"] != 0:
        raise ProblemError(m.loc, f"{what} drops activations and attention weights at random in training mode, which "
                                  "no prediction can know; give args: {dropout: 0} or training: false")
    kids = []
    for cname, ctype, given in CHILDREN[t.name](args):
        ct = nn_types.lookup(ctype)
        kids.append((cname, ct, nn_types.resolved_args(ct, given)))
    specs = [(cname, ct, cargs, s) for cname, ct, cargs in kids for s in ct.params(cargs)]
    names = [f"{cname}.{s.name}" for cname, _, _, s in specs]
    given_decls = {}
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
            given_decls[key.text] = decl
        raise_all(errors)
    missing = [n for n in names if n not in given_decls]
    if missing and builder.init_seed is None and not builder.init_given:
        raise ProblemError(m.loc, f"{what} ({t.name}) has no values for {', '.join(missing)}; give them under params: "
                                  "or add a top-level init: {seed: 0} to generate them")
    children = []
    for cname, ct, cargs in kids:
        cpath = f"{prefix}{cname}"
        params = []
        for s in ct.params(cargs):
            full = f"{cname}.{s.name}"
            params.append(given_decls[full] if full in given_decls else
                          builder.generated(prefix + full, s.shape, m.loc, ct, cargs, frozen))
        children.append(Module(cpath, cname, ct.name, tuple(params), (), tuple(ct.inputs), None, None, m.loc,
                               args=tuple(cargs.items()), training=training))
    return Module(path, name or ROOT, t.name, (), tuple(children), tuple(inputs), None, None, m.loc,
                  args=tuple(args.items()), training=training)
