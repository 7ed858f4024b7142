"""The hooks already registered on the user's model, as hook entries with their bodies translated.

A hook's Python body is the user's code: the problem file cannot run it, so each one is
translated into the format's expression language (:mod:`.hookbody`: ``returns:`` and
``does:`` over the arguments the hook is handed, constants captured by value); a body that
only observes is written observe-only. A comment names the function and where it is
defined. A body that cannot be translated stops the import at the hook's ``file:line``
(:class:`ImportOptions` ``hooks="observe"``, ``--hooks observe``: it is written observe-only,
and the comment and the import's notes say that its effect is left out). Module hooks,
global module hooks, and tensor hooks on parameters (``register_hook``,
``register_post_accumulate_grad_hook``) are found. Registration order is the order
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
from adjoint.torchside.importer.hookbody import MODULE_ARGS, TENSOR_ARGS, Untranslatable, translate
from adjoint.torchside.importer.refuse import refuse
from adjoint.torchside.importer.program import _written

_TABLES = (("forward_pre", "_forward_pre_hooks"), ("forward", "_forward_hooks"),
           ("full_backward_pre", "_backward_pre_hooks"), ("backward", "_backward_hooks"))
_GLOBAL = (("forward_pre", "_global_forward_pre_hooks"), ("forward", "_global_forward_hooks"),
           ("full_backward_pre", "_global_backward_pre_hooks"), ("backward", "_global_backward_hooks"))


def _plain(path: str) -> bool:
    """A module path YAML reads back as a string without quotes (``fc1``, ``blocks.0``; not ``0``)."""
    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", path) is not None


def _describe(fn) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(getattr(fn, "func", None), "__qualname__", None)
    where = of_object(fn)
    if name is None:   # an object with a __call__ (Clipper(0.01)): its class, where the class is defined
        name, where = f"a {type(fn).__qualname__} object", of_object(type(fn))
    return f"{name} ({where})" if where else name


def _legacy_weight_norm(fn) -> bool:
    """torch.nn.utils.weight_norm's ``WeightNorm`` pre-hook (checked by builtins.legacy_weight_norm_dim)."""
    from torch.nn.utils.weight_norm import WeightNorm
    return isinstance(fn, WeightNorm)


def _entries(table: dict, extra: dict) -> list[tuple[int, bool, object]]:
    """(handle id, prepended, function) in the order the dict holds them. A hook registered with
    ``prepend=True`` went in front of every hook the dict held then (the ones with smaller ids),
    and no later registration changes that: it was prepended exactly when a hook with a smaller id
    comes after it. (The first hook of a dict is written without the flag, which changes nothing.)"""
    ids = list(table)
    out = []
    for pos, hid in enumerate(ids):
        prepended = any(other < hid for other in ids[pos + 1:])
        out.append((hid, prepended, table[hid]))
    return out


def registered(model: nn.Module, mode: str = "translate", notes: list | None = None) -> list:
    """Hook entries (with their comments), in registration order. ``mode``: ``translate`` (a body
    that cannot be translated is refused) or ``observe`` (it is written observe-only, and a
    line saying so is added to ``notes``)."""
    found = []
    tensors = _tensor_names(model)
    for path, module in model.named_modules():
        target = path or "model"
        for kind, attr in _TABLES:
            table = getattr(module, attr, None) or {}
            for hid, prepended, fn in _entries(table, {}):
                if kind == "forward_pre" and _legacy_weight_norm(fn):
                    continue   # the older weight_norm's: the module's weight_norm: {legacy: true}
                k = kind
                if attr == "_backward_hooks":
                    k = "full_backward" if module._is_full_backward_hook else "backward"
                fields = [("module", Flow(target) if _plain(target) else Text(target)), ("kind", Flow(k))]
                if prepended:
                    fields.append(("prepend", True))
                kw = False
                if kind in ("forward", "forward_pre"):
                    kwtable = (module._forward_hooks_with_kwargs if kind == "forward"
                               else module._forward_pre_hooks_with_kwargs)
                    kw = bool(kwtable.get(hid))
                    if kw:
                        fields.append(("with_kwargs", True))
                if kind == "forward" and module._forward_hooks_always_called.get(hid):
                    fields.append(("always_call", True))
                names = MODULE_ARGS[k + ("+kwargs" if kw else "")]
                found.append((hid, _entry(fields, fn, names, True, f"{k} hook on '{target}'", mode, notes,
                                          tensors, module)))
    for kind, attr in _GLOBAL:
        table = getattr(nn_module, attr, None) or {}
        for hid, _, fn in _entries(table, {}):
            k = kind
            if attr == "_global_backward_hooks":
                k = "full_backward" if nn_module._global_is_full_backward_hook else "backward"
            kw = False
            if k == "forward":
                kw = bool(nn_module._global_forward_hooks_with_kwargs.get(hid)) if hasattr(
                    nn_module, "_global_forward_hooks_with_kwargs") else False
            names = MODULE_ARGS[k + ("+kwargs" if kw else "")]
            fields = [("global", Flow(k))] + ([("with_kwargs", True)] if kw else [])
            found.append((hid, _entry(fields, fn, names, True, f"global {k} hook", mode, notes, tensors)))
    seen = set()
    for name, p in model.named_parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        target = Flow(name) if _plain(name) else Text(name)
        for hid, _, fn in _entries(getattr(p, "_backward_hooks", None) or {}, {}):
            found.append((hid, _entry([("tensor", target)], fn, TENSOR_ARGS["hook"], False,
                                      f"tensor hook on '{name}'", mode, notes, tensors)))
        for hid, _, fn in _entries(getattr(p, "_post_accumulate_grad_hooks", None) or {}, {}):
            found.append((hid, _entry([("tensor", target), ("kind", Flow("post_accumulate_grad"))], fn,
                                      TENSOR_ARGS["post_accumulate_grad"], False,
                                      f"post-accumulate-grad hook on '{name}'", mode, notes, tensors, target=p)))
    found.sort(key=lambda e: e[0])
    return [note for _, note in found]


