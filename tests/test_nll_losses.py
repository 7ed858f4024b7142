"""The likelihood and distance losses against real torch 2.13 (float64): F.poisson_nll_loss,
F.pairwise_distance, F.triplet_margin_loss, F.gaussian_nll_loss and their modules
(PoissonNLLLoss, PairwiseDistance, TripletMarginLoss, GaussianNLLLoss). Each case is solved by adjoint and run by hand in torch (tests/opcheck.py:
node chain with creation order and edges, values, every input's gradient, the legacy hook's
grad_input, the saved-tensor packs and unpacks); PyTorch's own refusals (type and exact
message) are compared with the error the answer predicts. Expected values come from torch."""

from __future__ import annotations

import pytest
from conftest import require_torch

torch = require_torch()
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import adjoint  # noqa: E402
from opcheck import Lambda, case, compare  # noqa: E402

X = [[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]]
POS = [[0.5, 1.0, 2.0], [1.5, 0.25, 3.0]]       # positive: log_input=False takes log(input + eps)
T = [[1.0, 0.5, 3.0], [2.0, 1.0, 0.25]]         # positive, some <= 1 (masked by full=True)


def _error_of(text: str):
    js = adjoint.loads(text).solve().variants[0].to_json()
    e = js.get("error")
    return None if e is None else (e["type"], e["message"])


def _torch_error(fn, *tensors):
    try:
        fn(*(torch.tensor(t, dtype=torch.float64, requires_grad=True) for t in tensors))
    except Exception as e:   # noqa: BLE001 -- whatever torch raises is the expected answer
        return type(e).__name__, str(e)
    raise AssertionError("torch raised nothing")


def _expr_text(expr: str, inputs: dict) -> str:
    lines = ["name: err", "dtype: float64", "inputs:"]
    lines += [f"  {n}: {{value: {v}, requires_grad: true}}" for n, v in inputs.items()]
    lines += ["model:", f"  inputs: [{', '.join(inputs)}]", f"  forward: \"{expr}\"", "loss: \"y.sum()\""]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- poisson_nll_loss

POISSON = [
    ("F.poisson_nll_loss(a, b)", lambda a, b: F.poisson_nll_loss(a, b), X, True),
    ("F.poisson_nll_loss(a, b, reduction='none')", lambda a, b: F.poisson_nll_loss(a, b, reduction="none"), X, True),
    ("F.poisson_nll_loss(a, b, reduction='sum')", lambda a, b: F.poisson_nll_loss(a, b, reduction="sum"), X, False),
    ("F.poisson_nll_loss(a, b, full=True)", lambda a, b: F.poisson_nll_loss(a, b, full=True), X, True),
    ("F.poisson_nll_loss(a, b, True, True, reduction='none')",
     lambda a, b: F.poisson_nll_loss(a, b, True, True, reduction="none"), X, False),
    ("F.poisson_nll_loss(a, b, log_input=False)", lambda a, b: F.poisson_nll_loss(a, b, log_input=False), POS, True),
    ("F.poisson_nll_loss(a, b, log_input=False, eps=0.5, reduction='sum')",
     lambda a, b: F.poisson_nll_loss(a, b, log_input=False, eps=0.5, reduction="sum"), POS, True),
    ("F.poisson_nll_loss(a, b, log_input=False, full=True, reduction='none')",
     lambda a, b: F.poisson_nll_loss(a, b, log_input=False, full=True, reduction="none"), POS, True),
    ("F.poisson_nll_loss(a, b[0])", lambda a, b: F.poisson_nll_loss(a, b[0]), X, True),
    ("F.poisson_nll_loss(a[1], b, full=True, reduction='none')",
     lambda a, b: F.poisson_nll_loss(a[1], b, full=True, reduction="none"), X, True),
]


@pytest.mark.parametrize("expr, fn, a, brg", POISSON, ids=[p[0] for p in POISSON])
def test_poisson_nll_loss_matches_torch(expr, fn, a, brg):
    assert case({"a": (a, True), "b": (T, brg)}, expr, fn) == []


@pytest.mark.parametrize("args, kwargs", [
    ("{}", {}),
    ("{args: {log_input: false, full: true, eps: 0.25, reduction: sum}}",
     {"log_input": False, "full": True, "eps": 0.25, "reduction": "sum"}),
    ("{args: {full: true, reduction: none}}", {"full": True, "reduction": "none"}),
])
def test_poisson_nll_loss_module_matches_torch(args, kwargs):
    child = "{type: PoissonNLLLoss" + ("" if args == "{}" else ", " + args[1:-1]) + "}"
    assert compare({"a": (POS, True), "b": (T, True)}, child, nn.PoissonNLLLoss(**kwargs)) == []


