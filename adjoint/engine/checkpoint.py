"""``torch.utils.checkpoint.checkpoint(FN, *args, ...)`` in a forward, as PyTorch 2.13 runs it.

PyTorch's torch/utils/checkpoint.py, step by step:

* ``use_reentrant`` not given: a UserWarning ("the use_reentrant parameter should be passed
  explicitly ...") and the reentrant variant (2.13 still defaults to True).
* **non-reentrant** (``use_reentrant=False``; ``_checkpoint_without_reentrant_generator``): with
  grad mode off, FN simply runs. Otherwise FN runs under ``_checkpoint_hook``, a
  ``saved_tensors_hooks`` pair (the innermost one while it is active): every tensor an op of the
  region saves is packed as an empty ``_Holder``. The region's nodes are the ordinary ones (hooks
  see the same graph). In the backward, the first unpack of one of the frame's holders in a
  graph task re-runs FN on the saved inputs, with grad mode on, under ``_recomputation_hook``:
  its pack hook fills the holders in order; with ``early_stop`` (the default) the recomputation
  stops (``_StopRecomputationError``, swallowed) as soon as the last holder is filled, so what
  FN would run after the last saving op -- module forward hooks of later modules, the op itself's
  module's forward hook -- does not run. Every user hook the recomputation calls is a call of
  the answer marked ``recomputed``. A second unpack of one holder in one graph task is
  PyTorch's CheckpointError; another graph task (``retain_graph``) recomputes again.
* **reentrant** (``CheckpointFunction``): see :mod:`adjoint.engine.checkpoint_reentrant`.

Names: the original forward binds the region's names (and registers hooks on them) once; the
recomputation binds none (its tensors are new ones no hook of the file names: in PyTorch a hook
registered on them would never fire, as nothing runs a backward through them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from adjoint.engine.graph import SavedVariable, Tensor
from adjoint.engine.runtime import TorchError
from adjoint.engine.inference import refuse_inside
from adjoint.engine.saved_hooks import disabled
from adjoint.engine import warns

USE_REENTRANT_WARNING = (
    "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. Starting in PyTorch 2.9, "
    "calling checkpoint without use_reentrant will raise an exception. use_reentrant=False is recommended, but if "
    "you need to preserve the current default behavior, you can pass use_reentrant=True. Refer to docs for more "
    "details on the differences between the two variants.")

UNPACKED_TWICE = ("torch.utils.checkpoint: Unpack is being triggered for a tensor that was already unpacked once. If "
                  "you are calling ctx.saved_tensors in backward, make sure to do so only once. Otherwise please open "
                  "an issue with details on your use case.")

#: ``_debug_tip_msg``: the end of every CheckpointError about a recomputation that differs
DEBUG_TIP = '\nTip: To see a more detailed error message, either pass `debug=True` to\n`torch.utils.checkpoint.checkpoint(...)` or wrap the code block\nwith `with torch.utils.checkpoint.set_checkpoint_debug_enabled(True):` to\nenable checkpoint‑debug mode globally.\n\nIf this error occurs under torch.compile with automatic_dynamic_shapes enabled,\nit may be because the recomputation selected a different compiled graph than the\nforward pass (e.g., a dynamic graph instead of the original static graph).\nTo fix this, either:\n  - Use torch._dynamo.mark_dynamic() to explicitly mark varying dimensions as\n    dynamic upfront, avoiding the static-to-dynamic transition.\n  - Call torch._C._dynamo.eval_frame._set_lru_cache(False) to disable LRU cache\n    reordering, which can change which graph is checked first between forward\n    and recompute.\nSee https://github.com/pytorch/pytorch/issues/166926 for more details and\nworkaround examples.\n'

MORE_SAVED = ("torch.utils.checkpoint: trying to save more tensors during recomputation than during the original "
              "forward pass.\n" + DEBUG_TIP)

#: the keyword arguments of ``checkpoint`` a file may give (PyTorch's names)
OPTIONS = ("use_reentrant", "preserve_rng_state", "early_stop")

#: ``checkpoint``'s own keyword parameters (torch/utils/checkpoint.py): any other keyword lands in its
#: ``**kwargs`` (``preserve_rng_state`` is popped from there), meant for the function
NAMED = ("use_reentrant", "context_fn", "determinism_check", "debug", "early_stop", "preserve_rng_state")


class StopRecomputation(Exception):
    """``_StopRecomputationError``: raised by the recomputation's pack hook once every holder is filled."""


