"""F.embedding_bag and nn.EmbeddingBag against real torch: EmbeddingBagBackward0's edges (weight,
per_sample_weights), values, gradients (dense), what the node saves and packs (offset2bag, bag_size,
max_indices as the CPU kernel fills them, in float32 and float64), and PyTorch's errors in its
order (tests/data/regressions/embedding_bag_modules.yaml checks hooks through verify)."""

import pytest

from conftest import require_torch

torch = require_torch()
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import adjoint  # noqa: E402
from nn_harness import Case, close, lit, torch_chain  # noqa: E402

W = [[1.0, 2.0, 0.5], [3.0, -4.0, 1.0], [0.5, 0.25, -1.0], [2.0, 2.0, 2.0], [-1.0, 0.0, 1.0]]
IDX = [1, 2, 4, 4, 3, 0, 2]
OFFS = [0, 2, 2, 5]
PSW = [0.5, 1.0, -2.0, 0.25, 1.5, 3.0, -1.0]


def _file(expr: str, dtype: str, idx=IDX, offs=OFFS, psw=PSW, w=W, w_grad: bool = True, s_grad: bool = True) -> str:
    return f"""name: t
dtype: {dtype}
inputs:
  w: {{value: {lit(w)}, requires_grad: {'true' if w_grad else 'false'}}}
  i: {{value: {lit(idx)}, dtype: int64}}
  o: {{value: {lit(offs)}, dtype: int64}}
  s: {{value: {lit(psw)}, requires_grad: {'true' if s_grad else 'false'}}}
model:
  inputs: [w, i, o, s]
  forward: |
    h = {expr}
    return h
loss: "sum(y * y * y)"
hooks:
  - {{saved_tensors: {{pack: "x", unpack: "x"}}}}
"""


def _torch(fn, dtype, idx=IDX, offs=OFFS, psw=PSW, w=W, w_grad: bool = True, s_grad: bool = True):
    t = {"w": torch.tensor(w, dtype=dtype, requires_grad=w_grad), "i": torch.tensor(idx), "o": torch.tensor(offs),
         "s": torch.tensor(psw, dtype=dtype, requires_grad=s_grad)}
    packs = []
    with torch.autograd.graph.saved_tensors_hooks(lambda x: packs.append(x.detach().clone()) or x, lambda x: x):
        h = fn(t)
        (h * h * h).sum().backward()
    return h, t, packs


def assert_close(ours, theirs, what: str) -> None:
    """float64 runs compared at the harness's tolerance, float32 ones at float32's."""
    wide = isinstance(theirs, torch.Tensor) and theirs.dtype == torch.float32
    assert close(ours, theirs, rtol=1e-6, atol=1e-6) if wide else close(ours, theirs), \
        f"{what}: adjoint {ours} != torch {theirs}"


def _compare(case: Case, h, t, packs) -> None:
    assert case.chain("h") == torch_chain(h, {"w": t["w"], "s": t["s"]})
    assert_close(case.value("h"), h, "h")
    for name in ("w", "s"):
        assert_close(case.grad(name), t[name].grad, f"grad of {name}")
    ours = case.calls("pack")
    assert [tuple(c["args"]["x"]["shape"]) for c in ours] == [tuple(p.shape) for p in packs]
    for c, p in zip(ours, packs):
        if p.numel():
            assert_close(c["args"]["x"]["value"], p, "pack")


