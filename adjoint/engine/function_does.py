"""``function: {does: [...]}``: statements a custom Function's backward runs before its formulas,
with what the backward sees (``saved``: ``ctx.saved_tensors``, ``grad_output``) and, as a
closure, the forward's named tensors; names it binds are seen by the formulas.

``ctx.saved_tensors`` are what ``SavedVariable::unpack`` hands back: without saved-tensor hooks
the saved original itself (an input) or a variable over the saved output's data, sharing its
version counter; with hooks a variable over the unpack hook's result, sharing *that* tensor's
storage and version counter (``impl::set_version_counter(var, impl::version_counter(data))``).
So an in-place write in the backward (``x.add_(1)``) changes the values of that tensor and
moves its version, and no other tensor's (PyTorch's
test_saved_tensors_hook_version_counter_not_shared: a pack hook returning a clone keeps the
input's version; a pack hook returning its argument -- a ``detach()`` of the input, which
shares the input's counter -- moves it).
"""

from __future__ import annotations

from adjoint.engine.graph import Tensor
from adjoint.engine.interpreter import EnvScope, Interp


def run_does(rt, mod, node, env: dict) -> None:
    holders = []
    saved = []
    for t, sv in zip(env.get("saved", ()), node.saved):
        target = getattr(sv, "unpacked", None) if sv.hooks is not None else sv.tensor
        if isinstance(t, Tensor) and isinstance(target, Tensor):
            t.version = target.version   # one counter: the write moves the holder's version
            holders.append((t, target, t.version.value))
        saved.append(t)
    env["saved"] = tuple(saved)
    interp = Interp(rt, EnvScope(env, f"the backward of {mod.function.name}", rt.names))
    for stmt in mod.function.does:
        interp.execute(stmt)
    for t, target, version in holders:
        if t.version.value != version:
            target.value = t.value   # the same storage


def replay_does(rt, mod, env: dict) -> None:
    """The statements again, outside a backward, for the names they bind (``x = saved[0]``, which
    the formulas may read): the adjoint recursion's J^T of a Function (its declared backward) on
    the values the forward saved. They run on copies -- of ``saved`` (already fresh tensors) and of
    the forward's named tensors, each keeping its version -- so a write there (``x.add_(1)``)
    reaches none of the run's tensors, and with warnings quiet: what PyTorch ran is the backward."""
    from adjoint.engine.graph import VersionCounter
    names = {}
    for k, v in rt.names.items():
        if isinstance(v, Tensor):
            copy = rt.tensor(v.value, dtype=v.dtype)
            copy.version = VersionCounter()
            copy.version.value = v.version.value
            v = copy
        names[k] = v
    interp = Interp(rt, EnvScope(env, f"the backward of {mod.function.name}", names))
    before = rt.grad_enabled
    rt.grad_enabled = False
    rt.quiet += 1
    try:
        for stmt in mod.function.does:
            interp.execute(stmt)
    finally:
        rt.grad_enabled = before
        rt.quiet -= 1
