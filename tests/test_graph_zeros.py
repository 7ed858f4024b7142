"""The cookbook's zeros_vs_none picture: the zeros a full backward hook is handed for an input
that does not require grad are drawn, red, on the slot of scale's input BackwardHookFunction
that has no edge (the zeros go nowhere after the hook)."""

from __future__ import annotations

import os

import pytest

import adjoint
from adjoint.render.graph import ZERO, picture

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBLEM = os.path.join(ROOT, "problems", "zeros_vs_none.yaml")


def test_the_zeros_slot_is_drawn_red():
    pred = adjoint.load(PROBLEM).solve()
    dot = picture(pred["zeros"]).source
    red = [line for line in dot.splitlines() if ZERO in line]
    assert any("zeros (materialized), no edge" in line for line in red), dot
    assert any("-> " in line and "label=zeros" in line and "taillabel=1" in line for line in red), dot
    assert ZERO not in picture(pred["frozen_input"]).source    # nothing materialized there


@pytest.mark.torch
def test_in_torch_the_hook_is_handed_zeros_for_c_which_has_no_edge():
    import torch
    from torch import nn

    class Scale(nn.Module):
        def forward(self, x, c):
            return x * c

    scale, lin = Scale(), nn.Linear(2, 1)
    seen = []
    scale.register_full_backward_hook(lambda m, gi, go: seen.append(gi))
    x = torch.tensor([1.5, -2.0], requires_grad=True)
    c = torch.tensor([3.0, 0.5])
    (lin(scale(x, c)) ** 2).sum().backward()
    (grad_input,) = seen
    assert torch.equal(grad_input[1], torch.zeros(2)) and c.grad_fn is None and not c.requires_grad
