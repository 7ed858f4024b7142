"""``torch.isfinite`` and ``torch.nan_to_num`` were refused ("a PyTorch function adjoint does not model
yet"), in forwards and in hook bodies. isfinite is ATen's composite ``(x == x) * (x.abs() != inf)``:
no node for its bool result, but the abs's AbsBackward0 is made (and packs x) when x requires grad;
nan_to_num is NanToNumBackward0 (saves self; backward ``grad * isfinite(self)``), its infinities
replaced by the dtype's largest finite values unless given. Expected values from real torch, run
here, and through verify (tests/gen)."""

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from gen import check  # noqa: E402

TEXT = """
name: f
dtype: DTYPE
inputs:
  x: {value: [1, 2, -3, 0.5], requires_grad: true}
  m: {value: [false, true, true, false], dtype: bool}
  s: [1, 1, -1, 1]
model:
  inputs: [x, m, s]
  forward: |
    h = x.masked_fill(m, float("-inf")) * s
    f = torch.isfinite(h)
    y = torch.nan_to_num(h, nan=0.5)
    z = h.nan_to_num(neginf=-2.5, posinf=3)
    return (y * 1e-30 * x).sum() + (z * z).sum() + torch.where(f, h, x).sum()
hooks:
  - {tensor: h}
  - {saved_tensors: {pack: "x", unpack: "x"}}
"""


def _torch(dtype):
    x = torch.tensor([1, 2, -3, 0.5], dtype=dtype, requires_grad=True)
    m = torch.tensor([False, True, True, False])
    packs, calls = [], []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: packs.append(t.grad_fn) or t, lambda t: t):
        h = x.masked_fill(m, float("-inf")) * torch.tensor([1, 1, -1, 1], dtype=dtype)
        h.register_hook(lambda g: calls.append(g.tolist()))
        f = torch.isfinite(h)
        y = torch.nan_to_num(h, nan=0.5)
        z = h.nan_to_num(neginf=-2.5, posinf=3)
        out = (y * 1e-30 * x).sum() + (z * z).sum() + torch.where(f, h, x).sum()
    out.backward()
    return f.tolist(), y.tolist(), z.tolist(), x.grad.tolist(), calls, len(packs), type(y.grad_fn).__name__


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_in_a_forward_against_torch(dtype):
    text = TEXT.replace("DTYPE", dtype)
    f, y, z, x_grad, calls, npacks, node = _torch(getattr(torch, dtype))
    v = adjoint.loads(text).solve().variants[0]
    names = v.run.forward.names

    def floats(t):
        return torch.tensor(t.value.floats(), dtype=getattr(torch, dtype)).tolist()
    assert [bool(b) for b in names["f"].value.floats()] == f
    assert floats(names["y"]) == y and floats(names["z"]) == z
    assert names["y"].grad_fn.name == node == "NanToNumBackward0"
    assert torch.tensor(v.grads["x"].floats(), dtype=getattr(torch, dtype)).tolist() == x_grad
    assert len([c for c in v.hook_calls if c.kind == "pack"]) == npacks   # the dropped abs's pack too
    assert check(text, timeout=120).ok


def test_in_hook_bodies():
    text = """
name: hb
dtype: float32
inputs:
  x: {value: [1, 2, -3, 0.5], requires_grad: true}
  m: {value: [false, true, true, false], dtype: bool}
model:
  inputs: [x, m]
  forward: |
    h = x * 2
    return (h.masked_fill(m, float("-inf")).exp() * x).sum()
hooks:
  - {tensor: h, returns: "torch.nan_to_num(grad, nan=0.0)"}
  - {tensor: x, returns: "torch.where(torch.isfinite(grad), grad, torch.zeros_like(grad))"}
"""
    outcome = check(text, timeout=120)
    assert outcome.ok, outcome.report()
