"""``batch_norm``, ``layer_norm``, ``group_norm``, ``embedding`` and ``dropout``, as PyTorch
2.13 runs them on the CPU.

* ``batch_norm``: one ``NativeBatchNormBackward0`` (edges ``input, weight, bias``), in
  training and in eval mode alike. In training mode the kernel updates ``running_mean`` and
  ``running_var`` in place (``(1 - momentum) * running + momentum * batch``, the variance
  unbiased), inside the kernel: their version counters do not move, and a node that saved
  them earlier (an eval-mode batch norm) sees the new values in its backward.
* ``layer_norm``: ``NativeLayerNormBackward0``; ``group_norm``: ``NativeGroupNormBackward0``
  (a non-contiguous input, weight or bias is made contiguous first: ``CloneBackward0``).
* ``rms_norm``: no node of its own on the CPU: ATen's composite ``pow(x, 2)``, ``mean`` over the
  normalized dims (keepdim), ``add_(eps)`` in place, ``rsqrt``, ``x * rsqrt`` and ``* weight``:
  PowBackward0, MeanBackward1, AddBackward1, RsqrtBackward0, MulBackward0 (twice with a weight);
  ``eps=None`` is the dtype's machine epsilon (``numeric_limits<opmath>::epsilon``).
* ``embedding``: ``EmbeddingBackward0`` (one edge, ``weight``); a negative ``padding_idx``
  counts from the end, as F.embedding turns it; with ``max_norm`` the weight's indexed rows are
  renormalized in place first (adjoint.engine.bindings.embedding_renorm).
* ``dropout``: eval mode or ``p = 0`` returns the input itself (no node); ``p = 1`` multiplies
  by a 0-d zero tensor; otherwise ``input * (mask / (1 - p))`` (``MulBackward0``, the scaled
  mask saved as ``other``), ``_dropout_impl``'s CPU path. The random keep-mask is what a
  prediction cannot know, so only a ``Dropout`` module, whose file gives ``mask:``, keeps
  elements at random; ``F.dropout`` in training mode with ``0 < p < 1`` is refused.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.engine.bindings.embedding_renorm import embedding_renorm
from adjoint.engine.bindings.signature import after_packs
from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.inplace import write_in_kernel
from adjoint.values.strides import is_contiguous
from adjoint.engine.ops.embedding import EmbeddingSpec
from adjoint.engine.ops.norm import BatchNormSpec, GroupNormSpec, LayerNormSpec, _channel_shape, _mean_over
from adjoint.engine.bindings.signature import Function, Param
from adjoint.engine.bindings.views import select
from adjoint.engine.runtime import TorchError
def _prod(xs) -> int:
    out = 1
    for v in xs:
        out *= v
    return out


def verify_batch_size(shape, loc: Loc) -> None:
    """F._verify_batch_size: training statistics need more than one value per channel. PyTorch's
    ValueError is the answer; the size is printed as it was passed (F.batch_norm passes
    ``input.size()``, a torch.Size; F.group_norm a list)."""
    if shape[0] * _prod(shape[2:]) == 1:
        size = f"torch.Size({list(shape)})" if isinstance(shape, tuple) else str(list(shape))
        raise TorchError("ValueError", f"Expected more than 1 value per channel when training, got input size {size}")


def batch_norm(rt, x: Tensor, running_mean, running_var, weight, bias, training: bool, momentum, eps, loc: Loc):
    """F.batch_norm; ``momentum`` an exact number (the module passes 1/num_batches_tracked for None)."""
    if training:
        if not x.shape:   # F._verify_batch_size reads size[0] of a 0-d input's empty torch.Size
            raise TorchError("IndexError", "tuple index out of range")
        verify_batch_size(x.shape, loc)
    return aten_batch_norm(rt, x, running_mean, running_var, weight, bias, training, momentum, eps, loc)


#: native_batch_norm's kernel, given one running statistic without the other in training mode
ONE_STATISTIC = "running_mean and running_var must either both be None or neither be None"


def aten_batch_norm(rt, x: Tensor, running_mean, running_var, weight, bias, training: bool, momentum, eps,
                    loc: Loc):
    """at::batch_norm (what F.batch_norm calls after its own check, and at::instance_norm directly):
    an input of no elements is a clone; the argument checks; VariableType's refusal of a running
    statistic that requires grad (grad mode on; before any node); the node, whose kernel refuses a
    1-D input and, in training, one running statistic without the other (after the packs)."""
    if 0 in x.shape:
        return _batch_norm_of_nothing(rt, x, weight, bias, loc)
    stats = (x, weight, bias, running_mean, running_var)
    refused = _batch_norm_refusal(x.shape, training, *stats[1:])
    if refused:
        raise TorchError("RuntimeError", refused)
    for name, t in (("running_mean", running_mean), ("running_var", running_var)):
        if rt.grad_enabled and t is not None and t.needs_grad:   # check_no_requires_grad
            raise TorchError("RuntimeError", f"The function 'native_batch_norm' is not differentiable with respect "
                                             f"to argument '{name}'. This input cannot have requires_grad True.")
    if len(x.shape) < 2:   # every check passed (none given, or of 0 elements): the kernel's dim 1, after the packs
        if not x.shape:
            raise ProblemError(loc, "batch_norm of a 0-d input is not modelled (PyTorch packs the input, then "
                                    "refuses it)")
        rt.raise_after_packs("native_batch_norm", list(stats), TorchError(
            "IndexError", "Dimension out of range (expected to be in range of [-1, 0], but got 1)"), loc)
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)):
        if t is not None and len(t.shape) != 1:
            raise ProblemError(loc, f"batch_norm with a {name} of shape {list(t.shape)} is not modelled (PyTorch takes "
                                    f"its {x.shape[1]} elements as a vector); give a 1-D {name}")
    if training and (running_mean is None) != (running_var is None):
        rt.raise_after_packs("native_batch_norm", list(stats), TorchError("ValueError", ONE_STATISTIC), loc)

    def update():   # inside the kernel: before the node packs its outputs (save_mean, save_invstd)
        update_running_stats(rt, x, running_mean, running_var, Fraction(momentum if momentum is not None else 0))
    updates = training and running_mean is not None and running_var is not None
    return rt.apply("native_batch_norm", [x, weight, bias, running_mean, running_var],
                    BatchNormSpec(training, Fraction(eps)), loc, in_kernel=update if updates else None)[0]


def _batch_norm_of_nothing(rt, x: Tensor, weight, bias, loc: Loc):
    """at::batch_norm of an input of no element, before its checks and the kernel: ``input.clone()``
    (so the gradient chain goes on), times ``weight[0]``, plus ``bias[0]``; the running statistics
    are neither checked nor updated."""
    out = rt.apply("clone", [x], None, loc)
    if weight is not None:
        out = rt.apply("mul", [out, select(rt, weight, 0, 0, loc)], None, loc)
    if bias is not None:
        out = rt.apply("add", [out, select(rt, bias, 0, 0, loc)], None, loc)
    return out


def _batch_norm_refusal(shape, training: bool, weight, bias, running_mean, running_var) -> str | None:
    """at::_batch_norm_impl_index's checks, before any node, in its order: each running statistic
    (missing in eval mode, or not of the channels' count of elements), then weight, then bias.
    An input of fewer than 2 dims has 0 channels here."""
    c = shape[1] if len(shape) >= 2 else 0
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)):
        if t is None:
            if not training and name.startswith("running"):
                return f"{name} must be defined in evaluation mode"
        elif _prod(t.shape) != c:
            return f"{name} should contain {c} elements not {_prod(t.shape)}"
    return None


def update_running_stats(rt, x: Tensor, running_mean: Tensor, running_var: Tensor, momentum: Fraction) -> None:
    """batch_norm_cpu_update_stats_template: written by the kernel, so no version bump, and every
    view of the statistics (and every node that saved one) reads the new values."""
    B = rt.B
    cs = _channel_shape(x.shape)
    c = x.shape[1]
    mean = _mean_over(B, x.value, cs)
    centered = B.sub(x.value, mean)
    n = B.numel(x.value) // c
    unbiased = B.div(B.sum_to(B.mul(centered, centered), cs), B.scalar(n - 1))
    m, keep = B.scalar(momentum), B.scalar(1 - momentum)
    write_in_kernel(rt, running_mean, B.add(B.mul(keep, running_mean.value), B.mul(m, B.reshape(mean, (c,)))))
    write_in_kernel(rt, running_var, B.add(B.mul(keep, running_var.value), B.mul(m, B.reshape(unbiased, (c,)))))


def lower_batch_norm(rt, a: dict, loc: Loc):
    return batch_norm(rt, a["input"], a["running_mean"], a["running_var"], a["weight"], a["bias"], a["training"],
                      a["momentum"], a["eps"], loc)


def layer_norm(rt, x: Tensor, normalized_shape, weight, bias, eps, loc: Loc):
    spec = LayerNormSpec(tuple(int(n) for n in normalized_shape), Fraction(eps))
    return rt.apply("native_layer_norm", [x, weight, bias], spec, loc)[0]


def lower_layer_norm(rt, a: dict, loc: Loc):
    return layer_norm(rt, a["input"], a["normalized_shape"], a["weight"], a["bias"], a["eps"], loc)


#: rms_norm's eps=None: std::numeric_limits<opmath_t>::epsilon() of the input's dtype
MACHINE_EPSILON = {"float32": Fraction(1, 2 ** 23), "float64": Fraction(1, 2 ** 52)}


def _rms_norm_refusal(x: Tensor, shape: tuple, weight, loc: Loc) -> TorchError | None:
    """``_check_rms_norm_inputs`` as PyTorch 2.13 runs it, in its order, then the dtype dispatch:
    all before any node."""
    if not shape:
        return TorchError("RuntimeError", "Expected normalized_shape to be at least 1-dimensional, i.e., containing at "
                                          f"least one element, but got normalized_shape = {list(shape)}")
    if weight is not None and tuple(weight.shape) != shape:
        return TorchError("RuntimeError", f"Expected weight to be of same shape as normalized_shape, but got weight of "
                                          f"shape {list(weight.shape)} and normalized_shape = {list(shape)}")
    if len(x.shape) < len(shape):
        return TorchError("ValueError", f"Input tensor must have at least {len(shape)} dimensions, but got "
                                        f"{len(x.shape)}")
    if tuple(x.shape[len(x.shape) - len(shape):]) != shape:
        return TorchError("RuntimeError", f"Given normalized_shape={list(shape)}, expected input with shape "
                                          f"[*{', '.join(map(str, shape))}], but got input of size{list(x.shape)}")
    if x.dtype not in MACHINE_EPSILON and weight is not None:
        raise ProblemError(loc, f"F.rms_norm of {'an' if x.dtype == 'int64' else 'a'} {x.dtype} input with a weight is not modelled: PyTorch warns that "
                                "their dtypes differ once per process (TORCH_WARN_ONCE), then raises; give a float input")
    if x.dtype not in MACHINE_EPSILON:
        return TorchError("NotImplementedError",
                          f'"rms_norm" not implemented for \'{"Long" if x.dtype == "int64" else "Bool"}\'')
    return None


def rms_norm(rt, x: Tensor, normalized_shape, weight, eps, loc: Loc):
    """F.rms_norm / nn.RMSNorm: the checks, then ATen's composite (``rms_norm_symint``), one node
    per op: ``rsqrt(pow(x, 2).mean(dims, keepdim=True).add_(eps))``, ``x * that``, ``* weight``."""
    from adjoint.engine.inplace import apply_inplace
    shape = tuple(int(n) for n in normalized_shape)
    refused = _rms_norm_refusal(x, shape, weight, loc)
    if refused is not None:
        raise refused
    dims = tuple(range(len(x.shape) - len(shape), len(x.shape)))
    squares = rt.apply("pow_scalar", [x], Fraction(2), loc)
    mean = rt.apply("mean_dim", [squares], (dims, True), loc)
    mean = apply_inplace(rt, "add_scalar", mean, [], MACHINE_EPSILON[x.dtype] if eps is None else Fraction(eps), loc)
    out = rt.apply("mul", [x, rt.apply("rsqrt", [mean], None, loc)], None, loc)
    return out if weight is None else rt.apply("mul", [out, weight], None, loc)


def lower_rms_norm(rt, a: dict, loc: Loc):
    return rms_norm(rt, a["input"], a["normalized_shape"], a["weight"], a["eps"], loc)


def group_norm(rt, x: Tensor, num_groups: int, weight, bias, eps, loc: Loc):
    """F.group_norm: its own checks (the input's rank; _verify_batch_size, which divides by
    num_groups), then at::group_norm's, all before any node."""
    if len(x.shape) < 2:
        raise TorchError("RuntimeError", f"Expected at least 2 dimensions for input tensor but received {len(x.shape)}")
    if num_groups == 0:
        raise TorchError("ZeroDivisionError", "integer division or modulo by zero")
    verify_batch_size([x.shape[0] * x.shape[1] // num_groups, num_groups] + list(x.shape[2:]), loc)
    refused = _group_norm_refusal(x.shape, num_groups, weight, bias)
    if refused:
        raise TorchError("RuntimeError", refused)
    # at::group_norm (above autograd) makes input, weight and bias contiguous, in that order
    x, weight, bias = (t if t is None or is_contiguous(t.shape, t.strides) else rt.apply("clone", [t], None, loc)
                       for t in (x, weight, bias))
    return rt.apply("native_group_norm", [x, weight, bias], GroupNormSpec(num_groups, Fraction(eps)), loc)[0]


def _group_norm_refusal(shape, num_groups: int, weight, bias) -> str | None:
    """at::group_norm's checks in its order. Its bias message prints the weight's shape (an
    absent weight's is [0]), as PyTorch 2.13 does."""
    if num_groups < 0:
        return f"Expected num groups to be greater than 0, got {num_groups}"
    c = shape[1]
    if c % num_groups:
        return (f"Expected number of channels in input to be divisible by num_groups, but got input of shape "
                f"{list(shape)} and num_groups={num_groups}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (c,):
            shown = list(weight.shape) if weight is not None else [0]
            return (f"Expected {name} to be a vector of size equal to the number of channels in input, but got "
                    f"{name} of shape {shown} and input of shape {list(shape)}")
    return None


def lower_group_norm(rt, a: dict, loc: Loc):
    return group_norm(rt, a["input"], a["num_groups"], a["weight"], a["bias"], a["eps"], loc)


# ----------------------------------------------------------------------------- embedding

def embedding(rt, indices: Tensor, weight: Tensor, padding_idx, max_norm, scale_grad_by_freq: bool, sparse: bool,
              loc: Loc, norm_type=Fraction(2)):
    n = weight.shape[0] if weight.shape else 0
    if padding_idx is not None:
        if not -n <= padding_idx < n:
            raise TorchError("AssertionError", "Padding_idx must be within num_embeddings")   # F.embedding's assert
        padding_idx = padding_idx + n if padding_idx < 0 else padding_idx
    if sparse:
        raise ProblemError(loc, "embedding with sparse=True makes a sparse gradient, which adjoint does not model; "
                                "use sparse=False")
    if max_norm is not None:
        embedding_renorm(rt, indices, weight, max_norm, norm_type, loc)
    if indices.dtype != "int64":   # checkScalarTypes in the kernel, after EmbeddingBackward0 packed the indices
        from adjoint.engine.bindings.views import _EXPAND_TYPE_NAMES as type_names
        if indices.dtype not in type_names:
            raise ProblemError(loc, f"embedding of {indices.dtype} indices is not modelled here; declare the indices "
                                    "with dtype: int64")
        if len(weight.shape) == 2:   # (another rank: the kernel's "'weight' must be 2-D" first, below)
            after_packs(rt, "embedding", [weight, indices], loc, lambda: _raise(TorchError(
                "RuntimeError", "Expected tensor for argument #1 'indices' to have one of the following scalar "
                                f"types: Long, Int; but got {type_names[indices.dtype]} instead (while checking "
                                "arguments for embedding)")))
    if len(weight.shape) == 2:   # (another rank: the kernel's "'weight' must be 2-D" first, from the op's shape rule)
        def checks():
            """index_select in the kernel, after EmbeddingBackward0 packed the indices."""
            if any(not 0 <= int(i) < n for i in rt.B.as_indices(indices.value).reshape(-1)):
                raise TorchError("IndexError", "index out of range in self")
        after_packs(rt, "embedding", [weight, indices], loc, checks)
    spec = EmbeddingSpec(-1 if padding_idx is None else padding_idx, scale_grad_by_freq)
    return rt.apply("embedding", [weight, indices], spec, loc)


def _raise(error: Exception):
    raise error


def lower_embedding(rt, a: dict, loc: Loc):
    return embedding(rt, a["input"], a["weight"], a["padding_idx"], a["max_norm"], a["scale_grad_by_freq"],
                     a["sparse"], loc, a["norm_type"])


# ----------------------------------------------------------------------------- dropout

def check_dropout_p(p: Fraction, loc: Loc) -> None:
    """F.dropout's (and dropout1d/2d/3d's, alpha_dropout's) ValueError, before any op; it prints p as given."""
    if not 0 <= p <= 1:
        if p.denominator == 1:
            raise ProblemError(loc, f"dropout with p={p} is not modelled: PyTorch's ValueError prints p as written "
                                    "(an int or a float), which adjoint's exact numbers do not keep; give a p in [0, 1]")
        raise TorchError("ValueError", f"dropout probability has to be between 0 and 1, but got {float(p)}")


def feature_noise_shape(shape: tuple) -> tuple:
    """ATen's ``make_feature_noise``: one draw per (batch, channel), ones over the other dims."""
    if len(shape) < 2:
        raise TorchError("RuntimeError", "Feature dropout requires at least 2 dimensions in the input")
    return tuple(shape[:2]) + (1,) * (len(shape) - 2)


def dropout(rt, x: Tensor, p: Fraction, training: bool, inplace: bool, mask, loc: Loc, feature: str | None = None):
    """_dropout_impl on the CPU; ``mask`` the keep-mask's exact value (a Dropout module's), or None.
    ``feature``: the module type of a channel-wise dropout (``Dropout2d``: ``feature_dropout``, whose noise
    has one element per batch and channel), or None (``Dropout``: one per element)."""
    from adjoint.engine.inplace import apply_inplace
    check_dropout_p(p, loc)
    if not training or p == 0 or _prod(x.shape) == 0:
        return x
    B = rt.B
    if p == 1:
        other = rt.tensor(B.zeros(()), dtype=x.dtype)
    else:
        noise = feature_noise_shape(tuple(x.shape)) if feature else tuple(x.shape)
        kind = feature or "Dropout"
        if mask is None:
            what = "channels" if feature else "elements"
            raise ProblemError(loc, f"dropout in training mode keeps {what} at random, which no prediction can know; "
                                    f"use a {kind} module with mask: [...] (1 keeps, 0 drops), or training=False")
        if rt.fresh_rng:
            raise ProblemError(loc, "checkpoint(..., preserve_rng_state=False) recomputes this dropout with a fresh "
                                    "random mask, which no prediction can know; leave preserve_rng_state at True (its "
                                    "default: the recomputation draws the mask given here again), or training=False")
        if tuple(B.shape(mask)) != noise:
            if feature:
                raise ProblemError(loc, f"the {kind} mask has shape {list(B.shape(mask))} but PyTorch draws one of "
                                        f"shape {list(noise)} (one per batch element and channel) for its input of "
                                        f"shape {list(x.shape)}; give a mask of that shape")
            raise ProblemError(loc, f"the Dropout mask has shape {list(B.shape(mask))} but its input has shape "
                                    f"{list(x.shape)}; give a mask of the input's shape")
        other = rt.tensor(B.div(mask, B.scalar(1 - p)), dtype=x.dtype)
    if inplace:
        return apply_inplace(rt, "mul", x, [other], None, loc)
    return rt.apply("mul", [x, other], None, loc)


def lower_dropout(rt, a: dict, loc: Loc):
    return dropout(rt, a["input"], a["p"], a["training"], a["inplace"], None, loc)


_IN = Param("input", "tensor")
_EPS = Fraction(1, 100000)

FUNCTIONS = (
    Function("batch_norm", (_IN, Param("running_mean", "tensor", optional=True),
                            Param("running_var", "tensor", optional=True), Param("weight", "tensor", None),
                            Param("bias", "tensor", None), Param("training", "bool", False),
                            Param("momentum", "number", Fraction(1, 10)), Param("eps", "number", _EPS)),
             lower_batch_norm, where="function",
             doc="NativeBatchNormBackward0 (training and eval); training updates the running stats in place"),
    Function("layer_norm", (_IN, Param("normalized_shape", "ints"), Param("weight", "tensor", None),
                            Param("bias", "tensor", None), Param("eps", "number", _EPS)),
             lower_layer_norm, where="function", doc="NativeLayerNormBackward0"),
    Function("rms_norm", (_IN, Param("normalized_shape", "ints"), Param("weight", "tensor", None),
                          Param("eps", "number", None)),
             lower_rms_norm, where="function",
             doc="no node of its own: PowBackward0, MeanBackward1, AddBackward1 (add_ of eps: None is the dtype's "
                 "epsilon), RsqrtBackward0, MulBackward0 (x * rsqrt), MulBackward0 (* weight)"),
    Function("group_norm", (_IN, Param("num_groups", "int"), Param("weight", "tensor", None),
                            Param("bias", "tensor", None), Param("eps", "number", _EPS)),
             lower_group_norm, where="function", doc="NativeGroupNormBackward0"),
    Function("embedding", (_IN, Param("weight", "tensor"), Param("padding_idx", "int", None),
                           Param("max_norm", "number", None), Param("norm_type", "number", Fraction(2)),
                           Param("scale_grad_by_freq", "bool", False), Param("sparse", "bool", False)),
             lower_embedding, where="function", doc="EmbeddingBackward0 (edge: weight only)"),
    Function("dropout", (_IN, Param("p", "number", Fraction(1, 2)), Param("training", "bool", True),
                         Param("inplace", "bool", False)), lower_dropout, where="function",
             doc="eval or p = 0: the input itself; p = 1: MulBackward0 by a 0-d zero; else refused (random mask): "
                 "use a Dropout module with mask:"),
)
