"""A Dropout's declared keep-mask, forced on PyTorch's own dropout.

On the CPU, ``F.dropout(x, p, training=True)`` (what ``nn.Dropout`` runs) is ATen's
``_dropout_impl``: ``noise = empty_like(x).bernoulli_(1 - p); noise.div_(1 - p);
return x * noise`` (``x.mul_(noise)`` in place), so the node is PyTorch's own
``MulBackward0`` and it saves the scaled noise. The random draw is the one
``aten::bernoulli_.float`` call. :func:`forced_mask` runs the Dropout module's call under a
``TorchDispatchMode`` that answers that call with the declared mask instead of a random
one and passes every other op through untouched. The mode sits below autograd, so every
node, edge, sequence number, saved tensor and hook is PyTorch's, exactly as with a random
draw that happened to give this mask. This works for any size (no seed search) and leaves
the global random generator alone.

Limits, each refused with one located line rather than a silent difference: the call must
draw exactly once, a tensor of the mask's shape (``0 < p < 1``; with ``p = 0`` or ``p = 1``
PyTorch draws nothing and the validator already requires the all-ones / all-zeros mask).
"""

from __future__ import annotations

import contextlib

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from adjoint.format.errors import ProblemError
from adjoint.format.problem import Module
from adjoint.torchside.values import literal_tensor

BERNOULLI = torch.ops.aten.bernoulli_.float


class _ForceMask(TorchDispatchMode):
    def __init__(self, decl: Module, mask: torch.Tensor):
        super().__init__()
        self.decl = decl
        self.mask = mask
        self.draws = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is BERNOULLI:
            self.draws += 1
            target = args[0]
            # a second draw is refused once the call returns (forced_mask); not here, since a call that
            # failed is rerun to name its unfinished packs (adjoint.torchside.unfinished), drawing again
            if tuple(target.shape) != tuple(self.mask.shape):
                raise ProblemError(self.decl.mask.loc, f"verify cannot force the mask of '{self.decl.label}': "
                                                       f"PyTorch draws a keep-mask of shape {list(target.shape)} "
                                                       f"(draw {self.draws}); give a mask of that shape, one call "
                                                       "per forward")
            target.copy_(self.mask.to(target.dtype))
            return target
        return func(*args, **kwargs)


@contextlib.contextmanager
def forced_mask(decl: Module, dtype: torch.dtype, symbols: dict):
    """Around one call of the Dropout ``decl``: its random keep-mask is the declared one."""
    p = dict(decl.args).get("p")
    mask = literal_tensor(decl.mask, dtype, symbols)
    mode = _ForceMask(decl, mask)
    with mode:
        yield
    if decl.training and p is not None and 0 < p < 1 and mode.draws != 1:
        raise ProblemError(decl.mask.loc, f"verify cannot force the mask of '{decl.label}': PyTorch drew "
                                          f"{mode.draws} keep-masks in its call (one expected)")
