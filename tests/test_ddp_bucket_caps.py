"""DistributedDataParallel's ``bucket_cap_mb_list`` (PyTorch 2.13's per-bucket limits): the buckets each
backward's comm hook is handed, as a hand-written script on two real gloo processes printed them
(three Linear layers, float64: a.weight 32 bytes, a.bias 16, b.weight 32, b.bias 16, c.weight 16,
c.bias 8; ``bucket.index()`` and ``bucket.parameters()`` per call). tests/ddp/bucket_cap_mb_list*.yaml
are the same set-ups, compared with gloo by tests/test_ddp.py's file test."""

from __future__ import annotations

import os
import re
import textwrap
from fractions import Fraction

import pytest

import adjoint
from adjoint import ProblemError
from adjoint.format.distributed import cap_bytes

HERE = os.path.dirname(os.path.abspath(__file__))

#: what torch printed per backward: [(bucket.index(), parameters in buffer order), ...]
LISTED = [[(0, ["c.bias"]), (1, ["b.weight", "b.bias", "c.weight"]), (2, ["a.weight", "a.bias"])],
          [],                                             # the no_sync backward: no call
          [(0, ["c.bias", "c.weight", "b.bias"]), (1, ["b.weight", "a.bias", "a.weight"])],
          [(0, ["c.bias", "c.weight", "b.bias"]), (1, ["b.weight", "a.bias", "a.weight"])]]
#: static_graph with [40 bytes]: the delayed all-reduce's three buckets all report index 0
STATIC = [[(0, ["c.weight", "c.bias"]), (0, ["b.weight", "b.bias"]), (0, ["a.weight", "a.bias"])],
          [(0, ["c.weight", "c.bias"]), (1, ["b.weight", "b.bias"]), (2, ["a.weight", "a.bias"])],
          [(0, ["c.bias", "c.weight", "b.bias"]), (1, ["b.weight", "a.bias"]), (2, ["a.weight"])]]

MODEL = textwrap.dedent("""\
    name: caps
    dtype: float64
    inputs:
      x: {per_rank: [[[1, 2]], [[2, -1]]]}
    model:
      type: Sequential
      children:
        a: {type: Linear, params: {weight: [[0.5, 1], [1, -0.5]], bias: [1, 0]}}
        b: {type: Linear, params: {weight: [[1, 2], [0.5, -1]], bias: [0.5, 0.25]}}
        c: {type: Linear, params: {weight: [[1, -1]], bias: [0.25]}}
    loss: "(y ** 2).sum()"
    distributed:
      world_size: 2
      wrap: ddp
      comm_hook: {builtin: allreduce}
    """)


def _calls(path: str) -> list:
    ranks = adjoint.load(path).solve().to_json()["variants"]["default"]["ranks"]
    out = [[(int(c["target"][len("bucket"):]), c["args"]["parameters"]) for c in p["hook_calls"]
            if c["kind"] == "comm_hook"] for p in ranks[0]["passes"]]
    assert out == [[(int(c["target"][len("bucket"):]), c["args"]["parameters"]) for c in p["hook_calls"]
                    if c["kind"] == "comm_hook"] for p in ranks[1]["passes"]]
    return out


def _with_args(tmp_path, args: str, steps: str = "[forward, backward, forward, backward]") -> str:
    path = tmp_path / "caps.yaml"
    path.write_text(MODEL.replace("  wrap: ddp\n", f"  wrap: ddp\n  args: {args}\n") + f"steps: {steps}\n")
    return str(path)


def test_the_list_sets_the_first_buckets_and_the_rebuilt_ones_and_bucket_cap_mb_is_ignored():
    assert _calls(os.path.join(HERE, "ddp", "bucket_cap_mb_list.yaml")) == LISTED


def test_with_static_graph_the_delayed_all_reduce_hands_every_bucket_index_0():
    assert _calls(os.path.join(HERE, "ddp", "bucket_cap_mb_list_static.yaml")) == STATIC


def test_find_unused_parameters_keeps_the_listed_first_buckets(tmp_path):
    # torch: never rebuilt, the same three buckets in every iteration
    first = LISTED[0]
    path = _with_args(tmp_path, '{find_unused_parameters: true, bucket_cap_mb_list: ["40/1048576", "60/1048576"]}',
                      "[forward, backward, forward, backward, forward, backward]")
    assert _calls(path) == [first, first, first]


def test_an_empty_list_is_not_given_and_zero_is_a_bucket_per_parameter(tmp_path):
    every = ["a.weight", "a.bias", "b.weight", "b.bias", "c.weight", "c.bias"]
    # torch: [] is falsy (the default: one bucket, then one 25 MiB bucket in ready order)
    assert _calls(_with_args(tmp_path, "{bucket_cap_mb_list: []}")) == [[(0, every)], [(0, every[::-1])]]
    alone = [(k, [n]) for k, n in enumerate(every[::-1])]
    assert _calls(_with_args(tmp_path, "{bucket_cap_mb_list: [0]}")) == [alone, alone]


def test_a_limit_is_truncated_from_the_float_pytorch_is_handed():
    # int(cap_mb * 2**20) on the float the decimal reads as: 0.0000305175781249999999 is the float
    # 2**-15 (32 bytes), though the decimal times 2**20 is just below 32
    assert cap_bytes(Fraction("0.0000305175781249999999")) == 32
    assert cap_bytes(Fraction("0.00003")) == 31           # 31.45728 truncated
    assert cap_bytes(Fraction(2 ** 43)) == 2 ** 63          # whole MiB: an int, exactly


@pytest.mark.parametrize("args,message", [
    ("{bucket_cap_mb_list: [1, -1]}", "distributed.args.bucket_cap_mb_list: -1 MiB is not modelled (PyTorch's "
                                      "TypeError from _compute_bucket_assignment_by_size"),
    ("{bucket_cap_mb_list: [8796093022209]}", "distributed.args.bucket_cap_mb_list: 8796093022209 MiB is not modelled"),
    ("{bucket_cap_mb_list: 5}", "distributed.args.bucket_cap_mb_list must be a list of numbers of MiB, one per "
                                "bucket, not a number"),
    ("{bucket_cap_mb_list: [one]}", "distributed.args.bucket_cap_mb_list must be a number such as 0.3"),
])
def test_a_list_pytorch_refuses_or_the_format_does_not_take_is_one_located_line(tmp_path, args, message):
    path = _with_args(tmp_path, args)
    with pytest.raises(ProblemError, match="^" + re.escape(path) + r":\d+:\d+: " + re.escape(message)):
        adjoint.load(path).solve()


def test_powersgd_counts_no_iteration_in_a_static_graphs_multi_bucket_delayed_all_reduce():
    # no bucket of the delayed all-reduce is_last() (each index 0): iterations 2 to 4 are counted, so the
    # fourth is still plain allreduce (real gloo processes agree: tests/ddp/powersgd_static_list.yaml)
    calls = _calls(os.path.join(HERE, "ddp", "powersgd_static_list.yaml"))
    assert calls[:3] == STATIC
    assert calls[3] == STATIC[2]
