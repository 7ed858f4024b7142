"""F.prelu and nn.PReLU against real torch (float64): at::prelu's node chain (the weight's
ViewBackward0 when its rank differs from the input's, then PreluKernelBackward0), values,
gradients, the saved tensors (self, then the reshaped weight), and PyTorch's checks in its
order (tests/data/regressions/prelu_modules.yaml checks hooks through verify)."""

import pytest

from conftest import require_torch

torch = require_torch()
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from nn_harness import (Case, assert_close, assert_error_matches_torch, assert_root_module, distinct,  # noqa: E402
                        lit, module_problem, t64, torch_chain, torch_module_run)


def _file(x, w, expr: str = "F.prelu(x, w)") -> str:
    return f"""name: t
dtype: float64
inputs:
  x: {{value: {lit(x)}, requires_grad: true}}
  w: {{value: {lit(w)}, requires_grad: true}}
model:
  inputs: [x, w]
  forward: |
    h = {expr}
    return h
loss: "sum(y * y * y)"
"""


# (input shape, weight): a weight per channel, one weight over every rank, a 0-d weight
@pytest.mark.parametrize("shape, w", [
    ((2, 3, 4), [0.25, -0.5, 2.0]),
    ((2, 3, 4), [0.375]),
    ((2, 3), [0.25, -1.5, 0.5]),
    ((4,), [-0.75]),
    ((), [0.25]),
    ((3, 2), 0.5),
    ((3,), -0.25),
])
def test_prelu_matches_torch(shape, w):
    x_values = distinct(shape, 1) if shape else -1.5
    case = Case(_file(x_values, w))
    x, wt = t64(x_values, True), t64(w, True)
    h = F.prelu(x, wt)
    (h * h * h).sum().backward()
    assert case.chain("h") == torch_chain(h, {"x": x, "w": wt})
    assert_close(case.value("h"), h, "h")
    assert_close(case.grad("x"), x.grad, "grad of x")
    assert_close(case.grad("w"), wt.grad, "grad of w")


def test_prelu_at_zero_and_as_a_method():
    """prelu'(0) is the weight; weight's gradient there is x * g = 0; torch.prelu and x.prelu."""
    x_values = [[0.0, -1.0, 2.0], [-0.5, 0.0, 1.0]]
    w = [0.25, -2.0, 0.5]
    for expr, fn in (("torch.prelu(x, w)", torch.prelu), ("x.prelu(w)", lambda a, b: a.prelu(b))):
        case = Case(_file(x_values, w, expr))
        x, wt = t64(x_values, True), t64(w, True)
        h = fn(x, wt)
        (h * h * h).sum().backward()
        assert case.chain("h") == torch_chain(h, {"x": x, "w": wt})
        assert_close(case.grad("x"), x.grad, "grad of x")
        assert_close(case.grad("w"), wt.grad, "grad of w")


@pytest.mark.parametrize("args, params, shape", [
    ({}, {}, (2, 3, 2)),
    ({"num_parameters": 3, "init": 0.125}, {}, (2, 3, 2)),
    ({"num_parameters": 3}, {"weight": [0.5, -0.25, 1.5]}, (2, 3)),
    ({}, {"weight": [-0.5]}, (4,)),
])
def test_prelu_module_matches_torch(args, params, shape):
    """nn.PReLU: weight every element init (0.25) unless given; F.prelu(input, self.weight); a
    legacy backward hook on it and the saved tensors as torch packs them."""
    x = distinct(shape, 2)
    case = Case(module_problem("PReLU", args, params, x))
    y, names, rec = torch_module_run(nn.PReLU(**args), params, x)
    assert_root_module(case, y, names, rec)


@pytest.mark.parametrize("x, w", [
    ([[1.0, 2.0, 3.0]], [0.5, 0.5]),            # two weights, three channels
    ([1.0, 2.0, 3.0], [0.5, 0.5, 0.5]),         # a 1-d input has one channel
    (1.0, [0.5, 0.5]),                          # a 0-d input with more than one weight
    ([[1.0, 2.0, 3.0]], [[0.5, 0.5, 0.5]]),     # a 2-d weight (numel matches: the rank check)
    ([[1.0, 2.0, 3.0]], [[0.5]]),               # a 2-d weight of one element
])
def test_torchs_errors(x, w):
    assert_error_matches_torch(_file(x, w), lambda: F.prelu(t64(x, True), t64(w, True)))
