"""``x.item()``: a one-element tensor's value as a Python number, as debugging hooks print it
(``print(grad.norm().item())``) and forwards read it. It was refused ("Tensor.item is a PyTorch
method adjoint does not model yet"). A rational value is exact (an int for int64); one that is
not (a norm's square root) may be printed, and computing with it is refused. Expected values from
real torch, run here."""

from __future__ import annotations

import contextlib
import io

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402
from gen import check  # noqa: E402

TEXT = """
name: item_hooks
dtype: float64
inputs:
  x: {value: [0.5, -1], requires_grad: true}
  k: {value: [3], dtype: int64}
model:
  inputs: [x, k]
  forward: |
    h = x * 3
    s = h.sum().item()
    return (h * s).sum() + k.item()
hooks:
  - {tensor: x, does: "print('grad norm', grad.norm().item())"}
  - {tensor: x, returns: "grad * grad.abs().max().item()"}
variants:
  plain: {}
  several_elements:
    hooks: [{tensor: x, does: "print(grad.item())"}]
"""


def _torch(variant: str):
    x = torch.tensor([0.5, -1], dtype=torch.float64, requires_grad=True)
    k = torch.tensor([3])
    if variant == "plain":
        x.register_hook(lambda g: print("grad norm", g.norm().item()))
        x.register_hook(lambda g: g * g.abs().max().item())
    else:
        x.register_hook(lambda g: print(g.item()))
    h = x * 3
    s = h.sum().item()
    loss = (h * s).sum() + k.item()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            loss.backward()
    except RuntimeError as e:
        return "RuntimeError", str(e), loss.item()
    return None, x.grad.tolist(), loss.item()


@pytest.mark.parametrize("variant", ["plain", "several_elements"])
def test_item_is_torchs(variant):
    got = adjoint.loads(TEXT).solve().to_json()["variants"][variant]
    kind, detail, loss = _torch(variant)
    if kind is None:
        assert got["values"]["y"]["value"] == loss
        assert got["grads"]["x"]["value"] == detail
    else:
        assert (got["error"]["type"], got["error"]["message"]) == (kind, detail)


def test_verify_agrees():
    outcome = check(TEXT, timeout=60)
    assert outcome.ok, outcome.report()


def test_computing_with_an_irrational_item_is_refused():
    text = TEXT.replace('returns: "grad * grad.abs().max().item()"', 'returns: "grad / grad.norm().item()"')
    with pytest.raises(ProblemError, match=r"x.item\(\) of a value that is not rational .* may be printed, but "
                                           r"computing with it is not modelled yet"):
        adjoint.loads(text).solve()


def test_an_integral_float_item_is_a_float():
    """x[1].item() of a float tensor holding -1.0 is the Python float -1.0: computed with, it is
    that number (the answer agrees with torch); as a size, PyTorch refuses it (view(n, ...):
    TypeError), which adjoint refuses to answer rather than take it for the int -1. It was refused
    outright (adjoint's numbers told an int from a float only by how the file writes them)."""
    text = TEXT.replace("    s = h.sum().item()\n", "    s = x[1].item()\n")
    outcome = check(text, timeout=60)
    assert outcome.ok, outcome.report()
    x = torch.tensor([1., 2, 3])
    with pytest.raises(TypeError):
        x.view(x[2].item(), -1)
    sized = text.replace("return (h * s).sum() + k.item()", "return (h.view(-s, 2) * s).sum() + k.item()")
    with pytest.raises(ProblemError, match=r"Tensor.view\(\): a float among the sizes"):
        adjoint.loads(sized).solve()
