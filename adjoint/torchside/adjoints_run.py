"""The answer's ``adjoints``, observed in torch: the variant run once more, with an observing full
backward pre-hook and full backward hook on every module, each put in front of the file's own
(``prepend=True``). The pre-hook is handed ``grad_output`` as it reaches the module, before any
hook of the module acts; the hook is handed ``grad_input``: what the module's forward passed its
inputs, the hooks inside it (its children's, its tensors', its nodes') acting, its own not yet.
That is the contract's definition of a module's adjoints, read where PyTorch hands it over --
except when the module's own full_backward_pre hook replaced ``grad_output`` (returned another, or
wrote it in place; the observing hook is handed the replacement as its ``grad_output``): the hook is
then handed what the replacement derives, while the answer's ``grad_input`` derives from
``grad_output`` before it; only ``grad_output`` is compared. The observers keep copies of what they
are handed: the file's own hooks, which run after them, may write those tensors in place.

A second run, because the observers change the graph (each module's inputs and outputs pass
through a ``BackwardHookFunctionBackward``): nothing else is read from it. It is compared for
the calls of modules called once in the last forward, after a plain backward (a second-order
pass reaches the forward's nodes from its own graph too, and the answer keeps ``J^T grad_output``
there), and only when it runs as the plain run did: a module with a legacy backward hook cannot
take a full one (PyTorch raises), and an in-place write into a module's input or output is one
PyTorch refuses on a ``BackwardHookFunction`` view; such a variant's adjoints are not compared.
"""

from __future__ import annotations

from functools import partial

from adjoint.torchside.values import snap


def observe_adjoints(problem, decl, dtype: str) -> dict | None:
    """``{callid: {"grad_output": [...], "grad_input": [...]}}`` for the modules called once in the
    last forward (their last backward's), or None when the observed run raised."""
    from adjoint.torchside.run import run_variant

    seen: dict = {}
    sessions: list = []

    def pre(label, module, grad_output):
        got = seen.setdefault(label, {})
        got["grad_output"] = grad_output
        got["before"] = _copies(grad_output)

    def post(label, module, grad_input, grad_output):
        got = seen.setdefault(label, {})
        got["grad_input"] = _copies(grad_input)   # as handed: the file's own hooks, after it, may write it
        # handed grad_output as the module's pre-hooks left it: did the file's own replace it (return
        # another tensor, or write the one it was handed in place)?
        got["replaced"] = any(a is not b for a, b in zip(grad_output, got.get("grad_output", grad_output))) or any(
            (a is None) != (b is None) or (a is not None and not a.equal(b))
            for a, b in zip(grad_output, got.get("before", grad_output)))

    def attach(session):
        sessions.append(session)
        for label, module in session.modules.items():
            if label in session.decls:
                module.register_full_backward_pre_hook(partial(pre, label), prepend=True)
                module.register_full_backward_hook(partial(post, label), prepend=True)

    observed = run_variant(problem, decl, dtype, observe=attach)
    if "error" in observed or not sessions or not sessions[0].forwards:
        return None
    s = sessions[0]
    counts = s.forwards[-1].counts
    out = {}
    for label, got in seen.items():
        if counts.get(label) != 1 or "grad_output" not in got or "grad_input" not in got:
            continue
        out[label] = {"grad_output": [snap(g, s.dtype) for g in got["before"]]}
        if not got.get("replaced"):   # else the hook was handed what the replacement derives: not the answer's
            out[label]["grad_input"] = [snap(g, s.dtype) for g in got["grad_input"]]
    return out


def _copies(grads: tuple) -> tuple:
    """What a hook is handed, kept as it is then: a later hook of the module may write it in place."""
    return tuple(g.clone() if g is not None else None for g in grads)


def comparable(vp) -> bool:
    """The answer's adjoints are what a module's hooks are handed: a variant that ran, whose last
    backward is a plain ``backward()`` of all that requires grad (``inputs=`` or ``autograd.grad``
    run fewer nodes, and an observer's input node changes which)."""
    run = getattr(vp, "run", None)
    last = getattr(run, "last_pass", None) if run is not None else None
    if vp.error is not None or last is None or getattr(last.request, "second", None) is not None:
        return False
    return last.request.method == "backward" and not last.request.inputs


def repeated_inputs(vp) -> set:
    """The calls of the last forward that pass one tensor in several positional slots, whose
    adjoints the answer gives from the graph (one history for the tensor) rather than as a full
    backward hook is handed them (adjoint.engine.observer: a module with a legacy backward hook
    cannot take one)."""
    out = set()
    watched = getattr(vp.run, "observed", {})
    for call in vp.run.forward.calls:
        ids = [id(a) for a in call.args if hasattr(a, "shape")]
        if len(ids) != len(set(ids)) and call.bw is None and call.callid not in watched:
            out.add(call.callid)
    return out


def as_answered(predicted: dict, seen: dict, repeated: set) -> tuple[dict, dict]:
    """The predicted and observed adjoints made comparable: a module whose one tensor fills
    several slots (self-attention's query, key, value) is left out (its observer's input node
    makes them separate tensors); a slot the answer says None and the observer was handed zeros
    in is None on both sides (BackwardHookFunction makes zeros where PyTorch computes none)."""
    pred, obs = {}, {}
    for callid, got in seen.items():
        if callid not in predicted or callid in repeated:
            continue
        mine = predicted[callid]
        if "grad_input" not in got:   # the module's own pre-hook replaced grad_output: its grad_output only
            mine = {"grad_output": mine.get("grad_output")}
        fixed = dict(got)
        if "grad_input" in got:
            fixed["grad_input"] = [None if p is None and _zeros(o) else o
                                   for p, o in zip(mine.get("grad_input") or [], got["grad_input"])] \
                if len(mine.get("grad_input") or []) == len(got["grad_input"]) else got["grad_input"]
        pred[callid], obs[callid] = mine, fixed
    return pred, obs


def _zeros(v) -> bool:
    if not isinstance(v, dict) or v.get("value") is None:
        return False
    def flat(x):
        return [e for y in x for e in flat(y)] if isinstance(x, list) else [x]
    return all(e == 0 or e is False for e in flat(v["value"]))
