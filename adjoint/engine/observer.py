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
query, key and value separately, as it does for a user's full hook. Self-attention needs no
second run: each position's part is read off the in-projection of the run itself
(:func:`_per_position`), which is what that separate projection computes. A module that has a legacy
``register_backward_hook`` cannot take a full one (PyTorch raises), and a run the watching hook
makes raise (an in-place op on an Identity's output, which is then a custom Function's view) has
no such reading: those calls keep the values the graph gives.
"""

from __future__ import annotations

from dataclasses import replace

from adjoint.format.errors import ProblemError
from adjoint.format.problem import Hook
from math import prod

from adjoint.engine.adjoints import gradient_value, input_slots, output_seeds, pure_vjp, seen_at
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
        if _shared_positions(call) or _passes_through(call):
            out.append(call)
    return out


def _shared_positions(call) -> set:
    """The positions of ``call``'s arguments whose tensor (one that requires grad) is handed at
    another position too, or by keyword as well (a full hook's BackwardHook wraps the positional
    arguments only: the keyword's use is not that position's); -1 for one repeated inside a tuple
    argument (no projection covers it)."""
    flat = [id(t) for t in _tensors(call.args) if t.requires_grad]
    keyword = {id(t) for t in call.kwarg_tensors if t.requires_grad}
    if not flat or (len(set(flat)) == len(flat) and not keyword.intersection(flat)):
        return set()
    repeated = {k for k in flat if flat.count(k) > 1 or k in keyword}
    shared = {i for i, a in enumerate(call.args) if isinstance(a, Tensor) and id(a) in repeated}
    if any(isinstance(a, tuple) and any(id(t) in repeated for t in _tensors(a)) for a in call.args):
        shared.add(-1)
    return shared


def _passes_through(call) -> bool:
    """An output of ``call`` is one of its inputs, or one output is returned twice."""
    outs = [id(o) for o in _tensors(call.out if isinstance(call.out, tuple) else (call.out,)) if o.requires_grad]
    if len(set(outs)) < len(outs):
        return True
    args = {id(a) for a in _tensors(call.args) if a.requires_grad}
    return any(o in args for o in outs)


def observe(run, make_backend, found: list) -> dict:
    """callid -> (grad_output, grad_input) as a watching full backward hook on the module is handed
    them in the last backward, for each call of :func:`calls_to_observe` of ``run``'s last pass;
    empty where there is none, or where the watched run does not get to that backward as ``run``
    did (``make_backend``: makes a fresh value backend of the run's mode). ``found``: the pass's
    boundaries (:func:`adjoint.engine.adjoints.boundaries_of`); a self-attention call is read off
    them and its in-projection (:func:`_per_position`), without a watched run -- unless saved-tensor
    hooks may hand the backward other values than the forward saved: the watched run's separate
    projections save, and unpack, other tensors."""
    last = run.last_pass
    if last is None or run.error is not None or _second_order(run) or _global_legacy(run.variant):
        return {}
    by_callid = {b.callid: b for b in found}
    derived, calls = {}, []
    unpacks = any(h.kind == "saved_tensors" for h in run.variant.hooks)
    legacy = _legacy_modules(run.variant)
    for call in calls_to_observe(last.forward):
        if call.path in legacy:
            continue
        got = None if unpacks else _per_position(run.rt, call, by_callid.get(call.callid), last.result)
        if got is not None:
            derived[call.callid] = got
        else:
            calls.append(call)
    if not calls:
        return derived
    return {**_watched(run, make_backend, calls), **derived}


def _per_position(rt, call, boundary, bwd):
    """(grad_output, grad_input) of a call whose only unmarked boundary is one tensor at several of
    its positions, each projected by its own rows of an in-projection weight (MultiheadAttention,
    :class:`adjoint.engine.layers.attention.Projection`): a position's part is the gradient at the
    projection's output in its rows, times those rows, carried back through the module's transpose
    or unsqueeze of the argument -- J^T of the projection the forward makes for that position when
    a full backward hook makes the positions different tensors. The exact arithmetic is the
    watched run's; a float64 answer differs from it in rounding only (the separate projection
    rounds on its own). None where the call is not of that kind (complex values: left to the
    watched run)."""
    shared = _shared_positions(call)
    covered = {pos for p in call.projections for pos, _, _ in p.blocks}
    if boundary is None or not call.projections or not shared <= covered or _passes_through(call) \
            or any(p.out.dtype.startswith("complex") for p in call.projections):
        return None
    if all(g is None for g in boundary.grad_output):
        return boundary.grad_output, (None,) * len(call.args)
    B, gins = rt.B, list(boundary.grad_input)
    seeds = output_seeds(call, boundary.grad_output)
    for p in call.projections:
        blocks = [b for b in p.blocks if b[0] in shared]
        if not blocks:
            continue
        # what the backward carried to the projection's output, the hooks inside the module acting
        # (a node hook on its output's node), as the watching hook's input node would be handed it
        dout = gradient_value(seen_at(bwd, p.out))
        if dout is None:
            (dout,) = pure_vjp(rt, rt.nodes[p.after:call.end], seeds, [p.out], getattr(bwd, "vjps", None))
        lead = tuple(B.shape(dout))[:-1]
        for pos, lo, n in blocks:
            part = B.reshape(B.index(dout, (slice(None),) * len(lead) + (slice(lo, lo + n),)), (prod(lead), n))
            rows = B.index(p.weight, (slice(lo, lo + n), slice(None)))
            at_x = B.reshape(B.matmul2d(part, rows), tuple(p.x.shape))
            (gins[pos],) = pure_vjp(rt, rt.nodes[call.body_start:p.first], [(p.x, at_x)], [call.args[pos]],
                                    none_unreached=True)
    return boundary.grad_output, tuple(gins)


def _watched(run, make_backend, calls: list) -> dict:
    """:func:`observe` for ``calls`` through a second run of the variant with a watching full
    backward hook on each of their modules."""
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


def _legacy_modules(variant) -> set:
    """The paths of the modules the variant gives a legacy backward hook: PyTorch refuses a watching
    full hook on them at its registration ("Cannot use both regular backward hooks and full
    backward hooks on a single Module"), which would end the watched run for every call -- also
    where the legacy hook never went on a node (the module's output had no grad_fn: a leaf
    returned as it is), so that the call itself looks unhooked."""
    return {h.target for h in variant.hooks if h.on == "module" and h.kind == "backward"}


def _watching_hook(index: int, path: str, loc) -> Hook:
    return Hook(index=index, on="module", target=path, kind="full_backward", returns=None, does=(), remove=None,
                when="before_forward", label=WATCH, loc=loc)


def _tensors(xs):
    for x in xs:
        if isinstance(x, tuple):
            yield from _tensors(x)
        elif isinstance(x, Tensor):
            yield x

