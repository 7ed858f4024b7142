"""``pixel_shuffle`` / ``pixel_unshuffle`` (``F.pixel_shuffle``, ``nn.PixelShuffle`` and the
unshuffle pair), as PyTorch 2.13's CPU kernels compute them, checked in real torch.

``pixel_shuffle(x, r)`` takes ``(*, C r^2, H, W)`` to ``(*, C, H r, W r)``: the input viewed
``(*, C, r, r, H, W)``, permuted ``(*, C, H, r, W, r)``, made contiguous. ``pixel_unshuffle`` is
its inverse. Each is a permutation of the elements: the backward applies the other
(``PixelShuffleBackward0`` / ``PixelUnshuffleBackward0`` save nothing but the factor).
"""

from __future__ import annotations

from adjoint.values.mathtree import Fn, generic_vjp, layer
from adjoint.engine.ops.record import Check, Math, Op


def _shuffle(B, x, r: int):
    shape = B.shape(x)
    lead, (c, h, w) = tuple(shape[:-3]), shape[-3:]
    n = len(lead)
    y = B.reshape(x, lead + (c // (r * r), r, r, h, w))
    y = B.permute(y, tuple(range(n)) + (n, n + 3, n + 1, n + 4, n + 2))
    return B.reshape(y, lead + (c // (r * r), h * r, w * r))


def _unshuffle(B, x, r: int):
    shape = B.shape(x)
    lead, (c, h, w) = tuple(shape[:-3]), shape[-3:]
    n = len(lead)
    y = B.reshape(x, lead + (c, h // r, r, w // r, r))
    y = B.permute(y, tuple(range(n)) + (n, n + 2, n + 4, n + 1, n + 3))
    return B.reshape(y, lead + (c * r * r, h // r, w // r))


def shuffle_shape(shapes, r, loc):
    *lead, c, h, w = shapes[0]
    return tuple(lead) + (c // (r * r), h * r, w * r)


def unshuffle_shape(shapes, r, loc):
    *lead, c, h, w = shapes[0]
    return tuple(lead) + (c * r * r, h // r, w // r)


SHUFFLE = Fn("pixel_shuffle", "\\operatorname{shuffle}_{#s}\\left(#0\\right)", generic_vjp)
UNSHUFFLE = Fn("pixel_unshuffle", "\\operatorname{unshuffle}_{#s}\\left(#0\\right)", generic_vjp)

OPS = (
    Op("pixel_shuffle", "PixelShuffleBackward0", lambda B, ins, r: _shuffle(B, ins[0], r),
       lambda B, gs, ins, outs, r, need: [_unshuffle(B, gs[0], r)], shuffle_shape, (),
       "pixel_unshuffle(g, r)", negzero="structural", grows=False, copies_values=True,
       math=Math(layer((SHUFFLE,), str)), checks=(Check(((1, 4, 2, 3),), 2),)),
    Op("pixel_unshuffle", "PixelUnshuffleBackward0", lambda B, ins, r: _unshuffle(B, ins[0], r),
       lambda B, gs, ins, outs, r, need: [_shuffle(B, gs[0], r)], unshuffle_shape, (),
       "pixel_shuffle(g, r)", negzero="structural", grows=False, copies_values=True,
       math=Math(layer((UNSHUFFLE,), str)), checks=(Check(((2, 1, 4, 2),), 2),)),
)
