"""A pre-norm transformer block: LayerNorm, multi-head self-attention, an MLP (ReLU, as
nn.TransformerEncoderLayer has by default), residuals.

    adjoint import examples/transformer.py:make_model --input x=1x1x2 -o transformer.yaml

One token (seq 1) keeps the exact solve to seconds; two tokens (x=1x2x2) take about 40 s of CPU:
the second LayerNorm then normalizes sums of softmax terms, in closed form.
"""

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim=2, heads=1, hidden=4):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, dim))

    def forward(self, x):
        h = self.ln1(x)
        attended, _ = self.attn(h, h, h, need_weights=False)
        x = x + attended
        return x + self.mlp(self.ln2(x))


def make_model():
    torch.manual_seed(0)
    return Block()