def _tensor_names(model: nn.Module) -> dict:
    """id -> the name a hook body reads it by, of each parameter (its first name, as
    ``named_parameters`` lists it) and buffer of the model: ``blk.mask``, ``layers[0].weight``
    (the path as a forward writes it); a root Sequential's numbered items have no such name, and
    the buffers of a torch.nn module are left out (the file writes a built-in's own buffers only)."""
    children = dict(model.named_children())
    own = [(f"{path}.{b}" if path else b, t) for path, m in model.named_modules()
           if not type(m).__module__.startswith("torch.") for b, t in m._buffers.items() if t is not None]
    out = {}
    for name, t in list(model.named_parameters()) + own:
        *path, attr = name.split(".")
        written = _written(children, path, holders_only=False) if path else (None, None)
        text = f"{written[1]}.{attr}" if path and written is not None else attr if not path else None
        if text is not None and text.split(".")[0].split("[")[0].isidentifier():
            out.setdefault(id(t), text)
    return out


def _entry(fields: list, fn, names: tuple, module_arg: bool, what: str, mode: str, notes: list | None,
           tensors: dict | None = None, module: nn.Module | None = None, target=None) -> Note:
    """One hook entry: its body translated, or (``mode`` observe) observe-only with the reason.
    ``tensors``: the model's parameters and buffers by id, which a body reads by name;
    ``module``: the module a module hook is on (its ``module`` argument); ``target``: the tensor a
    post-accumulate-grad hook is on."""
    where = of_object(fn)
    try:
        body = translate(fn, names, module_arg, tensors, module, target)
    except Untranslatable as exc:
        place = _line_of(where, exc.line)
        if mode != "observe":
            raise refuse(place, f"the {what} ({_name(fn)}) cannot be translated into the problem format: "
                                f"{exc.what}", "write it with returns: over its arguments, or pass --hooks observe "
                                               "to import it observe-only (its effect left out)") from None
        reason = f"{_describe(fn)}: OBSERVE-ONLY, its effect is left out ({exc.what})"
        if notes is not None:
            notes.append(f"{place or _name(fn)}: the {what} is imported observe-only: its effect on the gradients "
                         f"is left out ({exc.what})")
        return Note(flow_map(fields), reason)
    if body.optimizer is not None:   # the optimizer its body steps: the format's optim
        fields.append(("optimizer", Flow(body.optimizer)))
    if body.does:       # a body that writes in place keeps its lines even when it returns None
        fields.append(("does", Text(body.does[0]) if len(body.does) == 1 else
                       Flow("[" + ", ".join(Text(d).text for d in body.does) + "]")))
    if body.returns is not None:
        fields.append(("returns", Text(body.returns)))
    return Note(flow_map(fields), _describe(fn))


def _name(fn) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def _line_of(where: str | None, line: int | None) -> str | None:
    if where is None:
        return None
    if line is None:
        return where
    path, _, _ = where.rpartition(":")
    return f"{path}:{line}"
