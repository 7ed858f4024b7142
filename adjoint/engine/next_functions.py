"""``{node: NAME, next: [i, j, ...]}``: a node hook on ``NAME.grad_fn.next_functions[i][0]
.next_functions[j][0]...`` -- a node of the graph no tensor of the file names (a ``TBackward0``
inside ``Linear``, the input side's ``BackwardHookFunctionBackward``), reached as a script
walks to it. ``next_functions`` is the node's edges in order (an AccumulateGrad has none);
an index past them is Python's IndexError on the tuple, an edge without a node (an input that
needs no gradient) is ``(None, 0)``, and using that None is Python's AttributeError: both
PyTorch's answers, raised when the hook is registered."""

from __future__ import annotations

from adjoint.engine.torch_errors import TorchError


def walk(node, hook):
    """The node ``hook.next`` leads to from ``node``."""
    steps = hook.next
    for k, i in enumerate(steps):
        edges = list(node.edges)
        if i >= len(edges):
            raise TorchError("IndexError", "tuple index out of range", "register")
        edge = edges[i]
        if edge is None:
            what = "next_functions" if k + 1 < len(steps) else \
                ("register_prehook" if hook.kind == "pre" else "register_hook")
            raise TorchError("AttributeError", f"'NoneType' object has no attribute '{what}'", "register")
        node = edge.node
    return node
