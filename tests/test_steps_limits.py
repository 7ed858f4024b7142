"""Steps at their edges (issue 28): an SGD learning rate a user types as 1e30 is a Python
float on the torch side too (verify crashed converting 10**30), checked against real torch."""

import math

import pytest
from conftest import require_torch

import adjoint

PROBLEM = """name: lr
inputs:
  x: {value: [0.3], requires_grad: true}
model:
  type: Linear
  params: {weight: [[0.5]], bias: [0.1]}
loss: "sum(y)"
steps: [forward, backward, {step: {lr: 1e30}}, forward, backward]
"""


@pytest.mark.torch
def test_a_huge_learning_rate_agrees_with_torch(tmp_path):
    require_torch()
    import torch

    from adjoint.torchside.compare import compare
    from adjoint.torchside import run_variant

    path = tmp_path / "lr.yaml"
    path.write_text(PROBLEM)
    problem = adjoint.load(str(path))
    (vp,) = problem.solve().variants
    rows = compare(vp.to_json(), run_variant(problem, problem.variant(vp.name), "float32"), "float32")
    assert rows and all(r.ok for r in rows), [r for r in rows if not r.ok]
    # by hand, in torch: the weight after one step is 0.5 - 1e30 * 0.3 (float32), the bias 0.1 - 1e30
    lin = torch.nn.Linear(1, 1)
    with torch.no_grad():
        lin.weight.fill_(0.5)
        lin.bias.fill_(0.1)
    x = torch.tensor([0.3])
    lin(x).sum().backward()
    with torch.no_grad():
        for p in lin.parameters():
            p -= 1e30 * p.grad
    assert math.isclose(float(vp.values["weight"]), lin.weight.item(), rel_tol=1e-6)
    assert math.isclose(float(vp.values["bias"]), lin.bias.item(), rel_tol=1e-6)
