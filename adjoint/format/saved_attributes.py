"""What each autograd node class PyTorch 2.13 generates saves, by name (``grad_fn._saved_NAME``),
read from ``adjoint/format/data/saved_attributes.json`` (no torch import; the file is written
from torchgen's loader by ``scripts/gen_saved_attributes.py``). Read on each call: it is only
needed by a read step naming a slot the node's model does not save."""

from __future__ import annotations

import json
import os

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "saved_attributes.json")


def saved_attributes(node: str) -> dict | None:
    """``{"tensors": [...], "other": [...]}`` for a node class (``MulBackward0``), or None for a
    node not generated from derivatives.yaml (AccumulateGrad, CopySlices, a custom Function's)."""
    with open(_PATH, encoding="utf-8") as fh:
        return json.load(fh)["nodes"].get(node)
