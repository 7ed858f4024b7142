"""A float written inside a tuple or list that PyTorch takes as ints (a dim list, a permutation,
sizes): PyTorch's argument parser raises a TypeError ("permute(): argument 'dims' (position 1)
must be tuple of ints, but found element of type float at pos 0", or its overload list), but
adjoint took ``1.0`` as the int 1 and answered the call. Its wording depends on the overloads,
so adjoint refuses the call at the line. Expected: real torch raises TypeError for each call
(run here); adjoint refuses it (exit 2), and the same calls with ints are still answered."""

from __future__ import annotations

import pytest
from conftest import require_torch

torch = require_torch()
F = torch.nn.functional

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402

TEXT = """
name: float_in_ints
dtype: float64
inputs:
  x: {value: [[1, 2], [3, 4]], requires_grad: true}
model:
  forward: |
    h = x * 2
    a = CALL
    return a.sum()
"""

CALLS = {
    "h.permute((1.0, 0))": (lambda h: h.permute((1.0, 0)), "h.permute((1, 0))"),
    "h.view((4.0,))": (lambda h: h.view((4.0,)), "h.view((4,))"),
    "h.reshape([4.0])": (lambda h: h.reshape([4.0]), "h.reshape([4])"),
    "h.sum((0.0,))": (lambda h: h.sum((0.0,)), "h.sum((0,))"),
    "torch.sum(h, dim=[0.0])": (lambda h: torch.sum(h, dim=[0.0]), "torch.sum(h, dim=[0])"),
    "h.flip([0.0])": (lambda h: h.flip([0.0]), "h.flip([0])"),
    "torch.flip(h, (0.0,))": (lambda h: torch.flip(h, (0.0,)), "torch.flip(h, (0,))"),
    "h.movedim((1.0, 0), (0, 1))": (lambda h: h.movedim((1.0, 0), (0, 1)), "h.movedim((1, 0), (0, 1))"),
    "h.movedim(0, (1.5,))": (lambda h: h.movedim(0, (1.5,)), "h.movedim((0,), (1,))"),
    "h.expand((2.0, 2))": (lambda h: h.expand((2.0, 2)), "h.expand((2, 2))"),
    "torch.zeros((2.0, 2)) + h": (lambda h: torch.zeros((2.0, 2)) + h, "torch.zeros((2, 2), dtype=torch.float64) + h"),
    "F.pad(h, (1.0, 0))": (lambda h: F.pad(h, (1.0, 0)), "F.pad(h, (1, 0))"),
    "h.amax((0.0,))": (lambda h: h.amax((0.0,)), "h.amax((0,))"),
    "h.split([1.0, 1])[0]": (lambda h: h.split([1.0, 1])[0], "h.split([1, 1])[0]"),
    "F.interpolate(h[None], size=(4.0,))": (lambda h: F.interpolate(h[None], size=(4.0,)),
                                            "F.interpolate(h[None], size=(4,))"),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_float_among_ints_is_refused_where_torch_raises(call):
    build, with_ints = CALLS[call]
    h = torch.tensor([[1., 2], [3, 4]], dtype=torch.float64, requires_grad=True) * 2
    with pytest.raises(TypeError):
        build(h)
    with pytest.raises(ProblemError, match="where PyTorch takes ints"):
        adjoint.loads(TEXT.replace("CALL", call)).solve()
    got = adjoint.loads(TEXT.replace("CALL", with_ints)).solve().to_json()["variants"]["default"]
    assert got.get("error") is None
