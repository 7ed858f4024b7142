"""Primitives of the nn family (see the family's functions in adjoint/engine/bindings/nn.py), one
module per kind: :mod:`.conv` (convolution, constant padding), :mod:`.pool` (max, average and
adaptive average pooling), :mod:`.norm` (batch, layer and group norm), :mod:`.embedding`,
:mod:`.attention` (flash attention, baddbmm, repeat)."""

from __future__ import annotations

from adjoint.engine.ops import attention, conv, embedding, norm, pool

OPS: tuple = conv.OPS + pool.OPS + norm.OPS + embedding.OPS + attention.OPS
