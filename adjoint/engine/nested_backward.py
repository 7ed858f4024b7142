"""``T.backward(...)`` / ``backward(T, ...)`` as a statement of a hook body: a backward started
while another may be running.

PyTorch's ``Engine::execute`` called from a hook that runs inside a backward (on the engine's
CPU thread) is a reentrant backward: a new graph task one level deeper, run to completion
before the outer one goes on (its ready queue serves the deeper task first); every hook call in
it is marked ``reentrant`` with its depth. Called from a hook that runs in the forward it is an
ordinary backward (depth 0). ``torch.autograd.backward``'s checks come first, in its order:
``_make_grads`` (a given gradient's shape, then its complexity; an implicit gradient only for a
root that requires grad: one element, a real dtype), then the engine's (a root that does not
require grad).
"""

from __future__ import annotations

from adjoint.format.errors import ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.runtime import TorchError
from adjoint.engine.complex_grad import is_complex
from adjoint.engine.torch_errors import complex_mismatch, torch_size

#: the keyword arguments modelled (Tensor.backward's; torch.autograd.backward's grad_tensors)
KEYWORDS = ("gradient", "grad_tensors", "retain_graph")


def nested_backward(rt, root, args: list, kwargs: dict, loc):
    """Run the backward (``rt.backward_runner(root, gradient, retain_graph)`` runs one engine,
    handed the ``gradient`` tensor itself: torch.autograd.backward hands the engine the very tensor
    given, so a hook in that backward writing its gradient in place writes it)."""
    from adjoint.engine.inference import refuse_inside
    refuse_inside(rt, loc, "a backward")
    if not isinstance(root, Tensor):
        raise ProblemError(loc, "backward(...) in a hook body needs a tensor to start from")
    for k in kwargs:
        if k not in KEYWORDS:
            raise ProblemError(loc, f"backward(..., {k}=...) in a hook body is not modelled yet; the modelled "
                                    f"keywords are {', '.join(KEYWORDS)}")
    if len(args) > 2:
        raise ProblemError(loc, "backward(...) in a hook body: give retain_graph by keyword")
    gradient = args[0] if args else kwargs.get("gradient", kwargs.get("grad_tensors"))
    retain = args[1] if len(args) > 1 else kwargs.get("retain_graph")
    if gradient is not None and not isinstance(gradient, Tensor):
        raise ProblemError(loc, "backward(...)'s gradient must be a tensor here")
    if retain is not None and not isinstance(retain, bool):
        raise ProblemError(loc, "backward(...)'s retain_graph must be True or False")
    make_grad_checks(root, gradient)
    if not root.has_gradient_edge:
        raise TorchError("RuntimeError", "element 0 of tensors does not require grad and does not have a grad_fn",
                         "autograd")
    inside = rt.phase == "backward"
    phase, grad_mode = rt.phase, rt.grad_enabled
    if inside and rt.reentrant >= REENTRANT_LIMIT:
        raise ProblemError(loc, f"this backward(...) runs inside {REENTRANT_LIMIT} backwards it started: each reaches "
                                "the hook that runs it again, so PyTorch never finishes; run it outside the hook, "
                                "or from a root whose backward does not reach the hook")
    if inside:
        rt.reentrant += 1
    outer_warn = rt.warn_phase
    if not inside and outer_warn is None:   # a forward-time hook body's backward: it warns during the forward
        rt.warn_phase = phase
    try:
        rt.backward_runner(root, gradient, bool(retain))
        end = getattr(rt, "reentrant_end", None)   # DDP's Reducer: the callbacks this graph task queued
        if inside and end is not None:
            end(rt.reentrant)
    finally:
        if inside:
            rt.reentrant -= 1
        rt.phase, rt.grad_enabled = phase, grad_mode
        rt.warn_phase = outer_warn
    return None


#: torch.autograd.backward's parameters, in order, that a hook body may give
AUTOGRAD_PARAMS = ("tensors", "grad_tensors", "retain_graph")
#: the others it has (refused by name in a hook body)
AUTOGRAD_OTHERS = ("create_graph", "grad_variables", "inputs")


def autograd_backward(rt, args: list, kwargs: dict, loc):
    """``torch.autograd.backward(tensors, grad_tensors=None, retain_graph=None)`` in a hook body:
    the arguments bound as Python binds them, then one root (a tensor or a one-tensor list, its
    gradient a tensor, None or a one-entry list) run as ``tensors.backward(grad_tensors,
    retain_graph)`` -- what ``Tensor.backward`` itself calls."""
    if len(args) > len(AUTOGRAD_PARAMS):
        raise ProblemError(loc, "torch.autograd.backward(tensors, grad_tensors, retain_graph) in a hook body: give "
                                "the other arguments by keyword")
    given = dict(zip(AUTOGRAD_PARAMS, args))
    for k, v in kwargs.items():
        if k not in AUTOGRAD_PARAMS:
            if k in AUTOGRAD_OTHERS:
                raise ProblemError(loc, f"torch.autograd.backward(..., {k}=...) in a hook body is not modelled yet; "
                                        f"the modelled arguments are {', '.join(AUTOGRAD_PARAMS)}")
            raise TorchError("TypeError", f"backward() got an unexpected keyword argument '{k}'", "autograd")
        if k in given:
            raise TorchError("TypeError", f"backward() got multiple values for argument '{k}'", "autograd")
        given[k] = v
    if "tensors" not in given:
        raise TorchError("TypeError", "backward() missing 1 required positional argument: 'tensors'", "autograd")
    root = _one(given["tensors"], "tensors", loc)
    gradient = _one(given.get("grad_tensors"), "grad_tensors", loc)
    return nested_backward(rt, root, [gradient, given.get("retain_graph")], {}, loc)


def _one(value, what: str, loc):
    if isinstance(value, (list, tuple)):
        if len(value) != 1:
            raise ProblemError(loc, f"torch.autograd.backward in a hook body takes one tensor here; its {what} "
                                    f"has {len(value)} entries")
        return value[0]
    return value


def make_grad_checks(root: Tensor, gradient) -> None:
    """torch/autograd/__init__.py's ``_make_grads`` for one output (``torch.autograd.backward`` and
    ``torch.autograd.grad`` call it before the engine checks anything): a given gradient of another
    shape, then one of which exactly one of it and the output is complex; no gradient and an output
    that requires grad: more than one element, then a dtype that is not a real float. An output
    that does not require grad gets None here, whatever its shape: the engine's "element 0 ..."
    comes after (tests/test_nested_backward_checks_order.py)."""
    if gradient is not None:
        if tuple(gradient.shape) != tuple(root.shape):
            raise TorchError("RuntimeError", f"Mismatch in shape: grad_output[0] has a shape of "
                                             f"{torch_size(gradient.shape)} and output[0] has a shape of "
                                             f"{torch_size(root.shape)}.", "autograd")
        if is_complex(root) != is_complex(gradient):
            raise TorchError("RuntimeError", complex_mismatch(0, gradient.dtype, 0, root.dtype), "autograd")
    elif root.requires_grad:
        if _numel(root.shape) != 1:
            raise TorchError("RuntimeError", "grad can be implicitly created only for scalar outputs", "autograd")
        if is_complex(root):
            raise TorchError("RuntimeError", "grad can be implicitly created only for real scalar outputs but got "
                                             f"torch.{root.dtype}", "autograd")


#: how deep hook bodies' backwards may nest before the run is refused as one that never ends
REENTRANT_LIMIT = 16


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n
