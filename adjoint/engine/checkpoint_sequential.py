"""``torch.utils.checkpoint.checkpoint_sequential(functions, segments, input, use_reentrant=...)``
as PyTorch 2.13 runs it (torch/utils/checkpoint.py):

* ``use_reentrant`` not given: its own UserWarning ("torch.utils.checkpoint.checkpoint_sequential:
  the use_reentrant parameter should be passed explicitly. ..."), then the reentrant variant;
  a keyword other than ``preserve_rng_state`` is its ValueError.
* A ``Sequential`` is taken as ``list(functions.children())`` (a ``ModuleList`` is indexed as it
  is): the container itself is never called, so its own hooks never run.
* ``segment_size = len(functions) // segments``; each of the first ``segments - 1`` segments is
  ``checkpoint(run_function(start, end, functions), input, use_reentrant=...,
  preserve_rng_state=...)`` -- a plain Python function (no ``nn.Module``) calling the items in
  order -- and the rest of the items run after the last segment without checkpoint.

The segment functions are plain children made here (``plain: true``), labelled
``CONTAINER.segment{k}`` (k from 0): their outputs are named so, in the engine and the torch twin.
"""

from __future__ import annotations



from adjoint.format import syntax as S
from adjoint.format.errors import ProblemError
from adjoint.format.problem import Module
from adjoint.engine import warns
from adjoint.engine.runtime import TorchError

WARNING = ("torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should be passed explicitly. "
           "In version 2.9 we will raise an exception if use_reentrant is not passed. use_reentrant=False is "
           "recommended, but if you need to preserve the current default behavior, you can pass use_reentrant=True. "
           "Refer to docs for more details on the differences between the two variants.")


def segment_function(container: Module, start: int, end: int, k: int, loc) -> Module:
    """``run_function(start, end, functions)``: a plain function calling items start..end in order."""
    items = container.children[start:end + 1]
    value: S.Expr = S.Name(loc, "input")
    for item in items:
        value = S.Call(loc, item.name, (value,))
    label = f"{container.label}.segment{k}"
    return Module(label, f"segment{k}", None, (), tuple(items), ("input",), (S.Return(loc, value),), None, loc,
                  training=container.training, plain=True)


def plan(container: Module, segments, loc) -> list[tuple[int, int]]:
    """The (start, end) of each checkpointed segment; raises PyTorch's errors."""
    if not isinstance(segments, int) or isinstance(segments, bool):
        raise ProblemError(loc, "checkpoint_sequential's segments is an integer")
    if segments == 0:
        raise TorchError("ZeroDivisionError", "integer division or modulo by zero", "forward")
    size = len(container.children) // segments
    if size == 0:   # fewer items than segments: range(0, 0, 0)
        raise TorchError("ValueError", "range() arg 3 must not be zero", "forward")
    return [(start, start + size - 1) for start in range(0, size * (segments - 1), size)]


def run_checkpoint_sequential(scope, path: str, segments, inp, kwargs: dict, loc):
    """``checkpoint_sequential(CONTAINER, segments, input, ...)`` in the forward ``scope`` (forward._ModuleScope)."""
    from adjoint.engine.checkpoint import run_checkpoint
    run, rt = scope.run, scope.run.rt
    container = scope.find_child(path)
    if container is None or container.type not in ("Sequential", "ModuleList"):
        raise ProblemError(loc, f"checkpoint_sequential(FUNCTIONS, segments, input, ...) takes a Sequential or "
                                f"ModuleList child first; '{path}' is not one")
    use_reentrant = kwargs.get("use_reentrant")
    extra = [k for k in kwargs if k not in ("use_reentrant", "preserve_rng_state")]
    if use_reentrant is None:
        warns.warn(rt, "UserWarning", WARNING)
        use_reentrant = True
    if extra:
        raise TorchError("ValueError", "Unexpected keyword arguments: " + ",".join(extra), "forward")
    preserve = kwargs.get("preserve_rng_state", True)
    end = -1
    for k, (start, end) in enumerate(plan(container, segments, loc)):
        seg = segment_function(container, start, end, k, loc)
        scope.run.capture(seg, scope.lookup, loc)
        inp = run_checkpoint(run, seg, [inp], {"use_reentrant": use_reentrant, "preserve_rng_state": preserve}, loc)
    for item in container.children[end + 1:]:
        inp = run.call_module(item, [inp], loc)
    return inp