@dataclass(eq=False)
class Holder:
    """``_Holder``: what the forward's pack hook returns; the recomputation fills it per graph task."""

    # graph task -> the recomputed tensor (None once unpacked): ``x.detach()``, its memory, so what
    # the recomputation writes into it after it was saved is what the unpack reads
    values: dict = field(default_factory=dict)


class CheckpointFrame:
    """``_CheckpointFrame`` with its ``_checkpoint_hook``: pushed on the runtime's saved-tensor
    hooks stack while the region's forward runs (duck-typed by the hook runner: ``is_checkpoint``)."""

    is_checkpoint = True
    label = "checkpoint"

    def __init__(self, run, child, args: list, kwargs: dict, early_stop: bool, loc):
        self.run = run                 # the forward pass (adjoint.engine.forward._Pass)
        self.child = child
        self.args = list(args)
        self.kwargs = dict(kwargs)
        self.early_stop = early_stop
        self.loc = loc
        self.holders: list[Holder] = []
        self.recomputed: set = set()    # graph tasks that recomputed
        self.calls: list = []          # the module calls the original region made, in order
        self.forward_completed = False
        self.packed_inputs: list = []  # save_inputs: (hooks, what they packed) per tensor argument
        self.saved_inputs: list = []   # _NoopSaveInputs' save_for_backward of the tensor arguments (no hooks)
        self.metadata: list = []       # x_metadatas: (shape, dtype) of each tensor the forward packed
        self.recomputed_metadata: dict = {}   # graph task -> {holder index: (shape, dtype)} of the recomputation
        self.recomp_counter: dict = {}        # graph task -> how many tensors the recomputation packed
        self.ignore_saved_mismatch = False

    # ---------------------------------------------------------------- _checkpoint_hook
    def pack(self, rt, t, node, slot):
        holder = Holder()
        self.holders.append(holder)
        self.metadata.append((tuple(t.shape), t.dtype))
        return holder

    def unpack(self, rt, holder: Holder, node, sv):
        gid = rt.graph_task
        if gid not in self.recomputed:
            self.recompute(rt, gid)
            self.recomputed.add(gid)
            self.check_recomputed_tensors_match(gid)
        if gid not in holder.values:
            raise TorchError("RuntimeError", "torch.utils.checkpoint: internal error: a holder was not recomputed",
                             "checkpoint")
        value = holder.values[gid]
        if value is None:
            raise TorchError("CheckpointError", UNPACKED_TWICE, "checkpoint")
        holder.values[gid] = None
        return value.value

    def recompute(self, rt, gid) -> None:
        """FN again on the saved inputs, grad mode on, under ``_recomputation_hook``. The inputs are
        ``input_saver.grad_fn.saved_tensors`` first: each checked against its version when saved
        (an argument written in place since, after the call or by FN itself, is PyTorch's version
        error here), or unpacked by the hooks that packed it."""
        for sv in self.saved_inputs:
            rt.unpack(None, sv)
        for hooks, packed in self.packed_inputs:   # get_inputs: an enclosing checkpoint's (or save_on_cpu's) unpack
            rt.hooks_runner.unpack(hooks, packed, None, None)
        hooks = RecomputationHooks(self, gid)
        before_grad, depth, stack = rt.grad_enabled, len(rt.saved_hooks), len(rt.call_stack)
        rt.saved_hooks.append(hooks)
        rt.grad_enabled = True
        rt.recomputing += 1
        run = self.run
        replay = run.replay
        run.replay = iter(self.calls)
        try:
            run.call_module(self.child, list(self.args), self.loc, dict(self.kwargs))
        except StopRecomputation:
            pass
        finally:
            run.replay = replay
            rt.recomputing -= 1
            rt.grad_enabled = before_grad
            del rt.saved_hooks[depth:]
            del rt.call_stack[stack:]


    def check_recomputed_tensors_match(self, gid) -> None:
        """``_CheckpointFrame.check_recomputed_tensors_match``, after the first recomputation of a
        graph task: as many tensors packed as in the forward, each with the forward's metadata
        (shape, dtype, device). A module hook registered or removed since the forward changes what
        the recomputation runs; the first difference found is PyTorch's CheckpointError."""
        if self.ignore_saved_mismatch:
            return
        count = self.recomp_counter.get(gid, 0)
        if count != len(self.holders):
            raise TorchError("CheckpointError", "torch.utils.checkpoint: A different number of tensors was saved "
                             "during the original forward and recomputation.\nNumber of tensors saved during forward: "
                             f"{len(self.holders)}\nNumber of tensors saved during recomputation: {count}.\n"
                             + DEBUG_TIP, "checkpoint")
        recomputed = self.recomputed_metadata.get(gid, {})
        different = "".join(f"tensor at position {i}:\nsaved metadata: {_metadata(*meta)}\n"
                            f"recomputed metadata: {_metadata(*recomputed[i])}\n"
                            for i, meta in enumerate(self.metadata) if i in recomputed and recomputed[i] != meta)
        if different:
            raise TorchError("CheckpointError", "torch.utils.checkpoint: Recomputed values for the following tensors "
                             f"have different metadata than during the forward pass.\n{different}.\n" + DEBUG_TIP,
                             "checkpoint")


