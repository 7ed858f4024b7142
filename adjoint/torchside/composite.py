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
from adjoint.torchside.setup_raised import SetupRaised

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


def count_tree(run, decl: Module, module: nn.Module) -> None:
    """:func:`count_children` through every level (``TransformerEncoder``: ``layers.i`` and each
    layer's own submodules; the ``ModuleList`` itself is never called)."""
    for child in decl.children:
        sub = module.get_submodule(child.name)
        if child.type != "ModuleList":
            sub.__class__ = _counted(type(sub))
            sub.__dict__["_adjoint_call"] = (run, child)
        count_tree(run, child, sub)


def _kwargs(type_name: str, items) -> dict:
    from adjoint.format import module_signatures as nn_types
    from adjoint.torchside.values import number
    spec = nn_types.lookup(type_name)
    return {k: float(v) if spec.arg(k).kind in ("float", "opt_float") and v is not None else number(v)
            for k, v in items}


def build_stack(run, decl: Module, dtype) -> nn.Module:
    """``nn.TransformerEncoder(nn.TransformerEncoderLayer(**layer), num_layers, norm=nn.LayerNorm(**norm),
    ...)`` as a user writes it (``nn.TransformerDecoder`` the same; ``nn.Transformer(**args)``); the
    constructor's warnings are kept in ``run.setup_warnings`` (``during: setup``), listed before the
    run's own."""
    import warnings
    a = dict(decl.args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if decl.type == "Transformer":
                module = nn.Transformer(**_kwargs("Transformer", a.items()))
            else:
                arg, layer_type = {"TransformerEncoder": ("encoder_layer", "TransformerEncoderLayer"),
                                   "TransformerDecoder": ("decoder_layer", "TransformerDecoderLayer")}[decl.type]
                layer = getattr(nn, layer_type)(**_kwargs(layer_type, a[arg]))
                norm = nn.LayerNorm(**_kwargs("LayerNorm", a["norm"])) if a["norm"] is not None else None
                if decl.type == "TransformerEncoder":
                    module = nn.TransformerEncoder(layer, a["num_layers"], norm=norm,
                                                   enable_nested_tensor=a["enable_nested_tensor"],
                                                   mask_check=a["mask_check"])
                else:
                    module = nn.TransformerDecoder(layer, a["num_layers"], norm=norm)
        except (ValueError, AssertionError) as exc:   # the layer's constructor refuses its arguments: the answer
            raise SetupRaised(exc) from None
    kept = run.__dict__.setdefault("setup_warnings", [])
    kept.extend({"category": w.category.__name__, "message": str(w.message), "during": "setup"} for w in caught)
    return module.to(dtype)
