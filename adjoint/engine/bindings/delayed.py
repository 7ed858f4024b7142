"""``delayed_error(input, msg)``: PyTorch's ``torch._C._functions.DelayedError(msg, 1)(input)``
(adjoint.engine.ops.delayed), a node that raises ``msg`` when a backward runs it."""

from __future__ import annotations

from adjoint.engine.bindings.signature import Function, Param


def lower_delayed_error(rt, a, loc):
    return rt.apply("delayed_error", [a["input"]], a["msg"], loc)


FUNCTIONS = [
    Function("delayed_error", (Param("input", "tensor"), Param("msg", "str")), lower_delayed_error, where="function",
             doc="torch::autograd::Error (torch._C._functions.DelayedError(msg, 1)(input))"),
]
