"""The margin losses against real torch 2.13, float64: each functional (node chain, value, the
gradient of every input that requires grad) for every reduction, each module type called in a
forward with a legacy backward hook (its arguments as torch hands them), and the errors PyTorch
raises on their arguments (type and exact message). Expected values always come from torch."""

from __future__ import annotations

import warnings

import pytest
from conftest import require_torch

torch = require_torch()
import torch.nn as nn  # noqa: E402 (after the check)
import torch.nn.functional as F  # noqa: E402

import adjoint  # noqa: E402
from nn_harness import Case, assert_close, lit, torch_chain  # noqa: E402

F64 = torch.float64

#: name -> (values, requires_grad, dtype)
TENSORS = {
    "a": ([[0.5, -1.0, 2.0], [0.0, 1.5, -0.25]], True, None),
    "b": ([[1.0, 0.25, -0.5], [0.75, -2.0, 0.5]], True, None),
    "s": ([[1.0, -1.0, 1.0], [-1.0, -1.0, 1.0]], False, None),
    "r": ([1.0, -1.0], False, None),
    "p": ([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]], True, None),
    "w": ([1.0, 2.0, 0.5], False, None),
    "wg": ([1.0, 2.0, 0.5], True, None),
}


def _problem(expr: str, names: list[str], children: str = "", hooks: str = "") -> str:
    lines = ["name: t", "dtype: float64", "inputs:"]
    for n in names:
        values, rg, dt = TENSORS[n]
        extra = (", requires_grad: true" if rg else "") + (f", dtype: {dt}" if dt else "")
        lines.append(f"  {n}: {{value: {lit(values)}{extra}}}")
    lines += ["model:", f"  inputs: [{', '.join(names)}]"]
    if children:
        lines += ["  children:", f"    L: {children}"]
    lines += ["  forward: |", f"    h = {expr}", "    return h", 'loss: "sum(y * y)"']
    return "\n".join(lines) + "\n" + hooks


def _torch_inputs(names: list[str]) -> dict:
    out = {}
    for n in names:
        values, rg, dt = TENSORS[n]
        out[n] = torch.tensor(values, dtype=torch.int64 if dt == "int64" else F64, requires_grad=rg)
    return out


def _leaves(ts: dict) -> dict:
    return {n: t for n, t in ts.items() if t.requires_grad}


#: (adjoint's expression, the same in torch over the named tensors, the tensors it takes)
FUNCTIONAL = [
    *((f'torch.nn.functional.soft_margin_loss(a, s, reduction="{r}")',
       lambda t, r=r: F.soft_margin_loss(t["a"], t["s"], reduction=r), ["a", "s"]) for r in ("mean", "sum", "none")),
    ("torch.nn.functional.soft_margin_loss(a * 2, s[0])", lambda t: F.soft_margin_loss(t["a"] * 2, t["s"][0]),
     ["a", "s"]),
    *((f'torch.nn.functional.margin_ranking_loss(a, b, s, margin={m}, reduction="{r}")',
       lambda t, r=r, m=m: F.margin_ranking_loss(t["a"], t["b"], t["s"], margin=m, reduction=r), ["a", "b", "s"])
      for r in ("mean", "sum", "none") for m in (0, 0.5)),
    ("torch.nn.functional.margin_ranking_loss(a, b[:1], s)",
     lambda t: F.margin_ranking_loss(t["a"], t["b"][:1], t["s"]), ["a", "b", "s"]),
    *((f'torch.nn.functional.hinge_embedding_loss(a, s, margin={m}, reduction="{r}")',
       lambda t, r=r, m=m: F.hinge_embedding_loss(t["a"], t["s"], margin=m, reduction=r), ["a", "s"])
      for r in ("mean", "sum", "none") for m in (1, 0.5)),
    ("torch.nn.functional.hinge_embedding_loss(a, b)", lambda t: F.hinge_embedding_loss(t["a"], t["b"]), ["a", "b"]),
    *((f'torch.nn.functional.cosine_embedding_loss(a, b, r, margin={m}, reduction="{r}")',
       lambda t, r=r, m=m: F.cosine_embedding_loss(t["a"], t["b"], t["r"], margin=m, reduction=r), ["a", "b", "r"])
      for r in ("mean", "sum", "none") for m in (0, -0.5)),
    ("torch.nn.functional.cosine_embedding_loss(a[0], b[1], r[0])",
     lambda t: F.cosine_embedding_loss(t["a"][0], t["b"][1], t["r"][0]), ["a", "b", "r"]),
    ("torch.nn.functional.cosine_embedding_loss(a, b[:1], r * 0)",
     lambda t: F.cosine_embedding_loss(t["a"], t["b"][:1], t["r"] * 0), ["a", "b", "r"]),
    *((f'torch.nn.functional.multilabel_soft_margin_loss(a, p, reduction="{r}")',
       lambda t, r=r: F.multilabel_soft_margin_loss(t["a"], t["p"], reduction=r), ["a", "p"])
      for r in ("mean", "sum", "none")),
    ("torch.nn.functional.multilabel_soft_margin_loss(a, p, weight=wg)",
     lambda t: F.multilabel_soft_margin_loss(t["a"], t["p"], weight=t["wg"]), ["a", "p", "wg"]),
    ("torch.nn.functional.multilabel_soft_margin_loss(a[0], p[1], w, reduction=\"none\")",
     lambda t: F.multilabel_soft_margin_loss(t["a"][0], t["p"][1], t["w"], reduction="none"), ["a", "p", "w"]),
]


