"""Functions of the losses family: what PyTorch 2.13 runs for each (checked in real torch).

* ``mse_loss``, ``smooth_l1_loss``, ``huber_loss``: one node each (``MseLossBackward0``, ...)
  after ``torch.broadcast_tensors`` (an ``ExpandBackward0`` for an operand of another shape);
  with ``weight`` (2.13's new argument) they are composites: sub, pow / abs / the unreduced
  loss, mul, then sum, sum / sum(weight) or mean. ``smooth_l1_loss`` with ``beta=0`` is
  ``l1_loss``, which is always a composite: sub, abs, then mean or sum;
* ``nll_loss``: ``NllLossBackward0`` for a (C,) or (N, C) input, ``NllLoss2DBackward0`` for
  (N, C, H, W), and for other ranks a view to (N, C, 1, -1), ``NllLoss2DBackward0`` and, with
  ``reduction="none"``, a view back; its only edge is the input;
* ``cross_entropy``: ``log_softmax`` over the class dim, then: for class indices, nll_loss
  as above; with ``label_smoothing > 0``, also the smoothing term (sum over classes, neg,
  masked_fill of the ignored rows, reduced, times ls / C) added to (1 - ls) times nll (C++
  evaluates the right operand of ``+`` first, so its nodes come first); for probabilities
  (target of the input's shape), mul (by the weight too), sum, neg and a division by the
  number of rows (``DivBackward1``);
* ``binary_cross_entropy`` (the weight expanded to the target's shape in Python first) and
  ``binary_cross_entropy_with_logits``: one node each, edges to input and target only;
* ``kl_div``: ``xlogy(t, t) - t * input`` (``exp(t) * (t - input)`` with ``log_target``), then
  mean / sum; ``"batchmean"`` is sum then a Python division by the batch size.

Arguments PyTorch refuses are its errors, answers, where it raises them: the functional's Python
checks before any node, VariableType's requires_grad check before the node, the kernel's checks
after the node packed what it saves (``Runtime.raise_after_packs`` or the op's ``value_error``).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.ops.arith import broadcast_shapes
from adjoint.engine.ops.losses import BCE, BCE_EPSILON, BCELogits, Nll, Pointwise, bcel_target_error
from adjoint.engine.bindings.signature import Function, Param, dim_index
from adjoint.engine.bindings.core import binary
from adjoint.engine.bindings.views import lower_contiguous, view
from adjoint.engine.bindings.glue import size_dim
from adjoint.engine import warns
from adjoint.engine.torch_errors import TYPE_NAMES, TorchError, torch_size


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


# ----------------------------------------------------------------------------- argument checks

def reduction_of(a: dict, loc: Loc, fn: str, batchmean: bool = False) -> str:
    """``reduction`` as given (:func:`reduction_enum` checks it where PyTorch does); the deprecated
    ``size_average`` / ``reduce`` are refused (use reduction)."""
    for old in ("size_average", "reduce"):
        if a.get(old) is not None:
            raise ProblemError(loc, f"{fn}(): '{old}' is deprecated in PyTorch and not modelled; use reduction=")
    return a["reduction"]


#: _Reduction.get_enum's warning for the old name of "mean"
ELEMENTWISE_MEAN = "reduction='elementwise_mean' is deprecated. Please use reduction='mean' instead."


def reduction_enum(rt, r: str) -> str:
    """``_Reduction.get_enum(reduction)``, at the point the functional evaluates it: an unknown
    name is PyTorch's ValueError (an answer); ``elementwise_mean`` is ``mean`` with a warning."""
    if r in ("none", "mean", "sum"):
        return r
    if r == "elementwise_mean":
        warns.warn(rt, "UserWarning", ELEMENTWISE_MEAN)
        return "mean"
    raise TorchError("ValueError", f"{r} is not a valid value for reduction")


def _float_tensor(t: Tensor, what: str, fn: str, loc: Loc) -> None:
    if t.dtype not in ("float32", "float64"):
        raise ProblemError(loc, f"{fn}(): {what} is {t.dtype}; adjoint models {fn} on floating-point tensors only "
                                "(PyTorch would promote or refuse it)")


def _no_grad_arg(t: Tensor | None, name: str, aten: str, loc: Loc) -> None:
    """VariableType's check_no_requires_grad: before the node, so nothing of the op is packed."""
    if t is not None and t.requires_grad:
        raise TorchError("RuntimeError", f"The function '{aten}' is not differentiable with respect to argument "
                                         f"'{name}'. This input cannot have requires_grad True.")


