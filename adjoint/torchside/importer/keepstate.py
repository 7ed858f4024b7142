"""Running the user's model to learn about it must leave the model as the factory made it."""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import nn


@contextmanager
def state_kept(model: nn.Module):
    """Run the block, then put back every buffer of ``model`` (a training-mode BatchNorm's
    running statistics and ``num_batches_tracked`` move on every call) and the RNG state
    (a training-mode Dropout draws), each buffer's version counter too (the file writes it:
    ``version: N``, which the copy back would otherwise move)."""
    state = {n: (b.detach().clone(), b._version) for n, b in model.named_buffers()}
    rng = torch.get_rng_state()
    try:
        yield
    finally:
        with torch.no_grad():
            for n, b in model.named_buffers():
                value, version = state[n]
                b.copy_(value)
                torch._C._autograd._unsafe_set_version_counter((b,), (version,))
        torch.set_rng_state(rng)