@pytest.mark.parametrize("expr, fn, shapes", [
    ("F.poisson_nll_loss(a, b, reduction='elementwise_mean')",
     lambda a, b: F.poisson_nll_loss(a, b, reduction="elementwise_mean"), (X, T)),
    ("F.poisson_nll_loss(a, b, reduction='avg')", lambda a, b: F.poisson_nll_loss(a, b, reduction="avg"), (X, T)),
    ("F.poisson_nll_loss(a, b)", lambda a, b: F.poisson_nll_loss(a, b), (X, [[1.0, 2.0], [0.5, 3.0]])),
])
def test_poisson_nll_loss_errors_are_torchs(expr, fn, shapes):
    assert _error_of(_expr_text(expr, {"a": shapes[0], "b": shapes[1]})) == _torch_error(fn, *shapes)


# ----------------------------------------------------------------------------- pairwise_distance, triplet_margin_loss

A = [[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]]
P = [[1.0, 0.0, 3.5], [2.0, 1.0, 0.5]]
N = [[0.0, 0.75, 1.0], [-2.0, 1.0, 0.25]]
PAIRWISE = [
    ("F.pairwise_distance(a, b)", lambda a, b: F.pairwise_distance(a, b), A, P),
    ("F.pairwise_distance(a, b, p=1, keepdim=True)", lambda a, b: F.pairwise_distance(a, b, p=1, keepdim=True), A, P),
    ("torch.pairwise_distance(a, b, 3, 0.25)", lambda a, b: torch.pairwise_distance(a, b, 3, 0.25), A, P),
    ("F.pairwise_distance(a, b, float('inf'))", lambda a, b: F.pairwise_distance(a, b, float("inf")), A, P),
    ("F.pairwise_distance(a, b)", lambda a, b: F.pairwise_distance(a, b), A, P[0]),
    ("F.pairwise_distance(a[1], b)", lambda a, b: F.pairwise_distance(a[1], b), A, P),
    ("F.pairwise_distance(a, b, 0.5)", lambda a, b: F.pairwise_distance(a, b, 0.5), A, N),
]


@pytest.mark.parametrize("expr, fn, a, b", PAIRWISE, ids=[f"{i}-{p[0]}" for i, p in enumerate(PAIRWISE)])
def test_pairwise_distance_matches_torch(expr, fn, a, b):
    assert case({"a": (a, True), "b": (b, True)}, expr, fn) == []


TRIPLET = [
    ("F.triplet_margin_loss(a, b, c)", lambda a, b, c: F.triplet_margin_loss(a, b, c)),
    ("F.triplet_margin_loss(a, b, c, margin=3, reduction='none')",
     lambda a, b, c: F.triplet_margin_loss(a, b, c, margin=3, reduction="none")),
    ("F.triplet_margin_loss(a, b, c, swap=True, reduction='none', margin=2.5)",
     lambda a, b, c: F.triplet_margin_loss(a, b, c, swap=True, reduction="none", margin=2.5)),
    ("F.triplet_margin_loss(a, b, c, p=1, reduction='sum')",
     lambda a, b, c: F.triplet_margin_loss(a, b, c, p=1, reduction="sum")),
    ("F.triplet_margin_loss(a, b, c, 1.5, 1, 0.125, True)",
     lambda a, b, c: F.triplet_margin_loss(a, b, c, 1.5, 1, 0.125, True)),
    ("F.triplet_margin_loss(a[0], b[0], c[1], margin=4)",
     lambda a, b, c: F.triplet_margin_loss(a[0], b[0], c[1], margin=4)),
]


@pytest.mark.parametrize("expr, fn", TRIPLET, ids=[t[0] for t in TRIPLET])
def test_triplet_margin_loss_matches_torch(expr, fn):
    assert case({"a": (A, True), "b": (P, True), "c": (N, False)}, expr, fn) == []


