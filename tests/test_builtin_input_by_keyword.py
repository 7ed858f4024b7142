"""A built-in module handed its inputs by keyword (``attn(query=x, key=x, value=x)``,
``lin(input=o)``): Python binds ``forward(self, input)`` by name, but ``nn.Module._call_impl``
hands its hooks ``args`` as the call passed them, ``()``, and ``BackwardHook.setup_input_hook``
wraps no keyword argument. So a full backward hook has no input node and fires from the
output's ``BackwardHookFunctionBackward`` with ``grad_input = ()``, after PyTorch's warning that no
input requires gradients. adjoint refused these calls (exit 2). The expected values are real
torch's, run here (and, without torch, copied from a torch 2.13 run)."""

from __future__ import annotations

import warnings

import pytest

import adjoint

PATH = "tests/data/regressions/builtin_input_by_keyword_hooks.yaml"
NO_INPUTS = ("Full backward hook is firing when gradients are computed with respect to module outputs since no "
             "inputs require gradients.")
# torch 2.13, float64: the loss, x.grad, and each full backward hook's (grad_input, grad_output)
LOSS = 18.51276460258564
X_GRAD = [[[9.084523002078578, -0.5104808937925602]], [[13.68759889919566, 19.036541245954684]]]
CALLS = [("lin", [], [[[[2.0, 2.0]], [[2.0, 2.0]]]]),
         ("attn", [], [[[[8.0, 2.0]], [[8.0, 2.0]]], None])]


def _torch_run():
    torch = pytest.importorskip("torch")
    attn = torch.nn.MultiheadAttention(2, 1).double()
    lin = torch.nn.Linear(2, 2).double()
    with torch.no_grad():
        attn.in_proj_weight.copy_(torch.tensor([[1, 0.5], [0.2, -1], [0.3, 0.4], [-0.5, 1], [1, 1], [0.1, -0.2]],
                                                dtype=torch.float64))
        attn.in_proj_bias.zero_()
        attn.out_proj.bias.zero_()
        attn.out_proj.weight.copy_(torch.tensor([[1, -1], [0.5, 0.5]]))
        lin.weight.copy_(torch.tensor([[1., 2], [3, -1]]))
        lin.bias.copy_(torch.tensor([0.5, 0]))
    calls = []

    def rec(name):
        return lambda m, gi, go: calls.append((name, [g.tolist() for g in gi],
                                               [None if g is None else g.tolist() for g in go]))
    attn.register_full_backward_hook(rec("attn"))
    lin.register_full_backward_hook(rec("lin"))
    x = torch.tensor([[[0.5, -1]], [[1.5, 0.25]]], dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        o, _ = attn(query=x, key=x, value=x)
        loss = (lin(input=o) * 2).sum()
        loss.backward()
    return loss.item(), x.grad.tolist(), calls, [str(w.message) for w in caught]


def test_full_hooks_of_keyword_calls_get_no_grad_input():
    got = adjoint.load(PATH).solve().to_json()["variants"]["full"]
    assert got.get("error") is None
    assert got["loss"]["value"] == pytest.approx(LOSS, rel=1e-12)
    for row, want in zip(got["grads"]["x"]["value"], X_GRAD):
        assert row[0] == pytest.approx(want[0], rel=1e-12)
    full = [c for c in got["hook_calls"] if c["kind"] == "full_backward"]
    assert [(c["target"], c["args"]["grad_input"]) for c in full] == [(t, gi) for t, gi, _ in CALLS]
    assert [[None if g is None else g["value"] for g in c["args"]["grad_output"]] for c in full] \
        == [go for _, _, go in CALLS]
    assert [w["message"].startswith(NO_INPUTS) and w["during"] == "backward" for w in got["warnings"]] == [True] * 2


def test_the_expected_values_are_torchs():
    loss, x_grad, calls, messages = _torch_run()
    assert loss == pytest.approx(LOSS, rel=1e-12)
    for row, want in zip(x_grad, X_GRAD):
        assert row[0] == pytest.approx(want[0], rel=1e-12)
    assert [(n, gi) for n, gi, _ in calls] == [(t, gi) for t, gi, _ in CALLS]
    assert [go for _, _, go in calls] == [go for _, _, go in CALLS]
    assert [m.startswith(NO_INPUTS) for m in messages] == [True] * 2
