"""The module hooks already registered on the user's model, as observe-only hook entries.

A hook's Python body is the user's code: the problem file cannot run it, so each one is
written with its kind and target only (it then observes: what it is handed is what
``solve`` answers), and a comment names the function and where it is defined, for the
user to turn into ``returns:`` when it changes a gradient. Registration order is the order
of the handles' ids (PyTorch numbers every hook handle from one counter), so hooks on
different modules and of different kinds come out in the order the user registered them;
``prepend=True``, ``with_kwargs=True`` and ``always_call=True`` are read back from where
PyTorch records them. The global module hooks (``register_module_*_hook``) are included.
"""

from __future__ import annotations

from torch import nn
from torch.nn.modules import module as nn_module

import re

from adjoint.torchside.importer.emit import Flow, Note, Text, flow_map
from adjoint.torchside.importer.where import of_object

_TABLES = (("forward_pre", "_forward_pre_hooks"), ("forward", "_forward_hooks"),
           ("full_backward_pre", "_backward_pre_hooks"), ("backward", "_backward_hooks"))
_GLOBAL = (("forward_pre", "_global_forward_pre_hooks"), ("forward", "_global_forward_hooks"),
           ("full_backward_pre", "_global_backward_pre_hooks"), ("backward", "_global_backward_hooks"))


def _plain(path: str) -> bool:
    """A module path YAML reads back as a string without quotes (``fc1``, ``blocks.0``; not ``0``)."""
    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", path) is not None


def _describe(fn) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(getattr(fn, "func", None), "__qualname__", None) or repr(fn)
    where = of_object(fn)
    return f"{name} ({where})" if where else name


def _entries(table: dict, extra: dict) -> list[tuple[int, bool, object]]:
    """(handle id, prepended, function) in the order the dict holds them."""
    ids = list(table)
    out = []
    for pos, hid in enumerate(ids):
        prepended = any(other > hid for other in ids[:pos])
        out.append((hid, prepended, table[hid]))
    return out


def registered(model: nn.Module) -> list:
    """Hook entries (with their comments), in registration order."""
    found = []
    for path, module in model.named_modules():
        target = path or "model"
        for kind, attr in _TABLES:
            table = getattr(module, attr, None) or {}
            for hid, prepended, fn in _entries(table, {}):
                k = kind
                if attr == "_backward_hooks":
                    k = "full_backward" if module._is_full_backward_hook else "backward"
                fields = [("module", Flow(target) if _plain(target) else Text(target)), ("kind", Flow(k))]
                if prepended:
                    fields.append(("prepend", True))
                if kind in ("forward", "forward_pre"):
                    kw = (module._forward_hooks_with_kwargs if kind == "forward"
                          else module._forward_pre_hooks_with_kwargs)
                    if kw.get(hid):
                        fields.append(("with_kwargs", True))
                if kind == "forward" and module._forward_hooks_always_called.get(hid):
                    fields.append(("always_call", True))
                found.append((hid, Note(flow_map(fields), _describe(fn))))
    for kind, attr in _GLOBAL:
        table = getattr(nn_module, attr, None) or {}
        for hid, _, fn in _entries(table, {}):
            k = kind
            if attr == "_global_backward_hooks":
                k = "full_backward" if nn_module._global_is_full_backward_hook else "backward"
            found.append((hid, Note(flow_map([("global", Flow(k))]), _describe(fn))))
    found.sort(key=lambda e: e[0])
    return [note for _, note in found]