@pytest.mark.parametrize("args, kwargs", [
    ("", {}),
    ("margin: 3, swap: true, reduction: none", {"margin": 3.0, "swap": True, "reduction": "none"}),
    ("p: 1, eps: 0.25, reduction: sum", {"p": 1.0, "eps": 0.25, "reduction": "sum"}),
])
def test_triplet_margin_loss_module_matches_torch(args, kwargs):
    child = "{type: TripletMarginLoss" + (f", args: {{{args}}}" if args else "") + "}"
    assert compare({"a": (A, True), "b": (P, True), "c": (N, True)}, child, nn.TripletMarginLoss(**kwargs)) == []


@pytest.mark.parametrize("args, kwargs", [
    ("", {}),
    ("p: 1, eps: 0.25, keepdim: true", {"p": 1.0, "eps": 0.25, "keepdim": True}),
])
def test_pairwise_distance_module_matches_torch(args, kwargs):
    child = "{type: PairwiseDistance" + (f", args: {{{args}}}" if args else "") + "}"
    assert compare({"a": (A, True), "b": (P, True)}, child, nn.PairwiseDistance(**kwargs)) == []


@pytest.mark.parametrize("expr, fn, shapes", [
    ("F.triplet_margin_loss(a, b[0], c)", lambda a, b, c: F.triplet_margin_loss(a, b[0], c), (A, P, N)),
    ("F.triplet_margin_loss(a, b, c, margin=0)", lambda a, b, c: F.triplet_margin_loss(a, b, c, margin=0), (A, P, N)),
    ("F.triplet_margin_loss(a, b, c, margin=-1.5)",
     lambda a, b, c: F.triplet_margin_loss(a, b, c, margin=-1.5), (A, P, N)),
    ("F.triplet_margin_loss(a, b, c, margin=0.0)",
     lambda a, b, c: F.triplet_margin_loss(a, b, c, margin=0.0), (A, P, N)),
    ("F.triplet_margin_loss(a, b, c, margin=0, reduction='avg')",
     lambda a, b, c: F.triplet_margin_loss(a, b, c, margin=0, reduction="avg"), (A, P, N)),
    ("F.triplet_margin_loss(a, b, c)", lambda a, b, c: F.triplet_margin_loss(a, b, c),
     (A, [[1.0, 2.0], [0.5, 3.0]], N)),
])
def test_triplet_margin_loss_errors_are_torchs(expr, fn, shapes):
    got = _error_of(_expr_text(expr, {"a": shapes[0], "b": shapes[1], "c": shapes[2]}))
    assert got == _torch_error(fn, *shapes)


def test_triplet_elementwise_mean_warns_as_torch():
    import warnings
    text = _expr_text("F.triplet_margin_loss(a, b, c, reduction='elementwise_mean')", {"a": A, "b": P, "c": N})
    js = adjoint.loads(text).solve().variants[0].to_json()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        F.triplet_margin_loss(*(torch.tensor(t, dtype=torch.float64) for t in (A, P, N)), reduction="elementwise_mean")
    assert [w["message"] for w in js["warnings"]] == [str(w.message) for w in seen]


# ----------------------------------------------------------------------------- gaussian_nll_loss

V = [[1.0, 0.5, 2.0], [0.25, 0.0, 3.0]]    # one 0: clamped to eps under no_grad (no node)
GAUSSIAN = [
    ("F.gaussian_nll_loss(a, b, c)", lambda a, b, c: F.gaussian_nll_loss(a, b, c)),
    ("F.gaussian_nll_loss(a, b, c, full=True, reduction='none')",
     lambda a, b, c: F.gaussian_nll_loss(a, b, c, full=True, reduction="none")),
    ("F.gaussian_nll_loss(a, b, c, eps=0.5, reduction='sum')",
     lambda a, b, c: F.gaussian_nll_loss(a, b, c, eps=0.5, reduction="sum")),
    ("F.gaussian_nll_loss(a, b, c[:, 0], reduction='none')",
     lambda a, b, c: F.gaussian_nll_loss(a, b, c[:, 0], reduction="none")),
    ("F.gaussian_nll_loss(a, b, c[:, 2:])", lambda a, b, c: F.gaussian_nll_loss(a, b, c[:, 2:])),
    ("F.gaussian_nll_loss(a, b, c[1:])", lambda a, b, c: F.gaussian_nll_loss(a, b, c[1:])),
    ("F.gaussian_nll_loss(a, b, 0.5, True, reduction='none')",
     lambda a, b, c: F.gaussian_nll_loss(a, b, 0.5, True, reduction="none")),
    ("F.gaussian_nll_loss(a, b, 2.0)", lambda a, b, c: F.gaussian_nll_loss(a, b, 2.0)),
    ("F.gaussian_nll_loss(a[0], b[1], c[0, 1])", lambda a, b, c: F.gaussian_nll_loss(a[0], b[1], c[0, 1])),
]


