"""docs/cookbook.md: every answer it gives, checked on the problem that answers it.

The problems directly in problems/ are also run in torch by ``adjoint verify problems/``
(tests/test_verify.py); here each claim the cookbook makes is checked by hand (numbers
derived in the comments). The problems in problems/v2/ use features ``verify``'s torch side
does not run yet (in-place modules, saved-tensor hooks): they are written out in real
PyTorch below and compared call by call.
"""

from __future__ import annotations

import os
import re

import pytest
import sympy

import adjoint
from adjoint.effects import hook_effects

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COOKBOOK = os.path.join(ROOT, "docs", "cookbook.md")


def solve(name: str):
    return adjoint.load(os.path.join(ROOT, "problems", f"{name}.yaml")).solve()


def test_every_problem_the_cookbook_names_exists_and_solves():
    text = open(COOKBOOK, encoding="utf-8").read()
    named = sorted(set(re.findall(r"problems/((?:v2/)?[a-z_]+)\.yaml", text)))
    assert len(named) >= 9
    for name in named:
        assert solve(name).variants


def test_zeros_or_none():
    pred = solve("zeros_vs_none")
    # y = lin(x * c) = 2 (1.5 * 3) + 1 (-2 * 0.5) + 0.5 = 8.5; dloss/dy = 17; lin's grad_input = 17 w = [34, 17];
    # scale's grad_input for x = [34 * 3, 17 * 0.5]; for c: a zero tensor, though c does not require grad
    (call,) = pred["zeros"].hook_calls
    x, c = call.args["grad_input"]
    assert x.tolist() == [102.0, 8.5] and c is not None and c.tolist() == [0.0, 0.0]
    first, second = pred["frozen_input"].hook_calls
    assert (first.kind, second.kind) == ("full_backward", "hook")      # before lin.weight's gradient exists
    assert first.args["grad_input"] == (None,) and first.args["grad_output"][0].tolist() == [17.0]
    assert second.args["grad"].tolist() == [[17 * 4.5, 17 * -1.0]]     # dloss/dW = 17 * (x * c)


def test_legacy_or_full():
    pred = solve("slinear")
    assert pred["legacy"].hook_calls[0].node == "PowBackward0"
    assert pred["full"].hook_calls[0].node == "BackwardHookFunctionBackward"


def test_firing_order():
    labels = [h.label.split()[0] for h in solve("hook_order").variants[0].hook_calls]
    assert labels[:2] == ["1", "2"]          # forward hooks during the forward
    assert labels.index("6") < labels.index("7") < labels.index("8")   # tensor hook, node pre, node post


def test_rescaling_depends_on_where():
    pred = solve("rescaling")
    lin2 = {"lin2.weight", "lin2.bias"}
    for variant, halved in (("tensor_hook", {"x", "lin1.weight", "lin1.bias"}),
                            ("backward_pre", {"x", "lin1.weight", "lin1.bias"} | lin2),
                            ("full_backward", {"x", "lin1.weight", "lin1.bias"})):
        e = hook_effects(pred[variant])
        assert {c.name for c in e.changes} == halved, variant
        assert all(str(c.ratio) == "1/2" for c in e.changes), variant
        assert set(e.unchanged) == ({"x", "lin1.weight", "lin1.bias"} | lin2) - halved, variant


def test_early_full_hook_sees_no_weight_grad():
    pred = solve("early_full_hook")
    order = [(h.kind, h.target) for h in pred["data_input"].hook_calls]
    assert order[0] == ("full_backward", "fc") and {t for _, t in order[1:]} == {"fc.weight", "fc.bias"}
    order = [(h.kind, h.target) for h in pred["input_requires_grad"].hook_calls]
    assert order[-1] == ("full_backward", "fc")


