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


def test_a_grad_laid_out_otherwise_warns_once_as_a_fresh_process_does():
    """AccumulateGrad's CHECK_RESULT after variable_grad += new_grad: a .grad set to grad.t() warns
    (TORCH_WARN_ONCE) in the next backward, once per process -- checked in a fresh torch process,
    since verify's torch side removes repeats by the engine's own list."""
    import json
    import os
    import subprocess
    import sys
    script = ("import json, warnings, torch\n"
              "x = torch.tensor([[1., 2], [3, 4]], dtype=torch.float64)\n"
              "w = torch.tensor([[1., 2], [0.5, -1]], dtype=torch.float64, requires_grad=True)\n"
              "h = w.register_post_accumulate_grad_hook(lambda t: setattr(t, 'grad', t.grad.t()))\n"
              "with warnings.catch_warnings(record=True) as got:\n"
              "    warnings.simplefilter('always')\n"
              "    ((x * w) ** 2).sum().backward(); h.remove()\n"
              "    for _ in range(2):\n"
              "        ((x * w) ** 2).sum().backward()\n"
              "print(json.dumps([str(m.message) for m in got]))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    torch_messages = json.loads(out.stdout)
    path = os.path.join(os.path.dirname(__file__), "data", "regressions",
                        "grad_set_transposed_layout_contract_warning.yaml")
    got = adjoint.load(path).solve().to_json()["variants"]["default"]["warnings"]
    assert [w["message"] for w in got] == torch_messages[:1] and len(torch_messages) == 1
