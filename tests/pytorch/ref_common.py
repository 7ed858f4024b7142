"""Helpers shared by the torch references of tests/pytorch/ (ref_module_hooks.py,
ref_autograd.py): float64 modules with given weights, and the ``grads`` of a model."""

from __future__ import annotations

import torch
import torch.nn as nn

from capture import grads, snap, tensor


def linear(weight, bias=None) -> nn.Linear:
    """An nn.Linear holding the given float64 weight (out, in) and bias (None: bias=False)."""
    w = tensor(weight)
    m = nn.Linear(w.shape[1], w.shape[0], bias=bias is not None, dtype=torch.float64)
    with torch.no_grad():
        m.weight.copy_(w)
        if bias is not None:
            m.bias.copy_(tensor(bias))
    return m


def param_grads(model: nn.Module, **more) -> dict:
    """``grads`` of every parameter (as named_parameters() names them), then ``more``."""
    out = {name: snap(p.grad) for name, p in model.named_parameters()}
    out.update(grads(**more))
    return out
