"""The loss functions against real torch 2.13, float64: for every function and reduction, the
node chain behind the loss (names, edges, creation order, leaves), the loss value and every
leaf's gradient; then what the nodes save (pack / unpack sequences) and the kinks.

Each case is written twice: the problem-file expression, and the same call in torch by hand.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from conftest import require_torch

torch = require_torch()
import torch.nn.functional as F  # noqa: E402 (after the check)

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402
from nodechain import chain, leaf_names  # noqa: E402

warnings.filterwarnings("ignore", category=UserWarning)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
F64 = torch.float64

#: The tensors every case may use: (value, requires_grad, dtype). x: logits or predictions;
#: z: a float target that requires grad; q: probabilities in [0, 1] (incl. both ends); p: class
#: probabilities per row; t: class indices; w, pw: per-class weights; x3 / t3, x4 / t4: K-d.
X = [[0.5, -1.0, 2.0], [0.25, 0.0, -0.5]]
TENSORS = {
    "x": (X, True, None),
    "z": ([[0.0, 1.0, 2.5], [0.25, 0.5, -0.5]], True, None),
    "u": ([[0.0, 1.0, 2.5], [0.25, 0.5, -0.5]], False, None),
    "b": ([0.0, 1.0, 0.5], True, None),
    "q": ([[0.25, 0.0, 1.0], [0.5, 0.75, 0.2]], True, None),
    "r": ([[0.0, 1.0, 0.5], [1.0, 0.25, 0.75]], False, None),
    "rz": ([[0.0, 1.0, 0.5], [1.0, 0.25, 0.75]], True, None),
    "qi": ([[0.25, 0.5, 0.125], [0.5, 0.75, 0.2]], True, None),
    "p": ([[0.25, 0.25, 0.5], [1.0, 0.0, 0.0]], False, None),
    "pz": ([[0.25, 0.25, 0.5], [1.0, 0.0, 0.0]], True, None),
    "p1": ([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]], False, None),
    "t": ([2, 0], False, "int64"),
    "ti": ([2, 1], False, "int64"),
    "tn": ([-100, -100], False, "int64"),
    "tb": ([3, 1], False, "int64"),
    "w": ([1.0, 2.0, 0.5], False, None),
    "pw": ([3.0, 0.5, 2.0], False, None),
    "x1": ([0.5, -1.0, 2.0], True, None),
    "t0": (1, False, "int64"),
    "x3": ([[[0.5, -1.0], [2.0, 0.0], [0.25, 1.5]], [[1.0, 0.5], [-0.5, 0.0], [0.0, 2.0]]], True, None),
    "t3": ([[0, 2], [1, 1]], False, "int64"),
    "t3i": ([[0, 2], [-1, 1]], False, "int64"),
    "x4": ([[[[0.5, -1.0]], [[2.0, 0.0]], [[0.25, 1.5]]]], True, None),
    "t4": ([[[2, 0]]], False, "int64"),
}


def _literal(v) -> str:
    return str(v).replace("'", "")


def problem_text(loss: str, names: list[str], hooks: str = "", dtype: str = "float64") -> str:
    """A problem whose root returns its first input and whose loss is ``loss``: the leaves that
    require grad are inputs (in order), the others targets."""
    inputs = [n for n in names if TENSORS[n][1]]
    targets = [n for n in names if not TENSORS[n][1]]
    lines = [f"name: case\ndtype: {dtype}", "inputs:"]
    for n in inputs:
        lines.append(f"  {n}: {{value: {_literal(TENSORS[n][0])}, requires_grad: true}}")
    if targets:
        lines.append("targets:")
        for n in targets:
            value, _, dt = TENSORS[n]
            lines.append(f"  {n}: {{value: {_literal(value)}" + (f", dtype: {dt}" if dt else "") + "}")
    lines.append(f"model:\n  inputs: [{', '.join(inputs)}]\n  forward: \"{inputs[0]}\"")
    lines.append(f"loss: '{loss}'")
    return "\n".join(lines) + "\n" + hooks


def torch_tensors(names: list[str]) -> dict:
    out = {}
    for n in names:
        value, rg, dt = TENSORS[n]
        out[n] = torch.tensor(value, dtype=torch.int64 if dt else F64, requires_grad=rg)
    return out


def solve(loss: str, names: list[str], hooks: str = ""):
    return adjoint.loads(problem_text(loss, names, hooks)).solve().variants[0]


def floats(v):
    v = getattr(v, "value", v)  # an int64 tensor's record carries its dtype (adjoint.engine.graph.Typed)
    return np.array(v.floats(), dtype=float)


def close(ours, theirs) -> bool:
    a = floats(ours)
    b = np.asarray(theirs.detach(), dtype=float)
    return a.shape == b.shape and np.allclose(a, b, rtol=1e-10, atol=1e-12, equal_nan=True)


def check_against_torch(loss: str, names: list[str], fn) -> None:
    v = solve(loss, names)
    T = torch_tensors(names)
    ref = fn(T)
    fwd = v.run.forward
    ours = fwd.loss
    assert chain(ours, leaf_names({n: fwd.names[n] for n in names})) == chain(ref, leaf_names(T)), loss
    assert close(ours.value, ref), (loss, ours.value.floats(), ref)
    ref.backward()
    grads = v.run.grads()
    for n in names:
        if TENSORS[n][1]:
            assert close(grads[n], T[n].grad), (loss, n, grads[n].floats(), T[n].grad)


# ----------------------------------------------------------------------------- the cases

def _sum_if_none(expr: str, reduction: str) -> str:
    return f"sum({expr})" if reduction == "none" else expr


REDUCTIONS = ("mean", "sum", "none")

#: (problem-file call with {r} for the reduction, tensors, the same in torch)
CASES = [
    ("mse_loss(x, u, reduction={r})", ["x", "u"], lambda T, r: F.mse_loss(T["x"], T["u"], reduction=r)),
    ("mse_loss(x, z, reduction={r})", ["x", "z"], lambda T, r: F.mse_loss(T["x"], T["z"], reduction=r)),
    ("mse_loss(x, b, reduction={r})", ["x", "b"], lambda T, r: F.mse_loss(T["x"], T["b"], reduction=r)),
    ("mse_loss(b, x, reduction={r})", ["x", "b"], lambda T, r: F.mse_loss(T["b"], T["x"], reduction=r)),
    ("mse_loss(x, z, reduction={r}, weight=r)", ["x", "z", "r"],
     lambda T, r: F.mse_loss(T["x"], T["z"], reduction=r, weight=T["r"])),
    ("l1_loss(x, z, reduction={r})", ["x", "z"], lambda T, r: F.l1_loss(T["x"], T["z"], reduction=r)),
    ("l1_loss(x, b, reduction={r})", ["x", "b"], lambda T, r: F.l1_loss(T["x"], T["b"], reduction=r)),
    ("l1_loss(x, z, reduction={r}, weight=r)", ["x", "z", "r"],
     lambda T, r: F.l1_loss(T["x"], T["z"], reduction=r, weight=T["r"])),
    ("smooth_l1_loss(x, z, reduction={r}, beta=0.5)", ["x", "z"],
     lambda T, r: F.smooth_l1_loss(T["x"], T["z"], reduction=r, beta=0.5)),
    ("smooth_l1_loss(x, u, reduction={r})", ["x", "u"], lambda T, r: F.smooth_l1_loss(T["x"], T["u"], reduction=r)),
    ("smooth_l1_loss(x, z, reduction={r}, beta=0)", ["x", "z"],
     lambda T, r: F.smooth_l1_loss(T["x"], T["z"], reduction=r, beta=0.0)),
    ("huber_loss(x, z, reduction={r}, delta=0.5)", ["x", "z"],
     lambda T, r: F.huber_loss(T["x"], T["z"], reduction=r, delta=0.5)),
    ("huber_loss(x, u, {r}, 2)", ["x", "u"], lambda T, r: F.huber_loss(T["x"], T["u"], r, 2.0)),
    ("huber_loss(x, z, reduction={r}, weight=r)", ["x", "z", "r"],
     lambda T, r: F.huber_loss(T["x"], T["z"], reduction=r, weight=T["r"])),
    ("binary_cross_entropy(q, r, reduction={r})", ["q", "r"],
     lambda T, r: F.binary_cross_entropy(T["q"], T["r"], reduction=r)),
    ("binary_cross_entropy(qi, rz, reduction={r})", ["qi", "rz"],
     lambda T, r: F.binary_cross_entropy(T["qi"], T["rz"], reduction=r)),
    ("binary_cross_entropy(sigmoid(x), r, w, reduction={r})", ["x", "r", "w"],
     lambda T, r: F.binary_cross_entropy(torch.sigmoid(T["x"]), T["r"], T["w"], reduction=r)),
    ("binary_cross_entropy_with_logits(x, r, reduction={r})", ["x", "r"],
     lambda T, r: F.binary_cross_entropy_with_logits(T["x"], T["r"], reduction=r)),
    ("binary_cross_entropy_with_logits(x, rz, w, reduction={r})", ["x", "rz", "w"],
     lambda T, r: F.binary_cross_entropy_with_logits(T["x"], T["rz"], T["w"], reduction=r)),
    ("binary_cross_entropy_with_logits(x, rz, reduction={r}, pos_weight=pw)", ["x", "rz", "pw"],
     lambda T, r: F.binary_cross_entropy_with_logits(T["x"], T["rz"], reduction=r, pos_weight=T["pw"])),
    ("binary_cross_entropy_with_logits(x, r, w, reduction={r}, pos_weight=pw)", ["x", "r", "w", "pw"],
     lambda T, r: F.binary_cross_entropy_with_logits(T["x"], T["r"], T["w"], reduction=r, pos_weight=T["pw"])),
    ("nll_loss(x, t, reduction={r})", ["x", "t"], lambda T, r: F.nll_loss(T["x"], T["t"], reduction=r)),
    ("nll_loss(x, ti, w, reduction={r}, ignore_index=1)", ["x", "ti", "w"],
     lambda T, r: F.nll_loss(T["x"], T["ti"], T["w"], reduction=r, ignore_index=1)),
    ("nll_loss(x1, t0, reduction={r})", ["x1", "t0"], lambda T, r: F.nll_loss(T["x1"], T["t0"], reduction=r)),
    ("nll_loss(x3, t3i, w, reduction={r}, ignore_index=-1)", ["x3", "t3i", "w"],
     lambda T, r: F.nll_loss(T["x3"], T["t3i"], T["w"], reduction=r, ignore_index=-1)),
    ("nll_loss(x4, t4, reduction={r})", ["x4", "t4"], lambda T, r: F.nll_loss(T["x4"], T["t4"], reduction=r)),
    ("cross_entropy(x, t, reduction={r})", ["x", "t"], lambda T, r: F.cross_entropy(T["x"], T["t"], reduction=r)),
    ("cross_entropy(x, ti, w, ignore_index=1, reduction={r})", ["x", "ti", "w"],
     lambda T, r: F.cross_entropy(T["x"], T["ti"], T["w"], ignore_index=1, reduction=r)),
    ("cross_entropy(x, t, reduction={r}, label_smoothing=0.25)", ["x", "t"],
     lambda T, r: F.cross_entropy(T["x"], T["t"], reduction=r, label_smoothing=0.25)),
    ("cross_entropy(x, ti, w, ignore_index=1, reduction={r}, label_smoothing=0.25)", ["x", "ti", "w"],
     lambda T, r: F.cross_entropy(T["x"], T["ti"], T["w"], ignore_index=1, reduction=r, label_smoothing=0.25)),
    ("cross_entropy(x1, t0, reduction={r}, label_smoothing=0.5)", ["x1", "t0"],
     lambda T, r: F.cross_entropy(T["x1"], T["t0"], reduction=r, label_smoothing=0.5)),
    ("cross_entropy(x3, t3, w, reduction={r}, label_smoothing=0.5)", ["x3", "t3", "w"],
     lambda T, r: F.cross_entropy(T["x3"], T["t3"], T["w"], reduction=r, label_smoothing=0.5)),
    ("cross_entropy(x3, t3i, reduction={r}, ignore_index=-1, label_smoothing=0.5)", ["x3", "t3i"],
     lambda T, r: F.cross_entropy(T["x3"], T["t3i"], reduction=r, ignore_index=-1, label_smoothing=0.5)),
    ("cross_entropy(x4, t4, reduction={r})", ["x4", "t4"], lambda T, r: F.cross_entropy(T["x4"], T["t4"], reduction=r)),
    ("cross_entropy(x1, b, w, reduction={r}, label_smoothing=0.25)", ["x1", "b", "w"],
     lambda T, r: F.cross_entropy(T["x1"], T["b"], T["w"], reduction=r, label_smoothing=0.25)),
    ("cross_entropy(x, p, reduction={r})", ["x", "p"], lambda T, r: F.cross_entropy(T["x"], T["p"], reduction=r)),
    ("cross_entropy(x, pz, w, reduction={r}, label_smoothing=0.25)", ["x", "pz", "w"],
     lambda T, r: F.cross_entropy(T["x"], T["pz"], T["w"], reduction=r, label_smoothing=0.25)),
    ("kl_div(x, r, reduction={r})", ["x", "r"], lambda T, r: F.kl_div(T["x"], T["r"], reduction=r)),
    ("kl_div(x, qi, reduction={r})", ["x", "qi"], lambda T, r: F.kl_div(T["x"], T["qi"], reduction=r)),
    ("kl_div(x, z, reduction={r}, log_target=True)", ["x", "z"],
     lambda T, r: F.kl_div(T["x"], T["z"], reduction=r, log_target=True)),
]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("expr,names,fn", CASES, ids=[c[0].split("(")[0] + f"-{i}" for i, c in enumerate(CASES)])
def test_function_matches_torch(expr, names, fn, reduction):
    loss = _sum_if_none(expr.format(r=f'"{reduction}"'), reduction)

    def ref(T):
        out = fn(T, reduction)
        return out.sum() if reduction == "none" else out

    check_against_torch(loss, names, ref)


@pytest.mark.parametrize("names,fn,expr", [
    (["x", "r"], lambda T: F.kl_div(T["x"], T["r"], reduction="batchmean"), 'kl_div(x, r, reduction="batchmean")'),
    (["x", "z"], lambda T: F.kl_div(T["x"], T["z"], reduction="batchmean", log_target=True),
     'kl_div(x, z, reduction="batchmean", log_target=True)'),
    (["x", "t"], lambda T: F.cross_entropy(T["x"], T["t"], label_smoothing=1.0),
     "cross_entropy(x, t, label_smoothing=1)"),
    (["x", "t"], lambda T: F.cross_entropy(T["x"], T["t"], label_smoothing=-0.5),
     "cross_entropy(x, t, label_smoothing=-0.5)"),
    (["x", "p"], lambda T: F.cross_entropy(F.relu(T["x"]), T["p"]), "cross_entropy(relu(x), p)"),
    (["x3", "t3"], lambda T: F.cross_entropy(T["x3"].transpose(1, 2).transpose(1, 2), T["t3"], reduction="sum"),
     'cross_entropy(x3.transpose(1, 2).transpose(1, 2), t3, reduction="sum")'),
    (["x3", "t3"], lambda T: F.nll_loss(T["x3"].transpose(0, 2).transpose(0, 2), T["t3"]),
     "nll_loss(x3.transpose(0, 2).transpose(0, 2), t3)"),
])
def test_more_chains_match_torch(names, fn, expr):
    check_against_torch(expr, names, fn)


# ----------------------------------------------------------------------------- saved tensors

SAVED = "hooks:\n  - {saved_tensors: {pack: \"x\", unpack: \"x\"}}\n"


def torch_saved_log(fn, T) -> list:
    log = []

    def pack(t):
        log.append(("pack", t.detach().clone()))
        return t

    def unpack(t):
        log.append(("unpack", t.detach().clone()))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        out = fn(T)
        out.backward()
    return log


@pytest.mark.parametrize("expr,names,fn", [
    ("mse_loss(x, z)", ["x", "z"], lambda T: F.mse_loss(T["x"], T["z"])),
    ("binary_cross_entropy(sigmoid(x), rz, w)", ["x", "rz", "w"],
     lambda T: F.binary_cross_entropy(torch.sigmoid(T["x"]), T["rz"], T["w"])),
    ("binary_cross_entropy_with_logits(x, r, w, pos_weight=pw)", ["x", "r", "w", "pw"],
     lambda T: F.binary_cross_entropy_with_logits(T["x"], T["r"], T["w"], pos_weight=T["pw"])),
    ("binary_cross_entropy_with_logits(x, r, pos_weight=pw)", ["x", "r", "pw"],
     lambda T: F.binary_cross_entropy_with_logits(T["x"], T["r"], pos_weight=T["pw"])),
    ('sum(nll_loss(x, ti, w, ignore_index=1, reduction="none"))', ["x", "ti", "w"],
     lambda T: F.nll_loss(T["x"], T["ti"], T["w"], ignore_index=1, reduction="none").sum()),
    ("cross_entropy(x, t, label_smoothing=0.25)", ["x", "t"],
     lambda T: F.cross_entropy(T["x"], T["t"], label_smoothing=0.25)),
    ("cross_entropy(x, ti, w, ignore_index=1, label_smoothing=0.25)", ["x", "ti", "w"],
     lambda T: F.cross_entropy(T["x"], T["ti"], T["w"], ignore_index=1, label_smoothing=0.25)),
    ("cross_entropy(x, pz, w, label_smoothing=0.25)", ["x", "pz", "w"],
     lambda T: F.cross_entropy(T["x"], T["pz"], T["w"], label_smoothing=0.25)),
    ("cross_entropy(x4, t4)", ["x4", "t4"], lambda T: F.cross_entropy(T["x4"], T["t4"])),
    ("kl_div(x, qi, reduction=\"sum\")", ["x", "qi"], lambda T: F.kl_div(T["x"], T["qi"], reduction="sum")),
    ("kl_div(x, z, reduction=\"sum\", log_target=True)", ["x", "z"],
     lambda T: F.kl_div(T["x"], T["z"], reduction="sum", log_target=True)),
])
def test_saved_tensors_match_torch(expr, names, fn):
    v = solve(expr, names, SAVED)
    ours = [(c.kind, c.args["x"]) for c in v.hook_calls]
    theirs = torch_saved_log(fn, torch_tensors(names))
    assert [k for k, _ in ours] == [k for k, _ in theirs]
    for (_, a), (_, b) in zip(ours, theirs):
        assert close(a, b), (floats(a), b)


def test_saved_tensors_keep_their_dtypes():
    """nll saves the int64 class indices; the smoothing term's masked_fill saves a bool mask
    and the mean divides by an int64 count (DivBackward0 saves it)."""
    v = solve("cross_entropy(x, t, label_smoothing=0.25)", ["x", "t"], SAVED)
    packs = [c for c in v.hook_calls if c.kind == "pack"]
    nodes = v.run.rt.nodes
    saved = [(sv.name, sv.tensor.dtype, n.name) for n in nodes for sv in n.saved]
    assert saved == [("result", "float64", "LogSoftmaxBackward0"), ("self", "float64", "NllLossBackward0"),
                     ("target", "int64", "NllLossBackward0"), ("total_weight", "float64", "NllLossBackward0"),
                     ("mask", "bool", "MaskedFillBackward0"), ("other", "int64", "DivBackward0")]
    assert len(packs) == 6
    T = torch_tensors(["x", "t"])
    dtypes = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: dtypes.append(str(t.dtype)) or t, lambda t: t):
        F.cross_entropy(T["x"], T["t"], label_smoothing=0.25)
    assert [d.replace("torch.", "") for d in dtypes] == [s[1] for s in saved]


# ----------------------------------------------------------------------------- kinks and exact values

def test_bce_clamps_log_at_minus_100_and_the_gradient_denominator():
    """Probabilities 0 and 1: each log is clamped at -100, so the loss is 100 per mismatched
    element (exactly), and the gradient divides by max(x (1 - x), 1e-12), 1e-12 as a float32
    holds it even in float64 (torch gives -1000000003995.8029 for x = 0, target 1)."""
    v = solve('binary_cross_entropy(q, r, reduction="none").sum()', ["q", "r"])
    loss = v.run.forward.names["loss"]
    T = torch_tensors(["q", "r"])
    ref = F.binary_cross_entropy(T["q"], T["r"], reduction="none")
    assert close(v.run.forward.names["loss"].value, ref.sum())
    ref.sum().backward()
    g = v.run.grads()["q"]
    assert close(g, T["q"].grad)
    from fractions import Fraction
    eps = Fraction(float(np.float32(1e-12)))
    # q[0][1] = 0 with target 1: -1 / eps; q[0][2] = 1 with target 0.5: 0.5 / eps
    assert g.strings()[0][1] == str(-1 / eps) and g.strings()[0][2] == str(Fraction(1, 2) / eps)
    assert loss.value.floats() > 100


def test_bce_target_gradient_is_infinite_at_0_and_1():
    v = solve("binary_cross_entropy(q, rz)", ["q", "rz"])
    T = torch_tensors(["q", "rz"])
    F.binary_cross_entropy(T["q"], T["rz"]).backward()
    ours = floats(v.run.grads()["rz"])
    assert np.array_equal(np.isinf(ours), torch.isinf(T["rz"].grad).numpy())
    assert close(v.run.grads()["rz"], T["rz"].grad)


def test_l1_at_zero_difference_has_zero_gradient():
    v = solve("l1_loss(x, z)", ["x", "z"])
    g = v.run.grads()["x"].strings()
    # x[1][0] = z[1][0] = 0.25: sgn(0) = 0
    assert g[1][0] == "0"


def test_smooth_l1_and_huber_at_the_joint_are_rational():
    # |x - z| = 0.5 = beta at [0][0] (x 0.5, z 0): derivative 1 / 6 (mean over 6) from both pieces
    v = solve("smooth_l1_loss(x, z, beta=0.5)", ["x", "z"])
    assert v.run.grads()["x"].strings()[0][0] == "1/6"
    v = solve("huber_loss(x, z, delta=0.5)", ["x", "z"])
    assert v.run.grads()["x"].strings()[0][0] == "1/12"


def test_losses_of_rationals_are_rational():
    for expr, names in [("mse_loss(x, z)", ["x", "z"]), ("smooth_l1_loss(x, z, beta=0.5)", ["x", "z"]),
                        ("huber_loss(x, z)", ["x", "z"]), ("nll_loss(x, ti, w, ignore_index=1)", ["x", "ti", "w"]),
                        ('kl_div(x, p1, reduction="batchmean")', ["x", "p1"]),
                        ("l1_loss(x, z)", ["x", "z"])]:
        v = solve(expr, names)
        assert v.run.forward.loss.value.rational, expr
        assert v.run.grads()["x"].rational, expr
    # kl_div's value holds t log t, but its gradient (-t / n) is rational
    assert solve('kl_div(x, r, reduction="batchmean")', ["x", "r"]).run.grads()["x"].rational


def test_nll_mean_over_nothing_is_refused():
    """Every target ignored: PyTorch's mean is 0/0 = nan; a forward that makes nan is refused."""
    T = torch_tensors(["x", "tn"])
    assert math.isnan(F.nll_loss(T["x"], T["tn"]).item())
    with pytest.raises(ProblemError, match="total weight of 0"):
        solve("nll_loss(x, tn)", ["x", "tn"])
    v = solve('nll_loss(x, tn, reduction="sum")', ["x", "tn"])
    assert v.run.forward.loss.value.strings() == "0" and v.run.grads()["x"].strings() == [["0"] * 3] * 2


