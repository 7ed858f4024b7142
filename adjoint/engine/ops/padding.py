"""Reflection and replication padding: ``reflection_pad{1,2,3}d`` and
``replication_pad{1,2,3}d`` (``F.pad(mode='reflect' | 'replicate')``, the ``ReflectionPad`` /
``ReplicationPad`` modules, a convolution's ``padding_mode``), as PyTorch 2.13's CPU kernels
(ReflectionPad.cpp, ReplicationPadding.cpp) compute them, checked in real torch.

Each pads the last 1, 2 or 3 dims (``len(pads) // 2``), the last dim by ``pads[0:2]``. Along a
padded dim of size ``n`` with pads ``(l, r)``, output position ``j`` reads input position

* reflect: ``2l - j`` for ``j < l``, ``j`` up to ``n + l``, then ``2(n + l - 1) - j``;
* replicate: ``l`` for ``j < l``, ``j`` up to ``n + l``, then ``n + l - 1``;

less ``max(0, l)``, plus ``max(0, -l)`` (the kernel's ``o_start`` / ``i_start``; negative pads,
which crop, are refused by the binding). The backward adds each output gradient into the input
position it read (``ReflectionPad2DBackward0`` and the rest save ``self`` and ``padding``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from adjoint.values.mathtree import Fn, generic_vjp, layer
from adjoint.engine.ops.record import Check, Math, Op, Save


@dataclass(frozen=True)
class PadSpec:
    """``mode`` ``"reflect"`` or ``"replicate"``, ``pads`` as F.pad takes them (last dim first)."""

    mode: str
    pads: tuple[int, ...]


def source_positions(n: int, left: int, right: int, mode: str) -> np.ndarray:
    """The input position each output position reads along one padded dim (the module docstring)."""
    i_start, o_start = max(0, -left), max(0, left)
    j = np.arange(n + left + right)
    if mode == "reflect":
        ip = np.where(j < left, 2 * left - j, np.where(j < n + left, j, 2 * (n + left - 1) - j))
    else:
        ip = np.where(j < left, left, np.where(j < n + left, j, n + left - 1))
    return ip - o_start + i_start


def _keys(shape, spec: PadSpec) -> list[tuple]:
    """One numpy key per padded dim, last dim first: that dim's source positions, the rest whole."""
    keys = []
    for i in range(len(spec.pads) // 2):
        d = len(shape) - 1 - i
        where = source_positions(shape[d], spec.pads[2 * i], spec.pads[2 * i + 1], spec.mode)
        keys.append((d, (slice(None),) * d + (where,)))
    return keys


def padded_shape(shapes, spec: PadSpec, loc) -> tuple[int, ...]:
    shape = list(shapes[0])
    for i in range(len(spec.pads) // 2):
        shape[len(shape) - 1 - i] += spec.pads[2 * i] + spec.pads[2 * i + 1]
    return tuple(shape)


def pad_forward(B, ins, spec: PadSpec):
    x = ins[0]
    for _, key in _keys(B.shape(x), spec):
        x = B.index(x, key)
    return x


def pad_vjp(B, gs, ins, outs, spec: PadSpec, need):
    """Each padded dim undone in turn (the first dim padded last): the gradient of every output
    position added into the input position it read."""
    g = gs[0]
    shape = list(B.shape(gs[0]))
    steps = _keys(B.shape(ins[0]), spec)
    in_shape = B.shape(ins[0])
    for d, key in reversed(steps):
        shape[d] = in_shape[d]
        g = B.place_add(tuple(shape), key, g)
    return [g]


def _sub(spec: PadSpec) -> str:
    return "\\mathrm{" + spec.mode + "}," + "(" + ",".join(str(p) for p in spec.pads) + ")"


PAD_BY_COPIES = Fn("pad_by_copies", "\\operatorname{pad}_{#s}\\left(#0\\right)", generic_vjp)


def _op(mode: str, rank: int) -> Op:
    kind = "Reflection" if mode == "reflect" else "Replication"
    pads = (1, 1) * rank if mode == "reflect" else (2, 1) * rank
    shape = (2,) + (3,) * rank
    return Op(f"{kind.lower()}_pad{rank}d", f"{kind}Pad{rank}DBackward0", pad_forward, pad_vjp, padded_shape,
              (Save("self", "in", 0),),
              "g added into the input position each output position read", negzero="structural", grows=False,
              math=Math(layer((PAD_BY_COPIES,), _sub)), copies_values=True,
              checks=(Check((shape,), PadSpec(mode, pads)),))


OPS = tuple(_op(mode, rank) for mode in ("reflect", "replicate") for rank in (1, 2, 3))
