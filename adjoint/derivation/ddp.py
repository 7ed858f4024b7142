"""The derivation of a distributed file (DistributedDataParallel): rank 0's derivation, as every
rank runs the same graph and fires its hooks in the same order, and a record of what DDP did
in each backward pass on every rank -- the buckets it launched (parameters in buffer order,
each rank's flat buffer, the collective's result) and each rank's ``.grad`` before and after
the reduction. Made from the engine's records (``run.ddp``: :class:`adjoint.engine.distributed.Reducer`,
its ``history``); typeset by :mod:`adjoint.render.latex.section_ddp`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from adjoint.derivation import derive_problem


@dataclass(frozen=True)
class BucketInfo:
    """One bucket of one backward pass: its parameters and what each rank's collective saw."""

    index: int
    parameters: tuple          # names, in buffer order
    buffers: tuple             # each rank's flat buffer as the collective was handed it
    results: tuple             # each rank's result (None: not known)


@dataclass(frozen=True)
class ReductionInfo:
    """One backward pass of DDP's Reducer: whether it reduced, its buckets, the local gradients."""

    number: int                # the backward pass, 1-based
    reduced: bool              # finalize_backward wrote .grad
    synced: bool               # the Reducer was armed (its hooks copied gradients into buckets)
    buckets: tuple             # BucketInfo, in launch order
    local: dict                # parameter -> each rank's .grad when the backward ended, before the reduction
    final: dict                # parameter -> each rank's .grad after the pass


@dataclass(frozen=True)
class DistributedInfo:
    """What DistributedDataParallel does in one variant."""

    variant: str
    world_size: int
    hook: str                  # none | allreduce | fp16_compress | bf16_compress | written
    find_unused_parameters: bool
    static_graph: bool
    gradient_as_bucket_view: bool
    bucket_cap_mb: object      # Fraction | None
    passes: tuple              # ReductionInfo per backward pass
    bucket_cap_mb_list: tuple = ()          # per-bucket limits in MiB (given: the first buckets follow them too)
    skip_all_reduce_unused_params: bool = False


def derive_distributed(prediction):
    """(the ProblemDerivation of rank 0, [DistributedInfo per variant])."""
    spec = prediction.problem.distributed
    if spec.wrap == "fully_shard":   # rank 0's derivation; what FSDP adds is said by its own section
        first = _Rank0(prediction.problem, [rp.ranks[0].derivation for rp in prediction.variants], prediction.numeric)
        from adjoint.derivation.fsdp import fsdp_infos
        return derive_problem(first), fsdp_infos(prediction)
    hook = ("none" if spec.comm_hook is None else spec.comm_hook.builtin if spec.comm_hook.builtin is not None
            else "written")
    rank0 = []
    infos = []
    for rp in prediction.variants:
        runs = [vp.run for vp in rp.ranks]
        passes = []
        for i in range(min(min(len(run.passes), len(run.ddp.history)) for run in runs)):   # passes every rank finished
            hs = [run.ddp.history[i] for run in runs]
            first = hs[0]
            buckets = tuple(BucketInfo(k, names, tuple(h.buckets[j][2] for h in hs),
                                       tuple(h.buckets[j][3] for h in hs))
                            for j, (k, names, _, _) in enumerate(first.buckets)
                            if all(len(h.buckets) > j for h in hs))
            names = list(first.local)
            passes.append(ReductionInfo(first.number, first.reduced, first.armed, buckets,
                                        {n: tuple(h.local[n] for h in hs) for n in names},
                                        {n: tuple(run.passes[i].grads.get(n) for run in runs) for n in names}))
        infos.append(DistributedInfo(rp.name, spec.world_size, hook, spec.find_unused_parameters, spec.static_graph,
                                     spec.gradient_as_bucket_view, spec.bucket_cap_mb, tuple(passes),
                                     spec.bucket_cap_mb_list, spec.skip_all_reduce_unused_params))
        reduced = tuple(p.number for p in passes if p.reduced)
        rank0.append(replace(rp.ranks[0].derivation, reduced_passes=reduced))
    first = _Rank0(prediction.problem, rank0, prediction.numeric)
    return derive_problem(first), infos


class _Rank0:
    """A prediction-like view of rank 0's answers (what :func:`adjoint.derivation.derive` reads)."""

    def __init__(self, problem, derivations: list, numeric: bool):
        self.problem = problem
        self.variants = [_Derived(d) for d in derivations]
        self.numeric = numeric


class _Derived:
    __slots__ = ("derivation",)

    def __init__(self, derivation):
        self.derivation = derivation
