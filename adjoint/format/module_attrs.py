"""``self.NAME = EXPR`` in a custom module's forward: a tensor stored as a module attribute.

PyTorch's ``nn.Module.__setattr__`` keeps a plain tensor (not a Parameter) in the module's
``__dict__``; the caller reads it back as ``PATH.NAME`` after the call (the same tensor object:
``mod.inp is`` the tensor the forward stored). The parse is here; the engine keeps the value per
module (:mod:`adjoint.engine.module_attrs`), the torch twin sets the real attribute.
"""

from __future__ import annotations

import ast

from adjoint.format.errors import ProblemError
from adjoint.format.syntax import Attr, Name

#: the statement's target: ``Attr(Name("self"), NAME)``
SELF = "self"


def self_attribute_target(builder, node: ast.Attribute, what: str, unpack: bool) -> Attr:
    """The target of ``self.NAME = EXPR`` (a plain assignment line of a module's forward)."""
    loc = builder.loc(node)
    if not unpack:
        raise ProblemError(loc, f"{what}: only a plain assignment 'self.{node.attr} = value' may set a module "
                                "attribute (no in-place 'self.NAME += v')")
    if node.attr.startswith("_"):
        raise ProblemError(loc, f"{what}: attribute '{node.attr}' is not allowed: names starting with '_' are "
                                "private to nn.Module; pick a public name")
    return Attr(loc, Name(builder.loc(node.value), SELF), node.attr)


def is_self_attribute(target) -> bool:
    """Whether an assignment target is ``self.NAME``."""
    return isinstance(target, Attr) and isinstance(target.obj, Name) and target.obj.id == SELF


def readable_attribute(kids, child: str, name: str) -> bool:
    """Whether ``CHILD.NAME`` in a parent's forward reads a module attribute: the child is a custom
    module (a forward program, not a custom Function) whose forward has a ``self.NAME = ...`` line
    (``name`` None: any ``self.X = ...`` line)."""
    mod = next((c for c in kids if c.name == child), None)
    if mod is None or mod.type is not None or getattr(mod, "function", None) is not None or not mod.forward:
        return False
    return any(is_self_attribute(t) and name in (None, t.name) for t in _targets(mod.forward))


def module_at(kids, path: str):
    """The module ``path`` (``lin``, ``transformer.wte``, ``layers.0``) names among ``kids`` and
    their children, or None."""
    found = None
    for part in path.split("."):
        found = next((c for c in kids if c.name == part), None)
        if found is None:
            return None
        kids = found.children
    return found


def own_tensor(mod, name: str) -> bool:
    """Is ``name`` a parameter or buffer of module ``mod`` (``lin.weight``, ``bn.running_mean``), or its
    weight computed by weight_norm's or spectral_norm's parametrization at each read?"""
    return mod.param(name) is not None or mod.buffer(name) is not None or \
        (name == "weight" and (getattr(mod, "weight_norm", None) is not None or
                               getattr(mod, "spectral_norm", None) is not None))


def _targets(program):
    """Every assignment target of a program (``with`` bodies and unpacked tuples included)."""
    from adjoint.format.syntax import Assign, Tup, With
    stack = list(program)
    while stack:
        s = stack.pop()
        if isinstance(s, With):
            stack.extend(s.body)
        elif isinstance(s, Assign):
            stack.append(s.target)
        elif isinstance(s, Tup):
            stack.extend(s.items)
        elif isinstance(s, Attr):
            yield s
