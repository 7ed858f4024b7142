"""The order and length of ``steps:``: a backward needs a forward before it, a run needs a
forward, and at most MAX_STEPS steps are run.

PyTorch cannot call ``loss.backward()`` before a forward made ``loss``; a list of steps with
no forward at all (``steps: [zero_grad]``) runs no model, and there is nothing to predict.
Both are refused at the step (or the list), before anything runs."""

from __future__ import annotations

from adjoint.format.errors import Loc, ProblemError


#: the most entries a list of steps may have (each forward and backward is a whole pass: 10,000
#: steps took minutes, with exact parameters growing at every SGD step)
MAX_STEPS = 1000


def check_step_order(steps, loc: Loc, what: str) -> None:
    if len(steps) > MAX_STEPS:
        raise ProblemError(loc, f"{what} has {len(steps):,} entries, more than {MAX_STEPS:,}; run at most "
                                f"{MAX_STEPS:,} steps")
    for i, step in enumerate(steps):
        if step.kind == "forward":
            return
        if step.kind == "backward":
            raise ProblemError(step.loc, f"step {i} of {what} is a backward before any forward; PyTorch needs the "
                                         "forward that makes the loss first: put a forward step before it")
    raise ProblemError(loc, f"{what} has no forward step, so no model runs and there is nothing to predict; add "
                            "forward (and backward) steps, as in [forward, backward, zero_grad]")
