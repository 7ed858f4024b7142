"""Weight tying: one Parameter in two modules (``head.weight = emb.weight`` in PyTorch).

A file writes ``params: {weight: {tied: emb.weight}}``: the parameter is the one named, not a
copy. Validation makes a placeholder :class:`~adjoint.format.problem.TensorDecl` (``tied`` set; a
built-in's with the shape its type gives it) and :func:`resolve_ties` then gives it the
named parameter's value, ``requires_grad`` and dtype, once the whole model is read (the named
parameter may come later in the file). The engine keeps one leaf under both names (one
``.grad``, listed in ``grads`` under each name; an SGD step updates it once); ``verify``'s
torch side assigns the same ``nn.Parameter`` to both modules.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from adjoint.format.checks import string
from adjoint.format.errors import Loc, ProblemError
from adjoint.format.loader import YMap, YNode
from adjoint.format.problem import Literal, Module, TensorDecl


def tied_decl(full: str, node: YMap, loc: Loc, shape: tuple[int, ...] | None, frozen: bool) -> TensorDecl:
    """The placeholder of ``NAME: {tied: OTHER}`` (``shape``: the built-in's, None for a custom module)."""
    for key, _ in node.entries:
        if key.text != "tied":
            raise ProblemError(key.loc, f"a tied parameter takes only tied: (the parameter it is), not '{key.text}'")
    target = string(node.get("tied"), f"the tied: of parameter '{full}'").strip()
    if target == full:
        raise ProblemError(node.get("tied").loc, f"parameter '{full}' cannot be tied to itself")
    if frozen:
        raise ProblemError(node.get("tied").loc, f"parameter '{full}' is tied in a module with requires_grad: false; "
                                                 "freezing one module of a tied Parameter is not modelled yet")
    placeholder = Literal(tuple(shape) if shape is not None else (), (Fraction(0),) * _numel(shape or ()), loc)
    return TensorDecl(full, placeholder, True, loc, None, tied=target)


def is_tied(node: YNode) -> bool:
    return isinstance(node, YMap) and node.get("tied") is not None


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def resolve_ties(model: Module) -> Module:
    """Every tied placeholder given the named parameter's value (a built-in's shape checked)."""
    params = {p.name: p for m in model.walk() for p in m.params if p.tied is None}
    if not any(p.tied is not None for m in model.walk() for p in m.params):
        return model

    def resolve(m: Module) -> Module:
        own = []
        for p in m.params:
            if p.tied is not None:
                target = params.get(p.tied)
                if target is None:
                    names = ", ".join(params) or "none"
                    raise ProblemError(p.loc, f"parameter '{p.name}' is tied to '{p.tied}', which is no (untied) "
                                              f"parameter of the model (its parameters: {names})")
                if m.type is not None and tuple(p.value.shape) != tuple(target.value.shape):
                    raise ProblemError(p.loc, f"parameter '{p.name}' of this {m.type} has shape "
                                              f"{list(p.value.shape)} but '{target.name}', which it is tied to, has "
                                              f"{list(target.value.shape)}")
                p = TensorDecl(p.name, target.value, target.requires_grad, p.loc, target.dtype, tied=target.name)
            own.append(p)
        return replace(m, params=tuple(own), children=tuple(resolve(c) for c in m.children))
    return resolve(model)
