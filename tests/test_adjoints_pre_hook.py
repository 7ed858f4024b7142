"""``adjoints``: ``grad_input`` is what the module's forward derives from ``grad_output`` as it
reached the module, before any hook of the module acts. A module's own ``full_backward_pre``
hook that replaced ``grad_output`` leaked into it: ``grad_output`` [1] but ``grad_input``
[6, 8] = J^T [2]. Found by a contract audit; the expected J^T from real torch (autograd.grad
through the same module, no hooks), run here."""

from __future__ import annotations

from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402

SEQ = """
name: adj_pre
inputs:
  x: {value: [1, 2], requires_grad: true}
model:
  type: Sequential
  children:
    lin: {type: Linear, params: {weight: [[3, 4]], bias: [0]}}
hooks:
  - {module: lin, kind: full_backward_pre, returns: "(2 * grad_output[0],)"}
  - {module: lin, kind: full_backward}
"""

ROOT = """
name: adj_root_pre
inputs:
  x: {value: [1, 2], requires_grad: true}
model:
  params: {w: [3, 4]}
  forward: "x * w"
loss: "sum(y)"
hooks:
  - {module: model, kind: full_backward_pre, returns: "(grad_output[0] * 10,)"}
"""


def _adjoints(text: str) -> dict:
    out = adjoint.loads(text).solve().to_json()["variants"]["default"]
    return {k: ([g["value"] for g in v["grad_output"]], [g["value"] for g in v["grad_input"]])
            for k, v in out["adjoints"].items()}, out


def test_grad_input_is_derived_from_the_grad_output_before_the_modules_pre_hook():
    lin = torch.nn.Linear(2, 1)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[3., 4]]))
        lin.bias.zero_()
    x = torch.tensor([1., 2], requires_grad=True)
    jt, = torch.autograd.grad(lin(x), x, grad_outputs=torch.ones(1))
    handed = []
    lin.register_full_backward_pre_hook(lambda m, go: (2 * go[0],))
    lin.register_full_backward_hook(lambda m, gi, go: handed.append(gi[0].tolist()))
    lin(x).backward()
    got, out = _adjoints(SEQ)
    assert got["lin"] == ([[1.0]], [jt.tolist()]) == ([[1.0]], [[3.0, 4.0]])
    # the hooks are handed what PyTorch hands them; the Sequential passes on what its child passed
    assert out["hook_calls"][1]["args"]["grad_input"][0]["value"] == handed[0] == [6.0, 8.0]
    assert got["model"] == ([[1.0]], [[6.0, 8.0]])
    assert out["grads"]["x"]["value"] == x.grad.tolist()


def test_a_root_pre_hook_too():
    x = torch.tensor([1., 2], requires_grad=True)
    w = torch.tensor([3., 4])
    jt, = torch.autograd.grad((x * w).sum(), x)
    got, _ = _adjoints(ROOT)
    assert got["model"] == ([[1.0, 1.0]], [jt.tolist()])


INNER = """
name: adj_pre_inner_hook
dtype: float64
inputs:
  x: {value: [[1, 2]], requires_grad: true}
model:
  children:
    p:
      children:
        lin: {type: Linear, params: {weight: [[1, 2], [3, 4]], bias: [0, 0]}}
      forward: "lin(x) * 2"
  forward: "p(x)"
loss: "sum(y)"
hooks:
  - {module: p.lin, kind: full_backward, returns: "(grad_input[0] * 2,)"}
  - {module: p, kind: full_backward_pre, returns: "(grad_output[0] * 1,)"}
"""


def test_with_a_hook_inside_the_module_its_grad_input_is_what_it_passed():
    """p's own pre-hook returns an equal new tensor, and p.lin's full hook doubles: the J^T with
    hooks ignored dropped the child's doubling (found by an adversarial review). With a hook inside,
    grad_input is what p passed its input, as a full hook in front of p's own is handed."""
    lin = torch.nn.Linear(2, 2).double()
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1., 2], [3, 4]]))
        lin.bias.zero_()

    class P(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lin

        def forward(self, x):
            return self.lin(x) * 2

    p, handed = P(), []
    p.lin.register_full_backward_hook(lambda m, gi, go: (gi[0] * 2,))
    p.register_full_backward_hook(lambda m, gi, go: handed.append(gi[0].tolist()))   # observer in front
    p.register_full_backward_pre_hook(lambda m, go: (go[0] * 1,))
    x = torch.tensor([[1., 2]], dtype=torch.float64, requires_grad=True)
    p(x).sum().backward()
    got, out = _adjoints(INNER)
    assert got["p"][1] == [handed[0]] == [[[16.0, 24.0]]]
    assert out["grads"]["x"]["value"] == x.grad.tolist()
