"""AccumulateGrad takes the gradient itself as ``.grad`` only when nothing else holds it, and a view
of it held elsewhere holds it (a view's ViewInfo keeps its base): ``SumBackward0``'s expanded view
waiting in a module's BackwardHookFunctionBackward buffer makes p0's AccumulateGrad copy, so the
full backward hook's in-place write later reaches u1.grad only (sweep 89071/465). Checked against
the script a user writes; tests/data/regressions/accumulate_grad_copies_a_gradient_a_waiting_view_holds.yaml
holds the reshape and transpose cases."""

from fractions import Fraction

import pytest

import adjoint

FILE = """\
name: waiting-view
dtype: float64
inputs:
  u1: {value: [[1]], requires_grad: true}
model:
  inputs: [u1]
  params:
    p0: 0.125
  forward: |
    return -((p0 + 1.0) + sum(u1))
loss: "y * 3"
hooks:
  - {module: model, kind: full_backward, does: "grad_input[0].add_(0.5)"}
"""


@pytest.mark.torch
def test_the_hooks_write_does_not_reach_the_copied_grad():
    import torch
    import torch.nn as nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.p0 = nn.Parameter(torch.tensor(0.125, dtype=torch.float64))

        def forward(self, u1):
            return -((self.p0 + 1.0) + torch.sum(u1))

    m = M()
    u1 = torch.tensor([[1.0]], dtype=torch.float64, requires_grad=True)
    m.register_full_backward_hook(lambda mod, gi, go: gi[0].add_(0.5) and None)
    (m(u1) * 3).backward()

    grads = adjoint.loads(FILE, name="w").solve().variants[0].to_json()["grads"]
    assert Fraction(grads["p0"]["exact"]) == Fraction(m.p0.grad.item()) == -3
    assert Fraction(grads["u1"]["exact"][0][0]) == Fraction(u1.grad.item()) == Fraction(-5, 2)