def _metadata(shape, dtype) -> str:
    """``_default_meta_extractor``'s dict as Python prints it."""
    return f"{{'shape': torch.Size({list(shape)}), 'dtype': torch.{dtype}, 'device': device(type='cpu')}}"


class RecomputationHooks:
    """``_recomputation_hook``: fills the frame's holders in order; stops at the last with early_stop."""

    is_checkpoint = True
    label = "checkpoint recomputation"

    def __init__(self, frame: CheckpointFrame, gid):
        self.frame = frame
        self.gid = gid
        self.counter = 0

    def pack(self, rt, t, node, slot):
        frame = self.frame
        idx = self.counter
        self.counter += 1
        frame.recomp_counter[self.gid] = self.counter
        if idx >= len(frame.holders):
            if not frame.forward_completed:   # a backward inside the region's own forward: not checked
                frame.ignore_saved_mismatch = True
                return t.value
            raise TorchError("CheckpointError", MORE_SAVED, "checkpoint")
        frame.holders[idx].values[self.gid] = t
        frame.recomputed_metadata.setdefault(self.gid, {})[idx] = (tuple(t.shape), t.dtype)
        if frame.early_stop and self.counter == len(frame.holders):
            raise StopRecomputation
        return t.value

    def unpack(self, rt, packed, node, sv):
        return packed


def options(rt, kwargs: dict, loc) -> tuple[bool, bool]:
    """(use_reentrant, early_stop) from ``checkpoint``'s keyword arguments; the missing
    ``use_reentrant`` warning is issued here, as ``checkpoint`` issues it first."""
    from adjoint.format.errors import ProblemError
    for k in kwargs:
        if k == "debug" and kwargs[k] is False:   # checkpoint's default: nothing changes
            continue
        if k not in OPTIONS:
            raise ProblemError(loc, f"checkpoint(...) keyword '{k}' is not modelled; the modelled ones are "
                                    f"{', '.join(OPTIONS)}")
    for k in OPTIONS:
        if k in kwargs and kwargs[k] is not None and not isinstance(kwargs[k], bool):
            raise ProblemError(loc, f"checkpoint(...)'s {k} must be True or False")
    use_reentrant = kwargs.get("use_reentrant")
    if use_reentrant is None:
        warns.warn(rt, "UserWarning", USE_REENTRANT_WARNING)
        use_reentrant = True
    # early_stop is a named parameter of checkpoint(): the reentrant variant ignores it
    early_stop = kwargs.get("early_stop", True)
    return bool(use_reentrant), bool(early_stop)