# ----------------------------------------------------------------------------- int64 tensors

def test_int64_targets_stay_int64_through_views_and_indexing():
    v = solve("nll_loss(x[0], t[1]) + nll_loss(x, t.view(2))", ["x", "t"])
    rt = v.run.rt
    views = [app.outs[0] for app in rt.applications if app.prim in ("select", "view") and app.ins[0].dtype == "int64"]
    assert views and all(t.dtype == "int64" and not t.requires_grad for t in views)
    assert v.run.forward.names["t"].dtype == "int64"
    T = torch_tensors(["x", "t"])
    ref = F.nll_loss(T["x"][0], T["t"][1]) + F.nll_loss(T["x"], T["t"].view(2))
    assert close(v.run.forward.loss.value, ref)


# ----------------------------------------------------------------------------- PyTorch's refusals

def test_the_deprecated_arguments_are_refused():
    with pytest.raises(ProblemError, match="deprecated"):
        solve("nll_loss(x, t, size_average=True)", ["x", "t"])


@pytest.mark.parametrize("expr,names,fn", [
    ("cross_entropy(x, t, w, label_smoothing=1.5)", ["x", "t", "w"],
     lambda T: F.cross_entropy(T["x"], T["t"], T["w"], label_smoothing=1.5)),
    ("cross_entropy(x, p, label_smoothing=2)", ["x", "p"], lambda T: F.cross_entropy(T["x"], T["p"], label_smoothing=2.0)),
    ("cross_entropy(x, p, b[:2])", ["x", "p", "b"], lambda T: F.cross_entropy(T["x"], T["p"], T["b"][:2])),
    ("cross_entropy(x, ti, b)", ["x", "ti", "b"], lambda T: F.cross_entropy(T["x"], T["ti"], T["b"])),
    ("binary_cross_entropy_with_logits(x, b)", ["x", "b"], lambda T: F.binary_cross_entropy_with_logits(T["x"], T["b"])),
    ("binary_cross_entropy(q, b)", ["q", "b"], lambda T: F.binary_cross_entropy(T["q"], T["b"])),
    ("smooth_l1_loss(x, z, beta=-1)", ["x", "z"], lambda T: F.smooth_l1_loss(T["x"], T["z"], beta=-1.0)),
    ("huber_loss(x, z, delta=0)", ["x", "z"], lambda T: F.huber_loss(T["x"], T["z"], delta=0.0)),
    ("mse_loss(x, z, weight=w)", ["x", "z", "w"], lambda T: F.mse_loss(T["x"], T["z"], weight=T["w"])),
    ("nll_loss(x3, t3[0])", ["x3", "t3"], lambda T: F.nll_loss(T["x3"], T["t3"][0])),
    ("nll_loss(x4, t3)", ["x4", "t3"], lambda T: F.nll_loss(T["x4"], T["t3"])),
    ("nll_loss(x[0, 0], t0)", ["x", "t0"], lambda T: F.nll_loss(T["x"][0, 0], T["t0"])),
    ('kl_div(x, t, reduction="sum")', ["x", "t"], lambda T: F.kl_div(T["x"], T["t"], reduction="sum")),
    ("cross_entropy(t3, t) + x.sum()", ["x", "t3", "t"], lambda T: F.cross_entropy(T["t3"], T["t"]) + T["x"].sum()),
    ("cross_entropy(t4, t3) + x.sum()", ["x", "t4", "t3"], lambda T: F.cross_entropy(T["t4"], T["t3"]) + T["x"].sum()),
])
def test_pytorch_argument_errors_are_answers(expr, names, fn):
    """PyTorch's errors for arguments it refuses are the answer, with its type and message
    (their place among the hook calls: tests/data/regressions/*loss*_are_answers.yaml)."""
    v = solve(expr, names)
    with pytest.raises(Exception) as theirs:
        fn(torch_tensors(names))
    assert (v.error.type, v.error.message, v.error.during) == \
        (type(theirs.value).__name__, str(theirs.value), "forward")


