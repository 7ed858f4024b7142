"""The saved-tensor additions of contract v3 (section 5), on the engine's records.

* :func:`register_saved` -- ``t.grad_fn._raw_saved_SLOT.register_hooks(pack, unpack)``
  (torch/csrc/autograd/saved_variable.cpp, ``SavedVariable::register_hooks``): no grad_fn is
  Python's AttributeError on None; a slot the node's class does not have is the node's
  AttributeError; a slot it has but did not save (an input that needed no gradient) is "with
  value None is forbidden"; a slot released by a backward is the freed message; a slot that
  already has hooks (its own, or the ``saved_tensors_hooks`` pair active when it was saved) is
  "only one pair of hooks". Otherwise the hooks are set, then the pack runs at once on the
  saved tensor (a pack that raises leaves the hooks set, as in PyTorch), and the node's
  backward later runs the unpack as it runs a ``saved_tensors_hooks`` unpack.
* :func:`enter` / :func:`leave` -- ``saved_tensors_hooks`` and ``disable_saved_tensors_hooks``
  entered around a forward or a module call: hooks entered while disabled raise the innermost
  disabling message; disabling while hooks are active raises the disabling entry's own message
  (``torch._C._autograd._saved_tensors_hooks_disable`` checks the stack is empty).
"""

from __future__ import annotations

from adjoint.engine.torch_errors import TorchError

DISABLE = "disable_saved_tensors_hooks"

#: SavedVariable::register_hooks's refusals (torch/csrc/autograd/saved_variable.cpp)
HOOKS_SET = ("Calling register_hooks on a saved tensor whose hooks have already been set. Hint: only one pair of "
             "hooks is allowed at a time.")
FREED = ("Calling register_hooks on a saved tensor after it has been freed. Saved intermediate values of the graph "
         "are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward "
         "through the graph a second time or if you need to access saved variables after calling backward.")
NONE_VALUE = "Calling register_hooks on a saved tensor with value None is forbidden"


def register_saved(rt, hook, node) -> None:
    """``register_hooks`` on the saved variable ``hook.slot`` of ``node`` (the target's grad_fn, or None)."""
    attr = f"_raw_saved_{hook.slot}"
    if node is None:
        raise TorchError("AttributeError", f"'NoneType' object has no attribute '{attr}'", "register")
    # a custom Function's node keeps its saved tensors as _raw_saved_tensors (a tuple), no _raw_saved_NAME
    sv = next((s for s in node.saved if s.name == hook.slot), None) if node.kind != "function" else None
    if sv is None:
        if hook.slot in _slots_of(node):
            raise TorchError("RuntimeError", NONE_VALUE, "register")
        raise TorchError("AttributeError", f"'{_class_name(node)}' object has no attribute '{attr}'", "register")
    if sv.released:
        raise TorchError("RuntimeError", FREED, "register")
    if sv.hooks is not None:
        raise TorchError("RuntimeError", HOOKS_SET, "register")
    sv.hooks = hook
    sv.packed_grad_fn = sv.tensor.grad_fn   # save_metadata when the hooks are registered
    missing = hook.pack_params[1:]
    if missing:   # PyTorch calls pack(x): Python refuses the call before the body runs (the hooks stay set)
        raise TorchError("TypeError", missing_arguments("<lambda>", missing), "hook_arity")
    sv.packed = rt.hooks_runner.pack(hook, sv.tensor, node, sv.name)


def missing_arguments(name: str, missing: tuple) -> str:
    """CPython's TypeError for a call that leaves required positional parameters unfilled."""
    quoted = [f"'{m}'" for m in missing]
    listed = quoted[0] if len(quoted) == 1 else \
        (" and ".join(quoted) if len(quoted) == 2 else ", ".join(quoted[:-1]) + ", and " + quoted[-1])
    s = "" if len(missing) == 1 else "s"
    return f"{name}() missing {len(missing)} required positional argument{s}: {listed}"


def _slots_of(node) -> tuple:
    """The saved-variable attributes the node's class has, saved this time or not."""
    if node.kind == "function":
        return ()
    op = getattr(node, "op", None)
    saves = getattr(op, "saves", None) if node.kind == "op" else None
    return tuple(s.name for s in saves) if saves else tuple(s.name for s in node.saved)


def _class_name(node) -> str:
    return node.name.rsplit("::", 1)[-1]


# ----------------------------------------------------------------------------- the with blocks

def disabled(rt) -> list:
    """The ``disable_saved_tensors_hooks`` entries entered now (innermost last)."""
    if not hasattr(rt, "saved_disabled"):
        rt.saved_disabled = []
    return rt.saved_disabled


def enter(rt, hooks) -> list:
    """Enter ``hooks`` (saved_tensors and disable_saved_tensors_hooks entries) in order, innermost
    last; returns what :func:`leave` takes. Raises PyTorch's RuntimeError where PyTorch does
    (having left what it entered)."""
    entered = []
    try:
        for h in hooks:
            if h.on == DISABLE:
                if rt.saved_hooks:
                    raise TorchError("RuntimeError", h.message, "saved_hooks_disabled")
                disabled(rt).append(h)
            else:
                off = disabled(rt)
                if off:
                    raise TorchError("RuntimeError", off[-1].message, "saved_hooks_disabled")
                rt.saved_hooks.append(h)
            entered.append(h)
    except TorchError:
        leave(rt, entered)
        raise
    return entered


def leave(rt, entered: list) -> None:
    for h in reversed(entered):
        stack = disabled(rt) if h.on == DISABLE else rt.saved_hooks
        if stack and stack[-1] is h:
            stack.pop()