@pytest.mark.parametrize("expr,fn,names", FUNCTIONAL, ids=[c[0] for c in FUNCTIONAL])
def test_functional_matches_torch(expr, fn, names):
    case = Case(_problem(expr, names))
    ts = _torch_inputs(names)
    h = fn(ts)
    (h * h).sum().backward()
    assert case.chain("h") == torch_chain(h, _leaves(ts))
    assert_close(case.value("h"), h, "h")
    for n, t in _leaves(ts).items():
        assert_close(case.grad(n), t.grad, f"grad of {n}")


#: (module type, its args, the call in the forward, torch's module, the call in torch, the tensors)
MODULES = [
    *(("SoftMarginLoss", {"reduction": r}, "L(a, s)", lambda r=r: nn.SoftMarginLoss(reduction=r),
       lambda L, t: L(t["a"], t["s"]), ["a", "s"]) for r in ("mean", "sum", "none")),
    *(("MarginRankingLoss", {"margin": 0.5, "reduction": r}, "L(a, b, s)",
       lambda r=r: nn.MarginRankingLoss(margin=0.5, reduction=r), lambda L, t: L(t["a"], t["b"], t["s"]),
       ["a", "b", "s"]) for r in ("mean", "sum", "none")),
    *(("HingeEmbeddingLoss", {"margin": 0.5, "reduction": r}, "L(a, s)",
       lambda r=r: nn.HingeEmbeddingLoss(margin=0.5, reduction=r), lambda L, t: L(t["a"], t["s"]), ["a", "s"])
      for r in ("mean", "sum", "none")),
    *(("CosineEmbeddingLoss", {"margin": 0.25, "reduction": r}, "L(a, b, r)",
       lambda r=r: nn.CosineEmbeddingLoss(margin=0.25, reduction=r), lambda L, t: L(t["a"], t["b"], t["r"]),
       ["a", "b", "r"]) for r in ("mean", "sum", "none")),
    *(("MultiLabelSoftMarginLoss", {"reduction": r}, "L(a, p)",
       lambda r=r: nn.MultiLabelSoftMarginLoss(reduction=r), lambda L, t: L(t["a"], t["p"]), ["a", "p"])
      for r in ("mean", "sum", "none")),
]


def _yaml_map(d: dict) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in d.items()) + "}"


@pytest.mark.parametrize("mtype,args,call,make,use,names", MODULES,
                         ids=[f"{m[0]}-{m[1]}" for m in MODULES])
