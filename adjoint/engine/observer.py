"""The adjoints of module calls whose boundary PyTorch's graph does not mark.

A full backward hook on a module wraps its inputs and its outputs in BackwardHookFunction nodes:
each output becomes a tensor of its own, and so does each input, once per position. Without one,
two kinds of call leave no trace of their boundary in the graph:

* a call that returns one of its inputs itself (``Identity``, an empty ``Sequential`` as a
  residual shortcut, eval-mode ``Dropout``, ``Flatten`` of a 2-D input, ``x.contiguous()``):
  its output *is* its input, so the tensor's gradient sums the uses before the call and after it;
* a call handed one tensor at several positions (self-attention's ``attn(x, x, x)``): its inputs
  are one tensor, whose gradient sums what every position sends.

The answer's ``adjoints`` are defined as a full backward hook sees the module (``grad_output``
the gradient reaching its output, ``grad_input`` what its forward derives from it for each
position). For such calls :func:`observe` runs the variant once more with a full backward hook
that only watches on each of those modules, and reads what it is handed in the last backward.
The watched run is PyTorch's own behaviour with that hook added: MultiheadAttention then projects
query, key and value separately, as it does for a user's full hook. A module that has a legacy
``register_backward_hook`` cannot take a full one (PyTorch raises), and a run the watching hook
makes raise (an in-place op on an Identity's output, which is then a custom Function's view) has
no such reading: those calls keep the values the graph gives.
"""

from __future__ import annotations

from dataclasses import replace

from adjoint.format.errors import ProblemError
from adjoint.format.problem import Hook
from adjoint.engine.adjoints import gradient_value, input_slots
from adjoint.engine.graph import Tensor
from adjoint.engine.passes import run_variant
from adjoint.engine.torch_errors import TorchError

#: the label of the watching hooks (never shown: their run's hook calls are not the answer's)
WATCH = "(adjoint's watching full backward hook)"


def calls_to_observe(fwd) -> list:
    """The calls of forward ``fwd`` whose boundary only a full backward hook would mark: no backward
    hook of the module's own acted at the call (no BackwardHookFunction, no legacy hook), grad
    mode was on (a call inside a reentrant checkpoint region runs without a graph; a watching
    hook would fire only in its recomputation), and an output is one of its inputs, an output
    is returned twice, or one tensor that requires grad is handed at several positions."""
    out = []
    for call in fwd.calls:
        if call.bw is not None or call.legacy_hooks or call.recomputes is not None or not call.grad_enabled:
            continue
        args = [a for a in _tensors(call.args) if a.requires_grad]
        outs = list(_tensors(call.out if isinstance(call.out, tuple) else (call.out,)))
        repeated_arg = len({id(a) for a in args}) < len(args)
        passed_through = any(any(o is a for a in args) for o in outs)
        repeated_out = len({id(o) for o in outs if o.requires_grad}) < sum(o.requires_grad for o in outs)
        if repeated_arg or passed_through or repeated_out:
            out.append(call)
    return out


def observe(run, make_backend) -> dict:
    """callid -> (grad_output, grad_input) as a watching full backward hook on the module is handed
    them in the last backward, for each call of :func:`calls_to_observe` of ``run``'s last pass;
    empty where there is none, or where the watched run does not get to that backward as ``run``
    did (``make_backend``: makes a fresh value backend of the run's mode)."""
    last = run.last_pass
    if last is None or run.error is not None or _second_order(run) or _global_legacy(run.variant):
        return {}
    calls = calls_to_observe(last.forward)
    if not calls:
        return {}
    variant, problem = run.variant, run.problem
    first = len(variant.hooks)
    paths = list(dict.fromkeys(c.path for c in calls))
    watching = tuple(_watching_hook(first + i, path, variant.loc) for i, path in enumerate(paths))
    try:
        watched = run_variant(problem, replace(variant, hooks=variant.hooks + watching), make_backend())
    except (ProblemError, TorchError):
        return {}
    other = watched.last_pass
    if watched.error is not None or other is None or len(watched.passes) != len(run.passes):
        return {}
    wanted = {c.callid for c in calls}
    seen: dict = {}
    own_calls = {id(c) for c in other.forward.calls}
    for i in other.calls:
        rec = watched.rt.log[i]
        if rec.hook.index < first or rec.call is None or id(rec.call) not in own_calls:
            continue
        callid = rec.call.callid
        if callid not in wanted:
            continue
        if callid in seen:   # handed twice in one pass: not one reading
            seen[callid] = None
            continue
        seen[callid] = (tuple(gradient_value(g) for g in rec.args["grad_output"]),
                        _computed(rec.call, rec.args["grad_input"], other.result))
    by_id = {c.callid: c for c in calls}
    for callid in wanted - set(seen):   # no gradient reached its output: the watching hook never fired
        call = by_id[callid]
        outs = call.out if isinstance(call.out, tuple) else (call.out,)
        seen[callid] = ((None,) * len(outs), (None,) * len(call.args))
    return {k: v for k, v in seen.items() if v is not None}


def with_observed(boundaries: list, observed: dict) -> list:
    """``boundaries`` with the watched readings of :func:`observe` in place of what the graph gave,
    where a reading has the call's shape (as many outputs and positional inputs). A slot the graph
    gives None stays None: no gradient reaches that tensor at all, and the zeros a
    BackwardHookFunction hands its hook there are its own, not a gradient PyTorch computed."""
    if not observed:
        return boundaries
    out = []
    for b in boundaries:
        got = observed.get(b.callid)
        if got is not None and len(got[0]) == len(b.grad_output) and len(got[1]) == len(b.grad_input):
            gouts = tuple(None if mine is None else g for mine, g in zip(b.grad_output, got[0]))
            gins = tuple(None if mine is None else g for mine, g in zip(b.passed or b.grad_input, got[1]))
            b = replace(b, grad_output=gouts, grad_input=gins, passed=gins)
        out.append(b)
    return out


def _computed(call, grad_input: tuple, bwd) -> tuple:
    """The watching hook's ``grad_input`` with None where PyTorch computed none: the input
    BackwardHookFunctionBackward received no gradient for that position (an input the forward
    does not use) and materialized zeros for the hook (``g(x, x)`` using its first input only)."""
    slots = input_slots(call)
    if slots is None:
        return tuple(gradient_value(g) for g in grad_input)
    node, positions = slots
    return tuple(None if k is not None and bwd.seen.get((id(node), k)) is None else gradient_value(g)
                 for g, k in zip(grad_input, positions))


def _second_order(run) -> bool:
    """A pass of the run built a graph of its gradients (create_graph): a later backward reaches
    the forward's nodes through that graph too, and a module's adjoints there are not what one
    first-order backward carries to it (the answer keeps J^T through the forward)."""
    return any(getattr(getattr(getattr(p.request, "second", None), "second", None), "create_graph", False)
               for p in run.passes)


def _global_legacy(variant) -> bool:
    """A global legacy backward hook (``register_module_backward_hook``): beside a watching full
    hook it would go on the module's own BackwardHookFunctionBackward, acting where, without the
    watching hook, it does not act at all."""
    return any(h.on == "global" and h.kind == "backward" for h in variant.hooks)


def _watching_hook(index: int, path: str, loc) -> Hook:
    return Hook(index=index, on="module", target=path, kind="full_backward", returns=None, does=(), remove=None,
                when="before_forward", label=WATCH, loc=loc)


def _tensors(xs):
    for x in xs:
        if isinstance(x, tuple):
            yield from _tensors(x)
        elif isinstance(x, Tensor):
            yield x

