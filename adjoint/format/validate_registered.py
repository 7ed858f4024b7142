"""The ``registered`` step: how many hooks one module's hook dict holds at that point.

``{registered: {module: PATH, kind: KIND, as: NAME}}`` reads ``len(module._forward_pre_hooks)``
(``kind: forward_pre``), ``len(module._forward_hooks)`` (``forward``),
``len(module._backward_pre_hooks)`` (``full_backward_pre``) or ``len(module._backward_hooks)``
(``full_backward`` and ``backward``: PyTorch keeps both in that one dict) -- what a test
checks with ``len(handle.hooks_dict_ref())``. The count is the answer's ``registered[NAME]``."""

from __future__ import annotations

from adjoint.format.checks import choice, identifier, mapping, string
from adjoint.format.errors import Loc, ProblemError
from adjoint.format.loader import YNode, YScalar
from adjoint.format.problem import MODULE_HOOK_KINDS


def parse_registered(body: YNode | None, loc: Loc, where: str) -> tuple[str, str, str]:
    """(module path, hook kind, name) of a ``registered`` step."""
    if body is None:
        raise ProblemError(loc, f"{where}: write {{registered: {{module: PATH, kind: forward_pre, as: NAME}}}}: "
                                "the module, which of its hook dicts, and the name of the count")
    r = mapping(body, f"the registered read of {where}", ("module", "kind", "as"), ())
    path = string(r.get("module"), f"the module of {where}")
    kind = choice(r.get("kind"), f"the hook kind of {where}", MODULE_HOOK_KINDS)
    name_node = r.get("as")
    if not isinstance(name_node, YScalar):
        raise ProblemError(name_node.loc, f"the name (as:) of {where} must be an identifier")
    return path, kind, identifier(name_node, f"the name (as:) of {where}")
