"""An MLP whose hooks change gradients, as people write them: a full backward hook that
rescales what flows into the first layer, and a lambda that clips a weight's gradient.

    adjoint import examples/hooked.py:make_model --input x=2x3 -o hooked.yaml
    adjoint verify hooked.yaml --origin     # runs this module, with these hooks, against the prediction

`adjoint import` translates both bodies (``returns: "(grad_input[0] * 0.5,)"``,
``returns: "grad.clamp(-0.1, 0.1)"``), so the prediction has their effect, and
``verify --origin`` proves it against this module running its own hooks.
"""

import torch
from torch import nn

SCALE = 0.5


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(3, 4)
        self.fc2 = nn.Linear(4, 1)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def damp(module, grad_input, grad_output):
    return (grad_input[0] * SCALE,)


def make_model():
    torch.manual_seed(0)
    model = MLP()
    model.fc2.register_full_backward_hook(damp)
    model.fc1.weight.register_hook(lambda g: g.clamp(-0.1, 0.1))
    return model
