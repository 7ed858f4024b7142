"""``torch.max_pool1d/2d/3d`` and ``torch.adaptive_max_pool1d`` are ATen's own functions, not
``torch.nn.functional``'s, against real torch.

``torch.adaptive_max_pool1d(x, 2)`` returns the pair (output, indices) always, so ``[0]`` is
the output (it was read as ``F.adaptive_max_pool1d``'s output tensor, and ``[0]`` took its
first row: a wrong shape, loss and gradient). None of them takes ``return_indices``: passed by
position or keyword it is the argument parser's TypeError (it was honoured). The ``F.`` forms
and the bare names are unchanged. Each case: the loss and the input's gradient, or the error's
type and message.
"""

import pytest

import adjoint
from conftest import require_torch

X = [[[[1, 2, 3], [4, 5, 6], [7, 8, 9]], [[0, 1, 0], [2, 2, 1], [1, 1, 1]]]]

TEMPLATE = """
name: case
dtype: float64
inputs:
  a: {{value: {x}, requires_grad: true}}
model:
  inputs: [a]
  forward: "{forward}"
loss: "sum(y * y)"
"""

CASES = [
    "torch.adaptive_max_pool1d(a[0], 2)[0]",
    "torch.adaptive_max_pool1d(a[0], output_size=2)[0] * 2",
    "F.adaptive_max_pool1d(a[0], 2)[0]",
    "adaptive_max_pool1d(a[0], 2)[1]",
    "torch.adaptive_max_pool1d(a[0], 2, True)[0]",
    "torch.adaptive_max_pool1d(a[0], 2, return_indices=False)[0]",
    "torch.max_pool2d(a, 2, return_indices=True)[0]",
    "torch.max_pool2d(a, 2, 2, 0, 1, False, True)[0]",
    "torch.max_pool1d(a[0], 2, 1, 0, 1, False, False)",
    "torch.max_pool3d(a[None], 1, return_indices=False)",
    "torch.max_pool2d(a, 2, 1)",
    "F.max_pool2d(a, 2, 1, return_indices=True)[0]",
]


def _torch(forward):
    torch = require_torch()
    import torch.nn.functional as F
    from torch.nn.functional import adaptive_max_pool1d
    a = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    try:
        y = eval(forward, {"torch": torch, "F": F, "a": a, "adaptive_max_pool1d": adaptive_max_pool1d})
    except TypeError as e:
        return {"type": "TypeError", "message": str(e)}
    loss = (y * y).sum()
    loss.backward()
    return loss.item(), a.grad.tolist()


@pytest.mark.parametrize("forward", CASES)
def test_torch_namespace_pools(forward):
    want = _torch(forward)
    doc = adjoint.loads(TEMPLATE.format(x=X, forward=forward)).solve().variants[0].to_json()
    if isinstance(want, dict):
        assert {k: doc["error"][k] for k in ("type", "message")} == want
        return
    assert "error" not in doc
    assert (doc["loss"]["value"], doc["grads"]["a"]["value"]) == want
