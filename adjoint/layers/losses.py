"""Built-in modules of the losses family: each forward as PyTorch's own."""

from __future__ import annotations

FORWARDS: dict = {}