@pytest.mark.parametrize("expr, fn", GAUSSIAN, ids=[g[0] for g in GAUSSIAN])
def test_gaussian_nll_loss_matches_torch(expr, fn):
    assert case({"a": (A, True), "b": (P, True), "c": (V, True)}, expr, fn) == []


@pytest.mark.parametrize("args, kwargs", [
    ("", {}),
    ("full: true, eps: 0.125, reduction: none", {"full": True, "eps": 0.125, "reduction": "none"}),
])
def test_gaussian_nll_loss_module_matches_torch(args, kwargs):
    child = "{type: GaussianNLLLoss" + (f", args: {{{args}}}" if args else "") + "}"
    assert compare({"a": (A, True), "b": (P, False), "c": (V, True)}, child, nn.GaussianNLLLoss(**kwargs)) == []


def test_gaussian_nll_loss_module_takes_a_number_var():
    forward = "h = m(a, b, 0.25)\nreturn (h * W).sum()"
    assert compare({"a": (A, True), "b": (P, True)}, "{type: GaussianNLLLoss, args: {reduction: none}}",
                   Lambda(lambda a, b: nn.GaussianNLLLoss(reduction="none")(a, b, 0.25)), forward) == []


@pytest.mark.parametrize("expr, fn, var", [
    ("F.gaussian_nll_loss(a, b, -0.5)", lambda a, b, c: F.gaussian_nll_loss(a, b, -0.5), V),
    ("F.gaussian_nll_loss(a, b, c - 0.5)", lambda a, b, c: F.gaussian_nll_loss(a, b, c - 0.5), V),
    ("F.gaussian_nll_loss(a, b, c)", lambda a, b, c: F.gaussian_nll_loss(a, b, c), V[0]),
    ("F.gaussian_nll_loss(a, b, c)", lambda a, b, c: F.gaussian_nll_loss(a, b, c), [[1.0, 2.0]]),
    ("F.gaussian_nll_loss(a, b, c[0, 0])", lambda a, b, c: F.gaussian_nll_loss(a, b, c[0, 0]), V),
    ("F.gaussian_nll_loss(a, b, c, reduction='avg')",
     lambda a, b, c: F.gaussian_nll_loss(a, b, c, reduction="avg"), V),
    ("F.gaussian_nll_loss(a, b, c[0], reduction='avg')",
     lambda a, b, c: F.gaussian_nll_loss(a, b, c[0], reduction="avg"), V),
    ("F.gaussian_nll_loss(a, b, 1)", lambda a, b, c: F.gaussian_nll_loss(a, b, 1), V),
    ("F.gaussian_nll_loss(a, b[:, :2], c)", lambda a, b, c: F.gaussian_nll_loss(a, b[:, :2], c), V),
])
def test_gaussian_nll_loss_errors_are_torchs(expr, fn, var):
    got = _error_of(_expr_text(expr, {"a": A, "b": P, "c": var}))
    assert got == _torch_error(fn, A, P, var)


@pytest.mark.parametrize("forward, var", [("h = m(a, b, 2.0)", 2.0), ("v = 3.0\nh = m(a, b, var=v)", 3.0),
                                          ("h = m(a, b, 4 / 2)", 2.0)])
def test_gaussian_nll_loss_module_takes_a_whole_float_var(forward, var):
    """A whole float (2.0, a name assigned 3.0, 4 / 2) is the Python float the call wrote: the module's
    F.gaussian_nll_loss fills a tensor with it, as torch does (an int would be its TypeError)."""
    forward += "\nreturn (h * W).sum()"
    assert compare({"a": (A, True), "b": (P, True)}, "{type: GaussianNLLLoss, args: {reduction: none}}",
                   Lambda(lambda a, b: nn.GaussianNLLLoss(reduction="none")(a, b, var)), forward) == []


def test_a_module_number_var_of_unknown_type_is_refused():
    text = ("name: t\ndtype: float64\ninputs:\n  a: {value: [1.0, 2.0], requires_grad: true}\n"
            "model:\n  children:\n    g: {type: GaussianNLLLoss}\n  forward: g(a, a * 2, 1)\n")
    with pytest.raises(adjoint.ProblemError, match="Python type is not known here"):
        adjoint.loads(text).solve()
