"""Why a declared hook never fired, read from the engine's own records of the run.

A report lists every hook of a variant that made no call, each with its reason; the reason is
what the run's records show, never a guess from the file:

* PyTorch raised before the hook could fire (``run.error``);
* it was never registered (a register step the variant does not reach) or was removed
  (``handle.remove()``: ``remove:``, ``removes:``, a ``{remove: [...]}`` step) before it could fire
  (``Registrations.handles`` / ``active``);
* its module was never called (no ``Call`` of that path in any forward);
* its node never ran (the ``seen`` record of every backward pass: the nodes the engine
  executed), for a node hook, or for a module's backward hook, whose nodes (the
  ``BackwardHookFunctionBackward`` around the call, the legacy hook's last node) never ran;
* its tensor got no gradient (the tensor's ``grad_fn``, or a leaf's ``AccumulateGrad``, never ran);
* the saved-tensor hook had nothing to pack or unpack.

When none of these is what the records show, the reason says so plainly instead of inventing one.
"""

from __future__ import annotations

from dataclasses import dataclass

from adjoint.engine.graph import Tensor


@dataclass(frozen=True)
class Silent:
    """A hook of the variant that never fired, and why."""

    index: int
    label: str
    kind: str
    on: str
    target: str
    reason: str


def silent_hooks(v) -> list[Silent]:
    """The hooks of variant prediction ``v`` that made no call, in declaration order, each with
    the reason the engine's records give."""
    run = v.run
    if run is None:
        return []
    fired = {h.index for h in v.hook_calls}
    out = []
    for hook in run.variant.hooks:
        if hook.index in fired or (hook.on == "tensor" and hook.kind == "retain_grad") or hook.on == "save_on_cpu":
            continue   # retain_grad is not a call: its effect is the tensor's .grad; save_on_cpu calls nothing of the file
        out.append(Silent(hook.index, hook.label, hook.kind, hook.on, hook.target, _reason(hook, run)))
    return out


def _ran(run) -> tuple[set[int], set[int]]:
    """(ids of the nodes any backward pass executed, ids of the leaves whose AccumulateGrad ran)."""
    nodes: set[int] = set()
    leaves: set[int] = set()
    passes = list(run.passes) + ([run.failed_pass] if run.failed_pass is not None else [])
    for p in passes:
        for key in p.result.seen:
            if isinstance(key, tuple):
                nodes.add(key[0])
            else:
                leaves.add(key)
    return nodes, leaves


def _reason(hook, run) -> str:
    if run.error is not None:
        return f"PyTorch raised {run.error.type} during the {run.error.during} before it could fire"
    reg = run.reg
    by = [h.label for h in run.variant.hooks if hook.index in h.registers]
    if by and reg is not None and hook.index not in reg.handles:
        return f"never registered: {', '.join(by)}, which registers it, never ran"
    if reg is not None and hook.index not in reg.handles:
        return "never registered: the step that registers it is not reached"
    removed = reg is not None and hook.index not in reg.active and not reg.handles.get(hook.index)
    # what the graph shows comes first: a hook removed after the backward whose node never ran
    # did not fire because its node never ran
    reason = _structural(hook, run, reg)
    if reason is not None:
        return reason
    if removed:
        return "removed (handle.remove()) before it could fire"
    if hook.on in ("module", "global") and hook.when == "after_forward":
        return ("registered after its module's call: a call hands the backward the module hooks it had then "
                "(BackwardHook's user_hooks)")
    t = reg.names.get(hook.target) if reg is not None else None
    if hook.on == "tensor" and isinstance(t, Tensor) and t.id not in reg.attached.get(hook.index, ()):
        return (f"it is on an earlier version of {hook.target} (registered before an in-place op on it), whose "
                "gradient nothing computes")
    if by:
        return (f"registered inside {', '.join(by)} (registers:) once the backward had passed its node, or had "
                "started the group of hooks it joined (they run from a copy of their dict): it fires from the next "
                "backward on")
    return "its node ran without calling it (no reason recorded)"


def _structural(hook, run, reg) -> str | None:
    """The reason the graph itself gives (nothing to fire on), or None when the hook's place ran."""
    if hook.on in ("module", "global"):
        return _module_reason(hook, run)
    if not run.passes:
        return "the variant runs no backward" if hook.on not in ("saved_tensors", "saved", "save_on_cpu") else None
    nodes, leaves = _ran(run)
    if hook.on in ("saved_tensors", "saved", "disable_saved_tensors_hooks", "save_on_cpu"):
        return None
    if hook.on == "multi_grad":
        return "none of its tensors got a gradient" if hook.mode == "any" else \
            ("none of its tensors was reached by the backward (mode 'all' waits only for the tensors whose "
             "nodes the backward runs, and fires once those have their gradients)")
    t = reg.names.get(hook.target) if reg is not None else None
    if not isinstance(t, Tensor):
        return "its tensor does not exist in this run"
    if t.grad_fn is None:   # a leaf: its AccumulateGrad
        if t.id in leaves:
            return None
        restricted = _restricted(run, t)
        if restricted is not None:
            return restricted
        if hook.on == "node":
            return f"its node AccumulateGrad never ran: no gradient reached the leaf {hook.target}"
        return f"its tensor got no gradient: no gradient reached the leaf {hook.target}"
    node = t.grad_fn
    if id(node) in nodes:
        return None
    if hook.on == "node":
        return f"its node {node.name} never ran: no gradient reached {hook.target}"
    return f"its tensor got no gradient: {hook.target}'s grad_fn {node.name} never ran"


