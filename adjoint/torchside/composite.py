"""Built-ins made of built-ins (``nn.TransformerEncoderLayer``) in real torch.

The real class is built (its own ``forward`` runs, fast-path checks and all), the file's
parameters are put into its submodules, and each submodule the file names
(``layer.linear1``) is made to go through the run's ``call_module`` when PyTorch's forward
calls it (``self.linear1(x)``): its instance gets a subclass of its own class whose
``__call__`` counts the call, names its output and scopes saved-tensor hooks as any module
call of the file is, then runs ``nn.Module.__call__`` unchanged (hooks, ``_call_impl``).
"""

from __future__ import annotations

from torch import nn

from adjoint.format.problem import Module

_CLASSES: dict[type, type] = {}


def _counted(cls: type) -> type:
    if cls not in _CLASSES:
        def __call__(self, *args, **kwargs):
            state = self.__dict__
            if state.get("_adjoint_inside"):
                return super(counted, self).__call__(*args, **kwargs)
            run, decl = state["_adjoint_call"]
            state["_adjoint_inside"] = True
            try:
                return run.call_module(decl, list(args), kwargs)
            finally:
                state["_adjoint_inside"] = False
        counted = type(cls.__name__, (cls,), {"__call__": __call__, "__module__": cls.__module__,
                                               "__qualname__": cls.__qualname__})
        _CLASSES[cls] = counted
    return _CLASSES[cls]


def count_children(run, decl: Module, module: nn.Module) -> None:
    """Route the calls PyTorch's forward makes of ``decl``'s submodules through ``run``."""
    for child in decl.children:
        sub = module.get_submodule(child.name)
        sub.__class__ = _counted(type(sub))
        sub.__dict__["_adjoint_call"] = (run, child)
