"""One rank's run of a distributed file, whatever wraps the model (DistributedDataParallel in
:mod:`adjoint.torchside.ddp`, ``fully_shard`` in :mod:`adjoint.torchside.fsdp`): the rank's
session, every warning recorded as in a single process, the wrapping and the steps (the
caller's ``body``), then the observed JSON of :func:`adjoint.torchside.run.run_variant` as this
rank saw it.
"""

from __future__ import annotations

import warnings

import torch

from adjoint.format.problem import Step
from adjoint.torchside.run import DEFAULT_STEPS, Session, finish_calls
from adjoint.torchside.run import _as_fresh_process, _recorder, _without_meta


def run_one_rank(problem, variant: str, dtype: str, rank: int, body, session_class=Session) -> dict:
    """``body(s, spec, steps, passes)`` wraps the model and runs the steps in ``s`` (a
    ``session_class``, its phase ``setup``), handing back the run's error record or None."""
    spec = problem.distributed
    mine = spec.ranks[rank]
    decl = mine.variant(variant)
    s = session_class(mine, decl, dtype)
    steps = decl.steps if decl.steps is not None else tuple(Step(k, decl.loc) for k in DEFAULT_STEPS)
    passes: list[dict] = []
    warned: list[dict] = list(s.__dict__.get("setup_warnings", ()))   # the constructors' (build), on every rank
    always = torch.is_warn_always_enabled()
    torch.set_warn_always(True)   # a TORCH_WARN_ONCE is issued again in this process: kept once below
    with warnings.catch_warnings():
        warnings.simplefilter("always")   # every warning each time it is issued, as in a single process
        warnings.showwarning = _recorder(s, warned)
        try:
            s.phase = "setup"
            error = body(s, spec, steps, passes)
        finally:
            s.close()
            torch.set_warn_always(always)
    warned = _as_fresh_process(warned)
    s.nodes.scan(s.kept)
    finish_calls(s)
    if error is not None:
        return {"error": error, "hook_calls": s.log, "warnings": warned}
    fp = s.forwards[-1] if s.forwards else None
    observed = {"loss": _without_meta(fp.values.get("loss")) if fp is not None and fp.loss is not None else None,
                "values": fp.values if fp is not None else {}, "grads": s.grads(), "hook_calls": s.log}
    if decl.steps is not None:
        observed["passes"] = passes
    observed["warnings"] = warned
    if s.written_leaves:
        observed["leaf_values"] = s.leaf_values()
        for entry in passes:   # in each passes[i] (contract v3 9), {} before a hook wrote a leaf
            entry.setdefault("leaf_values", {})
    return observed
