"""``checkpoint(child, *args, ...)`` in a custom forward, run by PyTorch's own torch.utils.checkpoint.

The function handed to ``torch.utils.checkpoint.checkpoint`` calls the child through the
session the first time (the original forward: names bound, calls counted, hooks registered on
names) and, every later time (PyTorch's recomputation in the backward), calls it again with the
session replaying: nothing is named or counted, each module call carries the call number of the
original call it repeats, and every hook call logged meanwhile is marked ``recomputed``. With
``use_reentrant=True``, the reentrant backward CheckpointFunction runs after the recomputation is
marked by a depth counter, which a post hook on the ``CheckpointFunctionBackward`` node (added
right after the forward, before any of the file's) takes down when the node returns.
"""

from __future__ import annotations

import contextlib

import torch
import torch.utils.checkpoint as torch_checkpoint

from adjoint.format.problem import Module
from adjoint.torchside import graphs
from adjoint.torchside.dropout import forced_mask


class Replay:
    """One recomputation: per module label, the (call number, forward index) of its current call."""

    def __init__(self, counts: dict, fi: int):
        self.base = dict(counts)      # the forward's call counts when the region began
        self.seen: dict = {}
        self.fi = fi
        self.current: dict = {}
        self.starts: dict = {}        # label -> the sequence_nr its current recomputed call began at


def checkpoint(run, decl, args: list, kwargs: dict):
    fp = run.fpass
    state = {"original": True, "counts": dict(fp.counts), "fi": fp.index}
    if run.replay is not None:   # a checkpoint nested in a region being recomputed: the calls it repeats
        replay = run.replay
        state["counts"] = {label: replay.base.get(label, 0) + replay.seen.get(label, 0)
                           for label in set(replay.base) | set(replay.seen)}
        state["fi"] = replay.fi
    reentrant = kwargs.get("use_reentrant", True) is not False

    def function(*a):
        if state["original"]:
            state["original"] = False
            return run.call_module(decl, list(a), {})
        outer = run.replay
        run.replay = Replay(state["counts"], state["fi"])
        try:
            return run.call_module(decl, list(a), {})
        finally:
            run.replay = outer
            if reentrant:   # CheckpointFunction.backward runs its reentrant backward next
                run.reentrant += 1

    out = torch_checkpoint.checkpoint(function, *args, **kwargs)
    if reentrant:
        for t in (out if isinstance(out, tuple) else (out,)):
            node = t.grad_fn if isinstance(t, torch.Tensor) else None
            if node is not None and node.name() == "CheckpointFunctionBackward":
                node.register_hook(lambda grad_inputs, grad_outputs: _leave(run))
                break
    return out


def _leave(run) -> None:
    run.reentrant -= 1


def replayed_call(run, decl, args: list, kwargs: dict):
    """A module call of the recomputation: the module itself, as the region's forward called it."""
    replay = run.replay
    label = decl.label
    n = replay.seen[label] = replay.seen.get(label, 0) + 1
    outer = replay.current.get(label)
    k = replay.base.get(label, 0) + n
    replay.current[label] = (k, replay.fi)
    outer_start = replay.starts.get(label)
    replay.starts[label] = graphs.next_sequence_nr()
    try:
        with contextlib.ExitStack() as stack:
            for hook in run.hooks.saved_hooks(label):
                stack.enter_context(run.hooks.saved_tensors(hook))
            if decl.mask is not None:
                stack.enter_context(forced_mask(decl, run.dtype, run.symbols))
            module = run.modules[label]
            out = (module.forward if decl.plain else module)(*args, **kwargs)
        for t in graphs.tensors_in(out):   # its output's BackwardHookFunctionBackward: where its hooks run
            if graphs.grad_fn_of(t) is not None:
                run.nodes.note_call(t.grad_fn, label, k, replay.fi)
        return out
    finally:
        if outer_start is not None:
            replay.starts[label] = outer_start
        if outer is None:
            replay.current.pop(label, None)
        else:
            replay.current[label] = outer


def _same(v):
    return v


class _Segment(torch.nn.Module):
    """``run_function(start, end, functions)`` of ``checkpoint_sequential``: the items called in
    order through the run (so their calls are counted, replayed and hooked as PyTorch's are);
    a plain function, so the run calls its ``forward`` directly."""

    def __init__(self, run, decl):
        super().__init__()
        object.__setattr__(self, "_run", run)
        object.__setattr__(self, "_decl", decl)

    def forward(self, input):
        for item in self._decl.children:
            input = self._run.call_module(item, [input], {})
        return input


def checkpoint_sequential(run, container, segments, inp, kwargs: dict, loc):
    """``torch.utils.checkpoint.checkpoint_sequential(container, segments, inp, **kwargs)``: PyTorch's
    own function first runs on no functions (its warning, its keyword and segment-count errors),
    then its segments are checkpointed as it checkpoints them, each a plain function."""
    torch_checkpoint.checkpoint_sequential([_same], 1, None, **kwargs)   # its warning and keyword check only
    use_reentrant = kwargs.get("use_reentrant")
    use_reentrant = True if use_reentrant is None else use_reentrant
    preserve = kwargs.get("preserve_rng_state", True)
    items = list(container.children)
    size = len(items) // segments
    end = -1
    for k, start in enumerate(range(0, size * (segments - 1), size)):
        end = start + size - 1
        # run_function(start, end, functions): items start..end, read here as PyTorch's loop reads
        # them (never the engine's segments: verify holds those to this)
        seg = Module(f"{container.label}.segment{k}", f"segment{k}", None, (), tuple(items[start:end + 1]),
                     ("input",), None, None, loc, training=container.training, plain=True)
        run.modules.setdefault(seg.label, _Segment(run, seg))
        inp = checkpoint(run, seg, [inp], {"use_reentrant": use_reentrant, "preserve_rng_state": preserve})
    for item in items[end + 1:]:
        inp = run.call_module(item, [inp], {})
    return inp
