"""The recursion table's lambda_in is J^T lambda_out through the module's own nodes as if no hook
inside it ran; when the hooks changed a gradient, the root's lambda_in is not the inputs' .grad
and the report says so under the table (found by trying adjoint as a user would: a reader took
the root's lambda_in for x.grad).

By hand: x = [[1, -2]], fc1 = Linear(w = [[1, 1]], b = 0), fc2 = Linear(w = [[3]], b = 0),
loss = sum(y). The model's J^T lambda_out is 3 * [1, 1] = [[3, 3]]. A full_backward_pre hook on
fc2 returning zeros stops the gradient: x.grad = [[0, 0]]. Checked in torch below.
"""

from __future__ import annotations

import adjoint
from adjoint.render.console import render

FILE = """
name: stopped
inputs:
  x: {value: [[1, -2]], requires_grad: true}
model:
  type: Sequential
  children:
    fc1: {type: Linear, params: {weight: [[1, 1]], bias: [0]}}
    fc2: {type: Linear, params: {weight: [[3]], bias: [0]}}
loss: "sum(y)"
variants:
  zeroed:
    hooks:
      - {module: fc2, kind: full_backward_pre, returns: "(torch.zeros_like(grad_output[0]),)"}
  observed:
    hooks:
      - {module: fc2, kind: full_backward_pre}
"""

CAVEAT = "a lambda_in leaves out what the hooks inside its module did"


def _render(tmp_path, variant):
    path = tmp_path / "p.yaml"
    path.write_text(FILE)
    pred = adjoint.load(str(path)).solve(variant=variant)
    return pred, " ".join(render(pred, width=200).split())


def test_a_changing_hook_gets_the_caveat(tmp_path):
    pred, text = _render(tmp_path, "zeroed")
    root = pred.variants[0].boundaries[0]
    assert [float(v) for v in root.grad_input[0].floats()[0]] == [3.0, 3.0]    # hooks aside
    assert [float(v) for v in pred.variants[0].grads["x"].floats()[0]] == [0.0, 0.0]
    assert "adjoint recursion" in text and CAVEAT in text


def test_observing_hooks_get_none(tmp_path):
    pred, text = _render(tmp_path, "observed")
    assert [float(v) for v in pred.variants[0].grads["x"].floats()[0]] == [3.0, 3.0]
    assert "adjoint recursion" in text and CAVEAT not in text


def test_torch_agrees():
    import torch

    x = torch.tensor([[1.0, -2.0]], requires_grad=True)
    model = torch.nn.Sequential(torch.nn.Linear(2, 1), torch.nn.Linear(1, 1))
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor([[1.0, 1.0]]))
        model[0].bias.zero_()
        model[1].weight.fill_(3.0)
        model[1].bias.zero_()
    handle = model[1].register_full_backward_pre_hook(lambda m, go: (torch.zeros_like(go[0]),))
    model(x).sum().backward()
    assert x.grad.tolist() == [[0.0, 0.0]]
    handle.remove()
    x.grad = None
    model(x).sum().backward()
    assert x.grad.tolist() == [[3.0, 3.0]]
