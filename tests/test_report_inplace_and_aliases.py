"""The report on hooks that write in place, and on a tensor with two names (found by trying
adjoint as a user would). Every claim is worked out by hand and checked in real torch beside it.

* A forward hook that writes its ``output`` in place changes the forward: it is shown as
  writing in place (not as observing), says why, and "what the hooks changed" compares the run
  with the one whose hooks only observe.
* A tensor hook that writes its gradient in place changes the gradients the same way: the
  comparison is shown for it too.
* ``h = lin(x)`` binds two names to one tensor: with ``retain_grad`` on one of them, the other's
  ``.grad`` is not None, and the report must not say it is.
"""

from __future__ import annotations

import pytest

import adjoint
from adjoint.answer.effects import hook_effects
from adjoint.render.console import render

FORWARD_WRITE = """
name: forward_hook_writes_output
inputs:
  x: {value: [[1, -2]], requires_grad: true}
model:
  children:
    lin: {type: Linear, params: {weight: [[1, 1]], bias: [0]}}
  forward: |
    h = lin(x)
    return h
loss: "sum(y ** 2)"
variants:
  doubles:
    hooks:
      - {module: lin, kind: forward, does: "output.mul_(2)"}
  retained:
    hooks:
      - {tensor: lin, kind: retain_grad}
  grad_tripled:
    hooks:
      - {tensor: h, does: "grad.mul_(3)"}
"""


def _flat(text: str) -> str:
    return " ".join(text.split())


def _load(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(FORWARD_WRITE)
    return adjoint.load(str(path))


def test_a_forward_hook_writing_its_output_is_a_change(tmp_path):
    """lin(x) = 1 - 2 = -1, doubled in place to -2: loss 4 (1 with the hook observing), x.grad =
    2 * (-2) * 2 * [1, 1] = [-8, -8] (observing: [-2, -2]), both x4."""
    pred = _load(tmp_path).solve(variant="doubles")
    v = pred.variants[0]
    assert v.hook_calls[0].wrote == ("argument output",)
    effects = hook_effects(v)
    changes = {c.name: (c.before.floats(), c.after.floats()) for c in effects.changes}
    assert changes["loss"] == (1.0, 4.0)
    assert changes["x"] == ([[-2.0, -2.0]], [[-8.0, -8.0]])
    text = _flat(render(pred, width=200))
    assert "returned None (writes in place)" in text
    assert "the hook writes its output in place: that is the forward's own tensor" in text
    assert "what the hooks changed" in text and "loss 1 → 4 ×4" in text


def test_a_tensor_hook_writing_its_gradient_is_a_change(tmp_path):
    """The gradient at h is 2 * h = -2, tripled in place to -6: x.grad = [-6, -6] (observing [-2, -2])."""
    pred = _load(tmp_path).solve(variant="grad_tripled")
    effects = hook_effects(pred.variants[0])
    changes = {c.name: (c.before.floats(), c.after.floats()) for c in effects.changes}
    assert changes["x"] == ([[-2.0, -2.0]], [[-6.0, -6.0]])
    assert "what the hooks changed" in _flat(render(pred, width=200))


def test_a_second_name_of_a_retained_tensor_is_not_called_none(tmp_path):
    pred = _load(tmp_path).solve(variant="retained")
    assert pred.variants[0].grads["lin"].floats() == [[-2.0]]
    text = _flat(render(pred, width=200))
    assert "h.grad" not in text   # h is lin: its .grad is lin's, not None


@pytest.mark.torch
def test_torch_agrees(tmp_path):
    import torch

    x = torch.tensor([[1.0, -2.0]], dtype=torch.float64, requires_grad=True)
    lin = torch.nn.Linear(2, 1, dtype=torch.float64)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1.0, 1.0]]))
        lin.bias.zero_()
    handle = lin.register_forward_hook(lambda m, i, o: o.mul_(2))
    loss = (lin(x) ** 2).sum()
    loss.backward()
    assert loss.item() == 4.0 and x.grad.tolist() == [[-8.0, -8.0]]
    handle.remove()

    x.grad = None
    h = lin(x)
    h.register_hook(lambda g: g.mul_(3))
    (h ** 2).sum().backward()
    assert x.grad.tolist() == [[-6.0, -6.0]]

    x.grad = None
    h = lin(x)
    same = h          # the forward's `h` and the name `lin` of the module's output: one tensor
    same.retain_grad()
    (h ** 2).sum().backward()
    assert h.grad.tolist() == [[-2.0]]


TWO_INPUTS = """
name: one_input_without_grad
inputs:
  a: {value: [1, 2], requires_grad: true}
  b: [3, 4]
model:
  inputs: [a, b]
  children:
    m: {inputs: [u, v], forward: "return u * v"}
  forward: |
    return m(a, b)
loss: "sum(y)"
variants:
  v:
    hooks:
      - {module: m, kind: full_backward}
"""


def test_one_input_without_grad_is_named_in_the_singular(tmp_path):
    path = tmp_path / "two.yaml"
    path.write_text(TWO_INPUTS)
    why = adjoint.load(str(path)).solve().variants[0].hook_calls[0].why
    assert "input v does not require grad: PyTorch hands a zero tensor there" in " ".join(why)
