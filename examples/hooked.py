"""An MLP whose hooks change gradients, as people write them: a full backward hook that
rescales what flows into the first layer, a lambda that clips a weight's gradient, and a
hook that clips a bias's gradient in place (it returns None: the write is what flows on).

    adjoint import examples/hooked.py:make_model --input x=2x3 -o hooked.yaml
    adjoint verify hooked.yaml --origin     # runs this module, with these hooks, against the prediction

`adjoint import` translates the three bodies (``returns: "(grad_input[0] * 0.5,)"``,
``returns: "grad.clamp(-0.1, 0.1)"``, ``does: "grad.clamp_(-0.05, 0.05)"``), so the
prediction has their effect, and ``verify --origin`` proves it against this module running
its own hooks (``make_bare``: the same module without them, for comparison).
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


def clip_(grad):
    grad.clamp_(-0.05, 0.05)


def make_model():
    model = make_bare()
    model.fc2.register_full_backward_hook(damp)
    model.fc1.weight.register_hook(lambda g: g.clamp(-0.1, 0.1))
    model.fc1.bias.register_hook(clip_)
    return model


def make_bare():
    torch.manual_seed(0)
    return MLP()