def test_module_matches_torch(mtype, args, call, make, use, names):
    """Value, grads, node chain and the legacy backward hook's arguments (the loss's last node)."""
    child = f"{{type: {mtype}, args: {_yaml_map(args)}}}"
    case = Case(_problem(call, names, child, "hooks: [{module: L, kind: backward}]\n"))
    ts = _torch_inputs(names)
    L = make()
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        L.register_backward_hook(lambda m, gi, go: seen.append((gi, go)))
    h = use(L, ts)
    (h * h).sum().backward()
    assert case.chain("h") == torch_chain(h, _leaves(ts))
    assert_close(case.value("h"), h, "h")
    for n, t in _leaves(ts).items():
        assert_close(case.grad(n), t.grad, f"grad of {n}")
    (call_record,) = case.calls("backward")
    ((gi, go),) = seen
    for ours, theirs in ((call_record["args"]["grad_input"], gi), (call_record["args"]["grad_output"], go)):
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            assert (o is None) == (t is None)
            if t is not None:
                assert_close(o["value"], t, "legacy hook argument")


def _error_of(text: str):
    got = adjoint.loads(text).solve().to_json()
    error = next(iter(got["variants"].values()))["error"]
    return error["type"], error["message"]


def _torch_error(fn, ts):
    with pytest.raises(Exception) as caught:
        h = fn(ts)
        (h * h).sum().backward()
    return type(caught.value).__name__, str(caught.value)


#: (adjoint's expression, torch's, tensors): each raises in torch
ERRORS = [
    ("torch.nn.functional.soft_margin_loss(a[0], s)", lambda t: F.soft_margin_loss(t["a"][0], t["s"]), ["a", "s"]),
    ("torch.nn.functional.soft_margin_loss(a, s[:, :2])", lambda t: F.soft_margin_loss(t["a"], t["s"][:, :2]),
     ["a", "s"]),
    ("torch.nn.functional.soft_margin_loss(a, b)", lambda t: F.soft_margin_loss(t["a"], t["b"]), ["a", "b"]),
    ('torch.nn.functional.soft_margin_loss(a, s, reduction="avg")',
     lambda t: F.soft_margin_loss(t["a"], t["s"], reduction="avg"), ["a", "s"]),
    ("torch.nn.functional.soft_margin_loss(a, s > 0)", lambda t: F.soft_margin_loss(t["a"], t["s"] > 0), ["a", "s"]),
]


@pytest.mark.parametrize("expr,fn,names", ERRORS, ids=[c[0] for c in ERRORS])
def test_errors_are_torchs(expr, fn, names):
    assert _error_of(_problem(expr, names)) == _torch_error(fn, _torch_inputs(names))


def test_deprecated_size_average_is_refused():
    text = _problem("torch.nn.functional.soft_margin_loss(a, s, size_average=False)", ["a", "s"])
    with pytest.raises(adjoint.ProblemError, match="'size_average' is deprecated"):
        adjoint.loads(text).solve()


def test_multilabel_soft_margin_weight_is_a_buffer():
    """MultiLabelSoftMarginLoss's weight is a buffer (a _WeightedLoss): given under buffers, used by the forward."""
    child = "{type: MultiLabelSoftMarginLoss, args: {reduction: sum}, buffers: {weight: [1.0, 2.0, 0.5]}}"
    case = Case(_problem("L(a, p)", ["a", "p"], child))
    ts = _torch_inputs(["a", "p"])
    L = nn.MultiLabelSoftMarginLoss(weight=torch.tensor([1.0, 2.0, 0.5], dtype=F64), reduction="sum")
    assert [n for n, _ in L.named_buffers()] == ["weight"]
    h = L(ts["a"], ts["p"])
    (h * h).sum().backward()
    assert case.chain("h") == torch_chain(h, _leaves(ts))
    assert_close(case.value("h"), h, "h")
    for n, t in _leaves(ts).items():
        assert_close(case.grad(n), t.grad, f"grad of {n}")
