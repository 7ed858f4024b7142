"""``function: {save: []}``: a custom Function that saves nothing (a gradient reversal, whose
backward reads only grad_output). ``save: []`` was refused, and without ``save:`` every input is
saved, so a second backward was predicted to raise and ``saved_tensors`` hooks to pack the
inputs; PyTorch does neither. Expected values from real torch, run here."""

from __future__ import annotations

from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from gen import check  # noqa: E402

TEXT = """
name: grad_reverse
dtype: float64
inputs:
  x: {value: [1, -2], requires_grad: true}
model:
  children:
    f:
      forward: "x * 1"
      function:
        name: GradReverse
        save: []
        backward: {x: "-grad_output"}
  forward: "f(x).sum()"
hooks:
  - {tensor: x}
variants:
  twice:
    steps: [forward, backward, backward]
  packs:
    hooks: [{saved_tensors: {pack: "x", unpack: "x"}}]
"""


class GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        return -g


def test_a_second_backward_runs_as_in_torch():
    x = torch.tensor([1., -2], dtype=torch.float64, requires_grad=True)
    calls = []
    x.register_hook(lambda g: calls.append(g.tolist()))
    loss = GradReverse.apply(x).sum()
    loss.backward()
    loss.backward()
    got = adjoint.loads(TEXT).solve().to_json()["variants"]["twice"]
    assert got.get("error") is None
    assert got["grads"]["x"]["value"] == x.grad.tolist() == [-2, -2]
    assert [c["args"]["grad"]["value"] for c in got["hook_calls"]] == calls


def test_no_saved_tensor_is_packed_as_in_torch():
    x = torch.tensor([1., -2], dtype=torch.float64, requires_grad=True)
    packed = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        loss = GradReverse.apply(x).sum()
    loss.backward()
    got = adjoint.loads(TEXT).solve().to_json()["variants"]["packs"]
    assert packed == []
    assert [c for c in got["hook_calls"] if c["kind"] in ("pack", "unpack")] == []
    assert got["grads"]["x"]["value"] == x.grad.tolist()


def test_verify_agrees():
    outcome = check(TEXT, timeout=60)
    assert outcome.ok, outcome.report()
