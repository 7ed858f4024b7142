"""Primitives of the losses family (see the family's functions in adjoint/functions/losses.py)."""

from __future__ import annotations

OPS: tuple = ()
