"""``torch.any`` / ``torch.all`` (and ``x.any()``, ``x.all(dim)``) were refused ("a PyTorch function
adjoint does not model yet"), and so were the guards users put in gradient hooks around them:
``if torch.isnan(g).any(): return torch.zeros_like(g)``, ``assert torch.isfinite(g).all()``
(an assert also refused the truth value of any tensor). Both are bool tensors with no node; a
float element counts where it is not 0, a nan included. Expected values from real torch, run
here, and through verify (tests/gen)."""

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from gen import check  # noqa: E402

TEXT = """
name: anyall
dtype: DTYPE
inputs:
  x: {value: [[1, 0, -2], [0, 0, 0], [0.5, 1, 3]], requires_grad: true}
  b: {value: [[true, false, true], [true, true, true], [false, false, false]], dtype: bool}
model:
  inputs: [x, b]
  forward: |
    h = x * 2
    a1 = h.any()
    a2 = torch.any(h, dim=1)
    a3 = h.all(dim=0, keepdim=True)
    a4 = torch.all(b, 1)
    a5 = b.any(dim=(0, 1))
    a6 = (h > 1).any(-1, True)
    a7 = torch.all(h)
    return h * a2.unsqueeze(1) + h * a3 + h * a6 + (h * 3 if a1 else h)
loss: "sum(y * y)"
hooks:
  - {tensor: h, returns: "torch.zeros_like(grad) if torch.isnan(grad).any() else grad * 2"}
  - {tensor: x, does: "assert torch.isfinite(grad).all()"}
"""

NAMES = ("a1", "a2", "a3", "a4", "a5", "a6", "a7")


def _torch(dtype):
    x = torch.tensor([[1, 0, -2], [0, 0, 0], [0.5, 1, 3]], dtype=dtype, requires_grad=True)
    b = torch.tensor([[True, False, True], [True, True, True], [False, False, False]])

    def guard(g):
        return torch.zeros_like(g) if torch.isnan(g).any() else g * 2

    def check_finite(g):
        assert torch.isfinite(g).all()
    h = x * 2
    h.register_hook(guard)
    x.register_hook(check_finite)
    a = (h.any(), torch.any(h, dim=1), h.all(dim=0, keepdim=True), torch.all(b, 1), b.any(dim=(0, 1)),
         (h > 1).any(-1, True), torch.all(h))
    y = h * a[1].unsqueeze(1) + h * a[2] + h * a[5] + (h * 3 if a[0] else h)
    (y * y).sum().backward()
    return a, x.grad


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_any_and_all_in_a_forward_and_hook_guards_against_torch(dtype):
    text = TEXT.replace("DTYPE", dtype)
    flags, x_grad = _torch(getattr(torch, dtype))
    v = adjoint.loads(text).solve().variants[0]
    names = v.run.forward.names
    for name, want in zip(NAMES, flags):
        got = names[name]
        assert got.dtype == "bool" and got.grad_fn is None and not got.requires_grad, name
        assert tuple(got.shape) == tuple(want.shape), name
        assert torch.tensor(got.value.floats()).bool().flatten().tolist() == want.flatten().tolist(), name
    assert torch.tensor(v.grads["x"].floats(), dtype=getattr(torch, dtype)).reshape(3, 3).tolist() == x_grad.tolist()
    assert check(text, timeout=120).ok


def test_a_nan_counts_as_not_zero():
    """In --float64, where PyTorch's nan is followed: sqrt of a negative element is nan, and nan != 0."""
    text = """
name: nan
dtype: float64
inputs:
  x: {value: [-1, 0, 0], requires_grad: true}
model:
  inputs: [x]
  forward: |
    s = torch.sqrt(x)
    n = torch.isnan(s)
    return s * s.any() + s * n.all() + s * (s[1:]).any()
loss: "sum(y)"
"""
    v = adjoint.loads(text).solve(mode="float64").variants[0]
    s = torch.sqrt(torch.tensor([-1.0, 0, 0], dtype=torch.float64))
    want = [s.any().item(), torch.isnan(s).all().item(), s[1:].any().item()]
    assert want == [True, False, False]
    y = v.run.forward.names["model"].value.floats()
    assert torch.isnan(torch.tensor(y[0])) and list(y[1:]) == [0.0, 0.0]


def test_of_no_element_is_refused_at_its_place():
    text = """
name: e
inputs:
  x: {value: [1, 2], requires_grad: true}
model:
  inputs: [x]
  forward: "x * x[2:].any()"
"""
    with pytest.raises(adjoint.ProblemError) as err:
        adjoint.loads(text).solve()
    assert "any() of a tensor with no element is not modelled yet" in str(err.value)


def test_structure_takes_an_assert_of_a_computed_bool_tensor_to_hold():
    v = adjoint.loads(TEXT.replace("DTYPE", "float32")).solve(mode="structure").variants[0]
    assert v.error is None and [c.target for c in v.hook_calls] == ["h", "x"]


MODEL = '''\
import torch
from torch import nn


def nan_guard(grad):
    if torch.isnan(grad).any():
        return torch.zeros_like(grad)
    return grad * 2


def finite(module, grad_input, grad_output):
    assert torch.isfinite(grad_output[0]).all()


def make():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1)).double()
    m[0].weight.register_hook(nan_guard)
    m[2].register_full_backward_hook(finite)
    return m
'''


def test_nan_guards_in_a_users_hooks_are_imported_and_equal_the_users_module(tmp_path):
    from conftest import import_to_file, users_module_run
    from adjoint.torchside.verify import predict, verify_variant
    models = tmp_path / "guards.py"
    models.write_text(MODEL)
    out, text, problem = import_to_file(str(models), "make", ["x=2x2"])
    assert 'if torch.isnan(grad).any():' in text and 'does: "assert torch.isfinite(grad_output[0]).all()"' in text
    vp = predict(problem, None, "float64").variants[0]
    loss, grads = users_module_run(problem, str(models), "make")
    js = vp.to_json()
    for name, g in grads.items():
        assert torch.allclose(torch.tensor(js["grads"][name]["value"], dtype=torch.float64), g,
                              rtol=1e-10, atol=1e-12), name
    result = verify_variant(out, problem, vp, "float64", False, origin=True)
    assert result.ok, [(r.item, r.detail) for r in result.rows if not r.ok]
