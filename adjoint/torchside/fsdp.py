"""A ``wrap: fully_shard`` file run for real, one rank of it: FSDP2's ``fully_shard`` on each
``shard:`` submodule in order, then on the root, then the steps (the processes and the gloo
process group are :mod:`adjoint.torchside.ddp`'s). Parameters, their ``.grad`` and what a
post-accumulate-grad hook is handed are DTensors: this rank's rows are recorded.
"""

from __future__ import annotations

import warnings

import torch
from torch.distributed.fsdp import fully_shard

from adjoint.format.problem import Step
from adjoint.torchside.run import DEFAULT_STEPS, Session, finish_calls, run_steps
from adjoint.torchside.run import _as_fresh_process, _recorder


def _user_class(module, decl) -> None:
    """The twin of a built-in type named as the user's torch.nn class (FSDP names the class it
    makes, FSDP<name>, in its warnings)."""
    if decl.type is not None and type(module).__name__ != decl.type:
        module.__class__ = type(decl.type, (type(module),), {})


def run_fsdp_rank(problem, variant: str, dtype: str, rank: int) -> dict:
    spec = problem.distributed
    mine = spec.ranks[rank]
    decl = mine.variant(variant)
    s = Session(mine, decl, dtype)
    kwargs = {} if spec.reshard_after_forward is None else {"reshard_after_forward": spec.reshard_after_forward}
    steps = decl.steps if decl.steps is not None else tuple(Step(k, decl.loc) for k in DEFAULT_STEPS)
    passes: list[dict] = []
    warned: list[dict] = []
    always = torch.is_warn_always_enabled()
    torch.set_warn_always(True)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = _recorder(s, warned)
        try:
            s.phase = "setup"
            for label in [lb for lb, _ in spec.shard] + [mine.model.label]:
                _user_class(s.modules[label], s.decls[label])
            for label, _ in spec.shard:
                fully_shard(s.modules[label], **kwargs)
            fully_shard(s.root, **kwargs)
            sharded = dict(s.root.named_parameters())
            for name in list(s.params):
                if name in sharded:      # the module's parameter is now the sharded DTensor one
                    s.params[name] = s.leaves[name] = sharded[name]
            error = run_steps(s, steps, passes, pass_extras=False)
        finally:
            s.close()
            torch.set_warn_always(always)
    warned = _as_fresh_process(warned)
    s.nodes.scan(s.kept)
    finish_calls(s)
    if error is not None:
        return {"error": error, "hook_calls": s.log, "warnings": warned}
    fp = s.forwards[-1] if s.forwards else None
    observed = {"loss": fp.values.get("loss") if fp is not None and fp.loss is not None else None,
                "values": fp.values if fp is not None else {}, "grads": s.grads(), "hook_calls": s.log}
    if decl.steps is not None:
        observed["passes"] = passes
    observed["warnings"] = warned
    return observed
