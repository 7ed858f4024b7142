"""A backward step inside ``with torch.autograd.graph.saved_tensors_hooks(...)`` blocks
(``during: [STEP]`` on a ``saved_tensors`` hook, adjoint.format.validate_during): the blocks
are entered before the step's root is evaluated and left after the backward returns, so
every tensor saved in between -- by the root's ops, and by the ops a ``create_graph``
backward records for its nodes' formulas -- is packed by the innermost block."""

from __future__ import annotations

from adjoint.engine import saved_hooks


def backward_step_within(run, problem, variant, step, index: int, first_backward: bool, backend,
                         backward_request, run_backward) -> bool:
    """Run backward step ``index`` inside its blocks, as adjoint.engine.passes runs a backward
    step (hooks removed before and after the first backward, with passes' ``backward_request``
    and ``run_backward``); returns ``first_backward`` after it."""
    reg = run.reg
    start = len(run.rt.log)   # the root's ops pack inside the blocks: those calls are the pass's
    blocks = saved_hooks.enter(run.rt, reg.saved_hooks_during_backward(index))
    try:
        request = backward_request(problem, step.backward or variant.backward, run, backend)
        if first_backward:
            for hook in variant.hooks:
                if hook.remove == "before_backward":
                    reg.remove(hook.index)
        run_backward(run, request, index, start)
    finally:
        saved_hooks.leave(run.rt, blocks)
    if first_backward:
        for hook in variant.hooks:
            if hook.remove == "after_backward":
                reg.remove(hook.index)
    return False
