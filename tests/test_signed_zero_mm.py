"""mm with an inner size of 1 writes each element's one product, so a zero takes the product's
sign (-0.0 where exactly one factor is negative); with more it accumulates from +0.0. The
answer's values are held to torch's, sign bits included, run here."""

from __future__ import annotations

import math

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402

FILE = """name: sz
dtype: float64
inputs:
  a: {{value: {a}, requires_grad: true}}
  b: {{value: {b}, requires_grad: true}}
model:
  inputs: [a, b]
  forward: "torch.mm(a, b)"
loss: "y.sum()"
"""


@pytest.mark.parametrize("a, b", [
    ([[0], [1], [-0.5]], [[-1, 2, 0]]),          # inner size 1: the products' signs
    ([[0, 0], [1, -1]], [[-1, 2], [-1, 3]]),     # inner size 2: accumulated from +0.0
])
def test_signs_of_zeros_are_torchs(a, b):
    got = adjoint.loads(FILE.format(a=a, b=b)).solve().to_json()["variants"]["default"]["values"]["y"]["value"]
    want = torch.mm(torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)).tolist()
    assert [[math.copysign(1, v) for v in row] for row in got] == [[math.copysign(1, v) for v in row] for row in want]
    assert got == want
