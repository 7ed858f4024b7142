"""F.pad in reflect and replicate mode and the padding modules against real torch (float64): the
node chain (ReflectionPad{1,2,3}DBackward0, ReplicationPad{1,2,3}DBackward0; the constant
modules' ConstantPadNdBackward0), values and gradients, a Conv2d with padding_mode='reflect';
PyTorch's errors (tests/data/regressions/padding_*.yaml check hooks and saved tensors through verify)."""

import pytest

from conftest import require_torch

torch = require_torch()
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from nn_harness import (Case, assert_close, assert_error_matches_torch, assert_expr_matches_torch,  # noqa: E402
                        distinct, expr_problem, lit, t64, torch_chain)

X = distinct((2, 3, 4), 1)


@pytest.mark.parametrize("expr, torch_fn", [
    ("F.pad(x, (1, 2, 2, 1), mode='reflect')", lambda x: F.pad(x, (1, 2, 2, 1), mode="reflect")),
    ("F.pad(x, (3, 1), mode='replicate')", lambda x: F.pad(x, (3, 1), mode="replicate")),
    ("F.pad(x.unsqueeze(0), (1, 1, 0, 2, 1, 0), mode='reflect')",
     lambda x: F.pad(x.unsqueeze(0), (1, 1, 0, 2, 1, 0), mode="reflect")),
    ("F.pad(x[0], (0, 3), mode='reflect')", lambda x: F.pad(x[0], (0, 3), mode="reflect")),
    ("F.pad(x.transpose(1, 2), (2, 2, 1, 1), mode='replicate')",
     lambda x: F.pad(x.transpose(1, 2), (2, 2, 1, 1), mode="replicate")),
])
def test_reflect_and_replicate_match_torch(expr, torch_fn):
    assert_expr_matches_torch(expr, torch_fn, X)


def test_reflect_padded_conv_matches_torch():
    w = distinct((1, 2, 2, 3), 2)
    text = f"""name: t
dtype: float64
inputs:
  x: {{value: {lit([X[:2]])}, requires_grad: true}}
model:
  children:
    conv: {{type: Conv2d, args: {{in_channels: 2, out_channels: 1, kernel_size: [2, 3], padding: same,
            padding_mode: reflect}}, params: {{weight: {lit(w)}, bias: [0.5]}}}}
  forward: |
    h = conv(x)
    return h
loss: "sum(y * y)"
"""
    case = Case(text)
    conv = nn.Conv2d(2, 1, (2, 3), padding="same", padding_mode="reflect").double()
    with torch.no_grad():
        conv.weight.copy_(t64(w))
        conv.bias.fill_(0.5)
    x = t64([X[:2]], True)
    h = conv(x)
    (h * h).sum().backward()
    leaves = {"x": x, "conv.weight": conv.weight, "conv.bias": conv.bias}
    assert case.chain("h") == torch_chain(h, leaves)
    for name, t in leaves.items():
        assert_close(case.grad(name), t.grad, f"grad of {name}")


@pytest.mark.parametrize("expr, torch_fn", [
    ("F.pad(x, (4, 0), mode='reflect')", lambda x: F.pad(x, (4, 0), mode="reflect")),
    ("F.pad(x, (1, 1, 1, 1), mode='replicate', value=1.0)",
     lambda x: F.pad(x, (1, 1, 1, 1), mode="replicate", value=1.0)),
    ("F.pad(x[0, 0], (1, 1), mode='reflect')", lambda x: F.pad(x[0, 0], (1, 1), mode="reflect")),
])
def test_torchs_errors(expr, torch_fn):
    assert_error_matches_torch(expr_problem(expr, X), lambda: torch_fn(t64(X, True)))