def test_symbolic_closed_forms():
    pred = solve("symbolic")
    w, b, x0 = sympy.symbols("w b x0")
    dh = 2 * (w * x0 + b - 1)                      # dloss/dh, loss = (w x0 + b - 1)^2
    observe, doubled = pred["observe"], pred["doubled"]
    assert sympy.simplify(sympy.sympify(observe.hook_calls[0].args["grad"].strings()[0]) - dh) == 0
    assert sympy.simplify(sympy.sympify(observe.grads["x"].strings()[0]) - w * dh) == 0
    assert sympy.simplify(sympy.sympify(doubled.grads["lin.weight"].strings()[0][0]) - 2 * x0 * dh) == 0
    assert [str(c.ratio) for c in hook_effects(doubled).changes] == ["2", "2", "2"]
    numeric = adjoint.load(os.path.join(ROOT, "problems", "symbolic.yaml")).solve(numeric=True)
    assert numeric["doubled"].grads["x"].tolist() == [0.5 * 2 * 2 * (0.5 * 1.5 - 0.25 - 1)]


# ---- problems/v2: written out in real PyTorch ------------------------------------------------

@pytest.mark.torch
def test_inplace_hooks_match_torch():
    import torch

    pred = solve("v2/inplace_hooks")
    lin = torch.nn.Linear(2, 2, dtype=torch.float64)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1, 0.5], [0.25, 1]]))
        lin.bias.copy_(torch.tensor([0, 0.5]))
    x = torch.tensor([1.5, -2], dtype=torch.float64, requires_grad=True)
    calls = []
    h = lin(x)
    h.register_hook(lambda g: calls.append(g.clone()))   # registered when lin returned
    h.retain_grad()
    y = torch.nn.ReLU(inplace=True)(h)
    (y * y).sum().backward()
    v = pred["tensor_hooks"]
    assert len(v.hook_calls) == len(calls) == 0          # the hook stayed with the overwritten value
    assert v.grads["lin"].tolist() == h.grad.tolist() and v.grads["x"].tolist() == x.grad.tolist()
    assert v.grads["lin.weight"].tolist() == lin.weight.grad.tolist()
    assert v.values["lin"].tolist() == h.detach().tolist()   # the ReLU wrote into lin's output

    lin.register_full_backward_hook(lambda m, gi, go: None)
    with pytest.raises(RuntimeError) as theirs:
        torch.nn.ReLU(inplace=True)(lin(x))
    err = pred["relu_after_hooked_module"].error
    assert err is not None and err.during == "forward" and err.message == str(theirs.value)


@pytest.mark.torch
@pytest.mark.parametrize("variant, unpack_factor, scoped", [("observe", 1, False), ("scaled_unpack", 2, False),
                                                            ("scoped", 1, True)])
def test_saved_tensors_match_torch(variant, unpack_factor, scoped):
    import contextlib

    import torch

    log = []

    def pack(t):
        log.append(("pack", t.detach().clone()))
        return t

    def unpack(t):
        out = t * unpack_factor
        log.append(("unpack", out.detach().clone()))
        return out

    x = torch.tensor([0.5, -1], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([2, 3], dtype=torch.float64, requires_grad=True)
    hooks = lambda: torch.autograd.graph.saved_tensors_hooks(pack, unpack)  # noqa: E731
    with contextlib.nullcontext() if scoped else hooks():
        h = x * w
        with hooks() if scoped else contextlib.nullcontext():
            y = torch.tanh(h)
        loss = (y ** 2).sum()
    loss.backward()
    v = solve("v2/saved_tensors")[variant]
    ours = [(c.kind, c.returned.tolist()) for c in v.hook_calls]
    theirs = [(kind, t.tolist()) for kind, t in log]
    assert [k for k, _ in ours] == [k for k, _ in theirs]
    for (_, a), (_, b) in zip(ours, theirs):
        assert a == pytest.approx(b, rel=1e-12)
    assert v.grads["x"].tolist() == pytest.approx(x.grad.tolist(), rel=1e-12)
    assert v.grads["w"].tolist() == pytest.approx(w.grad.tolist(), rel=1e-12)
