"""``t.requires_grad_(requires_grad=True)`` (and ``t.detach_()``, below). In a hook body the idiom
``g = grad.detach().requires_grad_()`` makes a new leaf a backward run by the hook body can
differentiate into (its ``.grad`` then read as ``g.grad``). PyTorch's refusals are answers: a
non-leaf set to False ("you can only change requires_grad flags of leaf variables. ..."), an
integer or bool tensor set to True ("only Tensors of floating point dtype can require
gradients", as ``requires_grad_`` words it). It returns the tensor itself."""

from __future__ import annotations

from adjoint.format.errors import ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.torch_errors import TorchError

NON_LEAF = ("you can only change requires_grad flags of leaf variables. If you want to use a computed variable in a "
            "subgraph that doesn't require differentiation use var_no_grad = var.detach().")
NOT_FLOAT = "only Tensors of floating point dtype can require gradients"
#: the dtypes a tensor that requires grad may have (AutogradMeta::set_requires_grad)
DIFFERENTIABLE = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128")


def requires_grad_(t: Tensor, args: list, kwargs: dict, loc) -> Tensor:
    if len(args) > 1 or set(kwargs) - {"requires_grad"} or (args and kwargs):
        raise ProblemError(loc, "requires_grad_ takes one argument, requires_grad (True by default)")
    flag = args[0] if args else kwargs.get("requires_grad", True)
    if not isinstance(flag, bool):
        raise ProblemError(loc, "requires_grad_'s argument must be True or False")
    # a non-leaf: a grad_fn, or an autograd view of a base that requires grad (a detach()ed tensor,
    # and a view of one, is no view for autograd: fake.detach().requires_grad_() makes a leaf)
    if t.grad_fn is not None or (t.is_view and t.grad_base.requires_grad):
        if not flag:
            raise TorchError("RuntimeError", NON_LEAF, "autograd")
        return t
    if flag and t.is_view:
        # a view of a detach()ed tensor made to require grad: PyTorch keeps it a view of its base
        # (in-place ops on it or its base then meet the view-of-a-leaf rules): not modelled
        raise ProblemError(loc, "requires_grad_() on a view (of a detach()ed tensor) is not modelled yet; make the "
                                "view first and detach it (x[0].detach().requires_grad_()), or clone it")
    if flag and t.dtype not in DIFFERENTIABLE:
        raise TorchError("RuntimeError", NOT_FLOAT, "autograd")
    t.requires_grad = flag
    t.edgeless = False
    return t


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
