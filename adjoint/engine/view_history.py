"""A view's history after its base was written in place (``VariableHooks::grad_fn``,
``handle_view_on_rebase``): when a view's grad_fn is stale, regenerating it as
``AsStridedBackward0`` on the base's current history, or PyTorch's refusal; and a view's value
replayed from its base's."""

from __future__ import annotations

from adjoint.format.errors import ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.ops import REGISTRY
from adjoint.engine.ops.views import AsStrided
from adjoint.engine.torch_errors import TorchError


def view_value(B, base_value, chain):
    """A view's value from its base's, replaying the view ops."""
    v = base_value
    for opname, params, k, _ in chain:
        out = REGISTRY[opname].forward(B, [v], params)
        v = out[k] if isinstance(out, tuple) else out
    return v


_MULTI = ("This view is the output of a function that returns multiple views. Such functions do not allow the "
          "output views to be modified inplace. You should replace the inplace operation by an out-of-place one.")


_CUSTOM = ("This view was created inside a custom Function (or because an input was returned as-is) and the "
           "autograd logic to handle view+inplace would override the custom backward associated with the custom "
           "Function, leading to incorrect gradients. This behavior is forbidden. You can fix this by cloning the "
           "output of the custom Function.")


_INFERENCE = ("Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by "
              "moving both the view and the inplace either both inside the inference_mode block (if you don't want the "
              "inplace to be tracked) or both outside (if you want the inplace to be tracked).")


_NO_GRAD = ("Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by moving "
            "both the view and the inplace either both inside the no_grad block (if you don't want the inplace to be "
            "tracked) or both outside (if you want the inplace to be tracked).")


def rebase_message(t: Tensor, indirect: bool) -> str:
    """handle_view_on_rebase's message for a view PyTorch forbids to modify (directly, or
    ``indirect``: through its base or another view): the view's own node names it when it has
    one, a view without one (made under no_grad, or of a tensor that does not require grad)
    "was created in no_grad mode"; the tail says why, by the view's creation kind."""
    kind = t.creation[0]
    name = t.creation[1] if len(t.creation) > 1 else None
    modified = "its base or another view of its base has been" if indirect else "is being"
    has_fn = t.grad_fn is not None
    if kind in ("no_grad", "inference") or not has_fn:
        prefix = (f"Output {t.output_nr} of {name} is a view of a view which was created in" if has_fn and name
                  else "A view was created in")
        msg = f"{prefix} inference mode and {modified} modified inplace in normal mode." if kind == "inference" \
            else f"{prefix} no_grad mode and {modified} modified inplace with grad mode enabled."
    else:
        msg = f"Output {t.output_nr} of {name} is a view and {modified} modified inplace."
    tail = {"multi": _MULTI, "custom": _CUSTOM, "inference": _INFERENCE}.get(kind, _NO_GRAD)
    return f"{msg} {tail}"


def stale(t: Tensor) -> bool:
    """Reading ``t.grad_fn`` makes a new one: a view whose base was written in place since its
    grad_fn was made (or since it was made without one). ``VariableHooks::grad_fn`` returns early
    only for a view with no grad_fn of a base that does not require grad; a view with one (a
    custom Function's output returning, as is, an input that does not require grad while another
    does) is rebased, or refused, whatever its base requires. Writes through a ``.data`` alias
    move no version PyTorch's view sees (``VersionCounter.shown``)."""
    return t.is_view and (t.grad_base.requires_grad or t.grad_fn is not None) and t.view_version != t.version.shown


def grad_fn_name(t: Tensor) -> str | None:
    """``type(t.grad_fn).__name__`` as Python would read it now, without reading it: a stale view's
    is the AsStridedBackward0 the read would make (one that may not be regenerated: None, PyTorch
    raising instead), any other tensor's its node's (C++ nodes without their namespace)."""
    if stale(t):
        return None if t.creation and t.creation[0] in ("custom", "multi", "no_grad", "inference") else "AsStridedBackward0"
    node = t.grad_fn
    return None if node is None else node.name.removeprefix("torch::autograd::")


def refresh(rt, t: Tensor) -> None:
    """A view of a base that was modified in place since its grad_fn was made gets a new one
    when next used (as ``t.grad_fn`` does in PyTorch); a piece of a multi-output view op
    cannot, and PyTorch raises."""
    detached = t.grad_base.detached_at if t.is_view else None
    if detached is not None and t.view_version != t.version.shown and t.grad_fn is not None:
        # VariableHooks::grad_fn remakes it from the detach_()ed base, whatever that requires
        raise ProblemError(detached, "a view of this tensor, used after an in-place write since its detach_(): "
                                     "PyTorch remakes the view's grad_fn from the detached base, which is not "
                                     "modelled yet; detach_() before taking views, or use detach()")
    if not stale(t):
        return
    # handle_view_on_rebase(indirect=true): only a view made as a plain view may be regenerated
    if t.creation and t.creation[0] in ("custom", "multi", "no_grad", "inference"):
        raise TorchError("RuntimeError", rebase_message(t, True), "view_inplace")
    regenerate(rt, t)


def regenerate(rt, view: Tensor) -> None:
    """VariableHooks::grad_fn for a view whose base changed since its grad_fn was made:
    a fresh AsStridedBackward0 on the base's current history."""
    base = view.grad_base
    old = view.grad_fn
    spec = AsStrided(view.shape, view.strides, view.offset, view.grad_view_ops)
    node = rt.new_node("AsStridedBackward0", [rt.gradient_edge(base)], REGISTRY["as_strided"], spec, [base], None)
    node.outputs = [(view.shape, view.dtype)]
    node.output_values = [view.value]
    rt.record("as_strided", [base], [view], spec, node, None)
    view.grad_fn = node
    view.output_nr = 0
    view.requires_grad = True
    view.is_leaf = False
    view.view_version = view.version.shown
    view.backward_hooks = None
    if view.retains_grad and old is not None:
        for nr, r in list(old.retains_grad_hooks.items()):
            if r is view:
                del old.retains_grad_hooks[nr]
        node.retains_grad_hooks[0] = view
