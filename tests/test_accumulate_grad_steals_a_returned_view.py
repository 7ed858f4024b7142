"""AccumulateGrad takes as ``.grad`` itself a view or ``detach()`` of a file tensor that a hook
returned (a new tensor only the engine holds, on that tensor's memory): ``.grad`` then shares the
parameter's memory, so an SGD step on the parameter changes ``.grad`` and a second backward's
``.grad += new_grad`` changes the parameter. adjoint copied it. The expected numbers are those of
a plain torch 2.13 script (tests/data/regressions/hook_returned_view_of_a_leaf_becomes_its_grad.yaml
has the script's cases; verify checks them there):

    lin.bias.register_hook(lambda g: lin.bias.detach())    # or lin.weight[0]
    (lin(x) ** 2).sum().backward()   # h * h
    with torch.no_grad():
        for p in lin.parameters(): p -= 0.5 * p.grad
"""

from __future__ import annotations

import pytest

import adjoint

FILE = """
name: steal_view
inputs:
  x: {value: [[0.5, -1]], requires_grad: true}
model:
  children:
    lin: {type: Linear, params: {weight: [[1, 2], [0.5, -1]], bias: [0.25, 0.5]}}
  forward: |
    h = lin(x)
    return h * h
loss: "sum(y)"
hooks: [HOOKS]
steps: STEPS
"""

STEP = "[forward, backward, {step: {lr: 0.5}}]"


def _grads(hooks: str, steps: str) -> dict:
    text = FILE.replace("HOOKS", hooks).replace("STEPS", steps)
    got = adjoint.loads(text).solve().to_json()["variants"]["default"]
    return {k: (v or {}).get("value") for k, v in got["grads"].items()}


@pytest.mark.parametrize("hooks, steps, leaf, expected", [
    # the bias, halved by the step, is .grad: torch prints bias.grad [0.125, 0.25]
    ('{tensor: lin.bias, returns: "lin.bias.detach()"}', STEP, "lin.bias", [0.125, 0.25]),
    # second backward: .grad (the bias's memory, [0.125, 0.25]) += bias.detach(): [0.25, 0.5]
    ('{tensor: lin.bias, returns: "lin.bias.detach()"}', "[forward, backward, {step: {lr: 0.5}}, forward, backward]",
     "lin.bias", [0.25, 0.5]),
    # weight row 0 after the step (1 - 0.5 * -1.25, 2 - 0.5 * 2.5) is bias.grad
    ('{tensor: lin.bias, returns: "lin.weight[0]"}', STEP, "lin.bias", [1.625, 0.75]),
    # x.mul_(3) after the accumulation shows in x.grad
    ('{tensor: x, returns: "x.view(1, 2)"}, {tensor: x, kind: post_accumulate_grad, does: "x.mul_(3)"}',
     "[forward, backward]", "x", [[1.5, -3.0]]),
    # the parameter itself (the file holds it): copied, the step leaves .grad alone
    ('{tensor: lin.bias, returns: "lin.bias"}', STEP, "lin.bias", [0.25, 0.5]),
])
def test_returned_view_becomes_grad(hooks, steps, leaf, expected):
    assert _grads(hooks, steps)[leaf] == expected