def broadcast_pair(rt, x: Tensor, y: Tensor, loc: Loc):
    """The functional's warning for a target of another size, then ``torch.broadcast_tensors(x, y)``:
    an operand of another shape is expanded (a view); shapes that do not broadcast are its error."""
    if x.shape == y.shape:
        return x, y
    warns.warn(rt, "UserWarning", f"Using a target size ({torch_size(y.shape)}) that is different to the input size "
                                  f"({torch_size(x.shape)}). This will likely lead to incorrect results due to "
                                  "broadcasting. Please ensure they have the same size.")
    shape = broadcast_shapes(x.shape, y.shape, loc)
    xs = x if x.shape == shape else rt.apply("expand", [x], shape, loc)
    ys = y if y.shape == shape else rt.apply("expand", [y], shape, loc)
    return xs, ys


def _reduce(rt, t: Tensor, reduction: str, loc: Loc):
    """``apply_loss_reduction``."""
    if reduction == "mean":
        return rt.apply("mean", [t], None, loc)
    if reduction == "sum":
        return rt.apply("sum", [t], None, loc)
    return t


def _weighted(rt, loss: Tensor, weight: Tensor, reduction: str, loc: Loc, mean_by_weight: bool):
    """The Python tail of mse_loss / l1_loss (sum / sum(weight)) and huber_loss (mean)."""
    out = rt.apply("mul", [loss, weight], None, loc)
    if reduction not in ("none", "mean", "sum"):   # this tail names the reduction itself, and knows no alias
        raise TorchError("ValueError", f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', 'sum'.")
    if reduction == "none":
        return out
    if reduction == "sum" or not mean_by_weight:
        return _reduce(rt, out, reduction, loc)
    total = rt.apply("sum", [out], None, loc)
    return rt.apply("div", [total, rt.apply("sum", [weight], None, loc)], None, loc)


def _check_weight_size(weight: Tensor | None, x: Tensor, loc: Loc) -> None:
    """The functional's own check (Python, after broadcast_tensors, before any node of the loss)."""
    if weight is not None and weight.shape != x.shape:
        raise TorchError("ValueError", "Weights and input must have the same size.")


# ----------------------------------------------------------------------------- pointwise losses

def lower_mse_loss(rt, a: dict, loc: Loc):
    x, y, weight = a["input"], a["target"], a["weight"]
    reduction = reduction_of(a, loc, "mse_loss")
    _pointwise_dtypes(x, y, "mse_loss", loc)
    xs, ys = broadcast_pair(rt, x, y, loc)
    if weight is None:
        return rt.apply("mse_loss", [xs, ys], Pointwise(reduction_enum(rt, reduction)), loc)
    _check_weight_size(weight, x, loc)
    squared = rt.apply("pow_scalar", [rt.apply("sub", [xs, ys], None, loc)], Fraction(2), loc)
    return _weighted(rt, squared, weight, reduction, loc, True)


def l1(rt, x: Tensor, y: Tensor, reduction: str, loc: Loc):
    """ATen's l1_loss: (input - target).abs(), reduced."""
    return _reduce(rt, rt.apply("abs", [rt.apply("sub", [x, y], None, loc)], None, loc), reduction, loc)


def lower_l1_loss(rt, a: dict, loc: Loc):
    x, y, weight = a["input"], a["target"], a["weight"]
    reduction = reduction_of(a, loc, "l1_loss")
    _pointwise_dtypes(x, y, "l1_loss", loc)
    xs, ys = broadcast_pair(rt, x, y, loc)
    if weight is None:
        return l1(rt, xs, ys, reduction_enum(rt, reduction), loc)
    _check_weight_size(weight, x, loc)
    absolute = rt.apply("abs", [rt.apply("sub", [xs, ys], None, loc)], None, loc)
    return _weighted(rt, absolute, weight, reduction, loc, True)


def lower_smooth_l1_loss(rt, a: dict, loc: Loc):
    x, y, beta = a["input"], a["target"], a["beta"]
    reduction = reduction_of(a, loc, "smooth_l1_loss")
    _pointwise_dtypes(x, y, "smooth_l1_loss", loc)
    xs, ys = broadcast_pair(rt, x, y, loc)
    reduction = reduction_enum(rt, reduction)
    if beta == 0:
        return l1(rt, xs, ys, reduction, loc)
    if beta < 0:   # the kernel's check, once SmoothL1LossBackward0 packed self and target
        rt.raise_after_packs("smooth_l1_loss", [xs, ys], TorchError(
            "RuntimeError", "smooth_l1_loss does not support negative values for beta."), loc)
    return rt.apply("smooth_l1_loss", [xs, ys], Pointwise(reduction, beta), loc)


def lower_huber_loss(rt, a: dict, loc: Loc):
    x, y, delta, weight = a["input"], a["target"], a["delta"], a["weight"]
    reduction = reduction_of(a, loc, "huber_loss")
    _pointwise_dtypes(x, y, "huber_loss", loc)
    xs, ys = broadcast_pair(rt, x, y, loc)
    if weight is None:
        reduction = reduction_enum(rt, reduction)
    else:
        _check_weight_size(weight, x, loc)   # F.huber_loss checks it before the kernel
    if delta <= 0:   # the kernel's check, once HuberLossBackward0 packed self and target
        rt.raise_after_packs("huber_loss", [xs, ys], TorchError(
            "RuntimeError", "huber_loss does not support non-positive values for delta."), loc)
    if weight is None:
        return rt.apply("huber_loss", [xs, ys], Pointwise(reduction, delta), loc)
    loss = rt.apply("huber_loss", [xs, ys], Pointwise("none", delta), loc)
    return _weighted(rt, loss, weight, reduction, loc, False)


def _pointwise_dtypes(x: Tensor, y: Tensor, fn: str, loc: Loc) -> None:
    """A float input; the target may be int64 or bool too, each kernel then doing what PyTorch's
    does with it: mse_loss and smooth_l1_loss promote it (their TensorIterator computes in the
    input's dtype), l1_loss's ``input - target`` and a weighted loss's ``input - target`` refuse a
    bool target (sub's error), binary_cross_entropy refuses it in its kernel ("Found dtype Long but
    expected Float", after the packs), binary_cross_entropy_with_logits in its ``(1 - target)
    .mul_(input)``, huber_loss computes the forward and refuses it in HuberLossBackward0."""
    _float_tensor(x, "the input", fn, loc)
    if y.dtype not in ("int64", "bool"):
        _float_tensor(y, "the target", fn, loc)


# ----------------------------------------------------------------------------- nll_loss

def _class_count_message(weight: Tensor | None, n_classes: int, prefix: str = "") -> str | None:
    """nll_loss's (and cross_entropy's, with its prefix) check of a weight: one per class."""
    if weight is not None and (len(weight.shape) != 1 or weight.shape[0] != n_classes):
        return (f"{prefix}weight tensor should be defined either for all {n_classes} classes or no classes but got "
                f"weight tensor of shape: {list(weight.shape)}")
    return None


def _out_of_bounds(rt, target: Tensor, n_classes: int, ignore_index: int, reduction: str, serial: bool) -> tuple | None:
    """The kernel's IndexError for the first target outside [0, C) (not ignore_index); unreduced
    (not ``serial``) its rows run in parallel, so only a single bad value is certain to be named."""
    bad = [c for c in rt.B.ints(target.value) if c != ignore_index and not 0 <= c < n_classes]
    if bad and (reduction != "none" or serial or len(set(bad)) == 1):
        return ("IndexError", f"Target {bad[0]} is out of bounds.")
    return None


def _index_target(rt, x: Tensor, target: Tensor, ignore_index: int, loc: Loc) -> list[int]:
    """The class indices, once the kernel's checks passed; targets out of bounds left here are
    several different values of an unreduced loss (see :func:`_out_of_bounds`)."""
    n_classes = x.shape[1] if len(x.shape) > 1 else x.shape[0]
    classes = rt.B.ints(target.value)
    bad = sorted({c for c in classes if c != ignore_index and not 0 <= c < n_classes})
    if bad:
        raise ProblemError(loc, f"targets {bad} are out of bounds with reduction='none': not modelled (PyTorch's "
                                "IndexError 'Target N is out of bounds.' names one of them, which one depends on its "
                                "parallel rows); give one bad value, or reduce")
    return classes


def total_weight(rt, x: Tensor, target: Tensor, weight: Tensor | None, reduction: str, ignore_index: int,
                 classes: list[int]) -> Tensor:
    """The kernel's second output, saved by the node: 0 for an unreduced (N, C) or 4-D input,
    else the summed weight (the count without weight) of the targets not ignored."""
    B = rt.B
    if reduction == "none" and len(x.shape) > 1:
        value = B.scalar(0)
    elif weight is None:
        value = B.scalar(sum(1 for c in classes if c != ignore_index))
    else:
        value = B.scalar(0)
        for c in classes:
            if c != ignore_index:
                value = B.add(value, B.reshape(B.index(weight.value, (c,)), ()))
    return rt.tensor(value)


def _nll_forward_error(rt, x: Tensor, target: Tensor, weight: Tensor | None, reduction: str,
                      ignore_index: int) -> tuple | None:
    """nll_loss_forward's own checks (a 1-D or 2-D input), made once the node has packed self,
    target and weight, in ATen's order: the target's rank, its dtype, a 1-D input's target of
    one element, the weight's size, then the kernel's class bounds. None: PyTorch computes; an
    out-of-bounds target the binding cannot place in order (several, unreduced: the kernel's
    rows run in parallel) is also None, and refused by :func:`_index_target`."""
    if len(target.shape) > 1:
        return ("RuntimeError", "0D or 1D target tensor expected, multi-target not supported")
    if target.dtype != "int64":
        if target.dtype not in TYPE_NAMES:
            return None
        return ("RuntimeError", f"expected target dtype to be Long or Byte, but got {TYPE_NAMES[target.dtype]}")
    if len(x.shape) == 1 and target.shape and target.shape[0] != 1:
        return ("ValueError", f"For 1D input, 1D target must have size 1, but got target size: {target.shape[0]}")
    weight_error = _class_count_message(weight, x.shape[-1])
    if weight_error:
        return ("RuntimeError", weight_error)
    return _out_of_bounds(rt, target, x.shape[-1], ignore_index, reduction, len(x.shape) == 1)


def _nll2d_forward_error(rt, x: Tensor, target: Tensor, weight: Tensor | None, reduction: str,
                         ignore_index: int) -> tuple | None:
    """nll_loss2d_forward's checks (a 4-D input), after the node packed self, target and weight,
    in its order (checked in torch 2.13): the target's rank, its dtype, the weight's element
    count, the sizes, then the class bounds (row-major when reduced)."""
    if len(target.shape) != 3:
        return ("RuntimeError", f"only batches of spatial targets supported (3D tensors) but got targets of "
                                f"dimension: {len(target.shape)}")
    if target.dtype != "int64":
        return ("RuntimeError", f"expected target dtype to be Long or Byte, but got {TYPE_NAMES[target.dtype]}")
    if weight is not None and _numel(weight.shape) != x.shape[1]:
        return ("RuntimeError", "weight tensor should be defined either for all or no classes")
    if target.shape != (x.shape[0],) + x.shape[2:]:
        return ("RuntimeError", f"size mismatch (got input: {list(x.shape)} , target: {list(target.shape)}")
    return _out_of_bounds(rt, target, x.shape[1], ignore_index, reduction, False)


def nll_kernel(rt, prim: str, x: Tensor, target: Tensor, weight: Tensor | None, reduction: str, ignore_index: int,
               loc: Loc):
    """``nll_loss`` / ``nll_loss2d`` (the ATen ops): the node, with its saved total weight."""
    _no_grad_arg(weight, "weight", prim + "_forward", loc)
    check = _nll_forward_error if prim == "nll_loss" else _nll2d_forward_error
    refused = check(rt, x, target, weight, reduction, ignore_index)
    if refused is not None:   # after the node packs self, target, weight (the total weight is its output)
        ins = [x, target] + ([weight] if weight is not None else []) + [None]
        return rt.apply(prim + ("_w" if weight is not None else ""), ins, Nll(reduction, ignore_index, refused), loc)
    if weight is not None and len(weight.shape) != 1:   # nll_loss2d counts the weight's elements only
        raise ProblemError(loc, f"nll_loss2d with a weight of shape {list(weight.shape)}: not modelled (PyTorch takes "
                                "its elements as the class weights); give a 1-D weight")
    classes = _index_target(rt, x, target, ignore_index, loc)
    tw = total_weight(rt, x, target, weight, reduction, ignore_index, classes)
    # a mean over a total weight of 0 (every target ignored, or weighted 0) is 0 / 0: nan, as PyTorch
    # computes it (the op's nonfinite result: exact mode refuses it, --float64 answers it)
    ins = [x, target] + ([weight] if weight is not None else []) + [tw]
    return rt.apply(prim + ("_w" if weight is not None else ""), ins, Nll(reduction, ignore_index), loc)


def nll_loss_nd(rt, x: Tensor, target: Tensor, weight: Tensor | None, reduction: str, ignore_index: int, loc: Loc):
    """ATen's nll_loss_nd: the rank decides between nll_loss, nll_loss2d and views around it."""
    _float_tensor(x, "the input", "nll_loss", loc)
    nd = len(x.shape)
    if nd < 1:
        raise TorchError("ValueError", f"Expected 1 or more dimensions (got {nd})")
    if nd != 1 and (not target.shape or x.shape[0] != target.shape[0]):
        got = target.shape[0] if target.shape else 0
        # nll_loss_nd's TORCH_CHECK_VALUE, before any node of its own (cross_entropy's log_softmax ran): an answer
        raise TorchError("ValueError", f"Expected input batch_size ({x.shape[0]}) to match target batch_size ({got}).")
    if nd <= 2:
        # the target's rank and size: nll_loss_forward's checks, after the node packs (nll_kernel)
        return nll_kernel(rt, "nll_loss", x, target, weight, reduction, ignore_index, loc)
    if nd == 4:   # the target's rank and sizes: nll_loss2d_forward's checks, after the node packs
        return nll_kernel(rt, "nll_loss2d", x, target, weight, reduction, ignore_index, loc)
    n, c = x.shape[0], x.shape[1]
    out_size = (n,) + x.shape[2:]
    if target.shape[1:] != x.shape[2:]:   # nll_loss_nd's own check, before its views
        raise TorchError("RuntimeError", f"Expected target size {list(out_size)}, got {list(target.shape)}")
    x = lower_contiguous(rt, {"self": x}, loc)
    x4 = view(rt, x, (n, c, 1, -1), loc)
    t3 = view(rt, target, (n, 1, -1), loc)
    out = nll_kernel(rt, "nll_loss2d", x4, t3, weight, reduction, ignore_index, loc)
    return view(rt, out, out_size, loc) if reduction == "none" else out


def lower_nll_loss(rt, a: dict, loc: Loc):
    reduction = reduction_enum(rt, reduction_of(a, loc, "nll_loss"))
    return nll_loss_nd(rt, a["input"], a["target"], a["weight"], reduction, a["ignore_index"], loc)


# ----------------------------------------------------------------------------- cross_entropy

def log_softmax(rt, x: Tensor, dim: int, loc: Loc):
    """``at::log_softmax(x, dim)``: the dim wrapped first (a 0-d input's class dim 1 is its
    IndexError), then an integer input is the CPU kernel's error."""
    dim_index(dim, len(x.shape), loc)
    if x.dtype in ("int64", "bool"):   # the CPU kernel's dispatch (an integer input needs no node)
        kernel = "log_softmax_lastdim_kernel_impl" if dim == len(x.shape) - 1 else "log_softmax_kernel_impl"
        raise TorchError("NotImplementedError", f"\"{kernel}\" not implemented for '{TYPE_NAMES[x.dtype]}'")
    return rt.apply("log_softmax", [x], dim, loc)


def _label_smoothing_check(ls: Fraction, loc: Loc) -> None:
    if ls > 1:   # C++ prints the double as an ostream does (%g: 2, 1.5)
        raise TorchError("RuntimeError", f"label_smoothing must be between 0.0 and 1.0. Got: {float(ls):g}")


def _class_view(rt, weight: Tensor, ndim: int, class_dim: int, loc: Loc) -> Tensor:
    """``weight.view(1, C, 1, ...)``: the weight broadcast along the class dim."""
    shape = tuple(weight.shape[0] if i == class_dim else 1 for i in range(ndim))
    return view(rt, weight, shape, loc)


def cross_entropy_probabilities(rt, x: Tensor, target: Tensor, weight: Tensor | None, reduction: str, ls: Fraction,
                                loc: Loc):
    """``cross_entropy_loss_prob_target``."""
    nd = len(x.shape)
    class_dim = 0 if nd == 1 else 1
    n_classes = size_dim(x, class_dim)   # a 0-d input: self.size(1)'s IndexError, before any node
    weight_error = _class_count_message(weight, n_classes, "cross_entropy: ")
    if weight_error:   # cross_entropy_loss_prob_target's check, before log_softmax
        raise TorchError("RuntimeError", weight_error)
    logp = log_softmax(rt, x, class_dim, loc)
    if ls > 0:
        _label_smoothing_check(ls, loc)
        scaled = rt.apply("mul_scalar", [target], 1 - ls, loc)
        target = rt.apply("add_scalar", [scaled], ls / n_classes, loc)
    prod = rt.apply("mul", [logp, target], None, loc)
    if weight is not None:
        w = _class_view(rt, weight, nd, class_dim, loc) if nd > 1 else weight
        prod = rt.apply("mul", [prod, w], None, loc)
    if reduction == "none":
        return rt.apply("neg", [rt.apply("sum_dim", [prod], ((class_dim,), False), loc)], None, loc)
    if reduction == "mean" and 0 in x.shape:
        raise ProblemError(loc, "cross_entropy of an input with no element (reduction='mean'): PyTorch's nan loss, "
                                "-(input * target).sum().fill_(nan) (FillBackward2), is not modelled; use "
                                "reduction='sum' or 'none'")
    neg = rt.apply("neg", [rt.apply("sum", [prod], None, loc)], None, loc)
    if reduction == "sum":
        return neg
    return rt.apply("div_scalar", [neg], Fraction(_numel(x.shape) // n_classes), loc)


def cross_entropy_smoothed(rt, x: Tensor, target: Tensor, weight: Tensor | None, reduction: str, ignore_index: int,
                           ls: Fraction, loc: Loc):
    """``cross_entropy_loss_label_smoothing``: (1 - ls) * nll + ls / C * (the smoothing term)."""
    B = rt.B
    nd = len(x.shape)
    class_dim = 0 if nd == 1 else 1
    logp = log_softmax(rt, x, class_dim, loc)
    nll = nll_loss_nd(rt, logp, target, weight, reduction, ignore_index, loc)
    n_classes = logp.shape[class_dim]
    per_class = rt.apply("mul", [logp, _class_view(rt, weight, nd, class_dim, loc)], None, loc) \
        if weight is not None else logp
    smooth = rt.apply("neg", [rt.apply("sum_dim", [per_class], ((class_dim,), False), loc)], None, loc)
    classes = B.ints(target.value)
    mask = rt.tensor(B.integers([int(c == ignore_index) for c in classes], target.shape), dtype="bool")
    # masked_fill_ in ATen, on a tensor nothing else holds: the same node, edge and saved mask
    filled = rt.apply("masked_fill", [smooth, mask], Fraction(0), loc)
    if filled.shape != smooth.shape:
        # a 1-D input's 1-element target: masked_fill_ in place on the 0-d term refuses the
        # broadcast once its node has packed the mask (the computed value is never used)
        raise TorchError("RuntimeError", f"output with shape {list(smooth.shape)} doesn't match the broadcast "
                                         f"shape {list(filled.shape)}")
    smooth = filled
    if reduction == "mean":
        if weight is not None:
            denominator = B.scalar(0)
            for c in classes:
                if c != ignore_index:
                    denominator = B.add(denominator, B.reshape(B.index(weight.value, (c,)), ()))
            divisor = rt.tensor(denominator)
        else:
            divisor = rt.tensor(B.scalar(sum(1 for c in classes if c != ignore_index)), dtype="int64")
        ret = rt.apply("div", [rt.apply("sum", [smooth], None, loc), divisor], None, loc)
    elif reduction == "sum":
        ret = rt.apply("sum", [smooth], None, loc)
    else:
        ret = smooth
    right = rt.apply("mul_scalar", [ret], ls / n_classes, loc)
    left = rt.apply("mul_scalar", [nll], 1 - ls, loc)
    return rt.apply("add", [left, right], None, loc)


def lower_cross_entropy(rt, a: dict, loc: Loc):
    x, target, weight = a["input"], a["target"], a["weight"]
    reduction = reduction_enum(rt, reduction_of(a, loc, "cross_entropy"))
    ignore_index, ls = a["ignore_index"], a["label_smoothing"]
    if x.dtype not in ("int64", "bool"):   # an integer input is log_softmax's error, where it runs
        _float_tensor(x, "the input", "cross_entropy", loc)
    if x.shape == target.shape:
        # cross_entropy_loss's own checks, before any node: an answer
        if target.dtype not in ("float32", "float64"):
            raise TorchError("RuntimeError", f"Expected floating point type for target with class probabilities, "
                                             f"got {TYPE_NAMES[target.dtype]}")
        if ignore_index >= 0:
            raise TorchError("RuntimeError", "ignore_index is not supported for floating point target")
        return cross_entropy_probabilities(rt, x, target, weight, reduction, ls, loc)
    if ls > 0:
        _label_smoothing_check(ls, loc)
        return cross_entropy_smoothed(rt, x, target, weight, reduction, ignore_index, ls, loc)
    return nll_loss_nd(rt, log_softmax(rt, x, 0 if len(x.shape) == 1 else 1, loc), target, weight, reduction,
                       ignore_index, loc)


# ----------------------------------------------------------------------------- binary cross entropy

def lower_binary_cross_entropy(rt, a: dict, loc: Loc):
    x, y, weight = a["input"], a["target"], a["weight"]
    reduction = reduction_enum(rt, reduction_of(a, loc, "binary_cross_entropy"))
    if y.shape != x.shape:   # F.binary_cross_entropy's own check, before any node
        raise TorchError("ValueError", f"Using a target size ({torch_size(y.shape)}) that is different to the input size "
                                       f"({torch_size(x.shape)}) is deprecated. Please ensure they have the same size.")
    _pointwise_dtypes(x, y, "binary_cross_entropy", loc)
    if weight is not None:   # weight.expand(torch.broadcast_shapes(target.size(), weight.size())), in Python
        shape = _python_broadcast_shapes(y.shape, weight.shape)
        weight = rt.apply("expand", [weight], shape, loc)
        _no_grad_arg(weight, "weight", "binary_cross_entropy", loc)
        if shape != x.shape:   # the kernel's output check, once the node packed self, target and weight
            rt.raise_after_packs("binary_cross_entropy_w", [x, y, weight], _output_mismatch(x.shape, shape), loc)
    p = BCE(reduction, BCE_EPSILON)   # an input or target outside [0, 1]: the kernel's error (ops.losses)
    if weight is None:
        return rt.apply("binary_cross_entropy", [x, y], p, loc)
    return rt.apply("binary_cross_entropy_w", [x, y, weight], p, loc)


def lower_binary_cross_entropy_with_logits(rt, a: dict, loc: Loc):
    x, y, weight, pos_weight = a["input"], a["target"], a["weight"], a["pos_weight"]
    reduction = reduction_enum(rt, reduction_of(a, loc, "binary_cross_entropy_with_logits"))
    if y.shape != x.shape:   # F.binary_cross_entropy_with_logits's own check, before any node
        raise TorchError("ValueError", f"Target size ({torch_size(y.shape)}) must be the same as input size "
                                       f"({torch_size(x.shape)})")
    _pointwise_dtypes(x, y, "binary_cross_entropy_with_logits", loc)
    _no_grad_arg(weight, "weight", "binary_cross_entropy_with_logits", loc)
    _no_grad_arg(pos_weight, "pos_weight", "binary_cross_entropy_with_logits", loc)
    prim = "bce_with_logits" + ("_w" if weight is not None else "") + ("_pw" if pos_weight is not None else "")
    ins = [x, y] + [t for t in (weight, pos_weight) if t is not None]
    refused = _bce_with_logits_shape_error(x, y.dtype, weight, pos_weight)
    if refused is not None:   # the kernel's, once the node packed what it saves
        rt.raise_after_packs(prim, ins, refused, loc)
    return rt.apply(prim, ins, BCELogits(reduction, weight is not None, pos_weight is not None), loc)


def _python_broadcast_shapes(*shapes) -> tuple[int, ...]:
    """``torch.broadcast_shapes`` (torch._refs._broadcast_shapes, Python): shape by shape, each
    dim from the last, into a common shape of 1s; its RuntimeError names the first mismatch."""
    common = [1] * max(len(s) for s in shapes)
    for arg, shape in enumerate(shapes):
        for idx in range(-1, -1 - len(shape), -1):
            if shape[idx] == common[idx]:
                continue
            if common[idx] == 1:
                common[idx] = shape[idx]
            if shape[idx] != 1 and common[idx] != shape[idx]:
                raise TorchError("RuntimeError", f"Attempting to broadcast a dimension of length {shape[idx]} at "
                                                 f"{idx}! Mismatching argument at index {arg} had {torch_size(shape)}; but "
                                                 f"expected shape should be broadcastable to {common}")
    return tuple(common)


def _output_mismatch(out: tuple, shape: tuple) -> TorchError:
    """TensorIterator's error for an output (written in place) smaller than the broadcast shape."""
    return TorchError("RuntimeError", f"output with shape {list(out)} doesn't match the broadcast shape {list(shape)}")


def _bce_with_logits_shape_error(x: Tensor, target_dtype: str, weight: Tensor | None, pos_weight: Tensor | None):
    """The kernel's order: ``(pos_weight - 1).mul(target)`` (pos_weight is tensor a), written
    into the input-shaped log_sigmoid by ``mul_``; then ``(1 - target).mul_(input)``, which refuses
    an int64 or bool target (ops.losses.bcel_target_error); then ``loss.mul_(weight)`` (the loss is a)."""
    shape = x.shape
    for t, first in ((pos_weight, True), (weight, False)):
        if not first:
            message = bcel_target_error((x.dtype, target_dtype), None)
            if message:
                return TorchError("RuntimeError", message)
        if t is None:
            continue
        try:
            out = broadcast_shapes(t.shape, shape, None) if first else broadcast_shapes(shape, t.shape, None)
        except TorchError as e:
            return e
        if out != shape:
            return _output_mismatch(shape, out)
    return None


# ----------------------------------------------------------------------------- kl_div

def lower_kl_div(rt, a: dict, loc: Loc):
    x, t = a["input"], a["target"]
    if a.get("size_average") is None and a.get("reduce") is None and a.get("reduction", "mean") == "mean":
        warns.warn(rt, "UserWarning", warns.KL_DIV_MEAN)   # F.kl_div warns before anything runs
    reduction = reduction_of(a, loc, "kl_div", batchmean=True)
    if reduction != "batchmean":
        reduction = reduction_enum(rt, reduction)
    # at::kl_div's checks, before any op: complex first, then integral (bool included)
    if {x.dtype, t.dtype} & {"complex64", "complex128"}:
        raise TorchError("RuntimeError", "kl_div: Complex inputs not supported.")
    if {x.dtype, t.dtype} & {"int64", "bool"}:
        raise TorchError("RuntimeError", "kl_div: Integral inputs not supported.")
    if a["log_target"]:
        diff = rt.apply("sub", [t, x], None, loc)          # C++ evaluates the right operand first
        out = rt.apply("mul", [rt.apply("exp", [t], None, loc), diff], None, loc)
    else:
        prod = rt.apply("mul", [t, x], None, loc)
        out = rt.apply("sub", [rt.apply("xlogy", [t, t], None, loc), prod], None, loc)
    if reduction == "batchmean":
        reduced = rt.apply("sum", [out], None, loc)
        return binary(rt, "/", reduced, Fraction(x.shape[0]), loc) if x.shape else reduced
    return _reduce(rt, out, reduction, loc)


# ----------------------------------------------------------------------------- the table

_IT = (Param("input", "tensor"), Param("target", "tensor"))
_OLD = (Param("size_average", "any", None), Param("reduce", "any", None))
_RED = Param("reduction", "str", "mean")
_W = Param("weight", "tensor", None)

FUNCTIONS = (
    Function("mse_loss", _IT + _OLD + (_RED, _W), lower_mse_loss, where="function",
             doc="MseLossBackward0 (weight: sub, pow, mul, sum, div by sum(weight))"),
    Function("l1_loss", _IT + _OLD + (_RED, _W), lower_l1_loss, where="function",
             doc="SubBackward0, AbsBackward0, MeanBackward0 / SumBackward0"),
    Function("smooth_l1_loss", _IT + _OLD + (_RED, Param("beta", "number", Fraction(1))), lower_smooth_l1_loss,
             where="function", doc="SmoothL1LossBackward0 (beta = 0: l1_loss)"),
    Function("huber_loss", _IT + (_RED, Param("delta", "number", Fraction(1)), _W), lower_huber_loss,
             where="function", doc="HuberLossBackward0 (weight: unreduced, mul, sum / mean)"),
    Function("nll_loss", _IT + (_W,) + _OLD[:1] + (Param("ignore_index", "int", -100),) + _OLD[1:] + (_RED,),
             lower_nll_loss, where="function",
             doc="NllLossBackward0; 4-D: NllLoss2DBackward0; 3-D, 5-D+: ViewBackward0, NllLoss2DBackward0 (, view)"),
    Function("cross_entropy", _IT + (_W,) + _OLD[:1] + (Param("ignore_index", "int", -100),) + _OLD[1:] +
             (_RED, Param("label_smoothing", "number", Fraction(0))), lower_cross_entropy, where="function",
             doc="LogSoftmaxBackward0 then nll_loss; label_smoothing and class probabilities: see the module"),
    Function("binary_cross_entropy", _IT + (_W,) + _OLD + (_RED,), lower_binary_cross_entropy, where="function",
             doc="BinaryCrossEntropyBackward0 (edges: input, target)"),
    Function("binary_cross_entropy_with_logits", _IT + (_W,) + _OLD + (_RED, Param("pos_weight", "tensor", None)),
             lower_binary_cross_entropy_with_logits, where="function",
             doc="BinaryCrossEntropyWithLogitsBackward0 (edges: input, target)"),
    Function("kl_div", _IT + _OLD + (_RED, Param("log_target", "bool", False)), lower_kl_div, where="function",
             doc="MulBackward0, XlogyBackward0, SubBackward0 (log_target: SubBackward0, ExpBackward0, "
                 "MulBackward0), then MeanBackward0 / SumBackward0 (batchmean: SumBackward0, DivBackward0)"),
)
