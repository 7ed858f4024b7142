"""FSDP2's ``fully_shard`` (``distributed: {wrap: fully_shard}``): the block, the per-rank model
and verification on real gloo processes (tests start their own process groups on 127.0.0.1;
every process they start is ended).

Expected values come from real torch (every tests/fsdp/*.yaml file run on world_size real
processes, one process-group start per world size), from torch's own chunking, or from
relations that hold by FSDP's definition (a rank's .grad is its rows of the mean over ranks
of what reached the unsharded parameter)."""

from __future__ import annotations

import copy
import glob
import os
import textwrap

import pytest

import adjoint
from adjoint import ProblemError
from adjoint.engine.fsdp import shard_rows

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = sorted(glob.glob(os.path.join(HERE, "fsdp", "*.yaml")))


def _exact(v) -> list[float]:
    """A VALUE's elements (the exact values as floats: some are transcendental), flattened."""
    def flat(x):
        return [y for i in x for y in flat(i)] if isinstance(x, list) else [x]
    return [pytest.approx(float(x), rel=1e-12) for x in flat(v["value"])]


def test_shard_rows_are_torch_chunks_padded_with_empty_shards():
    """FSDP2's Shard(0) is torch.chunk(param, world_size) with empty chunks added for the ranks
    chunk leaves out (_chunk_with_empty)."""
    from conftest import require_torch
    require_torch()
    import torch

    for n in range(0, 10):
        for ws in range(1, 5):
            chunks = list(torch.chunk(torch.arange(n), ws)) if n else []
            starts = [int(c[0]) for c in chunks]
            sizes = [len(c) for c in chunks] + [0] * (ws - len(chunks))
            for r in range(ws):
                lo, hi = shard_rows(n, ws, r)
                assert hi - lo == sizes[r], (n, ws, r)
                if sizes[r]:
                    assert lo == starts[r]


def test_a_rank_holds_its_rows_of_the_mean_of_the_ranks_gradients():
    """fc2.bias's gradient reaching the unsharded parameter is grad_output of fc2's full backward
    hook (the hook is called before FSDP's post-backward); each rank's .grad is its element of
    the mean of those over ranks, and the post-accumulate-grad hook is handed the same."""
    ranks = adjoint.load(os.path.join(HERE, "fsdp", "mlp.yaml")).solve().to_json()["variants"]["default"]["ranks"]
    p1 = [r["passes"][0] for r in ranks]
    outs = [_exact(next(c for c in p["hook_calls"] if c["label"] == "full_backward@fc2")["args"]["grad_output"][0])
            for p in p1]
    mean = [(a.expected + b.expected) / 2 for a, b in zip(*outs)]
    for rank, p in enumerate(p1):
        assert _exact(p["grads"]["fc2.bias"]) == [mean[rank]]
        hooked = next(c for c in p["hook_calls"] if c["label"] == "post_accumulate_grad@fc2.bias")
        assert _exact(hooked["args"]["tensor"]) == [mean[rank]]
    # the second backward adds its shard to the first
    for rank, r in enumerate(ranks):
        assert _exact(r["passes"][1]["grads"]["fc2.bias"])[0] == 2 * mean[rank]
    # the order: fc2's full backward hook, then its group's post-backward, then the activation's hook
    labels = [c["label"] for c in p1[0]["hook_calls"]]
    assert labels == ["full_backward@fc2", "post_accumulate_grad@fc2.bias", "hook@act", "full_backward@fc1",
                      "post_accumulate_grad@fc1.weight", "post_accumulate_grad@fc1.bias"]


def test_the_post_backward_node_sits_under_the_module_backward_hook():
    problem = adjoint.load(os.path.join(HERE, "fsdp", "mlp.yaml"))
    run = problem.solve().variants[0].ranks[0].run
    names = [n.name for n in run.rt.nodes]
    assert names.count("RegisterPostBackwardFunctionBackward") == 2 * 2   # fc1 and fc2, two forwards
    # x requires grad: the root's inputs go through one too, but the root has no parameter of its own
    first = names.index("RegisterPostBackwardFunctionBackward")
    assert names[first + 1] == "BackwardHookFunctionBackward"


@pytest.fixture(scope="module")
def gloo():
    """Every tests/fsdp file solved and run on its world_size of real gloo processes."""
    from conftest import require_torch
    require_torch()
    from adjoint.torchside.ddp import run_distributed_many

    problems = {os.path.basename(f): adjoint.load(f) for f in FILES}
    predicted = {name: p.solve().variant("default").to_json()["ranks"] for name, p in problems.items()}
    observed = {}
    sizes = sorted({p.distributed.world_size for p in problems.values()})
    for ws in sizes:
        names = [n for n, p in problems.items() if p.distributed.world_size == ws]
        runs = run_distributed_many([(problems[n], "default", problems[n].dtype) for n in names])
        observed.update(zip(names, runs))
    return problems, predicted, observed