CALLS = [
    ('F.embedding_bag(i, w, o, mode="sum")', lambda t: F.embedding_bag(t["i"], t["w"], t["o"], mode="sum")),
    ('F.embedding_bag(i, w, o)', lambda t: F.embedding_bag(t["i"], t["w"], t["o"])),
    ('F.embedding_bag(i, w, o, mode="max")', lambda t: F.embedding_bag(t["i"], t["w"], t["o"], mode="max")),
    ('F.embedding_bag(i, w, o, mode="sum", per_sample_weights=s)',
     lambda t: F.embedding_bag(t["i"], t["w"], t["o"], mode="sum", per_sample_weights=t["s"])),
    ('F.embedding_bag(i, w, o, mode="mean", padding_idx=2)',
     lambda t: F.embedding_bag(t["i"], t["w"], t["o"], mode="mean", padding_idx=2)),
    ('F.embedding_bag(i, w, o, mode="max", padding_idx=-1)',
     lambda t: F.embedding_bag(t["i"], t["w"], t["o"], mode="max", padding_idx=-1)),
    ('F.embedding_bag(i, w, o, mode="sum", padding_idx=4, per_sample_weights=s)',
     lambda t: F.embedding_bag(t["i"], t["w"], t["o"], mode="sum", padding_idx=4, per_sample_weights=t["s"])),
    # scale_grad_by_freq: the CPU backward divides the g-th distinct index by the count of sorted[g]
    ('F.embedding_bag(i, w, o, mode="sum", scale_grad_by_freq=True)',
     lambda t: F.embedding_bag(t["i"], t["w"], t["o"], mode="sum", scale_grad_by_freq=True)),
    ('F.embedding_bag(i, w, o, mode="mean", scale_grad_by_freq=True, padding_idx=1)',
     lambda t: F.embedding_bag(t["i"], t["w"], t["o"], mode="mean", scale_grad_by_freq=True, padding_idx=1)),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("expr, fn", CALLS, ids=[c[0] for c in CALLS])
def test_embedding_bag_matches_torch(expr, fn, dtype):
    case = Case(_file(expr, dtype))
    _compare(case, *_torch(fn, getattr(torch, dtype)))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_include_last_offset_and_empty_bags(mode, dtype):
    """include_last_offset: the last offset (the input's length) closes the last bag; an empty bag is 0."""
    offs = [0, 3, 3, 7]
    expr = f'F.embedding_bag(i, w, o, mode="{mode}", include_last_offset=True)'
    case = Case(_file(expr, dtype, offs=offs))
    _compare(case, *_torch(lambda t: F.embedding_bag(t["i"], t["w"], t["o"], mode=mode, include_last_offset=True),
                           getattr(torch, dtype), offs=offs))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_2d_input_is_bags_of_its_rows(dtype):
    """Offsets from arange; the per-sample weights reshaped (ViewBackward0)."""
    idx, psw = [[1, 2, 4], [4, 3, 0]], [[0.5, 1.0, -2.0], [0.25, 1.5, 3.0]]
    expr = 'F.embedding_bag(i, w, per_sample_weights=s, mode="sum")'
    text = _file(expr, dtype, idx=idx, psw=psw)
    case = Case(text)
    _compare(case, *_torch(lambda t: F.embedding_bag(t["i"], t["w"], per_sample_weights=t["s"], mode="sum"),
                           getattr(torch, dtype), idx=idx, psw=psw))


@pytest.mark.parametrize("w_grad, s_grad", [(True, False), (False, True)])
def test_saved_tensors_follow_which_gradients_are_needed(w_grad, s_grad):
    """The weight is saved only when the per-sample weights need a gradient."""
    expr = 'F.embedding_bag(i, w, o, mode="sum", per_sample_weights=s)'
    case = Case(_file(expr, "float32", w_grad=w_grad, s_grad=s_grad))
    h, t, packs = _torch(lambda t: F.embedding_bag(t["i"], t["w"], t["o"], mode="sum", per_sample_weights=t["s"]),
                         torch.float32, w_grad=w_grad, s_grad=s_grad)
    ours = case.calls("pack")
    assert [tuple(c["args"]["x"]["shape"]) for c in ours] == [tuple(p.shape) for p in packs]
    for name in ("w", "s"):
        assert_close(case.grad(name), t[name].grad, f"grad of {name}")


def test_max_ties_route_to_the_first_row():
    w = [[1.0, 2.0], [1.0, 3.0], [0.5, 3.0]]
    idx, offs = [2, 1, 0, 1], [0, 3]
    case = Case(_file('F.embedding_bag(i, w, o, mode="max")', "float64", idx=idx, offs=offs, w=w, psw=[1.0] * 4))
    _compare(case, *_torch(lambda t: F.embedding_bag(t["i"], t["w"], t["o"], mode="max"), torch.float64,
                           idx=idx, offs=offs, w=w, psw=[1.0] * 4))


def test_embedding_bag_module_matches_torch():
    """nn.EmbeddingBag: F.embedding_bag(input, self.weight, offsets, ..., per_sample_weights, ...)."""
    text = f"""name: t
dtype: float64
inputs:
  i: {{value: {lit(IDX)}, dtype: int64}}
  o: {{value: {lit(OFFS)}, dtype: int64}}
  s: {{value: {lit(PSW)}, requires_grad: true}}
model:
  inputs: [i, o, s]
  children:
    bag: {{type: EmbeddingBag, args: {{num_embeddings: 5, embedding_dim: 3, mode: sum}}, params: {{weight: {lit(W)}}}}}
    avg: {{type: EmbeddingBag, args: {{num_embeddings: 5, embedding_dim: 3, padding_idx: 0}},
          params: {{weight: {lit(W)}}}}}
  forward: |
    h = bag(i, o, per_sample_weights=s) * avg(i, offsets=o)
    return h
loss: "sum(y * y * y)"
"""
    case = Case(text)
    bag = nn.EmbeddingBag(5, 3, mode="sum").double()
    avg = nn.EmbeddingBag(5, 3, padding_idx=0).double()
    with torch.no_grad():
        bag.weight.copy_(torch.tensor(W))
        avg.weight.copy_(torch.tensor(W))
    i, o, s = torch.tensor(IDX), torch.tensor(OFFS), torch.tensor(PSW, dtype=torch.float64, requires_grad=True)
    h = bag(i, o, per_sample_weights=s) * avg(i, offsets=o)
    (h * h * h).sum().backward()
    names = {"s": s, "bag.weight": bag.weight, "avg.weight": avg.weight}
    assert case.chain("h") == torch_chain(h, names)
    assert_close(case.value("h"), h, "h")
    for name, t in names.items():
        assert_close(case.grad(name), t.grad, f"grad of {name}")


ERRORS = [   # (expression, torch, dtype, indices, offsets)
    ('F.embedding_bag(i, w, o)', lambda t: F.embedding_bag(t["i"], t["w"], t["o"]), "float64", IDX, [1, 2]),
    ('F.embedding_bag(i, w, o)', lambda t: F.embedding_bag(t["i"], t["w"], t["o"]), "float64", IDX, [0, 8]),
    ('F.embedding_bag(i, w, o)', lambda t: F.embedding_bag(t["i"], t["w"], t["o"]), "float64", [1, 5, -1, 0, 6, 2, 1],
     OFFS),
    ('F.embedding_bag(i, w, o, mode="max")', lambda t: F.embedding_bag(t["i"], t["w"], t["o"], mode="max"), "float32",
     [1, 2, 7, 0, 6, 2, 1], OFFS),
    ('F.embedding_bag(i, w, o, padding_idx=0)', lambda t: F.embedding_bag(t["i"], t["w"], t["o"], padding_idx=0),
     "float32", [1, 2, -3, 0, 6, 2, 1], OFFS),
    ('F.embedding_bag(i, w, o, mode="mean", per_sample_weights=s)',
     lambda t: F.embedding_bag(t["i"], t["w"], t["o"], mode="mean", per_sample_weights=t["s"]), "float32", IDX, OFFS),
    ('F.embedding_bag(i, w, o, per_sample_weights=s[1:])',
     lambda t: F.embedding_bag(t["i"], t["w"], t["o"], per_sample_weights=t["s"][1:]), "float32", IDX, OFFS),
    ('F.embedding_bag(i, w[0], o)', lambda t: F.embedding_bag(t["i"], t["w"][0], t["o"]), "float32", IDX, OFFS),
    ('F.embedding_bag(i, w)', lambda t: F.embedding_bag(t["i"], t["w"]), "float32", IDX, OFFS),
    ('F.embedding_bag(i.view(1, 7), w, o)', lambda t: F.embedding_bag(t["i"].view(1, 7), t["w"], t["o"]), "float32",
     IDX, OFFS),
    ('F.embedding_bag(i, w, o.view(2, 2))', lambda t: F.embedding_bag(t["i"], t["w"], t["o"].view(2, 2)), "float32",
     IDX, OFFS),
    ('F.embedding_bag(i.view(1, 1, 7), w, o)', lambda t: F.embedding_bag(t["i"].view(1, 1, 7), t["w"], t["o"]),
     "float32", IDX, OFFS),
    ('F.embedding_bag(i, w, o, mode="median")', lambda t: F.embedding_bag(t["i"], t["w"], t["o"], mode="median"),
     "float32", IDX, OFFS),
    ('F.embedding_bag(i, w, o, mode="max", scale_grad_by_freq=True)',
     lambda t: F.embedding_bag(t["i"], t["w"], t["o"], mode="max", scale_grad_by_freq=True), "float32", IDX, OFFS),
    ('F.embedding_bag(i, w, o, padding_idx=5)', lambda t: F.embedding_bag(t["i"], t["w"], t["o"], padding_idx=5),
     "float32", IDX, OFFS),
    ('F.embedding_bag(i, w, o, padding_idx=-6)', lambda t: F.embedding_bag(t["i"], t["w"], t["o"], padding_idx=-6),
     "float32", IDX, OFFS),
]


@pytest.mark.parametrize("expr, fn, dtype, idx, offs", ERRORS, ids=[f"{k}-{e[0]}" for k, e in enumerate(ERRORS)])
def test_torchs_errors(expr, fn, dtype, idx, offs):
    js = adjoint.loads(_file(expr, dtype, idx=idx, offs=offs)).solve().variants[0].to_json()
    with pytest.raises(Exception) as info:
        _torch(fn, getattr(torch, dtype), idx=idx, offs=offs)
    assert (js["error"]["type"], js["error"]["message"]) == (type(info.value).__name__, str(info.value))


@pytest.mark.parametrize("expr, idx, offs", [('F.embedding_bag(i, w, o, sparse=True)', IDX, OFFS),
                                             ('F.embedding_bag(i, w, o, mode="sum")', [1, 2, 5, 0, 0, 0, 0], OFFS),
                                             ('F.embedding_bag(i, w, o)', IDX, [0, 3, 2]),
                                             ('F.embedding_bag(i, w, o, include_last_offset=True)', IDX, [0, 2, 5])])
def test_refusals(expr, idx, offs):
    """sparse gradients; an index out of range on the float32 fast path (fbgemm's message depends on
    threads); decreasing offsets; include_last_offset
    with a last offset short of the input's end (the fast path and the others disagree)."""
    with pytest.raises(adjoint.ProblemError):
        adjoint.loads(_file(expr, "float32", idx=idx, offs=offs)).solve()


def test_equal_offsets_make_empty_bags():
    offs = [0, 0, 0, 4]
    case = Case(_file('F.embedding_bag(i, w, o, mode="max")', "float32", offs=offs))
    _compare(case, *_torch(lambda t: F.embedding_bag(t["i"], t["w"], t["o"], mode="max"), torch.float32, offs=offs))
