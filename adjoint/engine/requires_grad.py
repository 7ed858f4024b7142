"""``t.requires_grad_(requires_grad=True)``, the setter ``t.requires_grad = flag`` (and
``t.detach_()``, below). In a hook body the idiom ``g = grad.detach().requires_grad_()`` makes a
new leaf a backward run by the hook body can differentiate into (its ``.grad`` then read as
``g.grad``). PyTorch's refusals are answers: a non-leaf set to False ("you can only change
requires_grad flags of leaf variables. ..."), an integer or bool tensor set to True ("only
Tensors of floating point dtype can require gradients", as ``requires_grad_`` words it). The
setter (``THPVariable_set_requires_grad``) differs in three things: a value that is not a Python
bool is "requires_grad must be a bool", a non-leaf is refused whatever the flag (set to True
without the sentence on ``detach()``), and the dtype's message says "floating point and complex
dtype". Whether a tensor is a leaf is ``is_leaf()``, ``grad_fn() == nullptr``: reading it
remakes a stale view's grad_fn, or raises (``view_history.refresh``); a view made under no_grad
of a tensor that requires grad is a leaf. ``requires_grad_`` returns the tensor itself."""

from __future__ import annotations

from adjoint.format.errors import ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.torch_errors import TorchError
from adjoint.engine.view_history import refresh
from adjoint.engine.inference import REQUIRES_GRAD as INFERENCE_REQUIRES_GRAD

NON_LEAF = ("you can only change requires_grad flags of leaf variables. If you want to use a computed variable in a "
            "subgraph that doesn't require differentiation use var_no_grad = var.detach().")
NON_LEAF_TRUE = "you can only change requires_grad flags of leaf variables."   # the setter's, set to True
NOT_FLOAT = "only Tensors of floating point dtype can require gradients"
NOT_FLOAT_SETTER = "only Tensors of floating point and complex dtype can require gradients"
#: the dtypes a tensor that requires grad may have (AutogradMeta::set_requires_grad)
DIFFERENTIABLE = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128")


def is_leaf(rt, t: Tensor) -> bool:
    """``Tensor::is_leaf()``: ``grad_fn() == nullptr``, read as ``VariableHooks::grad_fn`` reads it
    (a view whose base was written since its grad_fn was made gets a new one, or PyTorch raises;
    a view made under no_grad, or before its base required grad, has none and is a leaf). A
    detach()ed tensor, and a view of one, is no view of the graph's tensor."""
    if t.is_view:
        refresh(rt, t)
    return t.grad_fn is None


def requires_grad_(rt, t: Tensor, args: list, kwargs: dict, loc) -> Tensor:
    if len(args) > 1 or set(kwargs) - {"requires_grad"} or (args and kwargs):
        raise ProblemError(loc, "requires_grad_ takes one argument, requires_grad (True by default)")
    flag = args[0] if args else kwargs.get("requires_grad", True)
    if not isinstance(flag, bool):
        raise ProblemError(loc, "requires_grad_'s argument must be True or False")
    if not is_leaf(rt, t):   # VariableTypeManual's requires_grad_: a non-leaf may be set to True (a no-op)
        if not flag:
            raise TorchError("RuntimeError", NON_LEAF, "autograd")
        return t
    _set_leaf(rt, t, flag, NOT_FLOAT, loc, "requires_grad_()")
    return t


def set_requires_grad(rt, t, flag, target: str, loc) -> None:
    """``t.requires_grad = flag`` (``THPVariable_set_requires_grad``): the value must be a Python
    bool, ``t`` a leaf (whatever the flag), and a tensor set to True of a floating or complex dtype."""
    if not isinstance(t, Tensor):
        raise ProblemError(loc, f"'{target}' is not a tensor here: setting its requires_grad is modelled on a "
                                "tensor only (a parameter by its path: lin.weight.requires_grad = False)")
    if not isinstance(flag, bool):   # PyBool_Check: 1, None, a bool tensor are refused alike
        raise TorchError("RuntimeError", "requires_grad must be a bool", "autograd")
    if not is_leaf(rt, t):
        raise TorchError("RuntimeError", NON_LEAF if not flag else NON_LEAF_TRUE, "autograd")
    _set_leaf(rt, t, flag, NOT_FLOAT_SETTER, loc, "setting requires_grad")


def _set_leaf(rt, t: Tensor, flag: bool, not_float: str, loc, what: str) -> None:
    """``TensorImpl::set_requires_grad`` on a leaf (the tensor's own flag), after the caller's dtype
    check: an inference tensor set to True outside inference_mode is refused there."""
    if flag and t.inference:
        if t.dtype not in DIFFERENTIABLE:
            raise TorchError("RuntimeError", not_float, "autograd")
        if rt.inference:
            raise ProblemError(loc, f"{what} on an inference tensor inside 'with inference_mode():' is not modelled")
        raise TorchError("RuntimeError", INFERENCE_REQUIRES_GRAD, "inference")
    if t.is_view and t.grad_base.requires_grad:
        # a leaf view of a tensor that requires grad (made under no_grad, or before its base
        # required grad): it requires grad through its base whatever its own flag, and its own
        # flag set gives it an AccumulateGrad of its own (the view-of-a-leaf rules then apply to
        # in-place ops on it): False changes nothing that is seen; True is not modelled
        if flag:
            raise ProblemError(loc, f"{what} on a view made under no_grad (or before its base required grad) is not "
                                    "modelled yet; detach the view first (x[0].detach()), or clone it")
        return
    if flag and t.is_view:
        # a view of a detach()ed tensor made to require grad: PyTorch keeps it a view of its base
        # (in-place ops on it or its base then meet the view-of-a-leaf rules): not modelled
        raise ProblemError(loc, f"{what} on a view (of a detach()ed tensor) is not modelled yet; make the "
                                "view first and detach it (x[0].detach().requires_grad_()), or clone it")
    if flag and t.dtype not in DIFFERENTIABLE:
        raise TorchError("RuntimeError", not_float, "autograd")
    t.requires_grad = flag
    t.edgeless = False


VIEW_DETACH_ = ("Can't detach views in-place. Use detach() instead. If you are using DistributedDataParallel (DDP) "
                "for training, and gradient_as_bucket_view is set as True, gradients are views of DDP buckets, and "
                "hence detach_() cannot be called on these gradients. To fix this error, please refer to the "
                "Optimizer.zero_grad() function in torch/optim/optimizer.py as the solution.")


def detach_(t: Tensor, args: list, kwargs: dict, loc) -> Tensor:
    """``t.detach_()``: the tensor leaves its graph in place (no grad_fn, no longer requiring
    grad) and is returned. A view is PyTorch's RuntimeError. The views taken of it keep their
    grad_fn (detach_ moves no version); one used after a write to it, which PyTorch would remake
    from the detached base, is refused where it is used (view_history.refresh)."""
    if args or kwargs:
        raise ProblemError(loc, "detach_ takes no arguments")
    if t.base is not None and (t.view_ops or not t.is_detached):   # x.detach() itself is no view
        raise TorchError("RuntimeError", VIEW_DETACH_)
    if t.grad_fn is not None:   # its views keep their grad_fn until a write makes them remake it (view_history)
        t.detached_at = loc
    t.grad_fn = None
    t.output_nr = 0
    t.is_leaf = True
    t.requires_grad = False
    return t
