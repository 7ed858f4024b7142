"""``torch._C._functions.DelayedError(msg, 1)(y)`` (the language's ``delayed_error(y, msg)``): a
node that raises its message when the engine runs it.

PyTorch's ``DelayedError::apply`` returns the input's data as a new tensor (the same values; not
a view) whose grad_fn is a ``torch::autograd::Error`` node; calling the DelayedError function
object takes one ``sequence_nr``, while the Error node itself has UINT64_MAX (so, once ready, it
runs before any other node). ``Error::apply`` throws ``std::runtime_error(msg)``: RuntimeError
with the message, after the node's pre-hooks, as any node's backward. A backward that does not
need the node (``autograd.grad`` of another input, or of the DelayedError's output itself)
never runs it, and nothing is raised."""

from __future__ import annotations

from adjoint.engine.ops.record import Check, Math, Op


def _forward(B, ins, p):
    return ins[0]


def _vjp(B, gs, ins, outs, p, need):   # never reached: the node raises first (backward_error)
    return [gs[0]]


def _raises(dtypes, p, need):
    """Error::apply: RuntimeError(msg), whatever the inputs."""
    return ("RuntimeError", p, "delayed_error")


OPS = [
    Op("delayed_error", "torch::autograd::Error", _forward, _vjp,
                        lambda shapes, p, loc: tuple(shapes[0]), (), "raises its message (RuntimeError)",
                        negzero="keep", grows=False, math=Math(lambda a, p, shape, k: a[0]),
                        checks=(Check(((2,),), "Boom!"),), backward_error=_raises, sequence_nr_max=True),
]
