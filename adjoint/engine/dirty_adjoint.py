"""The module adjoint (``adjoints.boundaries_of``) of a custom Function call that marked an
input dirty: the call's input tensor is, after the call, its output (rebased onto the node, or
a view under a CopySlices), so J^T of the call is read from the Function's own backward, per
argument whose edge existed when it was called."""

from __future__ import annotations

from adjoint.engine.autograd_function import declared_vjp, input_dtypes
from adjoint.engine.graph import Tensor


def dirty_call_grads(rt, call, gouts) -> tuple | None:
    """lambda_in of a call of a Function with ``dirty:``; None for any other call."""
    fn = getattr(call.module, "function", None)
    if fn is None or not fn.dirty:
        return None
    node = next((n for n in call.body_nodes(rt) if n.kind == "function"), None)
    if node is None:
        return None
    B = rt.B
    filled = [g if g is not None or node.outputs[i] is None else B.zeros(node.outputs[i][0])
              for i, g in enumerate(gouts)]
    outs = declared_vjp(rt, call.module, list(node.input_values), filled if len(filled) > 1 else filled[0],
                        dtypes=input_dtypes(node, B))
    edges = iter(node.edges)
    result = []
    for a, g in zip(call.args, outs):
        if not isinstance(a, Tensor):
            result.append(None)
            continue
        edge = next(edges, None)
        if edge is None:
            result.append(None)
        else:
            result.append(g if g is not None else B.zeros(a.shape))
    return tuple(result)