@pytest.mark.parametrize("expr,names,message", [
    ("binary_cross_entropy(x, r)", ["x", "r"], "all elements of input should be between 0 and 1"),
    ("binary_cross_entropy(q, z)", ["q", "z"], "all elements of target should be between 0 and 1"),
    ("cross_entropy(x, u[0, :2])", ["x", "u"], "expected target dtype to be Long or Byte, but got Double"),
    ("nll_loss(x, tb)", ["x", "tb"], "Target 3 is out of bounds."),
])
def test_pytorch_errors_on_values_are_answers(expr, names, message):
    """The kernel's refusal of its operands' values is the answer (PyTorch's RuntimeError, checked
    against torch in tests/data/regressions/bce_values_out_of_range_raise.yaml; nll_loss's in
    tests/test_nll_target_errors.py; test_pytorch_refuses_the_same raises both in torch)."""
    v = solve(expr, names)
    kind = "IndexError" if "out of bounds" in message else "RuntimeError"
    assert (v.error.type, v.error.message, v.error.during) == (kind, message, "forward")


def test_an_unknown_reduction_is_an_answer():
    """_Reduction.get_enum's ValueError (checked against torch in
    tests/data/regressions/loss_unknown_reduction_raises.yaml)."""
    v = solve('mse_loss(x, z, reduction="batchmean")', ["x", "z"])
    T = torch_tensors(["x", "z"])
    with pytest.raises(ValueError) as theirs:
        F.mse_loss(T["x"], T["z"], reduction="batchmean")
    assert (v.error.type, v.error.message, v.error.during) == ("ValueError", str(theirs.value), "forward")


