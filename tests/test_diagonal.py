"""``diagonal`` was refused ("a PyTorch method / function adjoint does not model yet"). at::diagonal
is a view (DiagonalBackward0): the other dims in order, the diagonal last, with strides the sum
of the two dims' and the storage offset the offset's; its backward is
``zeros(self).diagonal(...).copy_(grad)``, a new contiguous tensor. Expected values come from real
torch, run here: the node, the hooks' gradients, the leaf's gradient, a hook's ``grad.view(-1)``
on the diagonal (raising where torch's gradient is strided), an in-place write through the view
(CopySlices), and PyTorch's errors."""

from __future__ import annotations

import pytest
from conftest import require_torch

torch = require_torch()

import glue_harness as glue  # noqa: E402

X = [[[1, 2, 3, 4], [5, -6, 7, 8], [9, 10, 11, -12]], [[2, 4, 6, 8], [1, 3, 5, 7], [-1, 0, 2, 1]]]

TEXT = """
name: diagonal
dtype: float64
inputs:
  x: {value: VALUE, requires_grad: true}
model:
  forward: |
    h = x * 2
    o = FORWARD
    return (o * o * o).sum() + (o * o).reshape(-1)[0]
loss: "y"
hooks:
  - {tensor: h, label: on_h, does: "DOES"}
  - {tensor: o, label: on_o, does: "DOES"}
"""

CASES = {
    "default": "h.diagonal()",
    "function": "torch.diagonal(h, 1)",
    "negative_offset": "h.diagonal(-1, 1, 2)",
    "dims": "torch.diagonal(h, 0, 2, 0)",
    "keywords": "h.diagonal(offset=1, dim1=-1, dim2=-2)",
    "matrix": "h[0].diagonal()",
    "matrix_offset": "h[1].diagonal(2)",
    "transposed": "h[0].t().diagonal(-1)",
    "of_view": "h[:, 1:].diagonal(0, 1, 2)",
    "then_view": "h[0].diagonal().view(-1)",
    "identical": "h.diagonal(0, 1, 1)",
    "identical_wrapped": "h.diagonal(0, -1, 2)",
    "range": "h.diagonal(0, 0, 3)",
}


def _torch(expr, does):
    x, o, calls, error = glue.hooked_run(X, expr, does, {"torch": torch})
    return error or (x.grad.tolist(), calls, type(o.grad_fn).__name__, list(o.shape))


def _solve(expr, does):
    got = glue.solve(glue.fill(TEXT, VALUE=X, FORWARD=expr, DOES=does))
    return glue.error(got) or (got["grads"]["x"]["value"], glue.hook_grads(got, "on_o"), got["values"]["o"]["grad_fn"],
                               got["values"]["o"]["shape"])


@pytest.mark.parametrize("does", [glue.PLAIN, glue.VIEW])
@pytest.mark.parametrize("case", sorted(CASES))
def test_diagonal_matches_torch(case, does):
    assert _solve(CASES[case], does) == _torch(CASES[case], does)


INPLACE = """
name: diagonal_inplace
dtype: float64
inputs:
  x: {value: VALUE, requires_grad: true}
model:
  forward: |
    h = x * 2
    d = h.DIAG
    d.mul_(3)
    return (h * h).sum() + (d * d * d).sum()
loss: "y"
hooks:
  - {tensor: h, label: on_h}
"""


@pytest.mark.parametrize("diag", ["diagonal()", "diagonal(1, 1, 2)", "diagonal(-1, 2, 1)"])
def test_a_write_through_the_diagonal_view_is_torchs(diag):
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    h = x * 2
    calls = []
    h.register_hook(lambda g: calls.append(g.tolist()))   # where the file's hook goes: when h is bound
    d = eval("h." + diag, {"h": h})   # noqa: S307 -- the test's own expressions
    d.mul_(3)
    ((h * h).sum() + (d * d * d).sum()).backward()
    got = glue.solve(glue.fill(INPLACE, VALUE=X, DIAG=diag))
    assert got.get("error") is None, got.get("error")
    assert got["values"]["h"]["grad_fn"] == type(h.grad_fn).__name__ == "CopySlices"
    assert got["values"]["h"]["value"] == h.tolist()
    assert got["grads"]["x"]["value"] == x.grad.tolist()
    assert glue.hook_grads(got, "on_h") == calls


def test_an_empty_diagonal_is_refused():
    assert torch.zeros(2, 3).diagonal(5).shape == (0,)
    from adjoint.format.errors import ProblemError
    with pytest.raises(ProblemError):
        _solve("h.diagonal(5)", glue.PLAIN)
