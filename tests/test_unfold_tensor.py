"""``Tensor.unfold(dimension, size, step)`` was refused ("a PyTorch method adjoint does not model
yet"). at::unfold is a view (UnfoldBackward0): the dim becomes the number of windows, its stride
times ``step``, and the window's elements a new last dim with the dim's stride; its backward is
unfold_backward, zeros of the input's shape with each window's gradient added into its elements
(overlapping windows add up), a new contiguous tensor. Expected values come from real torch, run
here: the node, the shape, the hooks' gradients, the leaf's gradient, a hook's ``grad.view(-1)``,
``view`` of the (non-contiguous) result, a write through a view of disjoint windows (CopySlices),
and PyTorch's errors in its order."""

from __future__ import annotations

import pytest
from conftest import require_torch

torch = require_torch()

import glue_harness as glue  # noqa: E402

X = [[[1, 2, 3, 4, 5], [5, -6, 7, 8, 0], [9, 10, 11, -12, 3]], [[2, 4, 6, 8, 1], [1, 3, 5, 7, 9], [-1, 0, 2, 1, -2]]]

TEXT = """
name: unfold
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
    "last": "h.unfold(2, 2, 1)",
    "disjoint": "h.unfold(2, 2, 2)",
    "gaps": "h.unfold(2, 2, 3)",
    "whole": "h.unfold(1, 3, 1)",
    "first": "h.unfold(0, 1, 1)",
    "negative_dim": "h.unfold(-2, 2, 1)",
    "keywords": "h.unfold(dimension=2, size=3, step=2)",
    "size_one": "h.unfold(2, 1, 2)",
    "of_transpose": "h.transpose(1, 2).unfold(1, 3, 1)",
    "of_slice": "h[:, 1:, ::2].unfold(2, 2, 1)",
    "twice": "h.unfold(2, 3, 1).unfold(1, 2, 1)",
    "then_view": "h.unfold(2, 2, 1).view(-1)",
    "then_contiguous": "h.unfold(2, 2, 1).contiguous().view(-1)",
    "then_sum": "h.unfold(2, 3, 2).sum(-1)",
    "too_big": "h.unfold(2, 6, 1)",
    "negative_size": "h.unfold(2, -1, 1)",
    "zero_step": "h.unfold(2, 2, 0)",
    "range": "h.unfold(3, 1, 1)",
    "too_big_then_step": "h.unfold(1, 4, 0)",
}


def _torch(expr, does):
    x, o, calls, error = glue.hooked_run(X, expr, does, {"torch": torch})
    return error or (x.grad.tolist(), calls, type(o.grad_fn).__name__, list(o.shape), o.tolist())


def _solve(expr, does):
    got = glue.solve(glue.fill(TEXT, VALUE=X, FORWARD=expr, DOES=does))
    return glue.error(got) or (got["grads"]["x"]["value"], glue.hook_grads(got, "on_o"), got["values"]["o"]["grad_fn"],
                               got["values"]["o"]["shape"], got["values"]["o"]["value"])


@pytest.mark.parametrize("does", [glue.PLAIN, glue.VIEW])
@pytest.mark.parametrize("case", sorted(CASES))
def test_unfold_matches_torch(case, does):
    assert _solve(CASES[case], does) == _torch(CASES[case], does)


def test_unfold_node_and_saved_attributes_are_torchs():
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    u = (x * 2).unfold(-1, 3, 2)
    assert type(u.grad_fn).__name__ == "UnfoldBackward0"
    assert (u.grad_fn._saved_size, u.grad_fn._saved_step) == (3, 2)   # (the dimension as given: -1)
    assert u.stride() == (15, 5, 2, 1) and u._base is not None
    got = glue.solve(glue.fill(TEXT, VALUE=X, FORWARD="h.unfold(-1, 3, 2)", DOES=glue.PLAIN))
    assert got["values"]["o"]["grad_fn"] == "UnfoldBackward0"
    assert got["values"]["o"]["shape"] == list(u.shape)


INPLACE = """
name: unfold_inplace
dtype: float64
inputs:
  x: {value: VALUE, requires_grad: true}
model:
  forward: |
    h = x * 2
    d = h.UNFOLD
    d.mul_(3)
    return (h * h).sum() + (d * d * d).sum()
loss: "y"
hooks:
  - {tensor: h, label: on_h}
"""


@pytest.mark.parametrize("unfold", ["unfold(2, 2, 2)", "unfold(1, 1, 2)", "unfold(-1, 2, 3)"])
def test_a_write_through_disjoint_windows_is_torchs(unfold):
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    h = x * 2
    calls = []
    h.register_hook(lambda g: calls.append(g.tolist()))
    d = eval("h." + unfold, {"h": h})   # noqa: S307 -- the test's own expressions
    d.mul_(3)
    ((h * h).sum() + (d * d * d).sum()).backward()
    got = glue.solve(glue.fill(INPLACE, VALUE=X, UNFOLD=unfold))
    assert glue.error(got) is None, glue.error(got)
    assert got["values"]["h"]["grad_fn"] == type(h.grad_fn).__name__ == "CopySlices"
    assert got["values"]["h"]["value"] == h.tolist()
    assert got["grads"]["x"]["value"] == x.grad.tolist()
    assert glue.hook_grads(got, "on_h") == calls


@pytest.mark.parametrize("forward", ["h.unfold(2, 2, 1).mul_(3)", "h.unfold(2, 0, 1)", "h.sum().unfold(0, 1, 1)"])
def test_overlapping_writes_empty_windows_and_0d_are_refused(forward):
    from adjoint.format.errors import ProblemError
    with pytest.raises(ProblemError):
        _solve(forward, glue.PLAIN)
