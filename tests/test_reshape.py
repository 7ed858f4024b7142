"""reshape and flatten as at::reshape decides, checked against real torch: ``view`` of a
contiguous tensor (ViewBackward0), ``_reshape_alias`` when a non-contiguous tensor's strides allow
a view (ReshapeAliasBackward0), else ``clone`` then ``_unsafe_view`` (UnsafeViewBackward0)."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import require_torch  # noqa: E402

torch = require_torch()

from opcheck import case  # noqa: E402

X = [[[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]], [[1, -2, 3, -4], [5, -6, 7, -8], [9, -10, 11, -12]]]

CASES = [
    ("x.reshape(6, 4)", lambda x: x.reshape(6, 4), "ViewBackward0"),
    ("x[:, :, :2].reshape(6, 2)", lambda x: x[:, :, :2].reshape(6, 2), "ReshapeAliasBackward0"),
    ("x.transpose(1, 2).reshape(2, 4, 3)", lambda x: x.transpose(1, 2).reshape(2, 4, 3), "ReshapeAliasBackward0"),
    ("x.transpose(1, 2).reshape(8, 3)", lambda x: x.transpose(1, 2).reshape(8, 3), "UnsafeViewBackward0"),
    ("x[:, 1:2, :].flatten(1, 2)", lambda x: x[:, 1:2, :].flatten(1, 2), "ReshapeAliasBackward0"),
    ("x[:, :2].flatten()", lambda x: x[:, :2].flatten(), "UnsafeViewBackward0"),
]


@pytest.mark.parametrize("expr, fn, node", CASES, ids=[c[0] for c in CASES])
def test_reshape_builds_the_node_torch_builds(expr, fn, node):
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    assert type(fn(x).grad_fn).__name__ == node   # the case is what it says, in this torch
    assert case({"x": (X, True)}, expr, fn) == []


def test_linear_of_a_non_contiguous_batch_is_matmul_then_add_in_place():
    """at::linear: a contiguous N-D input is flattened for addmm; a non-contiguous one (a
    transposed batch) goes through matmul and then ``add_(bias)`` (AddBackward0)."""
    from torch import nn
    X3 = [[[1, 2, 3, 4], [5, 6, 7, 8]], [[1, -2, 3, -4], [5, -6, 7, -8]], [[0.5, 2, -3, 4], [5, 1, 7, 8]]]
    W, b = [[1, 2, 3, 4], [0, 1, 0, -1], [2, 2, 1, 1]], [1, 2, 3]
    lin = nn.Linear(4, 3).double()
    with torch.no_grad():
        lin.weight.copy_(torch.tensor(W))
        lin.bias.copy_(torch.tensor(b))
    x = torch.tensor(X3, dtype=torch.float64, requires_grad=True)
    assert type(lin(x.transpose(0, 1)).grad_fn).__name__ == "AddBackward0"
    child = ('{"type": "Linear", "params": {"weight": %s, "bias": %s}}' % (W, b))
    from opcheck import Lambda, compare
    got = compare({"x": (X3, True)}, child, Lambda(lambda x: lin(x.transpose(0, 1))),
                  forward="h = m(x.transpose(0, 1))\nreturn (h * W).sum()")
    assert got == []
