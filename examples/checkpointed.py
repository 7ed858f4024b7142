"""A model that trades memory for compute with ``torch.utils.checkpoint``: two blocks
checkpointed (``f`` non-reentrant, twice, once with ``early_stop=False``; ``g`` reentrant) and
a Tanh checkpointed without ``use_reentrant`` (PyTorch warns, then runs the reentrant
variant), with hooks inside the blocks that fire again when a block is recomputed.

    adjoint import examples/checkpointed.py:make_model --input x=2x3 -o checkpointed.yaml
    adjoint verify checkpointed.yaml --origin   # runs this module, with these hooks, against the prediction

`adjoint import` writes each call as the problem format writes it
(``checkpoint(f, x * w, use_reentrant=False)``), never tracing through it, so the answer has
every hook call of the recomputation (marked recomputed) and of the reentrant backward
(marked reentrant), and ``verify --origin`` compares them one by one with this module's.
"""

import torch
import torch.utils.checkpoint as cp
from torch import nn
from torch.utils.checkpoint import checkpoint

CALLS = []


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.act = nn.Tanh()

    def forward(self, x):
        return self.act(self.lin(x)) * 2


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.tensor([0.5, -1.0, 2.0]))
        self.f = Block()
        self.g = Block()
        self.act = nn.Tanh()
        self.head = nn.Linear(3, 1)

    def forward(self, x):
        h = x * self.w
        a = checkpoint(self.f, h, use_reentrant=False)
        b = cp.checkpoint(self.g, a, use_reentrant=True)
        c = checkpoint(self.f, b, use_reentrant=False, early_stop=False)
        d = checkpoint(self.act, c, preserve_rng_state=False)
        return self.head(d + a)


def pre(module, args):
    CALLS.append("forward_pre")


def fwd(module, args, output):
    CALLS.append("forward")


def bwd(module, grad_input, grad_output):
    CALLS.append("full_backward")


def make_model():
    torch.manual_seed(0)
    m = Net().double()
    m.f.lin.register_full_backward_hook(bwd)
    m.f.act.register_forward_pre_hook(pre)
    m.g.act.register_forward_hook(fwd)
    m.g.lin.register_full_backward_hook(bwd)
    m.act.register_full_backward_hook(bwd)
    return m
