"""A gradient the backward computes beyond the dtype's range: PyTorch's float is inf there, as in
the forward. adjoint checked overflow after forward ops only, so a hook returning grad * 1e308
followed by MulBackward0's * 5 kept the exact 5e308 (shown as inf, computed as a number): x's
hook grad - grad then gave 0 where PyTorch gives nan. Now a gradient surely beyond the range
(twice the threshold) is inf, and IEEE arithmetic follows; one nearer the threshold, where the
rounding decides, is refused with its location. Expected values from torch, run here."""

from __future__ import annotations

import math

import pytest

import adjoint
from adjoint.format.errors import ProblemError
from conftest import require_torch

torch = require_torch()

FILE = """
name: overflow
dtype: float64
inputs:
  x: {{value: [1, -1], requires_grad: true}}
model:
  forward: |
    k = x * {factor}
    return k
loss: "sum(y)"
hooks:
  - {{tensor: k, returns: "grad * 1e308"}}
  - {{tensor: x, returns: "grad - grad"}}
"""


def _torch(factor: float):
    x = torch.tensor([1.0, -1.0], dtype=torch.float64, requires_grad=True)
    handed = []
    k = x * factor
    k.register_hook(lambda g: g * 1e308)
    x.register_hook(lambda g: (handed.append(g.clone()), g - g)[1])
    k.sum().backward()
    return handed[0].tolist(), x.grad.tolist()


def test_a_gradient_surely_beyond_the_range_is_inf_and_nan_follows(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(FILE.format(factor=5))
    doc = adjoint.load(str(path)).solve().variants[0].to_json()
    handed, grad = _torch(5.0)
    assert handed == [math.inf, math.inf]
    assert all(math.isnan(g) for g in grad)
    assert doc["hook_calls"][1]["args"]["grad"]["exact"] == ["inf", "inf"]
    assert doc["grads"]["x"]["exact"] == ["nan", "nan"]


def test_a_gradient_near_the_threshold_is_refused_with_its_place(tmp_path):
    """3e308: PyTorch's float is inf here too (the threshold is 1.8e308), but within a factor 2 of
    it a longer chain's rounding could decide either way: refused, naming the node."""
    path = tmp_path / "p.yaml"
    path.write_text(FILE.format(factor=3))
    assert _torch(3.0)[0] == [math.inf, math.inf]
    with pytest.raises(ProblemError, match="the backward of MulBackward0 gives 3.0e\\+308 at element \\[0\\], beyond "
                                           "float64's range"):
        adjoint.load(str(path)).solve()


def test_float64_div_backward_divides_twice():
    """DivBackward0's gradient of the divisor is ``-grad * ((self / other) / other)``: in --float64,
    ``g * a / (b * b)`` overflowed b * b (1e200 squared) to inf and gave -0.0 for -1e-200."""
    text = """
name: quotient
dtype: float64
inputs:
  x: {value: [1e200, 3, 1e-200], requires_grad: true}
  w: {value: [1e200, 1e170, 1e-170], requires_grad: true}
model:
  inputs: [x, w]
  forward: "(x / w).sum()"
"""
    x = torch.tensor([1e200, 3, 1e-200], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([1e200, 1e170, 1e-170], dtype=torch.float64, requires_grad=True)
    (x / w).sum().backward()
    grads = adjoint.loads(text).solve(mode="float64").variants[0].to_json()["grads"]
    assert grads["w"]["value"] == w.grad.tolist() and grads["x"]["value"] == x.grad.tolist()
