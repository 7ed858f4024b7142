"""``adjoint verify`` on a distributed file: the run in ``world_size`` real processes
(:mod:`adjoint.torchside.ddp`), each rank's answer compared with its prediction."""

from __future__ import annotations

from adjoint.torchside.compare import Row, compare


def verify_ranks(problem, vp, dtype: str, fd: bool) -> tuple[list, dict]:
    """(rows, observed): every rank's rows, items prefixed ``rank R:``; a run that failed or
    timed out is one failing row saying so."""
    from adjoint.torchside.ddp import run_distributed

    predicted = vp.to_json()["ranks"]
    try:
        observed = run_distributed(problem, vp.name, dtype)
    except (RuntimeError, TimeoutError) as exc:
        return [Row("run", "distributed run", False, None, None, str(exc))], {}
    rows: list = []
    for rank, (p, o) in enumerate(zip(predicted, observed)):
        for row in compare(p, o, dtype):
            row.item = f"rank {rank}: {row.item}"
            rows.append(row)
    if fd:
        rows.append(Row("fd", "finite differences", True, None, None,
                        "not run: the final gradients of a distributed run are averages over ranks, not the "
                        "derivative of one forward", skipped=True))
    return rows, {"ranks": observed}
