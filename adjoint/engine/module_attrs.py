"""Tensors a custom module's forward stores on the module (``self.NAME = EXPR``), read back by a
caller as ``PATH.NAME``.

``nn.Module.__setattr__`` keeps a plain tensor in the instance's ``__dict__`` (a Parameter, a
buffer or a submodule under that name is PyTorch's TypeError: refused here as not modelled), so the
attribute is the very tensor the forward held: a view stays a view of its base, and reading it
after an in-place write to that base is what PyTorch does with it then (the view's regenerated
history, ``adjoint.engine.view_history``). The attribute lives as long as the module: across
forwards and steps of one variant, overwritten by the next call that sets it.
"""

from __future__ import annotations

from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.torch_errors import TorchError


def _store(model) -> dict:
    store = getattr(model, "module_attrs", None)
    if store is None:
        store = {}
        model.module_attrs = store
    return store


def set_attribute(model, mod, name: str, value, loc: Loc) -> None:
    """``self.NAME = value`` in the forward of ``mod``."""
    if mod.param(name) is not None or mod.child(name) is not None or \
            any(b.name.rsplit(".", 1)[-1] == name for b in mod.buffers):
        raise ProblemError(loc, f"'{name}' is a parameter, buffer or child of '{mod.label}': assigning a tensor over "
                                "it is not modelled; store it under a new attribute name")
    if not isinstance(value, Tensor):
        raise ProblemError(loc, f"self.{name} = ...: only a tensor may be stored on a module here")
    _store(model)[(mod.label, name)] = value


def get_attribute(model, mod, name: str, loc: Loc):
    """``PATH.NAME`` read by a caller: the tensor the module's forward stored, or PyTorch's AttributeError
    (nn.Module.__getattr__'s words) when no call has set it yet."""
    if mod.type is not None or getattr(mod, "function", None) is not None:
        raise ProblemError(loc, f"'{mod.label}.{name}': only a tensor a custom module's forward stored "
                                "(self.NAME = ...) is readable on a module")
    store = _store(model)
    if (mod.label, name) not in store:
        raise TorchError("AttributeError", f"'{class_name(mod)}' object has no attribute '{name}'")
    return store[(mod.label, name)]


def class_name(mod) -> str:
    """The class name the torch twin gives a custom module (adjoint.torchside.build)."""
    return mod.type or "CustomModule"
