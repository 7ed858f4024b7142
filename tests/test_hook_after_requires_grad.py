"""Split training: ``feat = enc(x).detach()`` then ``feat.requires_grad_()`` on a line of its own.
A tensor hook on ``feat`` went on right after ``feat``'s line, where its tensor does not require
grad yet, and the answer was PyTorch's "cannot register a hook on a tensor that doesn't require
gradient" -- which a PyTorch user never meets, since their ``register_hook`` line must come after
``requires_grad_()``. Now a tensor hook (of every kind, multi_grad included) on a name whose
tensor does not require grad at its line goes on right after the first later statement of that
forward making it require grad in place; none: at its line, as before (PyTorch's error). Found by
a trial with forum-style files; expected values from real torch, run here."""

from __future__ import annotations

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from gen import check  # noqa: E402

TEXT = """
name: split_training
dtype: float64
inputs:
  x: {value: [[1, 2], [-1, 0.5]], requires_grad: false}
model:
  children:
    enc: {type: Linear, params: {weight: [[1, -1], [0.5, 0.5]], bias: [0.25, 0]}}
    head: {type: Linear, params: {weight: [[2, 1]], bias: [0.5]}}
  forward: |
FORWARD
loss: "y.pow(2).mean()"
hooks:
HOOKS
"""

CASES = {
    # the idiom: hooks of every tensor kind on the new leaf; the encoder's hooks never fire
    "leaf": ("""
    f = enc(x)
    feat = f.detach()
    feat.requires_grad_()
    return head(feat * 3)
""", """
  - {tensor: feat, returns: "grad * 2"}
  - {tensor: feat, kind: post_accumulate_grad}
  - {tensor: feat, kind: retain_grad}
  - {module: enc, kind: full_backward}
  - {module: head, kind: full_backward}
  - {tensor: enc.weight}
"""),
    # a use of feat before requires_grad_ gets no gradient; the keyword form counts too
    "used_before": ("""
    f = enc(x)
    feat = f.detach()
    early = feat * 0.5
    feat.requires_grad_(requires_grad=True)
    return head(feat * 3 + early)
""", """
  - {tensor: feat, returns: "grad * 2"}
  - {tensor: feat, kind: post_accumulate_grad}
"""),
    # h's hook goes on at h's line; the multi_grad hook once feat's can (listed before feat's
    # doubling hook, it sees the raw gradient)
    "multi_grad": ("""
    f = enc(x)
    feat = f.detach()
    h = f * 2
    feat.requires_grad_(True)
    return head(feat * 3) + h.sum()
""", """
  - {tensor: h}
  - {multi_grad: [feat, h]}
  - {tensor: feat, returns: "grad * 2"}
  - {module: enc, kind: full_backward}
"""),
}


def _torch_run(case):
    """The case as a PyTorch user writes it: every hook registered where their code allows."""
    enc, head = torch.nn.Linear(2, 2).double(), torch.nn.Linear(2, 1).double()
    with torch.no_grad():
        enc.weight.copy_(torch.tensor([[1., -1], [0.5, 0.5]]))
        enc.bias.copy_(torch.tensor([0.25, 0]))
        head.weight.copy_(torch.tensor([[2., 1]]))
        head.bias.copy_(torch.tensor([0.5]))
    x = torch.tensor([[1., 2], [-1, 0.5]], dtype=torch.float64)
    calls = []

    def tensor_hook(label, returns=None):
        def fn(g):
            calls.append((label, g.tolist()))
            return None if returns is None else returns(g)
        return fn

    def module_hook(label):
        return lambda m, gi, go: calls.append((label, [g.tolist() for g in gi if g is not None]))

    if case in ("leaf", "multi_grad"):
        enc.register_full_backward_hook(module_hook("full_backward@enc"))
    if case == "leaf":
        head.register_full_backward_hook(module_hook("full_backward@head"))
        enc.weight.register_hook(tensor_hook("hook@enc.weight"))
    f = enc(x)
    feat = f.detach()
    if case == "leaf":
        feat.requires_grad_()
        feat.register_hook(tensor_hook("hook@feat", lambda g: g * 2))
        feat.register_post_accumulate_grad_hook(lambda t: calls.append(("post_accumulate_grad@feat", t.grad.tolist())))
        feat.retain_grad()
        y = head(feat * 3)
    elif case == "used_before":
        early = feat * 0.5
        feat.requires_grad_(requires_grad=True)
        feat.register_hook(tensor_hook("hook@feat", lambda g: g * 2))
        feat.register_post_accumulate_grad_hook(lambda t: calls.append(("post_accumulate_grad@feat", t.grad.tolist())))
        y = head(feat * 3 + early)
    else:
        h = f * 2
        h.register_hook(tensor_hook("hook@h"))
        feat.requires_grad_(True)
        torch.autograd.graph.register_multi_grad_hook(
            (feat, h), lambda gs: calls.append(("multi_grad@feat,h", [g.tolist() for g in gs])))
        feat.register_hook(tensor_hook("hook@feat", lambda g: g * 2))
        y = head(feat * 3) + h.sum()
    y.pow(2).mean().backward()
    grads = {"feat": feat.grad, "enc.weight": enc.weight.grad, "head.weight": head.weight.grad}
    return calls, {k: None if g is None else g.tolist() for k, g in grads.items()}


def _handed(call):
    args = call["args"]
    if call["kind"] == "full_backward":
        return [g["value"] for g in args["grad_input"] if g is not None]
    if call["kind"] == "post_accumulate_grad":
        return args["tensor"]["value"]
    if "grads" in args:
        return [g["value"] for g in args["grads"]]
    return args["grad"]["value"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_hooks_go_on_after_requires_grad(case):
    forward, hooks = CASES[case]
    text = TEXT.replace("FORWARD\n", forward.lstrip("\n")).replace("HOOKS\n", hooks.lstrip("\n"))
    calls, grads = _torch_run(case)
    got = adjoint.loads(text).solve().to_json()["variants"]["default"]
    assert got.get("error") is None, got.get("error")
    assert [(c["label"], _handed(c)) for c in got["hook_calls"]] == calls
    for name, value in grads.items():
        g = got["grads"].get(name)
        assert (None if g is None else g["value"]) == value, name
    assert check(text, timeout=60).ok


def test_without_such_a_statement_the_registration_is_refused():
    """``requires_grad_(False)`` makes nothing require grad: the hook goes on at feat's line and
    PyTorch's error is the answer, as a script registering it anywhere meets."""
    feat = torch.zeros(2).detach()
    with pytest.raises(RuntimeError) as torch_error:
        feat.register_hook(lambda g: g)
    forward = "    f = enc(x)\n    feat = f.detach()\n    feat.requires_grad_(False)\n    return head(feat * 3)\n"
    text = TEXT.replace("FORWARD\n", forward).replace("HOOKS\n", "  - {tensor: feat}\n")
    got = adjoint.loads(text).solve().to_json()["variants"]["default"]
    assert got["error"]["type"] == "RuntimeError"
    assert got["error"]["message"] == str(torch_error.value)
