"""DistributedDataParallel: the ``distributed:`` block, the Reducer model, the answer per rank,
and verification on real gloo processes (tests start their own process groups on 127.0.0.1,
world_size 2, tiny models; every process they start is ended).

Expected values come from real torch: ``PROBE`` is what a hand-written torch script printed
(2 processes, gloo, float64; the set-up is written in tests/ddp/probe.yaml's comment), or from
relations that hold by DDP's definition (an average is the mean of the ranks' buffers; no_sync
adds the local gradient to .grad)."""

from __future__ import annotations

import multiprocessing
import os
import re
import subprocess
import sys
import textwrap
from fractions import Fraction

import pytest

import adjoint
from adjoint import ProblemError
from adjoint.engine.distributed import assign_buckets
from adjoint.values.lowprec import round_to
from adjoint.answer.prediction import value_json

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DDP = os.path.join(ROOT, "problems", "ddp.yaml")
PROBE_FILE = os.path.join(HERE, "ddp", "probe.yaml")

#: printed by real torch 2.13 (two gloo processes, float64) for tests/ddp/probe.yaml's set-up:
#: per rank and pass, the comm hook's bucket (parameters in buffer order) and .grad after
PROBE = {
    (0, 0): (["0.weight", "0.bias", "1.weight", "1.bias"],
             ["4.144", "8.288", "4.736", "9.472", "4.144", "4.736", "5.92", "10.064", "5.92"]),
    (1, 0): (["0.weight", "0.bias", "1.weight", "1.bias"],
             ["9.156", "9.156", "10.464", "10.464", "4.578", "5.232", "7.194", "13.08", "6.54"]),
    (0, 1): (["1.bias", "1.weight", "0.bias", "0.weight"],
             ["14.61", "19.127", "35.036", "10.227", "11.688", "18.382", "32.186", "21.008", "36.784"]),
    (1, 1): (["1.bias", "1.weight", "0.bias", "0.weight"],
             ["15.85", "22.911", "44.28", "11.095", "12.68", "33.586", "35.658", "38.384", "40.752"]),
}
PROBE_GRADS = {0: {"0.weight": ["6.65", "8.722", "7.6", "9.968"], "0.bias": ["4.361", "4.984"],
                   "1.weight": ["6.557", "11.572"], "1.bias": ["6.23"]},
               1: {"0.weight": ["25.984", "33.922", "29.696", "38.768"], "0.bias": ["10.661", "12.184"],
                   "1.weight": ["21.019", "39.658"], "1.bias": ["15.23"]}}


def _exact(v) -> list[Fraction]:
    """A VALUE's exact elements, flattened."""
    def flat(x):
        return [y for i in x for y in flat(i)] if isinstance(x, list) else [x]
    return [Fraction(s) for s in flat(v["exact"])]


def _ranks(path: str, variant: str = "default") -> list[dict]:
    return adjoint.load(path).solve().to_json()["variants"][variant]["ranks"]


