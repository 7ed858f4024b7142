"""Big tensors of an imported model in one safetensors side file beside the YAML.

A tensor of more than :data:`INLINE_MAX` elements is not written as a YAML literal: it goes
into ``STEM.safetensors`` next to the problem file (keyed by its dotted name, ``layer1.0.conv1.weight``),
and the file says ``{value: {file: STEM.safetensors, key: NAME}}`` (docs/format.md, "Tensors
in side files"; the loader reads every float back exactly). So a ResNet-18 imports in
seconds and the YAML stays a readable page. The safetensors format is written here (an
8-byte little-endian header length, a JSON header of dtype, shape and byte offsets, the raw
little-endian data): the project reads it without the ``safetensors`` package, and so
writes it without it too.
"""

from __future__ import annotations

import json

import numpy as np
import torch

from adjoint.format.errors import ProblemError
from adjoint.torchside.importer.emit import Flow, Text, flow_map

INLINE_MAX = 256
_DTYPES = {torch.float32: ("F32", "<f4"), torch.float64: ("F64", "<f8"), torch.int64: ("I64", "<i8"),
           torch.bool: ("BOOL", "|b1")}


class SideFile:
    """The tensors to write beside the YAML; ``name``: the side file's name (relative to the
    problem file's directory), None when the output has no directory (standard output)."""

    def __init__(self, name: str | None):
        self.name = name
        self.tensors: dict[str, torch.Tensor] = {}

    def wants(self, t: torch.Tensor) -> bool:
        return t.numel() > INLINE_MAX

    def put(self, key: str, t: torch.Tensor) -> Flow:
        """The ``{file: ..., key: ...}`` value of ``t``, stored under ``key``."""
        if self.name is None:
            raise ProblemError(None, f"'{key}' has {t.numel()} elements, more than a problem file writes inline "
                                     f"({INLINE_MAX}): it goes into a safetensors side file beside the problem file; "
                                     "give -o PROBLEM.yaml (standard output has no directory for it)")
        if t.dtype not in _DTYPES:
            raise ProblemError(None, f"'{key}' is {t.dtype}; a side file holds float32, float64, int64 and bool")
        self.tensors[key] = t.detach().cpu().contiguous()
        return flow_map([("file", Text(self.name)), ("key", Text(key))])

    def data(self) -> bytes:
        """The safetensors bytes (empty when no tensor went to the side file)."""
        if not self.tensors:
            return b""
        header: dict = {}
        chunks = []
        offset = 0
        for key, t in self.tensors.items():
            code, npdtype = _DTYPES[t.dtype]
            raw = t.numpy().astype(np.dtype(npdtype), copy=False).tobytes()
            header[key] = {"dtype": code, "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
            chunks.append(raw)
            offset += len(raw)
        text = json.dumps(header, separators=(",", ":")).encode("utf-8")
        text += b" " * (-len(text) % 8)
        return len(text).to_bytes(8, "little") + text + b"".join(chunks)