@pytest.mark.torch
def test_every_fsdp_file_agrees_with_real_gloo_processes_on_every_rank(gloo):
    """Hook calls in order (tensor, full backward, post-accumulate-grad on the sharded
    parameters), values, each rank's .grad rows, warnings and errors, on 2 and 3 ranks."""
    from adjoint.torchside.compare import compare

    problems, predicted, observed = gloo
    assert len(problems) >= 3
    for name, p in problems.items():
        assert len(observed[name]) == p.distributed.world_size
        for pr, o in zip(predicted[name], observed[name]):
            rows = compare(pr, o, p.dtype)
            assert rows and all(r.ok for r in rows), (name, [r for r in rows if not r.ok])
    # the empty shards of a one-row parameter on 3 ranks, as torch reports them
    grads = [o["grads"]["lin2.weight"]["shape"] for o in observed["root_params.yaml"]]
    assert grads == [[1, 3], [0, 3], [0, 3]]
    # a backward raising after a group's reduce-scatter: its hooks were handed the reduced rows
    calls = [c for c in observed["error_after_reduce.yaml"][0]["hook_calls"] if c["kind"] == "post_accumulate_grad"]
    assert len(calls) == 2 and all(c["args"]["tensor"] is not None for c in calls)
    # a root's own parameter is its group's last
    labels = [c["label"] for c in observed["root_last.yaml"][0]["hook_calls"]][:6]
    assert labels[-1] == "post_accumulate_grad@scale"


@pytest.mark.torch
def test_a_wrong_shard_or_order_is_caught(gloo):
    from adjoint.torchside.compare import compare

    problems, predicted, observed = gloo
    wrong = copy.deepcopy(predicted["mlp.yaml"][1])
    g = wrong["grads"]["fc2.bias"]
    g["value"] = [g["value"][0] * 2]
    assert not all(r.ok for r in compare(wrong, observed["mlp.yaml"][1], "float32"))
    wrong = copy.deepcopy(predicted["mlp.yaml"][0])
    calls = wrong["passes"][0]["hook_calls"]
    calls[1], calls[2] = calls[2], calls[1]
    assert not all(r.ok for r in compare(wrong, observed["mlp.yaml"][0], "float32"))


BASE = textwrap.dedent("""\
    name: f
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
      wrap: fully_shard
    """)


@pytest.mark.parametrize("extra,message", [
    ("  shard: [b, b]\n", "distributed.shard names 'b' twice"),
    ("  shard: a\n", "distributed.shard must be a list of submodule names"),
    ("  args: {mp_policy: 1}\n", "distributed.args: 'mp_policy' is not modelled for fully_shard"),
    ("  comm_hook: {builtin: allreduce}\n", "distributed.comm_hook is DistributedDataParallel's"),
    ("steps: [{no_sync: [forward, backward]}]\n", "no_sync is DistributedDataParallel's"),
    ("hooks: [{tensor: b.weight, kind: post_accumulate_grad, returns: tensor}]\n",
     "a post_accumulate_grad hook with a body under fully_shard"),
    ("hooks: [{global: forward}]\n", "global module hooks under fully_shard are not modelled yet"),
    ("  shard: [a]\nhooks: [{module: a, kind: forward_pre, prepend: true}]\n",
     "a forward_pre hook with prepend: true"),
    ("backward: {method: grad, inputs: [x]}\n", "torch.autograd.grad under fully_shard"),
])
def test_what_is_not_modelled_is_refused_with_one_located_line(tmp_path, extra, message):
    path = tmp_path / "f.yaml"
    path.write_text(BASE + extra)
    with pytest.raises(ProblemError, match=message.replace("(", r"\(").replace(")", r"\)")):
        adjoint.load(str(path)).solve()


def test_the_report_and_the_latex_document(tmp_path):
    from adjoint.render.console import render
    from adjoint.render.latex.document import render_document
    from adjoint.render.report import Options

    pred = adjoint.load(os.path.join(HERE, "fsdp", "root_params.yaml")).solve()
    text = render(pred, Options(), width=200)
    assert "fully_shard (FSDP2), world_size 3: lin1, lin2, then the root" in text
    tex = render_document(pred)
    assert "What fully\\_shard does" in tex
    assert "rank 0 row 0, rank 1 none, rank 2 none" in tex
    # a post-accumulate-grad call is handed this rank's rows of the mean: no gradient of one run
    calls = [part for part in tex.split("\\subsubsection*")[1:]
             if "post\\_accumulate\\_grad@" in part.split("\n", 1)[0]]
    assert calls and all("gradient reaching" not in part.split("\\end{align*}", 1)[0] for part in calls)


def test_a_sharded_module_returning_a_view_warns_naming_its_fsdp_class():
    """fc2's full backward hook makes its output, the root Sequential's, a BackwardHookFunction
    view: the root's FSDP post-forward warns once per forward, naming FSDPSequential (the class
    fully_shard makes, FSDP<name>); fc2's own post-forward sees the output before the hook's view."""
    ranks = adjoint.load(os.path.join(HERE, "fsdp", "mlp.yaml")).solve().to_json()["variants"]["default"]["ranks"]
    for r in ranks:
        messages = [w["message"] for w in r["warnings"]]
        assert len(messages) == 2   # two forwards
        assert all(m.startswith("FSDP2-wrapped module (FSDPSequential) returned a view tensor.") for m in messages)
