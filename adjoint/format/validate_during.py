"""``during: [STEP, ...]`` on a ``saved_tensors:`` hook (and ``next:`` on a ``node:`` hook, below): the steps its ``with
torch.autograd.graph.saved_tensors_hooks(pack, unpack)`` block is around (contract v3
section 3), by their index in ``steps:`` (0 is the first step). A forward step listed: the
block is around that forward (or the calls of its ``scope``); a backward step listed: around
that backward, so the ops a ``create_graph`` backward records pack their saved tensors
through it. Without ``during:`` the block is around every forward and no backward."""

from __future__ import annotations

from adjoint.format.errors import ProblemError
from adjoint.format.literals import parse_int
from adjoint.format.loader import YNode, YSeq


def parse_during(node: YNode, index: int) -> tuple[int, ...]:
    if not isinstance(node, YSeq) or not node.items:
        raise ProblemError(node.loc, f"during: of hook {index} must be a non-empty list of step indices "
                                     "(0 is the first step of steps:), as in during: [0, 1]")
    out: list[int] = []
    for item in node.items:
        i = parse_int(item, f"a step index in during: of hook {index}", 0)
        if i in out:
            raise ProblemError(item.loc, f"step {i} is listed twice in during: of hook {index}")
        out.append(i)
    return tuple(out)


def check_during(steps, hooks, what: str) -> list[ProblemError]:
    """Each ``during:`` index names a forward or backward step of ``steps`` (the list the hooks run with)."""
    errors = []
    for h in hooks:
        for i in getattr(h, "during", None) or ():
            if not steps:
                errors.append(ProblemError(h.loc, f"during: of hook {h.index} names steps, but there is no steps: "
                                                  "list; write the steps (forward, backward, ...) it is around"))
                break
            if i >= len(steps):
                errors.append(ProblemError(h.loc, f"during: of hook {h.index} names step {i}, but {what} has "
                                                  f"{len(steps)} steps, numbered 0 to {len(steps) - 1}; list the "
                                                  "steps the with block is around"))
            elif steps[i].kind not in ("forward", "backward"):
                errors.append(ProblemError(h.loc, f"during: of hook {h.index} names step {i}, a {steps[i].kind} step; "
                                                  "a saved_tensors block is around a forward or a backward step"))
    return errors


def parse_next(node: YNode, index: int) -> tuple[int, ...]:
    """``next: [i, j, ...]`` on a ``node:`` hook: the node ``grad_fn.next_functions[i][0]
    .next_functions[j][0]...`` of the target, one index per step (a node no tensor names)."""
    if not isinstance(node, YSeq) or not node.items:
        raise ProblemError(node.loc, f"next: of hook {index} must be a non-empty list of indices into next_functions, "
                                     "as in next: [1, 0]")
    return tuple(parse_int(item, f"an index in next: of hook {index}", 0) for item in node.items)
