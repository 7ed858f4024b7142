"""Running the user's model to learn about it must leave the model as the factory made it."""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import nn


@contextmanager
def state_kept(model: nn.Module, parameters: bool = True):
    """Run the block, then put back every buffer of ``model`` (a training-mode BatchNorm's
    running statistics and ``num_batches_tracked`` move on every call), every parameter (a
    forward may write one in place: ``self.gain.detach().mul_(0.5)``; ``parameters=False``: not
    them, for a block that cannot write them, such as an fx trace, where parameters are proxies)
    and the RNG state (a training-mode Dropout draws), each tensor's version counter too (the file
    writes it: ``version: N``, which the copy back would otherwise move). A buffer the block
    rebinds (``self.running = 0.9 * self.running + ...`` in a forward; fx's trace leaves a Proxy
    there) is bound to its own tensor again, and its dotted name is added to the list the block
    is handed."""
    tensors = list(model.named_buffers()) + (list(model.named_parameters()) if parameters else [])
    state = [(t, t.detach().clone(), t._version) for _, t in tensors]
    bound = [(f"{path}.{name}" if path else name, m, name, t) for path, m in model.named_modules()
             for name, t in m._buffers.items()]
    rebound: list[str] = []
    rng = torch.get_rng_state()
    try:
        yield rebound
    finally:
        for full, m, name, t in bound:
            if m._buffers.get(name) is not t:
                rebound.append(full)
                m._buffers[name] = t
        with torch.no_grad():
            for t, value, version in state:   # every one: a kernel (batch_norm's running statistics)
                t.copy_(value)                  # may write it without moving its version counter
                torch._C._autograd._unsafe_set_version_counter((t,), (version,))
        torch.set_rng_state(rng)
