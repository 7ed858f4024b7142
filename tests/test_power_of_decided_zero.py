"""(cosh(x) - cosh(x)) ** n: the difference is decided exactly 0 (its exact text "0"), but its
certified ball still straddles 0, and the ball power gave no float for it: the answer printed
nan where PyTorch computes 0 (0 ** 1, 0 ** 2), and the sum after it nan too. The differential
sweep excused it as an overflow (seed 89213, problems 801 and 1087). 0 ** k is 0 for k > 0,
integer k included, as it was for a fractional k. Expected values from torch, run here."""

from __future__ import annotations

import adjoint
from conftest import require_torch

torch = require_torch()

FILE = """
name: power-of-a-decided-zero
dtype: float64
inputs:
  x: {value: [[-0.5], [0.75]], requires_grad: true}
model:
  inputs: [x]
  forward: |
    h0 = (cosh(x) - cosh(x)) ** 1
    h1 = (cosh(x) - cosh(x)) ** 2
    return h0 + h1 + x
loss: "sum(y)"
"""


def test_an_integer_power_of_a_decided_zero_is_zero(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(FILE)
    doc = adjoint.load(str(path)).solve().variants[0].to_json()
    x = torch.tensor([[-0.5], [0.75]], dtype=torch.float64, requires_grad=True)
    h0 = (torch.cosh(x) - torch.cosh(x)) ** 1
    h1 = (torch.cosh(x) - torch.cosh(x)) ** 2
    y = h0 + h1 + x
    y.sum().backward()
    for name, t in (("h0", h0), ("h1", h1), ("y", y)):
        assert doc["values"][name]["value"] == t.tolist(), name
    assert doc["grads"]["x"]["value"] == x.grad.tolist()
