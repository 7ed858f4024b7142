"""Built-in modules of the activations family: each forward as PyTorch's own."""

from __future__ import annotations

FORWARDS: dict = {}
