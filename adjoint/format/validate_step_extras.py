"""Two step extensions: ``{forward: {call: PATH}}`` (a forward that calls one child module
alone, as a script calls ``module_1(input)``) and the ``registered`` step.

The ``registered`` step: how many hooks one module's hook dict holds at that point.

``{registered: {module: PATH, kind: KIND, as: NAME}}`` reads ``len(module._forward_pre_hooks)``
(``kind: forward_pre``), ``len(module._forward_hooks)`` (``forward``),
``len(module._backward_pre_hooks)`` (``full_backward_pre``) or ``len(module._backward_hooks)``
(``full_backward`` and ``backward``: PyTorch keeps both in that one dict) -- what a test
checks with ``len(handle.hooks_dict_ref())`` -- or ``len(module._forward_hooks_always_called)``
(``forward_always_call``). ``module: global`` reads the global dicts
(``torch.nn.modules.module._global_forward_hooks``, ...). The count is the answer's
``registered[NAME]``."""

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
    kind = choice(r.get("kind"), f"the hook kind of {where}", MODULE_HOOK_KINDS + ("forward_always_call",))
    name_node = r.get("as")
    if not isinstance(name_node, YScalar):
        raise ProblemError(name_node.loc, f"the name (as:) of {where} must be an identifier")
    return path, kind, identifier(name_node, f"the name (as:) of {where}")


def check_step_modules(model, variants) -> None:
    """Every forward step's ``call:`` names a child module, every ``registered`` step a module."""
    from adjoint.format.errors import raise_all
    from adjoint.format.submodules import builtin_submodules
    if model is None or variants is None or not isinstance(variants, list):
        return
    labels = [m.label for m in model.walk()]
    children = [label for m, label in zip(model.walk(), labels) if m is not model]
    every = labels + list(builtin_submodules(model))
    errors = []
    for v in variants:
        for i, s in enumerate(v.steps or ()):
            if s.kind == "forward" and s.call is not None and s.call not in children:
                errors.append(ProblemError(s.loc, f"step {i} calls module '{s.call}', which is not a child module of "
                                                  f"the model; children: {', '.join(children) or 'none'}"))
            if s.kind == "registered" and s.counts[0] not in every + ["global"]:
                errors.append(ProblemError(s.loc, f"step {i} reads the hooks of module '{s.counts[0]}', which does not "
                                                  f"exist; modules: {', '.join(every)} (or global)"))
    raise_all(errors)
