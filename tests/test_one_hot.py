"""``F.one_hot`` was refused ("a PyTorch function adjoint does not model yet"), though users build
loss targets with it. at::one_hot checks the index's dtype, its smallest value, then infers or
checks ``num_classes``, and returns a new int64 tensor (zeros scattered with ones): no node.
Expected values come from real torch, run here: the leaf's and a hook's gradients through the
float ops that use it, and PyTorch's errors for bad indices and class counts."""

from __future__ import annotations

import pytest
from conftest import require_torch

torch = require_torch()
F = torch.nn.functional

import adjoint  # noqa: E402

X = [[1, 2, 3], [4, 5, -6]]
I = [0, 2]
K = [[0, 2], [1, 1]]

TEXT = """
name: one_hot
dtype: DTYPE
inputs:
  x: {value: VALUE, requires_grad: true}
  i: {value: IVALUE, dtype: int64}
  k: {value: KVALUE, dtype: int64}
model:
  inputs: [x, i, k]
  forward: |
    h = x * 2
    return FORWARD
loss: "y"
hooks:
  - {tensor: h, label: on_h}
"""

CASES = {
    "times": ("(h * F.one_hot(i, 3)).sum()", lambda h, i, k: (h * F.one_hot(i, 3)).sum()),
    "inferred": ("(h * F.one_hot(i)).sum()", lambda h, i, k: (h * F.one_hot(i)).sum()),
    "wider": ("(h[:, :2] * F.one_hot(i, num_classes=5)[:, 1:3]).sum()",
              lambda h, i, k: (h[:, :2] * F.one_hot(i, num_classes=5)[:, 1:3]).sum()),
    "two_d": ("(h.unsqueeze(1) * F.one_hot(k)).sum()", lambda h, i, k: (h.unsqueeze(1) * F.one_hot(k)).sum()),
    "zero_d": ("(h[0] * torch.nn.functional.one_hot(i[1], 3)).sum()",
               lambda h, i, k: (h[0] * torch.nn.functional.one_hot(i[1], 3)).sum()),
    "of_argmax": ("(h * F.one_hot(h.argmax(-1), 3)).sum()", lambda h, i, k: (h * F.one_hot(h.argmax(-1), 3)).sum()),
    "mse_target": ("F.mse_loss(h, F.one_hot(i, 3).to(h.dtype), reduction='sum')",
                   lambda h, i, k: F.mse_loss(h, F.one_hot(i, 3).to(h.dtype), reduction='sum')),
    "summed": ("(h * F.one_hot(k, 3).sum(1)).sum()", lambda h, i, k: (h * F.one_hot(k, 3).sum(1)).sum()),
    "too_few": ("(h * F.one_hot(i, 2)).sum()", lambda h, i, k: (h * F.one_hot(i, 2)).sum()),
    "zero_classes": ("(h * F.one_hot(i, 0)).sum()", lambda h, i, k: (h * F.one_hot(i, 0)).sum()),
    "float_index": ("(h * F.one_hot(h, 3)).sum()", lambda h, i, k: (h * F.one_hot(h, 3)).sum()),
    "bool_index": ("(h * F.one_hot(i > 0, 3)).sum()", lambda h, i, k: (h * F.one_hot(i > 0, 3)).sum()),
}

INDICES = {"given": I, "negative": [0, -1], "large": [0, 3]}


def _torch(build, dtype, ivalue):
    x = torch.tensor(X, dtype=getattr(torch, dtype), requires_grad=True)
    h = x * 2
    calls = []
    h.register_hook(lambda g: calls.append(g.tolist()))
    try:
        build(h, torch.tensor(ivalue), torch.tensor(K)).backward()
    except RuntimeError as exc:
        return (type(exc).__name__, str(exc))
    return x.grad.tolist(), calls


def _solve(expr, dtype, ivalue):
    text = (TEXT.replace("DTYPE", dtype).replace("IVALUE", str(ivalue)).replace("KVALUE", str(K))
            .replace("VALUE", str(X)).replace("FORWARD", expr))
    got = adjoint.loads(text).solve().to_json()["variants"]["default"]
    if got.get("error"):
        return (got["error"]["type"], got["error"]["message"])
    return got["grads"]["x"]["value"], [c["args"]["grad"]["value"] for c in got["hook_calls"]]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("indices", sorted(INDICES))
@pytest.mark.parametrize("case", sorted(CASES))
def test_one_hot_matches_torch(case, indices, dtype):
    expr, build = CASES[case]
    assert _solve(expr, dtype, INDICES[indices]) == _torch(build, dtype, INDICES[indices])


def test_one_hot_is_a_new_int64_tensor_with_no_node():
    out = F.one_hot(torch.tensor(K))
    assert (out.dtype, out.grad_fn, out.is_contiguous()) == (torch.int64, None, True)
    text = TEXT.replace("DTYPE", "float64").replace("IVALUE", str(I)).replace("KVALUE", str(K)) \
        .replace("VALUE", str(X)).replace("return FORWARD", "o = F.one_hot(k)\n    return (h.unsqueeze(1) * o).sum()")
    got = adjoint.loads(text).solve().to_json()["variants"]["default"]
    assert got["values"]["o"]["grad_fn"] is None
    assert got["values"]["o"]["value"] == out.tolist()
