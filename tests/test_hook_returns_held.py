"""A hook returning a tensor the file's code also holds -- a forward tensor, a leaf, a detach() of
one -- hands the engine that very tensor: a later hook's in-place write into the gradient
writes it (PyTorch then raises the forward's version error where a node saved it, or changes
the leaf). adjoint answered as if the hook had returned a new tensor (found by a hook-bodies
trial); the later hook is now handed that tensor itself. Torch runs in the test."""

from __future__ import annotations

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402

FILE = """
name: hook_returns_held
dtype: float64
inputs:
  x: {value: [0.5, -1.0], requires_grad: true}
model:
  inputs: [x]
  params: {w: [2.0, 3.0]}
  forward: |
    h = x * 3
    k = h * h
    return k * w
loss: "sum(y)"
hooks:
  - {tensor: k, label: k1, returns: "RETURNED"}
  - {tensor: k, label: k2, does: "WRITE"}
"""


def _torch(returned: str, write: bool):
    x = torch.tensor([0.5, -1.0], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([2.0, 3.0], dtype=torch.float64, requires_grad=True)
    h = x * 3
    k = h * h
    k.register_hook(lambda g: {"h": h, "x": x}[returned])
    if write:
        k.register_hook(lambda g: g.mul_(2))
    (k * w).sum().backward()
    return x.grad.tolist(), x.detach().tolist()


def test_forward_tensor_written_is_torchs_version_error():
    with pytest.raises(RuntimeError, match="modified by an inplace operation") as caught:
        _torch("h", True)
    text = FILE.replace("RETURNED", "h").replace("WRITE", "grad.mul_(2)")
    got = adjoint.loads(text).solve().to_json()["variants"]["default"]["error"]
    assert (got["type"], got["message"], got["during"]) == ("RuntimeError", str(caught.value), "backward")


def test_leaf_returned_then_written_changes_the_leaf():
    grad, leaf = _torch("x", True)
    assert leaf == [1.0, -2.0]          # PyTorch wrote the leaf itself
    text = FILE.replace("RETURNED", "x").replace("WRITE", "grad.mul_(2)")
    got = adjoint.loads(text).solve().to_json()["variants"]["default"]
    assert got["leaf_values"]["x"]["value"] == leaf
    assert got["grads"]["x"]["value"] == grad


@pytest.mark.parametrize("returned", ["h", "x"])
def test_returned_without_a_later_write_is_answered(returned):
    grad, _leaf = _torch(returned, False)
    text = FILE.replace("RETURNED", returned).replace('does: "WRITE"', 'kind: hook')
    got = adjoint.loads(text).solve().to_json()["variants"]["default"]["grads"]["x"]["value"]
    assert got == grad
