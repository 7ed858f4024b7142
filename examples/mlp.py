"""A small MLP with LayerNorm and dropout, as one would write it with torch.nn.

    adjoint import examples/mlp.py:make_model --input x=2x4 -o mlp.yaml
"""

import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    def __init__(self, d_in=4, hidden=4, d_out=2, p=0.1):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.drop = nn.Dropout(p)
        self.fc2 = nn.Linear(hidden, d_out)

    def forward(self, x):
        h = F.relu(self.norm(self.fc1(x)))
        h = self.drop(h)
        return self.fc2(h)


GRAD_NORMS = []


def log_grad(module, grad_input, grad_output):
    GRAD_NORMS.append(grad_output[0].norm().item())


def make_model():
    torch.manual_seed(0)
    model = MLP().eval()    # inference mode: dropout passes everything through
    model.fc1.register_full_backward_hook(log_grad)
    return model
