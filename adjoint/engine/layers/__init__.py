"""What a built-in module's forward computes: one function per ``torch.nn`` type, written as
PyTorch's own ``forward`` (calling the same functions, so the same nodes appear).

:data:`FORWARDS` maps each type name of :mod:`adjoint.format.module_signatures` to its forward, assembled
from the family modules listed in :data:`FAMILIES` (each imported when a type is first looked up
in it: :mod:`adjoint.engine.families`); ``tests/test_layers.py`` fails when a type
has none. A forward is ``forward(call: LayerCall) -> output`` (see :class:`LayerCall`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from adjoint.engine.families import Families, Table, file_once
from adjoint.format.errors import Loc


@dataclass
class LayerCall:
    """One call of a built-in module, as its forward sees it."""

    rt: object                        # the runtime
    module: object                    # problem.Module
    args: list                        # positional inputs
    kwargs: dict                      # keyword inputs
    loc: Loc
    params: dict                      # bare name -> Tensor (``weight``, ``out_proj.weight``)
    buffers: dict                     # bare name -> Tensor (``running_mean``)
    call_child: Callable              # (child Module, args, kwargs) -> output
    #: () -> whether the module or a module under it has a forward or forward_pre hook of its own
    #: (``len(m._forward_hooks) + len(m._forward_pre_hooks)`` over ``self.modules()``)
    forward_hooked: Callable = lambda: False

    def arg(self, name: str, default=None):
        return self.module.arg(name, default)

    @property
    def training(self) -> bool:
        return self.module.training


#: the family modules, in the order a lookup imports them
FAMILIES = ("basic", "activations", "nn", "losses", "swish", "recurrent", "recurrent_packed", "transformer",
            "transformer_stack", "nn3d", "instance_norm", "margin_losses",
            "nll_losses")

_forwards: dict[str, Callable] = {}


def _file(family) -> None:
    for name, fn in family.FORWARDS.items():
        file_once(_forwards, name, fn, "module type")


#: type name -> forward; a family is imported when a type is first looked up in it
FORWARDS: Table = Table(Families(__name__, FAMILIES, _file), _forwards)
