"""What fully_shard does in a distributed file's derivation: rank 0's derivation is the
document's; this record says how the ranks' gradients become each rank's ``.grad`` (made from
the engine's records, ``run.fsdp``: :class:`adjoint.engine.fsdp.FSDPRank`); typeset by
:mod:`adjoint.render.latex.section_fsdp`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FSDPInfo:
    """What fully_shard does in one variant."""

    variant: str
    world_size: int
    groups: tuple                  # ((module label, (parameter name, rows per rank), ...), ...) in named_modules order
    reshard_after_forward: object  # bool | None (PyTorch's default)
    fsdp: bool = True


def fsdp_infos(prediction) -> list:
    spec = prediction.problem.distributed
    out = []
    from adjoint.engine.fsdp import shard_rows
    for rp in prediction.variants:
        state = rp.ranks[0].run.fsdp
        groups = []
        for g in state.groups:
            params = []
            for name, t in g.params:
                n = t.shape[0] if t.shape else 0
                params.append((name, tuple(shard_rows(n, spec.world_size, r) for r in range(spec.world_size))))
            groups.append((g.label, tuple(params)))
        out.append(FSDPInfo(rp.name, spec.world_size, tuple(groups), spec.reshard_after_forward))
    return out
