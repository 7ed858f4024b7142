"""``{read: EXPR, as: NAME}``: a step that reads what a user reads between the steps of a
script -- a node's saved tensor (``y.grad_fn._saved_self``) or whether saved-tensor hooks may
be entered now (``torch._C._autograd._saved_tensors_hooks_is_enabled()``). The expression is
matched against these two forms, never evaluated."""

from __future__ import annotations

import re

from adjoint.format.checks import mapping, string
from adjoint.format.errors import ProblemError
from adjoint.format.loader import YMap

#: ``TENSOR.grad_fn._saved_SLOT``: SLOT is torchgen's saved-variable name (self, other, result, mat2, ...)
SAVED = re.compile(r"([A-Za-z_][A-Za-z0-9_.]*)\.grad_fn\._saved_([A-Za-z_][A-Za-z0-9_]*)")
#: the private predicate test/test_autograd.py reads after disable_saved_tensors_hooks blocks
HOOKS_ENABLED = "torch._C._autograd._saved_tensors_hooks_is_enabled()"
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_read_step(node) -> bool:
    return isinstance(node, YMap) and any(key.text == "read" for key, _ in node.entries)


def parse_read(node: YMap, where: str):
    """-> (what, target, slot, as_name): what is ``saved`` (target, slot) or ``hooks_enabled``."""
    r = mapping(node, f"the read of {where}", ("read", "as"), ())
    text = "".join(string(r.get("read"), f"the read of {where}").split())
    as_name = string(r.get("as"), f"the 'as' name of {where}")
    if not NAME.fullmatch(as_name):
        raise ProblemError(r.get("as").loc, f"{where}: 'as' takes a Python name such as s, not '{as_name}'")
    if text == HOOKS_ENABLED:
        return ("hooks_enabled", "", "", as_name)
    m = SAVED.fullmatch(text)
    if m is None:
        raise ProblemError(r.get("read").loc, f"{where}: a read is TENSOR.grad_fn._saved_NAME (y.grad_fn._saved_self) "
                                               f"or {HOOKS_ENABLED}, not '{text}'")
    return ("saved", m.group(1), m.group(2), as_name)


def check_read_names(steps, what: str) -> None:
    """Each read's ``as:`` names one answer: a name used twice would hide the first."""
    seen: set = set()
    for i, step in enumerate(steps):
        if step.kind == "read":
            name = step.read[3]
            if name in seen:
                raise ProblemError(step.loc, f"step {i} of {what} reads into '{name}' again; give each read its own "
                                             "as: name (the answer lists reads by name)")
            seen.add(name)
