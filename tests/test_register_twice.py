"""A hook registered by two ``register`` steps is two registrations, as a user's loop running
``h = w.register_hook(fn)`` twice makes: it fires twice. Tensor, post-accumulate, node and
multi_grad hooks went on once (module hooks twice), in adjoint and in verify's torch side, which
passed the wrong answer. Found by a GAN trial; expected values from real torch, run here."""

from __future__ import annotations

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from gen import check  # noqa: E402

TEXT = """
name: register_twice
dtype: float64
inputs:
  x: [[0.5, -1.0]]
model:
  children:
    lin: {type: Linear, params: {weight: [[1.0, -0.5]], bias: [0.0]}}
  forward: "lin(x) * 2"
loss: "sum(y ** 2)"
variants:
  tensor_hook:
    hooks: [{tensor: lin.weight, returns: "grad * 0.5", label: half}]
    steps: [{register: [0]}, {register: [0]}, forward, backward]
  post_acc:
    hooks: [{tensor: lin.bias, kind: post_accumulate_grad, label: post}]
    steps: [{register: [0]}, {register: [0]}, forward, backward]
  output_hook:
    hooks: [{tensor: model, returns: "grad * 0.5", label: out}]
    steps: [forward, {register: [0]}, {register: [0]}, backward]
  module_hook:
    hooks: [{module: lin, kind: full_backward_pre, label: pre}]
    steps: [{register: [0]}, {register: [0]}, forward, backward]
  accumulator_hook:
    hooks: [{node: lin.weight, kind: pre, returns: "(grad_outputs[0] * 0.5,)", label: acc}]
    steps: [forward, {register: [0]}, {register: [0]}, backward]
"""


def _torch(variant: str):
    lin = torch.nn.Linear(2, 1).double()
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1.0, -0.5]]))
        lin.bias.zero_()
    x = torch.tensor([[0.5, -1.0]], dtype=torch.float64)
    calls = []

    def reg():
        if variant == "tensor_hook":
            lin.weight.register_hook(lambda g: (calls.append("half"), g * 0.5)[1])
        if variant == "post_acc":
            lin.bias.register_post_accumulate_grad_hook(lambda p: calls.append("post"))
        if variant == "module_hook":
            lin.register_full_backward_pre_hook(lambda m, go: calls.append("pre"))
    if variant != "output_hook":
        reg()
        reg()
    y = lin(x) * 2
    if variant == "accumulator_hook":   # the AccumulateGrad node the graph holds for lin.weight
        acc = y.grad_fn.next_functions[0][0].next_functions[2][0].next_functions[0][0]
        for _ in range(2):
            acc.register_prehook(lambda go: (calls.append("acc"), (go[0] * 0.5,))[1])
    if variant == "output_hook":
        for _ in range(2):
            y.register_hook(lambda g: (calls.append("out"), g * 0.5)[1])
    (y ** 2).sum().backward()
    return calls, lin.weight.grad.tolist(), lin.bias.grad.tolist()


@pytest.mark.parametrize("variant", ["tensor_hook", "post_acc", "output_hook", "module_hook", "accumulator_hook"])
def test_two_registrations_fire_twice(variant):
    got = adjoint.loads(TEXT).solve().to_json()["variants"][variant]
    calls, weight, bias = _torch(variant)
    assert [c["label"] for c in got["hook_calls"]] == calls and len(calls) == 2
    assert got["grads"]["lin.weight"]["value"] == weight
    assert got["grads"]["lin.bias"]["value"] == bias


def test_verify_agrees():
    outcome = check(TEXT, timeout=60)
    assert outcome.ok, outcome.report()
