"""What a built-in module's forward computes: one function per ``torch.nn`` type, written as
PyTorch's own ``forward`` (calling the same functions, so the same nodes appear).

:data:`FORWARDS` maps each type name of :mod:`adjoint.format.module_signatures` to its forward, assembled
from the family modules listed in :func:`_collect`; ``tests/test_layers.py`` fails when a type
has none. A forward is ``forward(call: LayerCall) -> output`` (see :class:`LayerCall`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

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

    def arg(self, name: str, default=None):
        return self.module.arg(name, default)

    @property
    def training(self) -> bool:
        return self.module.training


def _collect() -> dict[str, Callable]:
    from adjoint.engine.layers import activations, basic, losses, nn, recurrent, swish
    from adjoint.engine.layers import recurrent_layers
    from adjoint.engine.layers import transformer
    from adjoint.engine.layers import transformer_stack
    from adjoint.engine.layers import nn3d
    forwards: dict[str, Callable] = {}
    for family in (basic, activations, nn, losses, swish, recurrent, recurrent_layers, transformer, transformer_stack,
                   nn3d):
        for name, fn in family.FORWARDS.items():
            if name in forwards:
                raise ValueError(f"module type {name!r} has two forwards")
            forwards[name] = fn
    return forwards


FORWARDS: dict[str, Callable] = _collect()