def unexpected_keywords(rt, kwargs: dict) -> None:
    """``checkpoint(fn, *args, k=v, use_reentrant=True)`` (or without ``use_reentrant``: its warning
    first, then True): keywords for the function are PyTorch's ValueError before it runs, as
    ``checkpoint`` checks ``if kwargs and use_reentrant`` once it popped ``preserve_rng_state``;
    then ``debug`` other than False is its other ValueError (``context_fn`` is no file's)."""
    extra = [k for k in kwargs if k not in NAMED]
    use_reentrant = kwargs.get("use_reentrant")
    debug = "debug" in kwargs and kwargs["debug"] is not False
    if not (extra or debug) or not (use_reentrant is None or use_reentrant is True):
        return
    if use_reentrant is None:
        warns.warn(rt, "UserWarning", USE_REENTRANT_WARNING)
    if extra:
        raise TorchError("ValueError", "Unexpected keyword arguments: " + ",".join(extra), "forward")
    raise TorchError("ValueError", "Passing `context_fn` or `debug` is only supported when use_reentrant=False.",
                     "forward")


def run_checkpoint(run, child, args: list, kwargs: dict, loc):
    """``checkpoint(child, *args, **kwargs)`` in the forward pass ``run`` (forward._Pass)."""
    rt = run.rt
    refuse_inside(rt, loc, "checkpoint")
    use_reentrant, early_stop = options(rt, kwargs, loc)
    if not use_reentrant and not rt.grad_enabled:   # _checkpoint_without_reentrant_generator: nothing to do
        return run.call_module(child, list(args), loc)
    # without the RNG state, the recomputation draws a training-mode dropout's mask afresh, which
    # a file cannot state: the region's dropout refuses it (adjoint.engine.bindings.norm.dropout)
    fresh = kwargs.get("preserve_rng_state") is False
    rt.fresh_rng += fresh
    rt.checkpointing += 1   # (an inference_mode block inside the region is refused)
    try:
        if use_reentrant:
            from adjoint.engine.checkpoint_reentrant import run_reentrant
            return run_reentrant(run, child, args, loc)
        return _run_non_reentrant(run, child, args, early_stop, loc)
    finally:
        rt.fresh_rng -= fresh
        rt.checkpointing -= 1


def _run_non_reentrant(run, child, args: list, early_stop: bool, loc):
    rt = run.rt
    if any(not getattr(h, "is_checkpoint", False) and getattr(h, "on", None) != "save_on_cpu" for h in rt.saved_hooks):
        from adjoint.format.errors import ProblemError
        raise ProblemError(loc, "checkpoint(..., use_reentrant=False) inside the scope of saved_tensors hooks is not "
                                "modelled yet (PyTorch packs the region's inputs with them, and unpacks them when it "
                                "recomputes); narrow the hooks' scope, or use use_reentrant=True")
    off = disabled(rt)
    if off:   # entering _checkpoint_hook (a saved_tensors_hooks) inside disable_saved_tensors_hooks
        raise TorchError("RuntimeError", off[-1].message, "saved_hooks_disabled")
    frame = CheckpointFrame(run, child, args, {}, early_stop, loc)
    if rt.saved_hooks:   # save_inputs: the arguments are saved tensors, packed by an enclosing checkpoint's
        # hooks (a recomputation's pack may stop it right here: _StopRecomputationError) or save_on_cpu's
        top = rt.saved_hooks[-1]
        frame.packed_inputs = [(top, rt.hooks_runner.pack(top, a, None, None)) for a in args if isinstance(a, Tensor)]
    else:   # ctx.save_for_backward(*tensors): unpacked with the version check before the recomputation
        frame.saved_inputs = [SavedVariable("input", a, a.version.value, False, a.value)
                              for a in args if isinstance(a, Tensor)]
    start, depth = run.calls_mark(), len(rt.saved_hooks)
    rt.saved_hooks.append(frame)
    try:
        out = run.call_module(child, list(args), loc)
    finally:
        del rt.saved_hooks[depth:]
    frame.calls = run.calls_since(start)
    frame.forward_completed = True
    if frame.calls and run.replay is None:
        frame.calls[0].checkpoint = ("non-reentrant, early_stop=True: recomputed in the backward at the first unpack of "
                                     "a tensor it saved, up to the last saving op" if early_stop else
                                     "non-reentrant, early_stop=False: recomputed whole in the backward at the first "
                                     "unpack of a tensor it saved")
    return out

