"""Functions of the nn family: what PyTorch 2.13 runs for each (checked in real torch)."""

from __future__ import annotations

FUNCTIONS: tuple = ()
