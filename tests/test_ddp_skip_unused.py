"""DistributedDataParallel's ``skip_all_reduce_unused_params``: with ``find_unused_parameters``, a
bucket whose parameters this rank's forward all left unused is not all-reduced (no comm hook call).
Expected calls as a hand-written script on two real gloo processes printed them for the set-up of
tests/ddp/skip_all_reduce_unused.yaml (compared with gloo by tests/test_ddp.py's file test)."""

from __future__ import annotations

import os
import re

import pytest

import adjoint
from adjoint import ProblemError

FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ddp", "skip_all_reduce_unused.yaml")
#: torch, per synchronized backward: (bucket.index(), parameters); without the argument bucket 0
#: ([c.bias], zeros) is called first
SKIPPED = [("bucket1", ["b.bias", "c.weight"]), ("bucket2", ["b.weight"]), ("bucket3", ["a.bias"]),
           ("bucket4", ["a.weight"])]


def _calls(path: str) -> list:
    ranks = adjoint.load(path).solve().to_json()["variants"]["default"]["ranks"]
    return [[(c["target"], c["args"]["parameters"]) for c in p["hook_calls"] if c["kind"] == "comm_hook"]
            for p in ranks[0]["passes"]], ranks


def test_a_bucket_of_unused_parameters_is_not_reduced():
    calls, ranks = _calls(FILE)
    assert calls == [SKIPPED, [], SKIPPED]
    assert all(r["grads"]["c.weight"] is None and r["grads"]["c.bias"] is None for r in ranks)


def test_without_the_argument_or_without_find_unused_nothing_is_skipped(tmp_path):
    text = open(FILE).read()
    path = tmp_path / "plain.yaml"
    path.write_text(text.replace("skip_all_reduce_unused_params: true, ", ""))
    calls, _ = _calls(str(path))
    assert calls[0] == [("bucket0", ["c.bias"])] + SKIPPED
    # without find_unused_parameters the argument changes nothing: c's bucket never completes, and the
    # next forward is the unfinished reduction's error (as torch raised it)
    path.write_text(text.replace("find_unused_parameters: true, ", ""))
    ranks = adjoint.load(str(path)).solve().to_json()["variants"]["default"]["ranks"]
    assert ranks[0]["error"]["message"].startswith("Expected to have finished reduction in the prior iteration")


def test_skip_with_static_graph_is_refused(tmp_path):
    path = tmp_path / "static.yaml"
    path.write_text(open(FILE).read().replace("find_unused_parameters: true", "static_graph: true"))
    with pytest.raises(ProblemError, match="^" + re.escape(str(path)) + r":\d+:\d+: " + re.escape(
            "distributed.args.skip_all_reduce_unused_params with static_graph is not modelled yet")):
        adjoint.load(str(path)).solve()


def test_unused_parameters_differing_between_ranks_are_refused():
    """No file can make the ranks' graphs differ yet (a forward has no if); the reducers' state as it
    would be: rank 0 left parameter 0 unused, rank 1 none -- PyTorch would all-reduce different buckets."""
    from types import SimpleNamespace

    from adjoint.engine.distributed import finalize
    from adjoint.format.errors import Loc

    spec = SimpleNamespace(comm_hook=None, skip_all_reduce_unused_params=True, loc=Loc("f.yaml", 1, 1))
    ranks = [SimpleNamespace(B=None, spec=spec, local_used=set(), static=False, unused=u) for u in ([0], [])]
    with pytest.raises(ProblemError, match="unused on some ranks only is not modelled"):
        finalize(ranks)
    spec.skip_all_reduce_unused_params = False     # without the argument the check does not apply
    ranks = [SimpleNamespace(B=None, spec=spec, local_used=set(), static=False, unused=u, launched=[], finalize_queued=False)
             for u in ([0], [])]
    finalize(ranks)
