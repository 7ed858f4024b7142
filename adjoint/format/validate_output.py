"""The loss's ``y`` is the model's output, and only that.

With a loss, ``y`` names what ``model(x)`` returned. A name ``y`` at the root -- a local of the
root's forward, a root parameter, buffer or child -- would be a second tensor the loss could
mean; PyTorch code has no such ambiguity (``y = model(x)`` is written by the user), so the
file is refused at that name's line rather than silently reading the wrong tensor."""

from __future__ import annotations

from adjoint.format import syntax as S
from adjoint.format.errors import ProblemError
from adjoint.format.problem import OUTPUT, Module


def _targets(program):
    """(name, loc) of every name the program assigns, in file order (``with`` bodies included)."""
    for stmt in program or ():
        if isinstance(stmt, S.Assign):
            stack = [stmt.target]
            while stack:
                t = stack.pop(0)
                if isinstance(t, S.Name):
                    yield t.id, t.loc
                elif isinstance(t, S.Tup):
                    stack[:0] = list(t.items)
        elif isinstance(stmt, S.AugAssign) and isinstance(stmt.target, S.Name):
            yield stmt.target.id, stmt.target.loc
        elif isinstance(stmt, S.With):
            yield from _targets(stmt.body)


def check_output_name(root: Module, has_loss: bool) -> None:
    """Refuse a root-level name ``y`` when the loss reads ``y`` as the model output."""
    if not has_loss:
        return
    why = f"'{OUTPUT}' in the loss is the model's output (y = model(x)); rename this {{what}}"
    for name, loc in _targets(root.forward if isinstance(root.forward, tuple) else None):
        if name == OUTPUT:
            raise ProblemError(loc, why.format(what="local of the root's forward"))
    for p in root.params:
        if p.name == OUTPUT:
            raise ProblemError(p.loc, why.format(what="parameter"))
    for b in root.buffers:
        if b.name == OUTPUT:
            raise ProblemError(b.loc, why.format(what="buffer"))
    for c in root.children:
        if c.name == OUTPUT:
            raise ProblemError(c.loc, why.format(what="child module"))
