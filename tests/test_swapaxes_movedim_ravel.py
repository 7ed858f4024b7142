"""``swapaxes`` / ``swapdims``, ``movedim`` / ``moveaxis`` and ``ravel`` were refused ("a PyTorch
method adjoint does not model yet"), though users write them for shape work. They are ATen
composites: ``swapaxes`` and ``swapdims`` are ``transpose`` (TransposeBackward0); ``movedim``
wraps and checks its dims, then ``permute`` (PermuteBackward0, an identity order too); ``ravel``
is ``contiguous().view(-1)`` (CloneBackward0 first for a non-contiguous tensor, then
ViewBackward0, a 1-d tensor's too). Expected values come from real torch, run here: the node
names, the hooks' gradients, the leaf's gradient, and a hook's ``grad.view(-1)``, which raises
exactly where torch's gradient is not contiguous (a transposed or permuted layout)."""

from __future__ import annotations

import pytest
from conftest import require_torch

torch = require_torch()

import glue_harness as glue  # noqa: E402

X = [[[1, 2], [3, 4]], [[5, 6], [7, -8]]]

TEXT = """
name: shape_aliases
dtype: float64
inputs:
  x: {value: VALUE, requires_grad: true}
model:
  forward: |
    h = x * 2
    o = FORWARD
    return (o * o * o).sum() + (o * o)[0].sum()
loss: "y"
hooks:
  - {tensor: o, label: on_o}
  - {tensor: h, label: on_h, does: "DOES"}
"""

CASES = {
    "swapaxes": ("torch.swapaxes(h, 0, 2)", lambda h: torch.swapaxes(h, 0, 2)),
    "swapaxes_method": ("h.swapaxes(-1, 1)", lambda h: h.swapaxes(-1, 1)),
    "swapdims": ("h.swapdims(0, 1)", lambda h: h.swapdims(0, 1)),
    "swapdims_same": ("torch.swapdims(h, 2, 2)", lambda h: torch.swapdims(h, 2, 2)),
    "movedim": ("h.movedim(0, 2)", lambda h: h.movedim(0, 2)),
    "movedim_tuple": ("torch.movedim(h, (0, 1), (2, 0))", lambda h: torch.movedim(h, (0, 1), (2, 0))),
    "moveaxis": ("h.moveaxis(-1, 0)", lambda h: h.moveaxis(-1, 0)),
    "movedim_identity": ("h.movedim(1, 1)", lambda h: h.movedim(1, 1)),
    "movedim_keywords": ("h.movedim(source=0, destination=1)", lambda h: h.movedim(source=0, destination=1)),
    "ravel": ("h.ravel()", lambda h: h.ravel()),
    "ravel_transposed": ("h.transpose(0, 1).ravel()", lambda h: h.transpose(0, 1).ravel()),
    "ravel_1d": ("torch.ravel(h[0, 0])", lambda h: torch.ravel(h[0, 0])),
}


def _raised(fn):
    try:
        return fn(), None
    except Exception as exc:   # noqa: BLE001 -- the error PyTorch raises is the expected value
        return None, (type(exc).__name__, str(exc))


def _torch(build, view_hook: bool):
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    h = x * 2
    o = build(h)
    names = [type(o.grad_fn).__name__] + [type(f).__name__ for f, _ in o.grad_fn.next_functions if f is not None]
    calls = []
    o.register_hook(lambda g: calls.append(g.tolist()))
    h.register_hook(glue.h_hook(view_hook))
    _, error = _raised(lambda: ((o * o * o).sum() + (o * o)[0].sum()).backward())
    return names, calls, (x.grad.tolist() if x.grad is not None else None), error


def _solve(expr, does):
    return glue.solve(glue.fill(TEXT, VALUE=X, FORWARD=expr, DOES=does))


@pytest.mark.parametrize("case", sorted(CASES))
def test_shape_aliases_match_torch(case):
    expr, build = CASES[case]
    names, calls, x_grad, error = _torch(build, view_hook=False)
    assert error is None
    got = _solve(expr, glue.PLAIN)
    assert glue.error(got) is None, glue.error(got)
    assert got["values"]["o"]["grad_fn"] == names[0]
    assert glue.hook_grads(got, "on_o") == calls
    assert got["grads"]["x"]["value"] == x_grad


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hooks_view_raises_where_torchs_gradient_is_not_contiguous(case):
    expr, build = CASES[case]
    _, _, x_grad, error = _torch(build, view_hook=True)
    got = _solve(expr, glue.VIEW)
    assert glue.error(got) == error
    if error is None:
        assert got["grads"]["x"]["value"] == x_grad


ERRORS = {
    "movedim_repeated_destination": ("h.movedim((0, 1), (2, 2))", lambda h: h.movedim((0, 1), (2, 2))),
    "movedim_repeated_source": ("h.movedim((0, 0), (1, 2))", lambda h: h.movedim((0, 0), (1, 2))),
    "movedim_counts": ("h.movedim((0, 1), (2,))", lambda h: h.movedim((0, 1), (2,))),
    "movedim_range": ("h.movedim(0, 3)", lambda h: h.movedim(0, 3)),
    "swapaxes_range": ("h.swapaxes(0, 3)", lambda h: h.swapaxes(0, 3)),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_shape_alias_errors_are_pytorchs(case):
    expr, build = ERRORS[case]
    _, want = _raised(lambda: build(torch.tensor(X, dtype=torch.float64, requires_grad=True) * 2))
    assert want is not None
    assert glue.error(_solve(expr, glue.PLAIN)) == want
