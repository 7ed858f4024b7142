"""A node hook lives on the node object it was registered on. A file's `{node: h}` hook goes on
h.grad_fn when the forward binds h; a later ``h.detach_()`` (and ``requires_grad_()``, which
makes h a leaf) moves nothing. adjoint, and verify's torch side with it, put the hook on h's new
AccumulateGrad too at the end of the forward (a second call, handed h's gradient), or, without
``requires_grad_()``, raised AttributeError "'NoneType' object has no attribute
'register_prehook'" -- so verify passed both. Found by a graph-structure trial; the expected
calls come from the plain torch script below, not from verify's torch side."""

from __future__ import annotations

import pytest

import adjoint
from conftest import require_torch

torch = require_torch()

FILE = """
name: detach-node-hook
dtype: float64
inputs:
  x: {{value: [[1, -2, 3], [4, 5, -6]], requires_grad: true}}
  w: {{value: [0.5, -1.5, 2], requires_grad: true}}
model:
  inputs: [x, w]
  forward: |
    h = x * w
    a = h * 2
    h.detach_()
{again}    b = h * w
    return a.sum() + b.sum()
hooks:
  - {{node: h, kind: {kind}}}
"""


def _torch(again: bool, kind: str):
    x = torch.tensor([[1., -2, 3], [4, 5, -6]], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([0.5, -1.5, 2], dtype=torch.float64, requires_grad=True)
    calls = []
    h = x * w
    if kind == "pre":
        h.grad_fn.register_prehook(lambda go: calls.append([g.tolist() for g in go]))
    else:
        h.grad_fn.register_hook(lambda gi, go: calls.append([g.tolist() for g in go]))
    a = h * 2
    h.detach_()
    if again:
        h.requires_grad_()
    b = h * w
    (a.sum() + b.sum()).backward()
    return calls, x.grad.tolist(), w.grad.tolist()


@pytest.mark.parametrize("again", [True, False])
@pytest.mark.parametrize("kind", ["pre", "post"])
def test_a_node_hook_stays_on_the_node_it_was_registered_on(tmp_path, again, kind):
    path = tmp_path / "p.yaml"
    path.write_text(FILE.format(again="    h.requires_grad_()\n" if again else "", kind=kind))
    doc = adjoint.load(str(path)).solve(mode="float64").variants[0].to_json()
    calls, xg, wg = _torch(again, kind)
    assert doc.get("error") is None
    arg = "grad_outputs"
    assert [[g["value"] for g in c["args"][arg]] for c in doc["hook_calls"]] == calls
    assert doc["grads"]["x"]["value"] == xg and doc["grads"]["w"]["value"] == wg
