"""Write adjoint/format/data/saved_attributes.json: every autograd node class PyTorch generates
from derivatives.yaml, with the names of what it saves (``grad_fn._saved_NAME``), split into
tensors and other values, read with torchgen's own loader from the copies of derivatives.yaml
and native_functions.yaml torch ships (torchgen/packaged).

    python scripts/gen_saved_attributes.py      # rewrites the file; commit it

A read step (``{read: y.grad_fn._saved_SLOT, as: NAME}``) uses it without importing torch: a
name the node does not have is PyTorch's AttributeError, a non-tensor one (``_saved_alpha``) is
refused as not modelled. Run it again when the targeted torch changes.
"""

from __future__ import annotations

import json
import os

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "adjoint", "format", "data",
                   "saved_attributes.json")


def table() -> dict:
    import torch
    import torchgen
    from torchgen.packaged.autograd.load_derivatives import load_derivatives

    base = os.path.join(os.path.dirname(torchgen.__file__), "packaged")
    infos, _ = load_derivatives(os.path.join(base, "autograd", "derivatives.yaml"),
                                os.path.join(base, "ATen", "native", "native_functions.yaml"),
                                os.path.join(base, "ATen", "native", "tags.yaml"))
    nodes: dict = {}
    for per_key in infos.values():
        for info in per_key.values():
            if not info.op:
                continue
            entry = nodes.setdefault(info.op, {"tensors": set(), "other": set()})
            for saved in list(info.all_saved_inputs) + list(info.all_saved_outputs):
                kind = "tensors" if str(saved.nctype.type) == "BaseCType(type=BaseCppType(ns='at', name='Tensor'))" \
                    else "other"
                entry[kind].add(saved.nctype.name)
    for entry in nodes.values():   # a name both ways over overloads stays a tensor only where it always is
        entry["other"] -= entry["tensors"]
    return {"torch_version": torch.__version__,
            "nodes": {name: {k: sorted(v) for k, v in entry.items()} for name, entry in sorted(nodes.items())}}


if __name__ == "__main__":
    data = table()
    lines = [f"{json.dumps(name)}: {json.dumps(entry, sort_keys=True)}" for name, entry in data["nodes"].items()]
    with open(OUT, "w", encoding="utf-8") as fh:   # one node a line
        fh.write(f'{{"torch_version": {json.dumps(data["torch_version"])},\n"nodes": {{\n')
        fh.write(",\n".join(lines) + "\n}}\n")
    print(f"wrote {OUT}")
