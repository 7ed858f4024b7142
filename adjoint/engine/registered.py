"""The ``registered`` step: ``len()`` of one module's hook dict at that point of the run (what
PyTorch's tests read as ``len(handle.hooks_dict_ref())``): ``_forward_pre_hooks``,
``_forward_hooks``, ``_backward_pre_hooks``, or ``_backward_hooks`` (full and legacy backward
hooks share it). Hooks that removed their own handle while running are gone from it."""

from __future__ import annotations

from adjoint.format.errors import ProblemError


def count_registered(run, step) -> None:
    path, kind, name = step.counts
    hooks = run.model.hooks
    if path != "global" and path not in hooks:
        raise ProblemError(step.loc, f"the registered step names module '{path}', which does not exist; modules: "
                                     f"{', '.join(hooks)}")
    state = run.model.global_hooks if path == "global" else hooks[path]
    if kind == "forward_always_call":   # _forward_hooks_always_called: the always_call marks
        run.registered[name] = len(state.always_called)
    else:
        extra = 0
        if kind == "forward_pre" and path != "global":   # the older weight_norm's WeightNorm hook is in it
            mod = next((m for m in run.problem.model.walk() if m.label == path), None)
            extra = int(bool(mod is not None and mod.weight_norm_legacy))
        run.registered[name] = len(state.dict_for(kind).items) + extra
