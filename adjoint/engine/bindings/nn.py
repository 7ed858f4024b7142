"""Functions of the nn family: what PyTorch 2.13 runs for each (checked in real torch), one
module per kind: :mod:`.conv` (conv1d, conv2d, the 2-D pools), :mod:`.norm` (batch, layer and
group norm, embedding, dropout), :mod:`.instance_norm`."""

from __future__ import annotations

from adjoint.engine.bindings import conv, instance_norm, norm

FUNCTIONS: tuple = conv.FUNCTIONS + norm.FUNCTIONS + instance_norm.FUNCTIONS
