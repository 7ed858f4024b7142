"""Write adjoint/format/data/torch_names.json: every public name PyTorch has, from the installed torch.

    python scripts/gen_torch_names.py            # rewrites the file; commit it

The file lets adjoint tell a name PyTorch has but adjoint does not model ("'unfold' is a
PyTorch function adjoint does not model yet") from a typo, without importing torch at run
time (``adjoint solve`` never imports torch). Run it again when the targeted torch changes.
"""

from __future__ import annotations

import inspect
import json
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "adjoint", "format", "data", "torch_names.json")


def public(names) -> list[str]:
    return sorted({n for n in names if not n.startswith("_")})


def functions(namespace) -> list[str]:
    """Public callables of a namespace that are functions (not classes, not typing helpers)."""
    found = []
    for name in public(dir(namespace)):
        obj = getattr(namespace, name)
        if callable(obj) and not inspect.isclass(obj) and "typing" not in str(getattr(obj, "__module__", "")):
            found.append(name)
    return found


def values(namespace) -> list[str]:
    """Public non-callable, non-module attributes (dtypes such as float32, constants such as pi)."""
    return [n for n in public(dir(namespace))
            if not callable(getattr(namespace, n)) and not inspect.ismodule(getattr(namespace, n))]


def parsed(namespace, names) -> list[str]:
    """The callables among ``names`` that PyTorch's C++ argument parser binds (builtins and
    method descriptors): they take NumPy's keyword names too (``axis=`` for ``dim=``), where the
    Python-level ones (torch/functional.py, torch/nn/functional.py, torch/_tensor.py) do not."""
    return [n for n in names if type(getattr(namespace, n, None)).__name__ in
            ("builtin_function_or_method", "method_descriptor")]


def both_differ() -> list[str]:
    """Names torch and torch.nn.functional both have as different callables (a bare name in a
    problem file is the functional one, as verify's torch side calls it)."""
    return sorted(n for n in dir(F) if not n.startswith("_") and callable(getattr(F, n, None))
                  and callable(getattr(torch, n, None)) and getattr(torch, n) is not getattr(F, n))


def module_classes() -> list[str]:
    found = []
    for name in dir(nn):
        obj = getattr(nn, name)
        if inspect.isclass(obj) and issubclass(obj, nn.Module) and not name.startswith("_"):
            found.append(name)
    return sorted(found)


def main() -> None:
    data = {
        "torch_version": torch.__version__,
        "torch": functions(torch),
        "torch_values": values(torch),
        "functional": functions(F),
        "tensor": public(dir(torch.Tensor)),
        "nn_modules": module_classes(),
        "parsed_torch": parsed(torch, functions(torch)),
        "parsed_functional": parsed(F, functions(F)),
        "parsed_tensor": parsed(torch.Tensor, public(dir(torch.Tensor))),
        "functional_and_torch_differ": both_differ(),
    }
    with open(OUT, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=0, sort_keys=True)
        fh.write("\n")
    print(f"wrote {OUT}: " + ", ".join(f"{k} {len(v)}" for k, v in data.items() if isinstance(v, list)))


if __name__ == "__main__":
    main()
