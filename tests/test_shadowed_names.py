"""A name the program binds hides the module or function of the same name, as in Python: with a
tensor called ``relu`` (or ``torch``, ``F``), ``relu(h)`` (``torch.relu(h)``) calls the tensor (looks
``relu`` up on it) and PyTorch raises TypeError; adjoint answered PyTorch's function instead, and
verify agreed (its torch side interprets the same names). Such a call is now refused at its place;
names that hide nothing in Python (a child module called by its name, a parameter -- ``self.NAME``
in Python --, a forward's local named in the loss) still answer. What Python does, from torch here."""

from __future__ import annotations

import pytest

from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402


def refusal(text: str) -> str:
    with pytest.raises(ProblemError) as info:
        adjoint.loads(text).solve()
    return info.value.line()


def test_python_calls_the_tensor_not_pytorchs_function():
    x = torch.tensor([1.0, -2.0], requires_grad=True)
    relu = x * 3
    with pytest.raises(TypeError, match="'Tensor' object is not callable"):
        relu(relu)
    F = x   # an input called F: F.relu(F) is Tensor.relu with an argument
    with pytest.raises(TypeError, match=r"relu\(\) takes no arguments \(1 given\)"):
        F.relu(F)


FORWARD = """
name: shadow
inputs:
  {inp}: {{value: [1, -2], requires_grad: true}}
model:
  inputs: [{inp}]
  forward: |
{body}
{extra}"""


@pytest.mark.parametrize("inp, body, where, name", [
    ("x", "    relu = x * 3\n    return relu(relu).sum()", "9:12", "'relu' names a Tensor here"),
    ("F", "    return F.relu(F).sum()", "8:12", "'F' names a Tensor here, which hides the module F"),
    ("x", "    torch = x * 3\n    return torch.relu(torch).sum()", "9:12",
     "'torch' names a Tensor here, which hides the module torch"),
    ("x", "    s = x.sum()\n    return s", "",  None),
])
def test_a_call_of_a_name_the_forward_binds_is_refused(inp, body, where, name):
    text = FORWARD.format(inp=inp, body=body, extra="")
    if name is None:
        adjoint.loads(text).solve()
        return
    line = refusal(text)
    assert line.startswith(f"<string>:{where}: {name}"), line


def test_a_target_named_torch_hides_torch_in_the_loss():
    text = """
name: shadow
inputs:
  x: {value: [1, -2], requires_grad: true}
targets:
  torch: [1, 1]
model: {type: Tanh}
loss: "torch.sum((y - torch) ** 2)"
"""
    assert refusal(text).startswith("<string>:8:8: 'torch' names a Tensor here, which hides the module torch")


def test_names_that_hide_nothing_in_python_still_answer():
    """A child module called by its name (``self.relu``), a parameter named like a function (a
    bare name in the format, ``self.norm`` in Python), and a root forward's local named like the
    loss's function (not a variable of the script computing the loss)."""
    text = """
name: fine
inputs:
  x: {value: [1, -2], requires_grad: true}
model:
  params: {norm: [2, 3]}
  children:
    relu: {type: ReLU}
  forward: |
    mean = relu(x) * norm
    return mean
loss: "mean((y - 1) ** 2)"
"""
    got = adjoint.loads(text).solve()
    x = torch.tensor([1.0, -2.0], requires_grad=True)
    norm = torch.tensor([2.0, 3.0], requires_grad=True)
    loss = torch.mean((torch.relu(x) * norm - 1) ** 2)
    loss.backward()
    grads = got.to_json()["variants"]["default"]["grads"]
    assert grads["x"]["value"] == pytest.approx(x.grad.tolist())
    assert grads["norm"]["value"] == pytest.approx(norm.grad.tolist())


def test_a_module_output_named_like_a_function_hides_nothing_in_a_root():
    """A ``root:`` is the script's code between two backwards: a child's output (``norm``) is not a
    variable there, so ``norm(gx)`` is torch.norm, as the script writing it would have it."""
    text = """
name: penalty
dtype: float64
inputs:
  x: {value: [[0.5, -1]], requires_grad: true}
model:
  type: Sequential
  children:
    fc: {type: Linear, params: {weight: [[0.2, -0.4], [0.6, 0.1]], bias: [0.1, 0]}}
    norm: {type: Tanh}
loss: "mean(y)"
steps:
  - forward
  - {backward: {method: grad, inputs: [x], create_graph: true, as: [gx]}}
  - {backward: {root: "loss + 10 * norm(gx) ** 2"}}
"""
    got = adjoint.loads(text).solve().to_json()["variants"]["default"]["grads"]
    fc = torch.nn.Linear(2, 2).double()
    with torch.no_grad():
        fc.weight.copy_(torch.tensor([[0.2, -0.4], [0.6, 0.1]]))
        fc.bias.copy_(torch.tensor([0.1, 0.0]))
    x = torch.tensor([[0.5, -1]], dtype=torch.float64, requires_grad=True)
    loss = torch.tanh(fc(x)).mean()
    gx, = torch.autograd.grad(loss, [x], create_graph=True)
    (loss + 10 * torch.norm(gx) ** 2).backward()
    assert torch.tensor(got["x"]["value"]).flatten().tolist() == pytest.approx(x.grad.flatten().tolist())
    assert torch.tensor(got["fc.weight"]["value"]).flatten().tolist() == \
        pytest.approx(fc.weight.grad.flatten().tolist())


def test_a_name_a_later_line_binds_is_a_local_throughout():
    """A name assigned on any line of a function (a forward, a hook body; in an ``if`` branch
    too) is Python's local throughout it: called or read before that line it is
    UnboundLocalError, not PyTorch's function nor the script's tensor. adjoint answered
    torch.relu (and read the forward's tensor); it refuses such a line now, naming the error."""
    # what Python does with such a function (written as source: a linter flags it, as it should)
    scope = {"relu": torch.relu, "h": torch.tensor([1.0])}
    exec("def forward(x):\n    h = relu(x)\n    relu = h * 2\n    return relu\n"
         "def body(grad):\n    g = grad * h\n    if g.sum() > 100:\n        h = g\n    return g\n", scope)
    with pytest.raises(UnboundLocalError, match="cannot access local variable 'relu'"):
        scope["forward"](torch.tensor([1.0]))
    with pytest.raises(UnboundLocalError, match="cannot access local variable 'h'"):
        scope["body"](torch.tensor([1.0]))

    text = FORWARD.format(inp="x", body="    h = relu(x)\n    relu = h * 2\n    return relu.sum()", extra="")
    assert refusal(text).startswith("<string>:8:9: 'relu' is assigned later in this code, so Python takes it "
                                    "as a local name throughout: relu(...) here raises UnboundLocalError")
    hooks = """hooks:
  - {tensor: h, does: ["g = relu(grad)", "relu = g * 2"], returns: "relu"}"""
    text = FORWARD.format(inp="x", body="    h = x * 2\n    return h.sum()", extra=hooks)
    assert "'relu' is assigned later in this code" in refusal(text)
    hooks = """hooks:
  - tensor: h
    does: |
      g = grad * h
      if g.sum() > 100:
          h = g
    returns: g"""
    text = FORWARD.format(inp="x", body="    h = x * 2\n    return h.sum()", extra=hooks)
    assert "'h' is assigned later in this code, so Python takes it as a local name throughout: reading 'h'" \
        in refusal(text)
