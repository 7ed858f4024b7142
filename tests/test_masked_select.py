"""``masked_select`` was refused ("a PyTorch method adjoint does not model yet"). PyTorch 2.13
records ``MaskedSelectBackward0`` (saves the mask, then self): self and the mask broadcast against
each other, the selected elements in row-major order of that shape; the backward is
``zeros_like(self.expand(broadcast), preserve_format).masked_scatter_(mask, grad)``, summed to a
broadcast self's shape. Expected values come from real torch, run here: the node, the hooks'
gradients, the leaf's gradient, a hook's ``grad.view(-1)`` (which raises where torch's gradient
keeps a transposed layout), and PyTorch's errors for a mask that is not bool or does not
broadcast."""

from __future__ import annotations

import pytest
from conftest import require_torch

torch = require_torch()

import glue_harness as glue  # noqa: E402

X = [[1, 2, 3], [4, 5, -6]]

TEXT = """
name: masked_select
dtype: float64
inputs:
  x: {value: XVALUE, requires_grad: true}
  m: {value: MVALUE, dtype: MDTYPE}
model:
  inputs: [x, m]
  forward: |
    h = x * 2
    o = FORWARD
    return (o * o * o).sum() + o[0] * 3
loss: "y"
hooks:
  - {tensor: h, label: on_h, does: "DOES"}
  - {tensor: o, label: on_o}
"""

MASKS = {
    "same": [[True, False, True], [False, True, True]],
    "row": [True, False, True],
    "column": [[True], [False]],
    "larger": [[[True, False, True], [False, True, True]], [[False, False, True], [True, True, True]]],
    "zero_d": True,
}

CASES = {
    "method": ("h.masked_select(m)", lambda h, m: h.masked_select(m)),
    "function": ("torch.masked_select(h, m)", lambda h, m: torch.masked_select(h, m)),
    "broadcast_self": ("h[0].masked_select(m)", lambda h, m: h[0].masked_select(m)),
    "transposed": ("h.t().masked_select(m)", lambda h, m: h.t().masked_select(m)),
    "sliced": ("h[:, 1:].masked_select(m)", lambda h, m: h[:, 1:].masked_select(m)),
    "expanded": ("h.expand(2, 2, 3).masked_select(m)", lambda h, m: h.expand(2, 2, 3).masked_select(m)),
    "transposed_view": ("h.t().masked_select(m).view(-1)", lambda h, m: h.t().masked_select(m).view(-1)),
}


def _torch(build, mask, mdtype, view_hook):
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    h = x * 2
    h.register_hook(glue.h_hook(view_hook))
    calls = []
    try:
        o = build(h, torch.tensor(mask, dtype=getattr(torch, mdtype)))
        o.register_hook(lambda g: calls.append(g.tolist()))
        ((o * o * o).sum() + o[0] * 3).backward()
    except RuntimeError as exc:
        return glue.raised(exc)
    return x.grad.tolist(), calls, type(o.grad_fn).__name__


def _text(expr, mask, mdtype, does):
    return glue.fill(TEXT, XVALUE=X, MVALUE=str(mask).lower(), MDTYPE=mdtype, FORWARD=expr, DOES=does)


def _solve(expr, mask, mdtype, does):
    got = glue.solve(_text(expr, mask, mdtype, does))
    return glue.error(got) or (got["grads"]["x"]["value"], glue.hook_grads(got, "on_o"), got["values"]["o"]["grad_fn"])


@pytest.mark.parametrize("view_hook", [False, True])
@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_masked_select_matches_torch(case, mask, view_hook):
    expr, build = CASES[case]
    assert _solve(expr, MASKS[mask], "bool", glue.does(view_hook)) == _torch(build, MASKS[mask], "bool", view_hook)


def test_a_transposed_selves_gradient_keeps_its_layout():
    """zeros_like(preserve_format) of a transposed self: the hook on the transposed view's base
    sees a contiguous gradient, the one on the transposed view itself a transposed one."""
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    t = (x * 2).t()
    seen = []
    t.register_hook(lambda g: seen.append(g.stride()))
    t.masked_select(torch.tensor(MASKS["same"]).t()).sum().backward()
    assert seen == [(1, 3)]
    text = _text("t.masked_select(m.unsqueeze(1))", MASKS["row"], "bool", glue.PLAIN).replace(
        "{tensor: o, label: on_o}", "{tensor: o, label: on_o}\n  - {tensor: t, label: on_t, does: \"%s\"}" % glue.VIEW).replace(
        "o = t.", "t = h.t()\n    o = t.")
    got = glue.solve(text)
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    t = (x * 2).t()
    t.register_hook(glue.h_hook(True))
    o = t.masked_select(torch.tensor(MASKS["row"]).unsqueeze(1))
    with pytest.raises(RuntimeError) as exc:
        ((o * o * o).sum() + o[0] * 3).backward()
    assert glue.error(got) == glue.raised(exc.value)


ERRORS = {
    "int64_mask": ([[1, 0, 1], [0, 1, 1]], "int64"),
    "mismatch": ([True, False], "bool"),
    "int64_mismatch": ([1, 0], "int64"),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_masked_select_errors_are_pytorchs(case):
    mask, mdtype = ERRORS[case]
    want = _torch(lambda h, m: h.masked_select(m), mask, mdtype, False)
    assert isinstance(want[0], str) and want[0] == "RuntimeError"
    assert _solve("h.masked_select(m)", mask, mdtype, glue.PLAIN) == want
