"""``adjoint verify`` on a distributed file: the run in ``world_size`` real processes
(:mod:`adjoint.torchside.ddp`), each rank's answer compared with its prediction."""

from __future__ import annotations

from adjoint.torchside.compare import Row, compare


def verify_ranks(problem, vp, dtype: str, fd: bool) -> tuple[list, dict]:
    """(rows, observed): every rank's rows, items prefixed ``rank R:``; a run that failed or
    timed out is one failing row saying so."""
    from adjoint.torchside.ddp import run_distributed

    predicted = vp.to_json()["ranks"]
    partial = len({p.get("error") is None for p in predicted}) > 1 or any(
        "waits" in (p.get("error") or {}) for p in predicted)
    try:
        observed = run_distributed(problem, vp.name, dtype, alone=partial)
    except (RuntimeError, TimeoutError) as exc:
        return [Row("run", "distributed run", False, None, None, str(exc))], {}
    rows: list = []
    for rank, (p, o) in enumerate(zip(predicted, observed)):
        if partial:
            p, o, waited = _partial(p, o)
            if waited is not None:
                waited.item = f"rank {rank}: {waited.item}"
                rows.append(waited)
        for row in compare(p, o, dtype):
            row.item = f"rank {rank}: {row.item}"
            rows.append(row)
    if fd:
        rows.append(Row("fd", "finite differences", True, None, None,
                        "not run: the final gradients of a distributed run are averages over ranks, not the "
                        "derivative of one forward", skipped=True))
    return rows, {"ranks": observed}


#: what gloo's RuntimeError says to a rank whose collective a peer never joins: the peer's process
#: ended, or the process group's timeout passed
GLOO_WAIT_ENDS = ("Connection closed by peer", "Connection reset by peer", "Timed out waiting")


def _partial(p: dict, o: dict) -> tuple:
    """A run where some ranks raised: a comm hook's value that depends on when a dead rank's
    process ended is not compared (predicted None: an asynchronous all-reduce the dead rank had
    launched), and a rank predicted to wait in a collective is held to gloo's words for it (the
    message names a port or a time, so its words are not predicted: type, during and the calls
    before it are)."""
    import copy

    p, o = copy.deepcopy(p), copy.deepcopy(o)
    for pc, oc in zip(p.get("hook_calls") or [], o.get("hook_calls") or []):
        if pc.get("kind") == "comm_hook" and pc.get("returned") is None:
            oc["returned"] = None
    perr, oerr = p.get("error") or {}, o.get("error") or {}
    if "waits" not in perr:
        return p, o, None
    said = oerr.get("message") or ""
    ok = oerr.get("type") == "RuntimeError" and any(w in said for w in GLOO_WAIT_ENDS)
    row = Row("run", f"waits in {perr['waits']['in']}", ok, None, None,
              "" if ok else f"predicted gloo's RuntimeError for a peer that never joins; observed {oerr!r}")
    perr.pop("waits")
    perr["message"] = said
    p["error"] = perr
    return p, o, row
