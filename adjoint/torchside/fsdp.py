"""A ``wrap: fully_shard`` file run for real, one rank of it: FSDP2's ``fully_shard`` on each
``shard:`` submodule in order, then on the root, then the steps (the processes and the gloo
process group are :mod:`adjoint.torchside.ddp`'s). Parameters, their ``.grad`` and what a
post-accumulate-grad hook is handed are DTensors: this rank's rows are recorded.
"""

from __future__ import annotations

from torch.distributed.fsdp import fully_shard

from adjoint.torchside.rank_run import run_one_rank
from adjoint.torchside.run import run_steps


def _user_class(module, decl) -> None:
    """The twin of a built-in type named as the user's torch.nn class (FSDP names the class it
    makes, FSDP<name>, in its warnings)."""
    if decl.type is not None and type(module).__name__ != decl.type:
        module.__class__ = type(decl.type, (type(module),), {})


def run_fsdp_rank(problem, variant: str, dtype: str, rank: int) -> dict:
    return run_one_rank(problem, variant, dtype, rank, _shard_and_run)


def _shard_and_run(s, spec, steps, passes: list) -> dict | None:
    """fully_shard on each ``shard:`` submodule in order, then on the root; the steps."""
    kwargs = {} if spec.reshard_after_forward is None else {"reshard_after_forward": spec.reshard_after_forward}
    for label in [lb for lb, _ in spec.shard] + [s.p.model.label]:
        _user_class(s.modules[label], s.decls[label])
    for label, _ in spec.shard:
        fully_shard(s.modules[label], **kwargs)
    fully_shard(s.root, **kwargs)
    sharded = dict(s.root.named_parameters())
    for name in list(s.params):
        if name in sharded:      # the module's parameter is now the sharded DTensor one
            s.params[name] = s.leaves[name] = sharded[name]
    return run_steps(s, steps, passes, pass_extras=False)