@pytest.mark.parametrize("expr,names,message", [
    ("cross_entropy(x, b)", ["x", "b"], "Expected input batch_size (2) to match target batch_size (3)."),
    ("cross_entropy(x, t[0])", ["x", "t"], "Expected input batch_size (2) to match target batch_size (0)."),
    ("nll_loss(x, b)", ["x", "b"], "Expected input batch_size (2) to match target batch_size (3)."),
])
def test_a_target_batch_size_that_differs_is_an_answer(expr, names, message):
    """nll_loss_nd's ValueError (test_pytorch_refuses_the_same raises it in torch; checked through verify
    in tests/data/regressions/cross_entropy_target_batch_size_raises.yaml)."""
    v = solve(expr, names)
    assert (v.error.type, v.error.message, v.error.during) == ("ValueError", message, "forward")


def test_the_log_softmax_before_the_batch_size_error_packs_as_torch_does():
    """cross_entropy's log_softmax node is made and its result packed before nll_loss_nd refuses
    (verify's torch side cannot name a node the failed call freed, so the pack is pinned here)."""
    hooks = 'hooks:\n  - {saved_tensors: {pack: "x", unpack: "x"}}\n'
    v = solve("cross_entropy(x, b)", ["x", "b"], hooks)
    T = torch_tensors(["x", "b"])
    packs = []
    with pytest.raises(ValueError) as theirs:
        with torch.autograd.graph.saved_tensors_hooks(lambda t: packs.append(t.detach().clone()) or t, lambda t: t):
            F.cross_entropy(T["x"], T["b"].detach())
    assert [(c.kind, c.node) for c in v.hook_calls] == [("pack", "LogSoftmaxBackward0")] * len(packs) == \
        [("pack", "LogSoftmaxBackward0")]
    assert close(v.hook_calls[0].args["x"], packs[0])
    assert (v.error.type, v.error.message) == ("ValueError", str(theirs.value))


def test_pytorch_refuses_the_same():
    T = torch_tensors(["x", "tb", "b", "ti", "t"])
    T["b"] = torch.tensor([0.0, 1.0, 0.5], dtype=F64, requires_grad=True)
    with pytest.raises(IndexError, match="Target 3 is out of bounds."):
        F.nll_loss(T["x"], T["tb"])
    with pytest.raises(ValueError, match=r"Expected input batch_size \(2\) to match target batch_size \(3\)."):
        F.cross_entropy(T["x"], T["b"].detach())
    with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte, but got Double"):
        F.cross_entropy(T["x"], T["b"].detach()[:2])
    with pytest.raises(ValueError, match=r"Expected input batch_size \(2\) to match target batch_size \(0\)."):
        F.cross_entropy(T["x"], T["t"][0])
    with pytest.raises(RuntimeError, match="not differentiable with respect to argument 'weight'"):
        F.cross_entropy(T["x"], T["ti"], T["b"])