def _restricted(run, leaf: Tensor) -> str | None:
    """Why a leaf's AccumulateGrad never ran when every backward named its ``inputs``
    (``torch.autograd.grad``, ``backward(inputs=...)``): the engine executes only what those
    inputs need, and ``autograd.grad`` captures an input's gradient (its tensor hooks run)
    without running the input's AccumulateGrad. None when some backward was not restricted."""
    passes = list(run.passes) + ([run.failed_pass] if run.failed_pass is not None else [])
    requests = [getattr(p, "request", None) for p in passes]
    if not requests or any(r is None or not getattr(r, "inputs", ()) for r in requests):
        return None
    grad = all(getattr(r, "method", "backward") == "grad" for r in requests)
    call = "torch.autograd.grad" if grad else "backward(inputs=...)"
    named = [n for r in requests for n, t, *_ in r.inputs if isinstance(t, Tensor) and t.id == leaf.id]
    if named and grad:
        return (f"{named[0]} is an input of torch.autograd.grad, which takes its gradient as the result (its "
                "tensor hooks run) without running its AccumulateGrad, so .grad and node hooks are untouched")
    if named:
        return None
    inputs = ", ".join(dict.fromkeys(n for r in requests for n, *_ in r.inputs))
    return (f"{call} computes only the gradients of its inputs ({inputs}): nothing needs this leaf's "
            "gradient, so its AccumulateGrad is not executed")


def _requires_grad_inside(value) -> bool:
    """A tensor that requires grad nested anywhere in ``value`` (tuples of tuples)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, Tensor) and v.requires_grad:
            return True
        if isinstance(v, tuple):
            stack.extend(v)
    return False


def _module_reason(hook, run) -> str | None:
    calls = [c for f in run.forwards for c in f.calls
             if hook.on == "global" or c.path == hook.target or c.module.path == hook.target]
    if not calls:
        return "its module was never called" if hook.on == "module" else "no module was called"
    if hook.kind in ("forward", "forward_pre"):
        return None
    if not run.passes:
        return "the variant runs no backward"
    nodes, _ = _ran(run)
    attached = [n for c in calls for n in (c.in_node, c.out_node, c.legacy_node) if n is not None]
    if not attached:   # the calls set up no BackwardHook: none requires grad, or the hook came later
        outs = [o for c in calls for o in (c.out if isinstance(c.out, tuple) else (c.out,))]
        first = [_first_tensor(c.out) for c in calls]
        if hook.kind == "backward" and any(isinstance(o, Tensor) and o.requires_grad for o in first) \
                and all(not isinstance(o, Tensor) or o.grad_fn is None for o in first):
            return ("its module's output has no grad_fn (a leaf it returns as it is): register_backward_hook "
                    "hooks the output's grad_fn, so PyTorch registers it on no node")
        if any(isinstance(o, Tensor) and o.requires_grad for o in outs):
            return None
        if any(isinstance(o, dict) for o in outs):   # BackwardHook finds no tensor in a dict (PyTorch warns)
            return ("its module takes and returns dicts: PyTorch's BackwardHook wraps no tensor in them, so its "
                    "backward hooks cannot fire (the forward's warning)")
        if any(isinstance(o, tuple) and _requires_grad_inside(o) for o in outs):   # (packed, (h_n, c_n))
            return ("its module's output holds no tensor at its top level (an LSTM's (PackedSequence, (h_n, c_n))): "
                    "PyTorch's BackwardHook wraps only top-level tensors, so its backward hooks cannot fire")
        return "no gradient can reach its module: its output does not require grad"
    if not any(id(n) in nodes for n in attached):
        names = ", ".join(dict.fromkeys(n.name for n in attached))
        return f"its node never ran: no gradient reached the module's output ({names} did not run)"
    if hook.kind in ("full_backward", "full_backward_pre") and not any(c.out_node is not None and id(c.out_node) in nodes
                                                                         for c in calls):
        outs = [o for c in calls for o in (c.out if isinstance(c.out, tuple) else (c.out,))]
        if any(isinstance(o, dict) for o in outs):   # BackwardHook wraps no tensor of a dict output (PyTorch warns)
            return ("its module returns a dict: PyTorch's BackwardHook wraps no tensor in it, so the gradient reached "
                    "the module's inputs without passing through its output, and BackwardHook calls no hook then "
                    "(the forward's warning)")
        return ("the gradient reached the module's inputs without passing through its output, and PyTorch's "
                "BackwardHook calls no hook then")
    if hook.kind == "full_backward" and all(c.in_node is not None and id(c.in_node) not in nodes for c in calls):
        return ("the gradient reached the module's output but no path leads from it back to the module's inputs "
                "(its input-side BackwardHookFunctionBackward never ran): PyTorch calls full backward hooks there, "
                "with grad_input, so it never does")
    return None


def _first_tensor(out):
    """The tensor ``_call_impl`` registers a legacy backward hook on: the first one of the result."""
    while isinstance(out, tuple) and out:
        out = out[0]
    return out


def unkept_grads(v) -> list[str]:
    """Names the last forward bound to a non-leaf tensor that requires grad and whose ``.grad``
    the prediction does not have: PyTorch leaves it None (it fills ``.grad`` of leaves only,
    and of a non-leaf only after ``retain_grad()``), and warns when it is read."""
    run = v.run
    if run is None or not run.forwards or v.error is not None:
        return []
    retained = {id(t) for t, _names in getattr(run, "retained", ())}
    out = []
    for name, t in run.forwards[-1].names.items():
        if isinstance(t, Tensor) and t.requires_grad and not t.is_leaf and name not in v.grads \
                and id(t) not in retained:   # `h = lin(x)` with lin retained: h is that tensor, its .grad too
            out.append(name)
    return out
