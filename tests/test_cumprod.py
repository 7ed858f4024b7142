"""``torch.cumprod`` / ``Tensor.cumprod`` against real torch 2.13: one CumprodBackward0 saving self
then result, its backward cumprod_backward (ReduceOps.cpp, grad mode off) with zeros in the input
-- one, two, at the start, at the end, in some slices only -- compared on the node chain, values,
grads, the legacy hook's grad_input and the saved-tensor packs (tests/opcheck.py); a gradient
and a -0.0 of the forward pinned with numbers copied from torch."""

import math

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from opcheck import case  # noqa: E402

X = [[2.0, 0.0, 3.0, 0.5, 4.0], [-1.0, 3.0, 0.0, -2.0, 0.0], [1.0, 2.0, 3.0, 4.0, 5.0]]


@pytest.mark.parametrize("x, expr, fn", [
    (X, "torch.cumprod(x, 1)", lambda x: torch.cumprod(x, 1)),
    (X, "x.cumprod(0)", lambda x: x.cumprod(0)),
    (X, "torch.cumprod(x, dim=-1)", lambda x: torch.cumprod(x, dim=-1)),
    ([[0.0, 0.0, 2.0], [0.0, 3.0, -1.0]], "x.cumprod(1)", lambda x: x.cumprod(1)),
    ([[1.5, -2.0, 0.25], [3.0, 0.5, -1.0]], "x.cumprod(1)", lambda x: x.cumprod(1)),
    ([4.0, -2.0, 0.0], "torch.cumprod(x, 0)", lambda x: torch.cumprod(x, 0)),
    ([[2.0, -3.0]], "x.cumprod(0)", lambda x: x.cumprod(0)),
])
def test_cumprod_matches_torch(x, expr, fn):
    assert case({"x": (x, True)}, expr, fn) == []


TEXT = """
name: cumprod_pinned
dtype: float64
inputs:
  x: {value: [[2, 0, 3, 0.5, 4], [-1, 3, 0, -2, 0], [1, 2, 3, 4, 5]], requires_grad: true}
  g: {value: [[1, 2, 3, 4, 5], [1, -1, 2, -2, 3], [1, 1, 1, 1, 1]]}
model:
  inputs: [x, g]
  forward: "torch.cumprod(x, 1)"
loss: "sum(y * g)"
"""

# torch 2.13.0 CPU, float64: y.backward(g)
GRAD = [[1.0, 94.0, 0.0, 0.0, 0.0], [-2.0, 1.0, -18.0, 0.0, 0.0], [153.0, 76.0, 50.0, 36.0, 24.0]]


def test_expected_numbers_are_torchs():
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    y = torch.cumprod(x, 1)
    y.backward(torch.tensor([[1, 2, 3, 4, 5], [1, -1, 2, -2, 3], [1, 1, 1, 1, 1.0]], dtype=torch.float64))
    assert x.grad.tolist() == GRAD
    assert math.copysign(1, y[1, 2].item()) == -1   # -1 * 3 * 0: -0.0


def test_zeros_in_the_input_take_cumprod_backward():
    v = adjoint.loads(TEXT).solve().variants[0].to_json()
    assert v["values"]["y"]["grad_fn"] == "CumprodBackward0"
    assert v["grads"]["x"]["value"] == GRAD
    assert math.copysign(1, v["values"]["y"]["value"][1][2]) == -1
