"""What the v1 engine (graph, lower, forward, reverse, torchside) runs; the rest is refused.

The validator reads all of contract v2; until the new runtime replaces the v1 engine, a
file that uses anything v2 added (a module type beyond v1's, buffers, a Dropout mask,
ModuleList, input defaults, int64 tensors, steps, the new hook targets and options) is
refused here, at the place it is written, with one line saying it is not supported yet.
v2 statements and expressions are refused where the engine meets them
(:func:`adjoint.expr.simple_program`, :class:`adjoint.lower.Lowerer`).
"""

from __future__ import annotations

from .errors import Loc, ProblemError
from .problem import BUILTIN_TYPES, Problem, Variant

_LATER = "is not supported yet: this version's engine runs contract v1 (the v2 runtime is in progress)"


def refuse_unsupported(problem: Problem, variant: Variant) -> None:
    for m in problem.model.walk():
        what = f"module '{m.label}'"
        if m.type is not None and m.type not in BUILTIN_TYPES:
            _refuse(m.loc, f"a {m.type} module ({what})")
        if m.buffers:
            _refuse(m.loc, f"the buffers of {what}")
        if m.input_defaults:
            _refuse(m.loc, f"an input default of {what}")
        if m.args and m.type not in (None, "Linear") and dict(m.args).get("inplace"):
            _refuse(m.loc, f"inplace=True on {what}")
    for decl in problem.all_tensors():
        if decl.dtype is not None:
            _refuse(decl.loc, f"the {decl.dtype} tensor '{decl.name}'")
    if variant.steps is not None:
        _refuse(variant.steps[0].loc if variant.steps else variant.loc, "steps:")
    for h in variant.hooks:
        if h.on in ("global", "multi_grad", "saved_tensors"):
            _refuse(h.loc, f"a {h.on} hook")
        if h.kind == "post_accumulate_grad":
            _refuse(h.loc, "a post_accumulate_grad hook")
        for option in ("prepend", "with_kwargs", "always_call"):
            if getattr(h, option):
                _refuse(h.loc, f"{option}: on a hook")
        if h.raises is not None:
            _refuse(h.loc, "raises: on a hook")
        if h.removes:
            _refuse(h.loc, "removes: on a hook")


def _refuse(loc: Loc | None, what: str) -> None:
    raise ProblemError(loc, f"{what} {_LATER}")
