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
