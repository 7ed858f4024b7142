"""A tiny causal language model: token embedding, one masked self-attention head, an output
head tied to the embedding (``head.weight = emb.weight``), and a gradient-clipping hook.

    adjoint import examples/causal_lm.py:make_model --input ids=1x3:int64:0-5 \
        --target t=1x3:int64:0-5 --loss 'cross_entropy(y[0], t[0])' -o causal_lm.yaml
    adjoint verify causal_lm.yaml --float64 --origin     # also runs this module, with its hook

The ids are int64 token ids in [0, 5) drawn from a seeded generator (the file's header says
how); the causal mask is a bool buffer; ``clip`` returns the gradient flowing into the value
projection clamped (a changed gradient). ``make_model`` ties the head to the embedding: one
Parameter, one ``.grad``, written ``head: {..., params: {weight: {tied: emb.weight}}}``;
``make_untied`` is the same model with its own head weight (two Parameters, two ``.grad``s).
"""

import torch
import torch.nn.functional as F
from torch import nn


class CausalLM(nn.Module):
    def __init__(self, vocab=5, dim=2, seq=3):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.q = nn.Linear(dim, dim, bias=False)
        self.k = nn.Linear(dim, dim, bias=False)
        self.v = nn.Linear(dim, dim, bias=False)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.emb.weight                      # tied
        self.register_buffer("mask", torch.tril(torch.ones(seq, seq)).bool())

    def forward(self, ids):
        h = self.emb(ids)
        scores = self.q(h) @ self.k(h).transpose(-2, -1)
        scores = torch.where(self.mask, scores, -1e4)           # causal: no look ahead
        h = h + F.softmax(scores, dim=-1) @ self.v(h)
        return self.head(h)


def clip(module, grad_output):
    return (grad_output[0].clamp(-0.25, 0.25),)


def make_model():
    torch.manual_seed(0)
    model = CausalLM()
    model.v.register_full_backward_pre_hook(clip)
    return model


def make_untied():
    """The same model with its own head weight (a copy of the embedding's, untied)."""
    torch.manual_seed(0)
    model = CausalLM()
    model.head.weight = nn.Parameter(model.emb.weight.detach().clone())
    model.v.register_full_backward_pre_hook(clip)
    return model
