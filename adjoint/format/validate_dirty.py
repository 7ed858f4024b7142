"""``function: {dirty: [x, ...]}``: ``ctx.mark_dirty(x, ...)`` in a custom Function's forward.

Each entry names an input or parameter of the module (a slot of the Function) that the forward
modifies in place and returns; the engine does what PyTorch's ``_wrap_outputs`` does with it
(adjoint/engine/dirty.py)."""

from __future__ import annotations

from adjoint.format.checks import string, suggest
from adjoint.format.errors import ProblemError
from adjoint.format.loader import YSeq


def parse_dirty(node, slots: list, what: str) -> tuple:
    """(slot name, Loc) per entry, in the file's order; ``()`` when absent."""
    if node is None:
        return ()
    if not isinstance(node, YSeq) or not node.items:
        raise ProblemError(node.loc, "function.dirty must be a list of input names (ctx.mark_dirty's arguments), "
                                     "as in dirty: [x]")
    out = []
    for item in node.items:
        name = string(item, "an entry of function.dirty")
        if name not in slots:
            raise ProblemError(item.loc, f"'{name}' is not an input or parameter of {what}"
                                         f"{suggest(name, slots)} (slots: {', '.join(slots)})")
        if name in [n for n, _ in out]:
            raise ProblemError(item.loc, f"'{name}' is listed twice in function.dirty; list each input once")
        out.append((name, item.loc))
    return tuple(out)
