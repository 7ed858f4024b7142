"""Primitives of the nn family (see the family's functions in adjoint/functions/nn.py)."""

from __future__ import annotations

OPS: tuple = ()
