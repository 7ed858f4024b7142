"""Tracing one custom module's forward with ``torch.fx``, its children kept as calls.

Every submodule is a leaf for the tracer: a child's call is one ``call_module`` node (the
child is imported on its own, as a built-in type or with its own traced forward), so a
forward is recorded as its own code wrote it. Stack traces are recorded, so a node can say
which line of the user's code made it.

When fx cannot trace the forward (data-dependent control flow, a Python call fx cannot see
through), the forward is run once on the example values it receives (:mod:`.record`) and
the tensor ops it ran are recorded with PyTorch's ``__torch_function__`` mode instead: the
program is then the path that example took.
"""

from __future__ import annotations

from torch import fx, nn


class ChildTracer(fx.Tracer):
    def __init__(self):
        super().__init__()
        self.record_stack_traces = True

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return True


def trace(module: nn.Module) -> fx.Graph:
    """The fx graph of ``module.forward`` (fx's own exception when it cannot trace)."""
    return ChildTracer().trace(module)