def _write(tmp_path, text: str, name: str = "f.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


BASE = textwrap.dedent("""\
    name: d
    dtype: float64
    inputs:
      x: {per_rank: [[[1, 2]], [[2, -1]]]}
    model:
      type: Sequential
      children:
        a: {type: Linear, params: {weight: [[0.5, 1], [1, -0.5]], bias: [1, 0]}}
        b: {type: Linear, params: {weight: [[1, 2]], bias: [0.5]}}
    loss: "(y ** 2).sum()"
    distributed:
      world_size: 2
      wrap: ddp
    """)


# ----------------------------------------------------------------------------- the model, no torch

def test_buckets_are_filled_in_order_and_closed_at_their_limit():
    # compute_bucket_assignment_by_size: a bucket closes as soon as it reaches its limit
    assert assign_buckets([0, 1, 2], [8, 8, 8], [10**9]) == [[0, 1, 2]]
    # sizes by index: 3 -> 32 bytes (>= 10: alone), 2 -> 16 and 1 -> 8 (24 >= 20), then 0 in the last
    assert assign_buckets([3, 2, 1, 0], [4, 8, 16, 32], [10, 20]) == [[3], [2, 1], [0]]
    assert assign_buckets([0, 1, 2], [8, 8, 8], [8]) == [[0], [1], [2]]
    assert assign_buckets([0, 1, 2], [8, 8, 8], [100]) == [[0, 1, 2]]


def test_rounding_to_16_bits_is_ieee_round_to_nearest_even():
    two = Fraction(2)
    assert round_to(1 + two ** -11, "float16") == 1                       # a tie: to the even neighbour
    assert round_to(1 + 3 * two ** -11, "float16") == 1 + two ** -9       # a tie the other way
    assert round_to(1 + two ** -11 + two ** -30, "float16") == 1 + two ** -10
    assert round_to(two ** -25, "float16") == 0                           # half the smallest subnormal
    assert round_to(3 * two ** -25, "float16") == two ** -23
    assert round_to(Fraction(65519), "float16") == 65504 and round_to(Fraction(65520), "float16") is None
    assert round_to(1 + two ** -8, "bfloat16") == 1 and round_to(-(1 + 3 * two ** -8), "bfloat16") == -(1 + two ** -6)
    assert round_to(Fraction(1, 10), "float32") == Fraction(13421773, 2 ** 27)   # float32(0.1)


def test_probe_predicted_exactly_as_real_torch_printed_it():
    ranks = _ranks(PROBE_FILE)
    for (rank, p), (params, bucket) in PROBE.items():
        (comm,) = [c for c in ranks[rank]["passes"][p]["hook_calls"] if c["kind"] == "comm_hook"]
        assert comm["target"] == "bucket0" and comm["label"] == "comm_hook@bucket0"
        assert comm["args"]["parameters"] == params
        assert _exact(comm["args"]["bucket"]) == [Fraction(s) for s in bucket]
    for rank in (0, 1):
        for p, grads in PROBE_GRADS.items():
            got = ranks[rank]["passes"][p]["grads"]
            assert {k: _exact(v) for k, v in got.items()} == {k: [Fraction(s) for s in v] for k, v in grads.items()}
    # the tensor hook and the post-accumulate hook see the local gradient, before the comm hook
    labels = [c["label"] for c in ranks[1]["passes"][1]["hook_calls"]]
    assert labels == ["hook@1.bias", "post_accumulate_grad@1.bias", "comm_hook@bucket0"]
    calls = ranks[1]["passes"][1]["hook_calls"]
    assert _exact(calls[0]["args"]["grad"]) == [Fraction("9.62")]
    assert _exact(calls[1]["args"]["tensor"]) == [Fraction("15.85")]   # 6.23 (averaged) + 9.62 (local)


def test_no_sync_accumulates_locally_and_the_next_synced_backward_averages_it():
    ranks = _ranks(DDP)
    names = ["hidden.weight", "hidden.bias", "out.weight", "out.bias"]
    for r in ranks:
        assert [len(p["hook_calls"]) for p in r["passes"]] == [4, 3, 4]
        assert [c["kind"] for c in r["passes"][1]["hook_calls"]].count("comm_hook") == 0
    first = [_exact(r["passes"][0]["grads"]["out.weight"]) for r in ranks]
    assert first[0] == first[1]                                    # averaged after pass 1
    for r in ranks:
        local = _exact(r["passes"][1]["hook_calls"][0]["args"]["grad"])    # hook on out.weight: local gradient
        after = _exact(r["passes"][1]["grads"]["out.weight"])
        assert after == [a + b for a, b in zip(first[0], local)]   # no_sync: .grad += local, nothing reduced
    # pass 3: the buffer is each rank's accumulated .grad (+ its new local gradient), in ready order;
    # the result is the mean of the two buffers, and becomes .grad on both ranks
    comms = [[c for c in r["passes"][2]["hook_calls"] if c["kind"] == "comm_hook"][0] for r in ranks]
    assert comms[0]["args"]["parameters"] == ["out.bias", "out.weight", "hidden.bias", "hidden.weight"]
    assert [c["label"] for c in ranks[0]["passes"][0]["hook_calls"]][-1] == "comm_hook@bucket0"
    assert ranks[0]["passes"][0]["hook_calls"][-1]["args"]["parameters"] == names
    b0, b1 = (_exact(c["args"]["bucket"]) for c in comms)
    mean = [(a + b) / 2 for a, b in zip(b0, b1)]
    for c, r in zip(comms, ranks):
        assert _exact(c["returned"]) == mean
        assert _exact(r["grads"]["out.bias"]) == mean[:1]


def test_without_a_comm_hook_no_call_is_made_and_grads_are_averaged(tmp_path):
    path = _write(tmp_path, BASE + "steps: [forward, backward]\n")
    ranks = _ranks(path)
    assert [r["hook_calls"] for r in ranks] == [[], []]
    assert _exact(ranks[0]["grads"]["b.bias"]) == _exact(ranks[1]["grads"]["b.bias"])
    # hand derivation: y = b(a(x)); dL/db.bias = 2y; rank 0: a(x) = [3.5, 0], y = 4; rank 1: a(x) = [1, 2.5], y = 6.5
    assert _exact(ranks[0]["grads"]["b.bias"]) == [Fraction(8 + 13, 2)]


def test_the_report_shows_ranks_side_by_side():
    from adjoint.render.console import render
    from adjoint.render.report import Options

    text = render(adjoint.load(DDP).solve(), Options(), width=160)
    assert "DistributedDataParallel, world_size 2, comm hook allreduce" in text
    assert "rank 0" in text and "rank 1" in text and "inside no_sync: gradients stay local" in text
    assert "parameters: out.bias, out.weight, hidden.bias, hidden.weight" in text


@pytest.mark.torch
def test_compressing_comm_hooks_are_predicted_exactly(tmp_path):
    from adjoint.torchside.verify_ddp import verify_ranks

    text = open(DDP, encoding="utf-8").read().replace("{builtin: allreduce}", "{builtin: fp16_compress}")
    text = text.replace("[[[1, 2]], [[2, -1]]]", "[[[0.1, 0.2]], [[0.3, -0.7]]]")   # gradients 16 bits cannot hold
    problem = adjoint.loads(text, "compressed.yaml")
    vp = problem.solve().variant("default")
    # the rounding shows: the result is not the exact mean of the two buffers
    comms = [[c for c in r["passes"][0]["hook_calls"] if c["kind"] == "comm_hook"][0] for r in vp.to_json()["ranks"]]
    b0, b1 = (_exact(c["args"]["bucket"]) for c in comms)
    assert _exact(comms[0]["returned"]) != [(a + b) / 2 for a, b in zip(b0, b1)]
    rows, _ = verify_ranks(problem, vp, problem.dtype, False)
    assert rows and all(r.ok for r in rows), [r for r in rows if not r.ok]


@pytest.mark.torch
def test_bf16_compress_is_refused_at_registration_on_a_cpu_build():
    """register_comm_hook's _check_comm_hook refuses a hook named bf16_compress_hook without CUDA and
    NCCL: a TypeError on every rank before any forward. The torch side registers its logging wrapper
    under the hook's own name, so verify runs PyTorch's check (it used to pass a normal run)."""
    from adjoint.torchside.verify_ddp import verify_ranks

    text = open(DDP, encoding="utf-8").read().replace("{builtin: allreduce}", "{builtin: bf16_compress}")
    problem = adjoint.loads(text, "bf16.yaml")
    vp = problem.solve().variant("default")
    for rank in vp.to_json()["ranks"]:
        assert rank["error"]["type"] == "TypeError" and rank["error"]["during"] == "register"
        assert rank["error"]["message"] == ("BF16 all reduce communication hook required CUDA 11+ and NCCL 2.10+ "
                                            "or XPU and XCCL")
        assert not rank.get("passes") and not rank.get("hook_calls")
    rows, _ = verify_ranks(problem, vp, problem.dtype, False)
    assert rows and all(r.ok for r in rows), [r for r in rows if not r.ok]


@pytest.mark.parametrize("block,message", [
    ("distributed:\n  world_size: 2\n  wrap: fsdp\n", "distributed.wrap: fsdp (FSDP) is not modelled yet"),
    ("distributed:\n  world_size: 2\n  wrap: ddp\n  args: {mixed_precision: 1}\n",
     "distributed.args: 'mixed_precision' is not modelled yet"),
    ("distributed:\n  world_size: 2\n  wrap: ddp\n  comm_hook: {builtin: powerSGD, state: {start_powerSGD_iter: 2}}\n"
     "steps: [forward, backward, forward, backward, forward, backward]\n",
     "powerSGD_hook compresses from iteration 2 on (a random projection and an orthogonalization): not modelled yet"),
    ("distributed:\n  world_size: 2\n  wrap: ddp\n  comm_hook: {builtin: allreduce, state: {random_seed: 1}}\n",
     "distributed.comm_hook.state is PowerSGDState's arguments: only with builtin: powerSGD"),
    ("distributed:\n  world_size: 3\n  wrap: ddp\n  comm_hook: {builtin: fp16_compress}\n",
     "fp16_compress on more than 2 ranks is not modelled yet"),
    ("distributed:\n  world_size: 2\n  wrap: ddp\n  comm_hook: {returns: \"bucket.sum()\"}\n",
     "only numbers, bucket, world_size"),
    ("distributed:\n  world_size: 2\n  wrap: ddp\n  comm_hook: {returns: \"grad * 2\"}\n",
     "'grad' is not known there"),
    ("distributed:\n  world_size: 3\n  wrap: ddp\n", "per_rank must list one value per rank (3, "
                                                       "distributed.world_size), not 2"),
    ("distributed:\n  world_size: 2\n  wrap: ddp\nhooks: [{global: forward}]\n",
     "global module hooks under DistributedDataParallel are not modelled yet"),
])
def test_what_is_not_modelled_is_refused_with_one_located_line(tmp_path, block, message):
    text = BASE.split("distributed:")[0] + block
    path = _write(tmp_path, text)
    with pytest.raises(ProblemError, match="^" + re.escape(str(path)) + r":\d+:\d+: .*" + re.escape(message)):
        adjoint.load(path).solve()


def test_complex_parameters_are_bucketed_as_their_real_view_and_mixed_dtypes_refused(tmp_path):
    """A complex128 parameter's slice of the bucket is its view_as_real (16 bytes an element): the
    comm hook's buffer is real, twice the numel (as real gloo printed it: tests/ddp/complex_*.yaml are
    also run on gloo); parameters of two dtypes (a bucket set per dtype) are refused, not mis-bucketed."""
    ranks = _ranks(os.path.join(HERE, "ddp", "complex_comm_hook.yaml"))
    comm = [c for c in ranks[0]["passes"][0]["hook_calls"] if c["kind"] == "comm_hook"][0]
    assert comm["args"]["bucket"]["value"] == [11.4, 25.2, -33.0, 21.0, -7.8, 9.6]
    assert ranks[1]["grads"]["bias"]["value"] == [[-7.8, 9.6]]
    text = BASE.replace("b: {type: Linear, params: {weight: [[1, 2]]", "b: {type: Linear, params: {weight: "
                        "{value: [[1, 2]], imag: [[0, 1]], dtype: complex128}")
    with pytest.raises(ProblemError, match="parameters of different dtypes under DistributedDataParallel"):
        adjoint.load(_write(tmp_path, text)).solve()


REENTRANT = BASE.replace("x: {per_rank: [[[1, 2]], [[2, -1]]]}", "x: {per_rank: [[[1, 2]], [[2, -1]]], requires_grad: true}") \
    .replace("  type: Sequential\n", "  forward: |\n    h = checkpoint(a, x, use_reentrant=True)\n    return b(h)\n")


def test_reentrant_backwards_under_ddp():
    """A hook body's backward(...) in the DDP backward (it crashed: no backward runner on a rank) marks
    the parameters it reaches ready as any other; a parameter ready twice in one reduced backward is
    the Reducer's RuntimeError naming its index and last name (it was refused as "not modelled");
    both files are also compared with gloo (the batch test)."""
    ranks = _ranks(os.path.join(HERE, "ddp", "backward_in_hook.yaml"))
    assert [r["grads"]["c.bias"]["value"] for r in ranks] == [[13.0], [13.0]]   # averaged (8 and 18)
    for rank in _ranks(os.path.join(HERE, "ddp", "marked_twice.yaml")):
        assert rank["error"]["type"] == "RuntimeError" and rank["error"]["during"] == "backward"
        assert rank["error"]["message"].startswith("Expected to mark a variable ready only once. ")
        assert "\nParameter at index 0 with name b.weight has been marked as ready twice." in rank["error"]["message"]


def test_the_last_bucket_completed_in_a_reentrant_backward_finalizes_when_it_ends(tmp_path):
    """checkpoint(use_reentrant=True) around the parameters that get their gradients last: PyTorch's
    finalize_backward runs when the inner backward ends (queued on the current graph task). It was
    refused; now predicted (tests/ddp/reentrant_last_bucket.yaml and reentrant_static.yaml are compared
    with gloo in the batch test) while the rest of the outer backward neither reads a parameter's .grad
    nor runs a parameter's AccumulateGrad: those would see the mean in the middle of the backward,
    still refused with one located line."""
    ranks = _ranks(_write(tmp_path, REENTRANT))
    # hand-derived: y = b(a(x)); rank 0 x = (1, 2): a(x) = (3.5, 0), y = 4, dL/dy = 8;
    # rank 1 x = (2, -1): a(x) = (1, 2.5), y = 6.5, dL/dy = 13: b.bias's mean 10.5 on both ranks
    assert [r["grads"]["b.bias"]["value"] for r in ranks] == [[10.5], [10.5]]
    assert [r["grads"]["a.bias"]["value"] for r in ranks] == [[10.5, 21.0], [10.5, 21.0]]
    # x is no parameter: its own gradient, dL/dy * b.weight @ a.weight, per rank
    assert [r["grads"]["x"]["value"] for r in ranks] == [[[20.0, 0.0]], [[32.5, 0.0]]]
    for hook in ('{tensor: x, kind: hook, returns: "grad + b.weight.grad.sum()"}',
                 '{tensor: x, kind: hook, does: "a.bias.grad.mul_(2)"}'):
        text = REENTRANT + f"hooks: [{hook}]\n"
        with pytest.raises(ProblemError, match=r"f\.yaml:\d+:\d+: under DistributedDataParallel the last bucket "
                                               r"was completed inside a reentrant backward .* a hook read a "
                                               r"parameter's \.grad in the outer backward"):
            adjoint.load(_write(tmp_path, text)).solve()


def test_create_graph_with_an_armed_reducer_is_refused(tmp_path):
    """backward(create_graph=True) after a synchronized forward: the Reducer copies gradients that require
    grad into its bucket views (PyTorch's in-place error on a leaf with two parameters in a bucket, a graph
    through the all-reduce with one); it was predicted as a plain averaged run. Refused at the step;
    inside no_sync it is local (tests/ddp/create_graph_no_sync.yaml, compared with gloo)."""
    text = BASE + "steps: [forward, {backward: {create_graph: true}}]\n"
    with pytest.raises(ProblemError, match=r"f\.yaml:\d+:\d+: backward\(create_graph=True\) under "
                                           "DistributedDataParallel"):
        adjoint.load(_write(tmp_path, text)).solve()


def test_a_comm_hook_returning_a_number_is_finalize_backwards_error(tmp_path):
    """returns: a number (no bucket, no all_reduce): PyTorch calls the hook, then finalize_backward cannot
    cast its result -- "Unable to cast 1.0 to Tensor" on every rank, during the backward, after the hook
    calls (it was refused as a wrong-shaped result). The number is Python's: 1.0 here, 3 in
    tests/ddp/comm_hook_number.yaml (compared with gloo)."""
    text = BASE + '  comm_hook: {returns: "world_size * 0.5"}\n'
    for rank in _ranks(_write(tmp_path, text)):
        assert rank["error"]["type"] == "RuntimeError" and rank["error"]["during"] == "backward"
        assert rank["error"]["message"] == "Unable to cast 1.0 to Tensor"
        calls = [c for c in rank["hook_calls"] if c["kind"] == "comm_hook"]
        assert len(calls) == 1 and calls[0]["returned"] is None


def test_targets_take_per_rank_as_inputs_do(tmp_path):
    """targets: {t: {per_rank: [...]}} was refused as an unknown key; each rank gets its own labels
    (tests/ddp/per_rank_target.yaml is compared with gloo): the mean of (9, 18, 9) and (9, -3, 3)."""
    ranks = _ranks(os.path.join(HERE, "ddp", "per_rank_target.yaml"))
    assert [r["grads"]["b.weight"]["value"] for r in ranks] == [[[9.0, 7.5]], [[9.0, 7.5]]]
    assert [r["grads"]["b.bias"]["value"] for r in ranks] == [[6.0], [6.0]]
    text = open(os.path.join(HERE, "ddp", "per_rank_target.yaml"), encoding="utf-8").read()
    with pytest.raises(ProblemError, match=r"target 't': per_rank must list one value per rank \(2"):
        adjoint.load(_write(tmp_path, text.replace("[[[1]], [[0]]]", "[[[1]]]"))).solve()


def test_no_sync_needs_a_list_and_refuses_autograd_grad(tmp_path):
    path = _write(tmp_path, BASE + "steps: [forward, {no_sync: []}]\n")
    with pytest.raises(ProblemError, match=r"f\.yaml:14:28: no_sync takes a non-empty list"):
        adjoint.load(path)
    path = _write(tmp_path, BASE + "backward: {method: grad, inputs: [a.bias]}\n")
    with pytest.raises(ProblemError, match="torch.autograd.grad under DistributedDataParallel is not modelled yet"):
        adjoint.load(path)


def test_latex_writes_rank_0_and_what_ddp_does_and_graph_draws_rank_0(tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "adjoint", *args], capture_output=True, text=True, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": ROOT}, timeout=120)
    from adjoint.render.latex import render_document
    from adjoint.render.pdf import compile_pdf

    tex = render_document(adjoint.load(DDP).solve())      # what adjoint latex writes
    assert compile_pdf(tex, None).pdf.startswith(b"%PDF")    # and --pdf compiles
    section = tex.split("\\subsection{What DistributedDataParallel does}")[1]
    assert "built-in \\texttt{allreduce\\_hook}" in section and "$W = 2$" in section
    # pass 2 ran inside no_sync; pass 3's bucket is in ready order; every rank's .grad is listed
    assert section.count("\\subsubsection*{Backward pass") == 3
    assert "inside \\texttt{no\\_sync()}" in section.split("Backward pass 2}")[1].split("Backward pass 3}")[0]
    assert "Bucket 0 holds \\texttt{out.\\allowbreak{}bias}, \\texttt{out.\\allowbreak{}weight}" in section
    assert "\\mathtt{out.bias.grad}^{(1)}" in section
    # rank 0's own derivation says a reduced .grad is DDP's, not the rank's gradient
    assert "what DistributedDataParallel wrote when the backward pass ended" in tex.split("What Distributed")[0]
    proc = run("graph", DDP, "-o", "-", "--format", "dot")
    assert proc.returncode == 0, proc.stderr
    # the comm hook's note hangs after the AccumulateGrad whose Reducer hook launched the bucket
    assert "#4, #11  comm_hook on bucket0" in proc.stdout


#: what a hand-written torch script printed for tests/ddp/unused.yaml's set-up (2 gloo processes,
#: float64; its modules were Sequential's "0", "1" and "unused", here a, b, u): per rank, the comm
#: hook calls of pass 1 (parameters, bucket, returned) and .grad after passes 1 and 3
UNUSED_PROBE = {
    0: [(["u.bias"], ["0"], ["0"]), (["b.bias", "u.weight"], ["9.875", "0", "0"], ["6.9375", "0", "0"]),
        (["b.weight"], ["24.6875", "41.96875"], ["13.84375", "23.984375"]),
        (["a.bias"], ["4.9375", "7.40625"], ["3.46875", "5.203125"]),
        (["a.weight"], ["4.9375", "9.875", "7.40625", "14.8125"], ["4.46875", "3.9375", "6.703125", "5.90625"])],
    1: [(["u.bias"], ["0"], ["0"]), (["b.bias", "u.weight"], ["4", "0", "0"], ["6.9375", "0", "0"]),
        (["b.weight"], ["3", "6"], ["13.84375", "23.984375"]), (["a.bias"], ["2", "3"], ["3.46875", "5.203125"]),
        (["a.weight"], ["4", "-2", "6", "-3"], ["4.46875", "3.9375", "6.703125", "5.90625"])],
}
UNUSED_GRADS = {0: {"a.weight": ["4.46875", "3.9375", "6.703125", "5.90625"], "a.bias": ["3.46875", "5.203125"],
                    "b.weight": ["13.84375", "23.984375"], "b.bias": ["6.9375"], "u.weight": None, "u.bias": None},
                2: {"a.weight": ["13.40625", "11.8125", "20.109375", "17.71875"], "a.bias": ["10.40625", "15.609375"],
                    "b.weight": ["41.53125", "71.953125"], "b.bias": ["20.8125"], "u.weight": None, "u.bias": None}}
#: ... and for tests/ddp/unfinished.yaml's set-up (no find_unused_parameters), rank R's error at the
#: second forward
UNFINISHED = ("Expected to have finished reduction in the prior iteration before starting a new one. This error "
              "indicates that your module has parameters that were not used in producing loss. You can enable "
              "unused parameter detection by passing the keyword argument `find_unused_parameters=True` to "
              "`torch.nn.parallel.DistributedDataParallel`, and by \nmaking sure all `forward` function outputs "
              "participate in calculating loss. \nIf you already have done the above, then the distributed data "
              "parallel module wasn't able to locate the output tensors in the return value of your module's "
              "`forward` function. Please include the loss function and the structure of the return value of "
              "`forward` of your module when reporting this issue (e.g. list, dict, iterable).\nParameter indices "
              "which did not receive grad for rank {rank}: 4 5\n In addition, you can set the environment variable "
              "TORCH_DISTRIBUTED_DEBUG to either INFO or DETAIL to print out information about which particular "
              "parameters did not receive gradient on this rank as part of this error")


def test_find_unused_parameters_predicted_as_real_torch_printed_it():
    pred = adjoint.load(os.path.join(HERE, "ddp", "unused.yaml")).solve()
    ranks = pred.to_json()["variants"]["default"]["ranks"]
    for rank, calls in UNUSED_PROBE.items():
        comms = [c for c in ranks[rank]["passes"][0]["hook_calls"] if c["kind"] == "comm_hook"]
        assert [c["target"] for c in comms] == [f"bucket{k}" for k in range(5)]
        for c, (params, bucket, returned) in zip(comms, calls):
            assert c["args"]["parameters"] == params
            assert _exact(c["args"]["bucket"]) == [Fraction(v) for v in bucket]
            assert _exact(c["returned"]) == [Fraction(v) for v in returned]
        for p, grads in UNUSED_GRADS.items():
            got = ranks[rank]["passes"][p]["grads"]
            assert {k: (None if v is None else _exact(v)) for k, v in got.items()} == \
                {k: (None if v is None else [Fraction(x) for x in v]) for k, v in grads.items()}
    # the unused parameters' bucket is launched at the first gradient, before the hook's own bucket
    labels = [c["label"] for c in ranks[0]["passes"][0]["hook_calls"]]
    assert labels[:5] == ["hook@y", "post_accumulate_grad@b.bias", "comm_hook@bucket0", "comm_hook@bucket1",
                          "post_accumulate_grad@b.weight"]
    # y is _DDPSink's output: its node is _DDPSinkBackward, next to the model's own output node
    y = pred.variant("default").ranks[0].run.forward.names["y"]
    assert y.grad_fn.name == "_DDPSinkBackward" and y.grad_fn.edges[0].node.name == "AddmmBackward0"


#: ... and for tests/ddp/static_unfinished.yaml's set-up (static_graph; c used in the first iteration,
#: not in the second), rank R's error at the third forward, after two post-accumulate calls
STATIC_UNFINISHED = ("Expected to have finished reduction in the prior iteration before starting a new one. This "
                     "error indicates that your training graph has changed in this iteration, e.g., one parameter "
                     "is used in first iteration, but then got unused in the second iteration. this is not "
                     "compatible with static_graph set to True.\nParameter indices which did not receive grad for "
                     "rank {rank}: 4 5\n In addition, you can set the environment variable TORCH_DISTRIBUTED_DEBUG "
                     "to either INFO or DETAIL to print out information about which particular parameters did not "
                     "receive gradient on this rank as part of this error")
STATIC_UNFINISHED_HANDED = ((["17.1875", "29.21875"], ["34.40625", "58.828125"]),
                            (["2.25", "4.5"], ["12.71875", "22.859375"]))


def test_static_graph_unfinished_reduction():
    """static_graph's message of the unfinished reduction was written from PyTorch's source only (no
    file left a static graph's reduction unfinished after its first iteration); a forward whose
    branch follows an input does, and torch printed this message on each rank."""
    for rank, r in enumerate(_ranks(os.path.join(HERE, "ddp", "static_unfinished.yaml"))):
        assert r["error"]["type"] == "RuntimeError" and r["error"]["during"] == "forward"
        assert r["error"]["message"] == STATIC_UNFINISHED.format(rank=rank)
        assert [_exact(c["args"]["tensor"]) for c in r["hook_calls"]] == \
            [[Fraction(v) for v in vs] for vs in STATIC_UNFINISHED_HANDED[rank]]


def test_an_unused_parameter_without_find_unused_is_the_next_forwards_error():
    ranks = _ranks(os.path.join(HERE, "ddp", "unfinished.yaml"))
    for rank, r in enumerate(ranks):
        assert r["error"]["type"] == "RuntimeError" and r["error"]["during"] == "forward"
        assert r["error"]["message"] == UNFINISHED.format(rank=rank)
        assert [c["label"] for c in r["hook_calls"]] == ["hook@y"] + [f"post_accumulate_grad@{p}" for p in
                                                                      ("b.bias", "b.weight", "a.bias", "a.weight")]
    from adjoint.render.console import render
    from adjoint.render.report import Options

    pred = adjoint.load(os.path.join(HERE, "ddp", "unfinished.yaml")).solve()
    text = render(pred, Options(), width=200)
    assert "rank 0: PyTorch raises RuntimeError during forward: Expected to have finished reduction" in text
    # gradient_as_bucket_view, no comm hook: the ready parameters' .grad is the bucket view, grad / 2
    # (what a real-torch probe printed for this set-up: b.bias 4.9375 on rank 0, 2 on rank 1)
    grads = [vp.run.passes[0].grads for vp in pred.variant("default").ranks]
    assert [_exact(value_json(g["b.bias"])) for g in grads] == [[Fraction("4.9375")], [Fraction(2)]]
    from adjoint.render.latex import render_document

    section = render_document(pred).split("What DistributedDataParallel does")[1]
    assert "Not every parameter became ready" in section and "its bucket view" in section


def test_static_graph_reduces_the_first_iteration_when_its_backward_ends():
    ranks = _ranks(os.path.join(HERE, "ddp", "static.yaml"))
    names = ["a.weight", "a.bias", "b.weight", "b.bias", "c.weight", "c.bias"]
    for r in ranks:
        first = r["passes"][0]["hook_calls"]
        assert [c["kind"] for c in first][-1] == "comm_hook" and len([c for c in first if c["kind"] == "comm_hook"]) == 1
        assert first[-1]["args"]["parameters"] == names              # one bucket, parameter order
        second = [c["args"]["parameters"] for c in r["passes"][1]["hook_calls"] if c["kind"] == "comm_hook"]
        assert second == [names]                                     # not rebuilt before the third forward
        third = [c["args"]["parameters"] for c in r["passes"][2]["hook_calls"] if c["kind"] == "comm_hook"]
        assert len(third) > 1 and third[0][0] in ("b.bias", "c.bias")   # rebuilt: ready order, 10-byte buckets
        # static_graph with find_unused_parameters: PyTorch's construction warning
        assert [(w["category"], w["during"]) for w in r["warnings"]] == [("UserWarning", "setup")]
    b0, b1 = (_exact(r["passes"][0]["hook_calls"][-1]["args"]["bucket"]) for r in ranks)
    assert _exact(ranks[0]["passes"][0]["hook_calls"][-1]["returned"]) == [(x + y) / 2 for x, y in zip(b0, b1)]


def test_a_parameter_without_gradient_is_reduced_as_zeros():
    ranks = _ranks(os.path.join(HERE, "ddp", "nograd.yaml"))
    for r in ranks:
        (pre, pah, comm) = r["passes"][0]["hook_calls"]
        assert pre["label"] == "full_backward_pre@b" and pah["label"] == "post_accumulate_grad@b.bias"
        assert pah["args"]["tensor"] is None or "value" in pah["args"]["tensor"]
        assert _exact(comm["args"]["bucket"]) == [0] * 9
        assert all(_exact(v) == [0] * len(_exact(v)) for v in r["passes"][0]["grads"].values())
    assert _exact(ranks[0]["grads"]["b.bias"]) == [Fraction(8 + 13, 2)]   # zeros + the mean (hand: 2y per rank)



#: what a hand-written torch script printed (2 gloo processes, float64) for tests/ddp/view_grad_*.yaml's
#: set-up, by what a.weight's post-accumulate hook does to b.weight.grad (the bucket view by then):
#: b.weight.grad after each backward, the same on both ranks
VIEW_GRAD = {"b.weight.grad.mul_(2)": (["41", "32.5"], ["123", "97.5"]),
             "b.weight.grad = b.weight.grad.detach()": (["20.5", "16.25"], ["41", "32.5"]),
             "b.weight.grad = b.weight.grad": (["20.5", "16.25"], ["41", "32.5"])}
#: ... and every rank's error when the hook assigns b.weight.grad = b.weight.grad.clone()
NOT_BUCKET_VIEW = ("Detected at least one parameter gradient is not the expected DDP bucket view with "
                   "gradient_as_bucket_view=True. This may happen (for example) if multiple allreduce hooks were "
                   "registered onto the same parameter. If you hit this error, please file an issue with a minimal "
                   "repro.")


def test_gradient_as_bucket_view_grad_is_the_bucket_until_a_hook_replaces_it(tmp_path):
    """With gradient_as_bucket_view .grad is the bucket view once the Reducer copied the gradient in:
    a hook's in-place write before the bucket is launched is all-reduced; .grad assigned itself (or
    its detach(), the same memory) stays the view; assigned a new tensor, finalize_backward raises."""
    replaced = os.path.join(HERE, "ddp", "view_grad_replaced.yaml")
    for does, passes in VIEW_GRAD.items():
        text = open(replaced).read().replace("b.weight.grad = b.weight.grad.clone()", does)
        for r in _ranks(_write(tmp_path, text)):
            assert "error" not in r
            assert [_exact(p["grads"]["b.weight"]) for p in r["passes"]] == [[Fraction(v) for v in g] for g in passes]
    for r in _ranks(replaced):
        assert (r["error"]["type"], r["error"]["message"], r["error"]["during"]) == \
            ("RuntimeError", NOT_BUCKET_VIEW, "backward")
        assert [c["label"] for c in r["hook_calls"]] == ["post_accumulate_grad@b.bias", "post_accumulate_grad@a.weight"]


@pytest.mark.parametrize("comm_hook", ["", "  comm_hook: {builtin: allreduce}\n"])
@pytest.mark.parametrize("hook", ['{tensor: a.weight, kind: post_accumulate_grad, does: "b.bias.grad.mul_(3)"}',
                                  '{tensor: x, kind: hook, returns: "grad * b.bias.grad"}'])
def test_a_launched_bucket_view_read_or_written_in_the_backward_is_refused(tmp_path, comm_hook, hook):
    """The bucket is all-reduced in place while the backward goes on (and the allreduce hook divides
    it first): what a hook reads or writes there is a race (two gloo runs of one script printed
    b.bias.grad 10.5 and 4, then 21 and 9.25, at the same hook)."""
    text = BASE.replace("  wrap: ddp\n", "  wrap: ddp\n  args: {gradient_as_bucket_view: true, bucket_cap_mb: 0.00001}\n"
                        + comm_hook).replace("[[2, -1]]]}", "[[2, -1]]], requires_grad: true}")
    text += f"hooks: [{hook}]\nsteps: [forward, backward, zero_grad, forward, backward]\n"
    with pytest.raises(ProblemError, match="reading a parameter's .grad after its bucket was launched"):
        adjoint.load(_write(tmp_path, text)).solve()

# ----------------------------------------------------------------------------- real gloo processes

WRITTEN_TINY = ("  wrap: ddp\n", "  wrap: ddp\n  args: {bucket_cap_mb: 0.00001}\n  comm_hook: {builtin: allreduce}\n")


def _batch_files(tmp) -> dict:
    """Every file the gloo tests check, by name: the worked problem, tests/ddp/*.yaml (world_size 2)
    and three written here (tiny buckets and no_sync forwards; no comm hook; an arming forward
    then one inside no_sync)."""
    files = {"ddp": DDP}
    for name in sorted(os.listdir(os.path.join(HERE, "ddp"))):
        if not name.startswith("partial_"):     # some ranks raise: each its own start (test_partial_errors_on_gloo)
            files[name[:-5]] = os.path.join(HERE, "ddp", name)
    texts = {
        "tiny": BASE.replace(*WRITTEN_TINY) + "hooks: [{tensor: a.bias, kind: hook}, {module: b, kind: full_backward}]\n"
        + "steps: [forward, backward, {no_sync: [forward]}, backward, forward, {no_sync: [backward]}, forward, backward]\n",
        "plain": BASE + "hooks: [{tensor: b.weight, kind: post_accumulate_grad}]\nsteps: [forward, backward, forward, "
                        "backward]\n",
        "armed": BASE + "  comm_hook: {builtin: allreduce}\nhooks: [{tensor: a.bias, kind: hook}]\n"
                 + "steps: [forward, forward, backward, forward, {no_sync: [forward]}, backward, {no_sync: [forward]}, "
                   "backward]\n"}
    for name, text in texts.items():
        path = tmp / f"{name}.yaml"
        path.write_text(text)
        files[name] = str(path)
    return files


@pytest.fixture(scope="module")
def gloo(tmp_path_factory):
    """Every file of :func:`_batch_files` solved, and run on 2 real gloo processes: one start for all."""
    from conftest import require_torch
    require_torch()
    from adjoint.torchside.ddp import run_distributed_many

    files = _batch_files(tmp_path_factory.mktemp("ddp"))
    problems = {name: adjoint.load(path) for name, path in files.items()}
    predicted = {name: p.solve().variant("default").to_json()["ranks"] for name, p in problems.items()}
    runs = run_distributed_many([(p, "default", p.dtype) for p in problems.values()])
    return files, predicted, dict(zip(problems, runs))


@pytest.mark.torch
def test_every_ddp_file_agrees_with_real_gloo_processes_on_every_rank(gloo):
    """The worked problem, find_unused_parameters, the unfinished reduction's error, static_graph,
    gradient_as_bucket_view, a parameter without gradient, a hook's error on every rank, the written
    comm hook probe, rebuilt tiny buckets, no_sync forwards and backwards: every rank compared."""
    from adjoint.torchside.compare import compare

    files, predicted, observed = gloo
    for name in files:
        assert len(observed[name]) == 2
        for p, o in zip(predicted[name], observed[name]):
            rows = compare(p, o, "float64")
            assert rows and all(r.ok for r in rows), (name, [r for r in rows if not r.ok])
    assert [c["kind"] for c in observed["ddp"][0]["hook_calls"]].count("comm_hook") == 2
    # a post_accumulate_grad hook stepping its parameter: each rank's torch side reports the value
    # it left, after the run and after each pass (not only the prediction: compare needs both)
    written = observed["optimizer_in_backward"]
    assert all(set(r["leaf_values"]) == {"l2.bias"} for r in written)
    assert all(set(p["leaf_values"]) == {"l2.bias"} for r in written for p in r["passes"])
    assert written[0]["leaf_values"]["l2.bias"]["value"] != written[1]["leaf_values"]["l2.bias"]["value"]
    for rank in (0, 1):
        assert observed["unfinished"][rank]["error"]["message"] == UNFINISHED.format(rank=rank)


@pytest.mark.torch
def test_a_wrong_bucket_order_or_value_is_caught(gloo):
    import copy

    from adjoint.torchside.compare import compare

    _, predicted, observed = gloo
    wrong = copy.deepcopy(predicted["ddp"][1])
    comm = [c for c in wrong["passes"][2]["hook_calls"] if c["kind"] == "comm_hook"][0]
    comm["args"]["parameters"] = list(reversed(comm["args"]["parameters"]))
    assert not all(r.ok for r in compare(wrong, observed["ddp"][1], "float64"))
    wrong = copy.deepcopy(predicted["ddp"][0])
    wrong["grads"]["out.bias"]["value"] = [wrong["grads"]["out.bias"]["value"][0] + 1e-6]
    assert not all(r.ok for r in compare(wrong, observed["ddp"][0], "float64"))


def test_written_hook_rebuild_and_no_sync_forward(tmp_path):
    files = _batch_files(tmp_path)
    # two forwards before a backward; an arming forward, then one inside no_sync: the backward is
    # still reduced (no_sync does not disarm); then only a no_sync forward: local
    kinds = [[c["kind"] for c in p["hook_calls"]] for p in _ranks(files["armed"])[1]["passes"]]
    assert kinds == [["hook", "comm_hook"], ["hook", "comm_hook"], ["hook"]]
    ranks = _ranks(files["tiny"])
    comms = [[c["args"]["parameters"] for c in p["hook_calls"] if c["kind"] == "comm_hook"] for p in ranks[0]["passes"]]
    # 10-byte buckets after the rebuild, filled in ready order: 8 + 16 bytes, then 16, then 32
    assert comms == [[["a.weight", "a.bias", "b.weight", "b.bias"]], [],
                     [["b.bias", "b.weight"], ["a.bias"], ["a.weight"]],
                     [["b.bias", "b.weight"], ["a.bias"], ["a.weight"]]]


@pytest.mark.torch
def test_a_run_out_of_time_ends_every_process_it_started():
    from conftest import require_torch
    require_torch()
    from adjoint.torchside.ddp import run_distributed

    before = set(multiprocessing.active_children())
    with pytest.raises(TimeoutError, match="did not finish within"):
        run_distributed(adjoint.load(DDP), "default", "float64", timeout=0.001)
    assert set(multiprocessing.active_children()) <= before


def test_generated_ddp_problems_load_and_solve():
    """tests/gen/ddp.py (the DDP sweep's generator, benchmarks/ddp_sweep.py): every problem of a
    few seeds is a valid distributed file whose every rank solves."""
    import random

    sys.path.insert(0, HERE)
    from gen.ddp import generate

    for i in range(12):
        text = generate(random.Random(f"suite-{i}"))
        problem = adjoint.loads(text, f"gen-{i}.yaml")
        ranks = problem.solve().to_json()["variants"]["default"]["ranks"]
        assert len(ranks) == problem.distributed.world_size


def test_a_comm_hook_writing_the_bucket_in_place():
    """does: writes the buffer in the hook call; .grad ends as what the hook returns (hand
    derivation: dL/db.bias = 2y, y = 4 on rank 0 and 6.5 on rank 1, so 8 and 13 locally)."""
    local = ["8", "13"]
    # bucket *= 0.5, the buffer returned: each rank keeps half its own gradient, nothing is reduced
    ranks = _ranks(os.path.join(HERE, "ddp", "inplace_local.yaml"))
    for r, g in zip(ranks, local):
        (comm,) = [c for c in r["passes"][0]["hook_calls"] if c["kind"] == "comm_hook"]
        assert _exact(comm["args"]["bucket"])[-1] == Fraction(g)             # handed before the write
        assert _exact(comm["returned"]) == [v / 2 for v in _exact(comm["args"]["bucket"])]
        assert _exact(r["passes"][0]["grads"]["b.bias"]) == [Fraction(g) / 2]
    # div_ then all_reduce in place, the buffer returned: the mean, as the built-in hook gives
    ranks = _ranks(os.path.join(HERE, "ddp", "inplace_allreduce.yaml"))
    assert [_exact(r["passes"][0]["grads"]["b.bias"]) for r in ranks] == [[Fraction(21, 2)]] * 2
    # mul_(2) in place, then all_reduce(bucket) / (2 * world_size): the doubled buffers' sum over 4
    ranks = _ranks(os.path.join(HERE, "ddp", "inplace_hook.yaml"))
    comms = [[c for c in r["passes"][0]["hook_calls"] if c["kind"] == "comm_hook"][0] for r in ranks]
    b0, b1 = (_exact(c["args"]["bucket"]) for c in comms)
    assert _exact(comms[0]["returned"]) == [(x + y) / 2 for x, y in zip(b0, b1)]
    assert [_exact(r["passes"][0]["grads"]["b.bias"]) for r in ranks] == [[Fraction(21, 2)]] * 2


@pytest.mark.parametrize("hook,message", [
    ('{does: "bucket.exp_()"}', "a comm hook's does: writes the bucket in place"),
    ('{does: "bucket.copy_(2)"}', "bucket.copy_ takes a tensor"),
    ('{does: "all_reduce(bucket)"}\n  args: {gradient_as_bucket_view: true}',
     "all_reduce in does: with gradient_as_bucket_view: true is not modelled yet"),
])
def test_a_comm_hook_does_outside_its_language_is_refused(tmp_path, hook, message):
    path = _write(tmp_path, BASE + "  comm_hook: " + hook + "\n")
    with pytest.raises(ProblemError, match=re.escape(message)):
        adjoint.load(path).solve()


#: what a hand-written torch script printed (2 gloo processes, float64, the model and inputs of
#: tests/ddp/static_no_sync.yaml, static_graph with the built-in allreduce hook): rank 0's comm
#: hook buffer per pass, for steps sync, no_sync, sync, sync
STATIC_NO_SYNC_PROBE = [["8", "16", "16", "32", "8", "16", "28", "0", "8"], None,
                        ["33", "33.5", "66", "67", "26.5", "53", "76.5", "16.25", "26.5"],
                        ["39.5", "89.5", "48.75", "39.5", "79", "59", "20.5", "118", "41"]]
UNARMED = ('expect_autograd_hooks_ INTERNAL ASSERT FAILED at "/__w/pytorch/pytorch/torch/csrc/distributed/'
           'c10d/reducer.cpp":1732, please report a bug to PyTorch. ')


def test_no_sync_with_static_graph():
    ranks = _ranks(os.path.join(HERE, "ddp", "static_no_sync.yaml"))
    for p, want in zip(ranks[0]["passes"], STATIC_NO_SYNC_PROBE):
        comms = [c for c in p["hook_calls"] if c["kind"] == "comm_hook"]
        assert [_exact(c["args"]["bucket"]) for c in comms] == ([] if want is None else [[Fraction(v) for v in want]])
    # the first iteration inside no_sync: the delayed all-reduce calls the comm hook, then
    # finalize_backward's internal assert (printed by real torch, both ranks)
    for r in _ranks(os.path.join(HERE, "ddp", "static_no_sync_first.yaml")):
        assert r["error"] == {"type": "RuntimeError", "message": UNARMED, "during": "backward", "after_call": 1}
        assert [c["label"] for c in r["hook_calls"]] == ["hook@b.bias", "comm_hook@bucket0"]


def _waits(path: str) -> list:
    return [(r["error"].get("waits"), r["error"]["during"], r["error"]["after_call"],
             [c["label"] for c in r["hook_calls"]][-3:]) for r in _ranks(path)]


def test_an_error_on_some_ranks_only_leaves_the_others_waiting():
    """Where each survivor waits (what real gloo processes showed: tests/ddp/partial_*.yaml)."""
    (w0, d0, a0, calls0), (w1, _, _, calls1) = _waits(os.path.join(HERE, "ddp", "partial_forward.yaml"))
    assert w0 == {"for": [1], "in": "finalize_backward's wait for the all-reduce of bucket 0"} and d0 == "backward"
    assert w1 is None and calls1 == [] and calls0 == ["hook@b.bias"]
    # the Reducer's async all-reduces: rank 0 runs its whole backward, then waits for a bucket rank 1 never launched
    (w0, _, _, calls0), (w1, _, _, calls1) = _waits(os.path.join(HERE, "ddp", "partial_backward.yaml"))
    assert w0["in"] == "finalize_backward's wait for the all-reduce of bucket 1"
    assert calls0 == ["hook@h", "comm_hook@bucket1", "comm_hook@bucket2"] and calls1[-1] == "hook@h"
    # a written hook's all_reduce is in the call: rank 0 stops inside the call on bucket 1
    (w0, _, a0, calls0), _ = _waits(os.path.join(HERE, "ddp", "partial_written.yaml"))
    assert w0["in"] == "the all_reduce of its comm hook call on bucket 1" and calls0[-1] == "comm_hook@bucket1"
    assert a0 == 6
    # a static graph's delayed all-reduce: the written hook's all_reduce waits before finalize's assert
    (w0, _, _, calls0), _ = _waits(os.path.join(HERE, "ddp", "partial_static_no_sync.yaml"))
    assert w0["in"] == "the all_reduce of its comm hook call on bucket 0" and calls0 == ["comm_hook@bucket0"]
    from adjoint.render.console import render
    from adjoint.render.report import Options

    text = render(adjoint.load(os.path.join(HERE, "ddp", "partial_written.yaml")).solve(), Options(), width=200)
    assert "rank 0: PyTorch raises RuntimeError during backward: waits in the all_reduce of its comm hook" in text


@pytest.mark.torch
def test_partial_errors_on_gloo():
    """Each file alone on two gloo processes (the rank that raises ends, as its script would):
    the waiting rank gets gloo's RuntimeError where predicted, with the same calls before it."""
    from conftest import require_torch
    require_torch()
    from adjoint.torchside.verify_ddp import verify_ranks

    for name in ("partial_backward", "partial_written", "partial_static_no_sync"):
        problem = adjoint.load(os.path.join(HERE, "ddp", f"{name}.yaml"))
        rows, observed = verify_ranks(problem, problem.solve().variant("default"), "float64", False)
        assert rows and all(r.ok for r in rows), (name, [r for r in rows if not r.ok])
        assert any(r.item.startswith("rank 0: waits in") for r in rows)
        said = observed["ranks"][0]["error"]["message"]   # the peer's process ended: gloo's words vary
        assert "Connection closed by peer" in said or "Connection reset by peer" in said, said


def test_powersgd_is_plain_allreduce_below_start_powersgd_iter():
    """powerSGD_hook's first start_powerSGD_iter iterations are default._allreduce_fut (the mean:
    hand derivation of b.bias as above, 8 and 13 locally); PowerSGDState's own refusal is each
    rank's error (its words printed by real torch)."""
    ranks = _ranks(os.path.join(HERE, "ddp", "powersgd.yaml"))
    for r in ranks:
        assert _exact(r["passes"][0]["grads"]["b.bias"]) == [Fraction(21, 2)]
        assert len([c for c in r["passes"][3]["hook_calls"] if c["kind"] == "comm_hook"]) == 3
    for r in _ranks(os.path.join(HERE, "ddp", "powersgd_start.yaml")):
        assert r["error"] == {"type": "ValueError", "during": "register", "after_call": None, "message":
                              "Expect `start_powerSGD_iter` > 1 if `use_error_feedback` or `warm_start` is enabled, "
                              "because PowerSGD can only be applied after the first two iterations in DDP."}


def test_a_survivors_comm_hook_without_a_collective_completes_on_gloo():
    """tests/ddp/partial_local_comm_hook.yaml on three real gloo processes: rank 0 raises in its
    forward; ranks 1 and 2 call the written hook `bucket * 2`, whose result is their own, then raise
    finalize_backward's assert (static graph, first iteration in no_sync)."""
    from conftest import require_torch
    require_torch()
    from adjoint.torchside.verify_ddp import verify_ranks

    problem = adjoint.load(os.path.join(HERE, "ddp", "partial_local_comm_hook.yaml"))
    rows, observed = verify_ranks(problem, problem.solve().variant("default"), "float32", False)
    assert rows and all(r.ok for r in rows), [r for r in rows if not r.ok]
    for rank in observed["ranks"][1:]:
        hook = [c for c in rank["hook_calls"] if c["kind"] == "comm_hook"][0]
        assert hook["returned"]["value"][-1] == 2 * hook["args"]["bucket"]["value"][-1] != 0


def test_a_waiting_rank_issues_no_warning_after_its_wait_on_gloo():
    """tests/ddp/partial_warning_after_wait.yaml: the survivors wait in the comm hook's all_reduce
    before l0's full hook would warn; PyTorch issues no warning there, nor does the prediction."""
    from conftest import require_torch
    require_torch()
    from adjoint.torchside.verify_ddp import verify_ranks

    problem = adjoint.load(os.path.join(HERE, "ddp", "partial_warning_after_wait.yaml"))
    vp = problem.solve().variant("default")
    assert [r.warnings for r in vp.ranks[:2]] == [[], []]
    rows, observed = verify_ranks(problem, vp, "float64", False)
    assert rows and all(r.ok for r in rows), [r for r in rows if not r.ok]
    assert [r["warnings"] for r in observed["ranks"][:2]] == [[], []]


#: what a hand-written torch 2.13 script printed (2 gloo processes, float64) for
#: tests/ddp/construction_versions.yaml's set-up: DistributedDataParallel(model, broadcast_buffers=False)
BROADCAST_BUFFERS_WARNING = (
    "`broadcast_buffers` is deprecated. Use `forward_sync_buffers` instead. IMPORTANT: unlike "
    "`broadcast_buffers=False`, `forward_sync_buffers=False` still syncs buffers at init. If you rely on buffers "
    "NOT being synced at init (e.g. rank-local buffers), keep using `broadcast_buffers=False` until "
    "`init_sync_buffers` is available.")


def test_the_constructor_broadcast_moves_every_parameters_version():
    """DDP's constructor broadcasts the parameters from rank 0 (dist._broadcast_coalesced copies the
    result back into each, rank 0 too): every parameter is at version 1 after the wrapping, a frozen
    one too, a tied one once (the script printed 1 for each of named_parameters). A forward and a hook
    reading _version see it; an in-place write of a saved parameter is 'at version 2; expected version
    1'. Given at all, broadcast_buffers is PyTorch 2.13's FutureWarning at the construction.
    Values printed by the script: the hook on b.bias handed 110.5 (rank 0) and -16.5 (rank 1), and
    .grad after each pass."""
    path = os.path.join(HERE, "ddp", "construction_versions.yaml")
    ranks = _ranks(path)
    for r, handed in zip(ranks, ("110.5", "-16.5")):
        assert "error" not in r
        (call, call2) = [c for p in r["passes"] for c in p["hook_calls"]]
        assert _exact(call["args"]["grad"]) == [Fraction(handed)]
        assert _exact(call["returned"]) == [2 * Fraction(handed)]   # grad * (b.bias._version + 1)
        assert _exact(r["passes"][0]["grads"]["b.bias"]) == [Fraction(94)]
        assert _exact(r["passes"][0]["grads"]["a.weight"]) == [Fraction(s) for s in
                                                               ("24.765625", "87.59375", "44.4140625", "156.75")]
        assert _exact(r["grads"]["d.bias"]) == [Fraction(47)]
        assert _exact(r["grads"]["b.weight"]) == [Fraction("372.71875"), Fraction("749.171875")]
        assert r["warnings"] == [{"category": "FutureWarning", "message": BROADCAST_BUFFERS_WARNING,
                                  "during": "setup"}]
    for r, handed in zip(_ranks(os.path.join(HERE, "ddp", "construction_versions_inplace.yaml")), (("356.40625", "723.296875"), ("16.3125", "25.875"))):
        assert [_exact(c["args"]["tensor"]) for c in r["hook_calls"]] == [[Fraction(s) for s in handed]]
        assert r["error"]["type"] == "RuntimeError"
        assert r["error"]["message"].startswith(
            "one of the variables needed for gradient computation has been modified by an inplace operation: "
            "[torch.DoubleTensor [2, 2]] is at version 2; expected version 1 instead. Hint:")
        assert r["warnings"][0]["category"] == "FutureWarning"


def test_broadcast_buffers_not_given_does_not_warn(tmp_path):
    """Without the argument PyTorch does not warn (problems/ddp.yaml gives none)."""
    for r in _ranks(DDP):
        assert r["warnings"] == []


#: printed by a hand-written torch 2.13 script (2 gloo processes, float64) for
#: tests/ddp/batchnorm_buffers.yaml (broadcast: DistributedDataParallel(model)) and
#: tests/ddp/batchnorm_no_broadcast.yaml (broadcast_buffers=False): per rank, b.bias.grad after each
#: pass, and the buffers (running_mean, running_var, num_batches_tracked) and their _version at the end
BN_PRINTED = {
    True: {"b.bias": ([5.3, 12.0725, 20.49525, 29.648225, 40.5731525], [5.3, 12.0725, 20.04525, 29.648225, 40.5731525]),
           "buffers": (([0.76783125, 1.38209625], [0.9104196875, 1.2175521875], 5),
                       ([0.60533125, 1.09459625], [1.0322946875, 1.5144271875], 5)),
           "versions": (2, 2, 7)},
    False: {"b.bias": ([4.3, 9.87, 17.29275, 24.7147, 33.94323], [4.3, 9.87, 16.07325, 24.7147, 33.94323]),
            "buffers": (([0.76783125, 1.38209625], [0.9104196875, 1.2175521875], 5),
                        ([0.1023775, 0.204755], [1.40951, 2.433285], 5)),
            "versions": (1, 1, 6)},
}


@pytest.mark.parametrize("broadcast", [True, False])
def test_buffers_are_broadcast_from_rank_0_before_a_forward_after_a_synchronized_one(broadcast):
    """A model with buffers under DDP was refused. broadcast_buffers (the default): rank 0's buffers
    are broadcast into every rank's before each forward whose previous forward was synchronized (not
    the synchronized forward right after a no_sync one: pass 3's b.bias.grad differs per rank, as
    the no_sync pass's accumulation does), with no version move; the constructor's broadcast moves
    each buffer's version once. broadcast_buffers=False: no broadcast at all, each rank's statistics
    its own. A hook adds running_mean.sum() + num_batches_tracked + running_mean._version to b.bias's
    gradient, so .grad shows what the hooks read."""
    name = "batchnorm_buffers.yaml" if broadcast else "batchnorm_no_broadcast.yaml"
    ranks = _ranks(os.path.join(HERE, "ddp", name))
    want = BN_PRINTED[broadcast]
    for rank, r in enumerate(ranks):
        assert "error" not in r
        got = [float(p["grads"]["b.bias"]["value"][0]) for p in r["passes"]]
        assert got == pytest.approx(want["b.bias"][rank], rel=1e-13)
        mean, var, count = want["buffers"][rank]
        assert r["values"]["bn.running_mean"]["value"] == pytest.approx(mean, rel=1e-13)
        assert r["values"]["bn.running_var"]["value"] == pytest.approx(var, rel=1e-13)
        assert r["values"]["bn.num_batches_tracked"]["value"] == count
        # the hook's last return: b.bias's local gradient 2 + running_mean.sum() + 5 + its _version
        last = r["passes"][-1]["hook_calls"][0]
        assert float(last["returned"]["value"][0]) == pytest.approx(2 + sum(mean) + count + want["versions"][0],
                                                                    rel=1e-13)
        assert [w["category"] for w in r["warnings"]] == ([] if broadcast else ["FutureWarning"])


#: printed by a hand-written torch 2.13 script (2 gloo processes, float64) for tests/ddp/init_sync.yaml
#: (DistributedDataParallel(model, init_sync=False)) and tests/ddp/forward_sync_buffers.yaml
#: (forward_sync_buffers=False, broadcast_buffers=True, check_reduction=True): per rank, b.bias.grad after each pass,
#: b.weight.grad after the last, the buffers at the end, and the constructor's warnings
SYNC_PRINTED = {
    "init_sync": {"b.bias": ([4.3, 10.0725, 17.49525, 25.648225, 35.5731525],
                             [4.3, 10.0725, 17.04525, 25.648225, 35.5731525]),
                  "b.weight": [24.99962286088822, 24.999735946984927],
                  "buffers": (([0.76783125, 1.38209625], [0.9104196875, 1.2175521875]),
                              ([0.60533125, 1.09459625], [1.0322946875, 1.5144271875])),
                  "warnings": []},
    "forward_sync_buffers": {"b.bias": ([5.3, 11.87, 20.29275, 28.7147, 38.94323],
                                        [5.3, 11.87, 19.07325, 28.7147, 38.94323]),
                             "b.weight": [49.99924572177644, 49.999471893969854],
                             "buffers": (([0.76783125, 1.38209625], [0.9104196875, 1.2175521875]),
                                         ([0.1023775, 0.204755], [1.40951, 2.433285])),
                             "warnings": [{"category": "FutureWarning", "during": "setup", "message":
                                           "Both `broadcast_buffers` and `forward_sync_buffers` were specified. "
                                           "`broadcast_buffers` is deprecated and its value is ignored when "
                                           "`forward_sync_buffers` is provided."},
                                          {"category": "FutureWarning", "during": "setup", "message":
                                           "The `check_reduction` argument in `DistributedDataParallel` module "
                                           "is deprecated. Please avoid using it."}]},
}


@pytest.mark.parametrize("name", sorted(SYNC_PRINTED))
def test_init_sync_and_forward_sync_buffers(name):
    """DistributedDataParallel's init_sync and forward_sync_buffers (PyTorch 2.13's replacement of
    the deprecated broadcast_buffers) were refused. init_sync=False: no broadcast at the
    construction, so no parameter's or buffer's _version moves (b.weight's hook doubles nothing,
    running_mean reads 1 less), while the forwards still broadcast rank 0's buffers.
    forward_sync_buffers=False: no broadcast before a forward (each rank's statistics its own), the
    construction's broadcast of parameters and buffers still done; with broadcast_buffers given too,
    the constructor's FutureWarning says both were given; check_reduction=True (no longer read by
    PyTorch, refused too) is the FutureWarning after it."""
    ranks = _ranks(os.path.join(HERE, "ddp", f"{name}.yaml"))
    want = SYNC_PRINTED[name]
    for rank, r in enumerate(ranks):
        assert "error" not in r
        got = [float(p["grads"]["b.bias"]["value"][0]) for p in r["passes"]]
        assert got == pytest.approx(want["b.bias"][rank], rel=1e-13)
        assert r["grads"]["b.weight"]["value"][0] == pytest.approx(want["b.weight"], rel=1e-13)
        mean, var = want["buffers"][rank]
        assert r["values"]["bn.running_mean"]["value"] == pytest.approx(mean, rel=1e-13)
        assert r["values"]["bn.running_var"]["value"] == pytest.approx(var, rel=1e-13)
        assert r["warnings"] == want["warnings"]


#: printed by a hand-written torch 2.13 script (2 gloo processes, float64) for
#: tests/ddp/optimizer_and_clip.yaml: per rank, what the tensor hook on b.weight was handed in each
#: call, and every rank's .grad at the end (the same on both)
OPT_PRINTED = {
    "b.weight hook": ([[-7.1875, -12.21875], [-0.942500272513911, -1.2512503820957221],
                       [-0.942500272513911, -1.2512503820957221], [4.543148358248961, 5.375085126886748]],
                      [[-0.375, -0.75], [0.6174999289254783, 0.8449999303040321],
                       [0.6174999289254783, 0.8449999303040321], [0.005067520786041812, 0.016216481124945312]]),
    "grads": {"a.weight": [[0.9723631314093162, 0.25793766018721276], [-0.8699499222262135, 0.040611088667444395]],
              "a.bias": [0.7190053882182279, -0.617347712488345],
              "b.weight": [[2.1116077677232847, 2.4925255781100013]], "b.bias": [0.993791284882185]},
}


def test_optimizer_and_clip_steps_under_ddp():
    """{step: {optimizer: ...}}, clip_grad_norm and clip_grad_value steps under DistributedDataParallel
    were refused as not modelled. Each rank clips its own .grad (a local norm, no collective) and
    steps its own Adam / SGD(momentum) over its parameters, the Adam state kept from one step to the
    next; with gradient_as_bucket_view the clip writes the bucket views in place."""
    ranks = _ranks(os.path.join(HERE, "ddp", "optimizer_and_clip.yaml"))
    for rank, r in enumerate(ranks):
        assert "error" not in r
        handed = [c["args"]["grad"]["value"][0] for c in r["hook_calls"] if c["label"] == "hook@b.weight"]
        assert len(handed) == 4
        for got, want in zip(handed, OPT_PRINTED["b.weight hook"][rank]):
            assert got == pytest.approx(want, rel=1e-12, abs=1e-15)
        for name, want in OPT_PRINTED["grads"].items():
            got = r["grads"][name]["value"]
            flat = [v for row in got for v in row] if isinstance(got[0], list) else got
            flat_want = [v for row in want for v in row] if isinstance(want[0], list) else want
            assert flat == pytest.approx(flat_want, rel=1e-12), name


def test_an_error_on_some_ranks_only_with_buffers_to_broadcast_is_refused(tmp_path):
    """The buffers' broadcast is a collective at the start of the forward: where the other ranks wait
    when some raise there is not modelled yet, so such a file is refused, not answered as without it."""
    text = open(os.path.join(HERE, "ddp", "partial_forward.yaml")).read().replace(
        "    b: {type: Linear,", "    bn: {type: BatchNorm1d, args: {num_features: 2}}\n    b: {type: Linear,").replace(
        "[[[1, 2]], [[2, -1, 1]]]", "[[[1, 2], [3, 1]], [[2, -1, 1], [0, 1, 2]]]")
    with pytest.raises(ProblemError, match="broadcasts the buffers"):
        adjoint.load(_write(tmp_path, text)).solve()


@pytest.mark.torch
def test_every_rank_has_its_constructors_warnings():
    """tests/ddp/constructor_warnings.yaml: each rank's script builds the model, so each rank
    lists the constructors' warnings (during: setup), in build order; the answer had none. The
    expected texts are real torch's constructors' (the gloo sweep above runs the file on two
    processes too)."""
    import warnings

    from torch import nn

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        nn.TransformerEncoder(nn.TransformerEncoderLayer(d_model=4, nhead=2, dim_feedforward=4, dropout=0.0),
                              num_layers=1)
        nn.GRU(input_size=4, hidden_size=2, dropout=0.25)
    want = [("UserWarning", str(w.message), "setup") for w in caught]
    assert len(want) == 2
    for rank in _ranks(os.path.join(HERE, "ddp", "constructor_warnings.yaml")):
        got = [(w["category"], w["message"], w["during"]) for w in rank["warnings"]]
        assert got[:2] == want


def test_latex_does_not_call_the_reduction_a_hooks_change():
    """problems/ddp.yaml's hooks only observe (they return None and write nothing), so by hand: rank 0's
    hidden.bias gradient is dL/dy * out.weight (ReLU passes both) = -1.75 * [1, -0.5] = [-1.75, 0.875],
    rank 1's 1.5 * [1, -0.5] = [1.5, -0.75], and the .grad DDP writes is their average [-0.125, 0.0625].
    That difference from rank 0's hook-free gradient is the reduction, not a hook: the document's "What
    the hooks changed" must not list the reduced .grad "with the hooks" (it did: 1/14 of it)."""
    from adjoint.render.latex import render_document

    text = open(DDP, encoding="utf-8").read()
    assert "returns:" not in text and "does:" not in text            # observing hooks only
    pred = adjoint.load(DDP).solve()
    tex = render_document(pred)
    first = tex.split("\\subsection{Backward pass 1: what the hooks changed}")[1].split("\\subsection{", 1)[0]
    assert "with the hooks" not in first and "\\frac{1}{14}" not in first
    assert "reduced gradient" in first
    grads = tex.split("\\subsection{Backward pass 1: gradients}")[1].split("\\subsection{", 1)[0]
    block = grads.split("\\texttt{hidden.\\allowbreak{}bias.\\allowbreak{}grad}")[1]
    assert "\\begin{bmatrix}-1.75 & 0.875\\end{bmatrix}" in block        # rank 0's own, without hooks
    assert "\\begin{bmatrix}-0.125 & 0.0625\\end{bmatrix}" in block      # the average DDP stores
