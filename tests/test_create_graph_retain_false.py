"""``retain_graph`` defaults to ``create_graph`` only when it is not given: a step with
``create_graph: true, retain_graph: false`` frees the forward graph's saved tensors, so a
gradient penalty's backward through it raises. adjoint (and verify's torch side, which passed
``retain_graph=False or None``) took the explicit false for absent. Found by a user trial;
expected outcomes from real torch, run here."""

from __future__ import annotations

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from gen import check  # noqa: E402

BASE = """
name: retain_given
dtype: float64
inputs:
  x: {value: [[1, -2]], requires_grad: true}
model:
  children:
    l: {type: Linear, params: {weight: [[1, 0.5], [2, 1]], bias: [0, 1]}}
    t: {type: Tanh}
  forward: "t(l(x))"
loss: "y.sum()"
steps:
  - forward
  - {backward: FIRST}
  - {backward: {root: "loss + (PENALTY ** 2).sum()"}}
"""

FIRSTS = {
    "grad": ("{method: grad, inputs: [x], create_graph: true%s, as: [gx]}", "gx"),
    "backward": ("{create_graph: true%s}", "x.grad"),
}
RETAINS = {"false": ", retain_graph: false", "true": ", retain_graph: true", "absent": ""}


def _text(method: str, retain: str) -> str:
    first, penalty = FIRSTS[method]
    return BASE.replace("FIRST", first % RETAINS[retain]).replace("PENALTY", penalty)


def _torch(method: str, retain: str):
    lin = torch.nn.Linear(2, 2).double()
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1, 0.5], [2, 1]]))
        lin.bias.copy_(torch.tensor([0., 1]))
    x = torch.tensor([[1., -2]], dtype=torch.float64, requires_grad=True)
    loss = torch.tanh(lin(x)).sum()
    kwargs = {"retain_graph": {"false": False, "true": True, "absent": None}[retain]}
    if method == "grad":
        g, = torch.autograd.grad(loss, [x], create_graph=True, **kwargs)
    else:
        loss.backward(create_graph=True, **kwargs)
        g = x.grad
    try:
        (loss + (g ** 2).sum()).backward()
    except RuntimeError as e:
        return type(e).__name__, str(e)
    return None, x.grad.tolist()


@pytest.mark.parametrize("method", ["grad", "backward"])
@pytest.mark.parametrize("retain", ["false", "true", "absent"])
def test_an_explicit_false_frees_the_graph_as_torch_does(method, retain):
    got = adjoint.loads(_text(method, retain)).solve().to_json()["variants"]["default"]
    kind, detail = _torch(method, retain)
    if kind is not None:
        assert retain == "false"
        assert (got["error"]["type"], got["error"]["message"]) == (kind, detail)
        assert detail.startswith("Trying to backward through the graph a second time")
    else:
        assert got.get("error") is None
        assert got["grads"]["x"]["value"][0] == pytest.approx(detail[0], rel=1e-12)


@pytest.mark.parametrize("method", ["grad", "backward"])
def test_verify_agrees(method):
    outcome = check(_text(method, "false"), timeout=60)
    assert outcome.ok, outcome.report()
