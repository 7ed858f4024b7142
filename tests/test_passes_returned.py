"""Every ``passes`` entry has ``returned``, as the answer's format lists it: the gradients a
``method: grad`` step returned, ``{}`` for a ``backward()`` step (it was left out). Found by a
contract audit; the grad step's values from real torch, run here."""

from __future__ import annotations

from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402

TEXT = """
name: passes_returned
dtype: float64
inputs:
  x: {value: [1, -2], requires_grad: true}
model:
  params: {w: [0.5, 0.25]}
  forward: "w * x"
loss: "sum(y ** 2)"
steps:
  - forward
  - {backward: {retain_graph: true}}
  - {backward: {method: grad, inputs: [w]}}
"""


def test_each_pass_has_returned():
    x = torch.tensor([1., -2], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([0.5, 0.25], dtype=torch.float64, requires_grad=True)
    loss = ((w * x) ** 2).sum()
    loss.backward(retain_graph=True)
    gw, = torch.autograd.grad(loss, [w])
    passes = adjoint.loads(TEXT).solve().to_json()["variants"]["default"]["passes"]
    assert [sorted(p) for p in passes] == [["grads", "hook_calls", "returned"]] * 2
    assert passes[0]["returned"] == {}
    assert list(passes[1]["returned"]) == ["w"]
    assert passes[1]["returned"]["w"]["value"] == gw.tolist()
