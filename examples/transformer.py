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


class GPT2Block(nn.Module):
    """GPT-2's block: pre-LN causal self-attention and a GELU (tanh) MLP of four times the width."""

    def __init__(self, dim, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"), nn.Linear(4 * dim, dim))

    def forward(self, x, mask):
        h = self.ln_1(x)
        attended, _ = self.attn(h, h, h, need_weights=False, attn_mask=mask)
        x = x + attended
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    """The 12 blocks of GPT-2 small (width 768, 12 heads) on a sequence of embeddings, with the
    final LayerNorm; the causal mask is a bool buffer (True: not attended)."""

    def __init__(self, layers=12, dim=768, heads=12, seq=16):
        super().__init__()
        self.blocks = nn.ModuleList(GPT2Block(dim, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.register_buffer("mask", torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1))

    def forward(self, x):
        for block in self.blocks:
            x = block(x, self.mask)
        return self.ln_f(x)


def make_gpt2():
    """``adjoint import examples/transformer.py:make_gpt2 --input x=1x16x768 -o gpt2.yaml``: its
    85 million parameters go to a side file; solve it with --float64 or --structure."""
    torch.manual_seed(0)
    return GPT2()
