"""Primitives of the activations family (see the family's functions in adjoint/functions/activations.py)."""

from __future__ import annotations

OPS: tuple = ()
