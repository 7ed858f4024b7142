"""The saved-tensor additions of contract v3 (section 5), in real torch.

* :func:`register_saved` -- ``t.grad_fn._raw_saved_SLOT.register_hooks(pack, unpack)`` as a
  user writes it (PyTorch's own errors propagate: AttributeError, the RuntimeErrors of
  ``SavedVariable::register_hooks``);
* :func:`disabled` -- ``torch.autograd.graph.disable_saved_tensors_hooks(MESSAGE)``;
* :class:`StashScope` -- ``stash(x)`` / ``unstash(key)`` in pack and unpack bodies: a Python
  list owned by the hook entry, the index as the packed value.
"""

from __future__ import annotations

import contextlib
import types

import torch

from adjoint.format.errors import ProblemError
from adjoint.torchside import graphs
from adjoint.torchside.program import EnvScope


def register_saved(hooks, hook, t: torch.Tensor) -> None:
    """``hooks``: the run's :class:`adjoint.torchside.hooks.Hooks` (its ``fire`` logs the calls)."""
    node = t.grad_fn
    saved = getattr(node, f"_raw_saved_{hook.slot}")

    def pack(x):
        where = {"_seq": graphs.sequence_nr(node)}
        return hooks.fire(hook, {"x": x}, kind="pack", body=hook.pack, where=where)

    def unpack(x):
        current = graphs.current_node()
        where = {"_seq": graphs.sequence_nr(current) if current is not None else None,
                 "_node": current.name() if current is not None else None}
        return hooks.fire(hook, {"x": x}, kind="unpack", body=hook.unpack, where=where)

    if len(hook.pack_params) > 1:   # lambda x, b: ...: the real call fails in Python, before any body
        saved.register_hooks(with_params(hook.pack_params), unpack)
        return
    saved.register_hooks(pack, unpack)


def _template(x, p1, p2, p3, p4, p5):   # the code object with_params renames (never called as is)
    return x


def with_params(params: tuple):
    """A real ``lambda PARAMS: x`` (no source evaluated: the template's code object with its first
    parameters renamed), so that calling it with one argument is CPython's own TypeError."""
    code = _template.__code__
    names = tuple(params) + code.co_varnames[len(params):]
    code = code.replace(co_argcount=len(params), co_varnames=names, co_name="<lambda>", co_qualname="<lambda>")
    return types.FunctionType(code, {}, "<lambda>")


@contextlib.contextmanager
def disabled(hook):
    with torch.autograd.graph.disable_saved_tensors_hooks(hook.message):
        yield


class StashScope(EnvScope):
    """A pack or unpack body's names, with ``stash`` (pack) or ``unstash`` (unpack)."""

    def __init__(self, env: dict, what: str, kind: str, store: list, run=None):
        super().__init__(env, what, run)   # run: the forward's named tensors (a closure's)
        self.kind = kind
        self.store = store

    def child(self, name: str):
        return name if name in ("stash", "unstash") else None

    def call_child(self, name: str, args: list, kwargs: dict, loc):
        if name == "stash" and self.kind == "pack" and len(args) == 1:
            self.store.append(args[0])
            return len(self.store) - 1
        if name == "unstash" and self.kind == "unpack" and len(args) == 1:
            return self.store[args[0]]
        raise ProblemError(loc, f"{name}(...) is for {'pack' if name == 'stash' else 'unpack'} hooks only, with one "
                                "argument")
