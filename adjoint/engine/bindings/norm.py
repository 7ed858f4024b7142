"""``batch_norm``, ``layer_norm``, ``group_norm``, ``embedding`` and ``dropout``, as PyTorch
2.13 runs them on the CPU.

* ``batch_norm``: one ``NativeBatchNormBackward0`` (edges ``input, weight, bias``), in
  training and in eval mode alike. In training mode the kernel updates ``running_mean`` and
  ``running_var`` in place (``(1 - momentum) * running + momentum * batch``, the variance
  unbiased), inside the kernel: their version counters do not move, and a node that saved
  them earlier (an eval-mode batch norm) sees the new values in its backward.
* ``layer_norm``: ``NativeLayerNormBackward0``; ``group_norm``: ``NativeGroupNormBackward0``
  (a non-contiguous input, weight or bias is made contiguous first: ``CloneBackward0``).
* ``embedding``: ``EmbeddingBackward0`` (one edge, ``weight``); a negative ``padding_idx``
  counts from the end, as F.embedding turns it.
* ``dropout``: eval mode or ``p = 0`` returns the input itself (no node); ``p = 1`` multiplies
  by a 0-d zero tensor; otherwise ``input * (mask / (1 - p))`` (``MulBackward0``, the scaled
  mask saved as ``other``), ``_dropout_impl``'s CPU path. The random keep-mask is what a
  prediction cannot know, so only a ``Dropout`` module, whose file gives ``mask:``, keeps
  elements at random; ``F.dropout`` in training mode with ``0 < p < 1`` is refused.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.engine.bindings.signature import after_packs
from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.graph import Tensor
from adjoint.values.strides import is_contiguous
from adjoint.engine.ops.embedding import EmbeddingSpec
from adjoint.engine.ops.norm import BatchNormSpec, GroupNormSpec, LayerNormSpec, _channel_shape, _mean_over
from adjoint.engine.bindings.signature import Function, Param
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
    if len(x.shape) < 2:
        raise ProblemError(loc, f"batch_norm needs an input of at least 2 dimensions (N, C, ...), got "
                                f"{list(x.shape)} (PyTorch raises ValueError)")
    if training:
        verify_batch_size(x.shape, loc)
    out = rt.apply("native_batch_norm", [x, weight, bias, running_mean, running_var],
                   BatchNormSpec(training, Fraction(eps)), loc)[0]
    if training and running_mean is not None and running_var is not None:
        update_running_stats(rt, x, running_mean, running_var, Fraction(momentum if momentum is not None else 0))
    return out


def update_running_stats(rt, x: Tensor, running_mean: Tensor, running_var: Tensor, momentum: Fraction) -> None:
    """batch_norm_cpu_update_stats_template: written by the kernel, so no version bump."""
    B = rt.B
    cs = _channel_shape(x.shape)
    c = x.shape[1]
    mean = _mean_over(B, x.value, cs)
    centered = B.sub(x.value, mean)
    n = B.numel(x.value) // c
    unbiased = B.div(B.sum_to(B.mul(centered, centered), cs), B.scalar(n - 1))
    m, keep = B.scalar(momentum), B.scalar(1 - momentum)
    running_mean.value = B.add(B.mul(keep, running_mean.value), B.mul(m, B.reshape(mean, (c,))))
    running_var.value = B.add(B.mul(keep, running_var.value), B.mul(m, B.reshape(unbiased, (c,))))
    alias_saved(rt, (running_mean, running_var))


def alias_saved(rt, tensors) -> None:
    """A node that saved these tensors (an eval-mode batch norm) holds their storage, not a copy,
    and the kernel's write moved no version counter: its backward reads the new values."""
    for node in rt.nodes:
        for sv in node.saved:
            if sv.hooks is None and any(sv.tensor is t for t in tensors):
                sv.value = sv.tensor.value


def lower_batch_norm(rt, a: dict, loc: Loc):
    return batch_norm(rt, a["input"], a["running_mean"], a["running_var"], a["weight"], a["bias"], a["training"],
                      a["momentum"], a["eps"], loc)


def layer_norm(rt, x: Tensor, normalized_shape, weight, bias, eps, loc: Loc):
    spec = LayerNormSpec(tuple(int(n) for n in normalized_shape), Fraction(eps))
    return rt.apply("native_layer_norm", [x, weight, bias], spec, loc)[0]


def lower_layer_norm(rt, a: dict, loc: Loc):
    return layer_norm(rt, a["input"], a["normalized_shape"], a["weight"], a["bias"], a["eps"], loc)


def group_norm(rt, x: Tensor, num_groups: int, weight, bias, eps, loc: Loc):
    if len(x.shape) < 2:
        raise ProblemError(loc, f"Expected at least 2 dimensions for input tensor but received {len(x.shape)} "
                                "(PyTorch raises RuntimeError)")
    if num_groups < 1 or x.shape[1] % num_groups:
        raise ProblemError(loc, f"Expected number of channels in input to be divisible by num_groups, but got input "
                                f"of shape {list(x.shape)} and num_groups={num_groups} (PyTorch raises RuntimeError)")
    verify_batch_size([x.shape[0] * x.shape[1] // num_groups, num_groups] + list(x.shape[2:]), loc)
    # at::group_norm (above autograd) makes input, weight and bias contiguous, in that order
    x, weight, bias = (t if t is None or is_contiguous(t.shape, t.strides) else rt.apply("clone", [t], None, loc)
                       for t in (x, weight, bias))
    return rt.apply("native_group_norm", [x, weight, bias], GroupNormSpec(num_groups, Fraction(eps)), loc)[0]


def lower_group_norm(rt, a: dict, loc: Loc):
    return group_norm(rt, a["input"], a["num_groups"], a["weight"], a["bias"], a["eps"], loc)


# ----------------------------------------------------------------------------- embedding

def embedding(rt, indices: Tensor, weight: Tensor, padding_idx, max_norm, scale_grad_by_freq: bool, sparse: bool,
              loc: Loc):
    n = weight.shape[0] if weight.shape else 0
    if padding_idx is not None:
        if not -n <= padding_idx < n:
            raise TorchError("AssertionError", "Padding_idx must be within num_embeddings")   # F.embedding's assert
        padding_idx = padding_idx + n if padding_idx < 0 else padding_idx
    if max_norm is not None:
        raise ProblemError(loc, "embedding with max_norm renormalizes weight rows in place, which adjoint does not "
                                "model yet; drop max_norm")
    if sparse:
        raise ProblemError(loc, "embedding with sparse=True makes a sparse gradient, which adjoint does not model; "
                                "use sparse=False")
    if indices.dtype != "int64":
        raise ProblemError(loc, "Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                                f"Long, Int; but got {indices.dtype} instead (PyTorch raises this); declare the "
                                "indices with dtype: int64")
    if len(weight.shape) == 2:   # (another rank: the kernel's "'weight' must be 2-D" first, from the op's shape rule)
        def checks():
            """index_select in the kernel, after EmbeddingBackward0 packed the indices."""
            if any(not 0 <= int(i) < n for i in rt.B.as_indices(indices.value).reshape(-1)):
                raise TorchError("IndexError", "index out of range in self")
        after_packs(rt, "embedding", [weight, indices], loc, checks)
    spec = EmbeddingSpec(-1 if padding_idx is None else padding_idx, scale_grad_by_freq)
    return rt.apply("embedding", [weight, indices], spec, loc)


def lower_embedding(rt, a: dict, loc: Loc):
    return embedding(rt, a["input"], a["weight"], a["padding_idx"], a["max_norm"], a["scale_grad_by_freq"],
                     a["sparse"], loc)


# ----------------------------------------------------------------------------- dropout

def dropout(rt, x: Tensor, p: Fraction, training: bool, inplace: bool, mask, loc: Loc):
    """_dropout_impl on the CPU; ``mask`` the keep-mask's exact value (a Dropout module's), or None."""
    from adjoint.engine.inplace import apply_inplace
    if not 0 <= p <= 1:
        raise ProblemError(loc, f"dropout probability has to be between 0 and 1, but got {float(p)}: PyTorch raises "
                                "ValueError")
    if not training or p == 0 or _prod(x.shape) == 0:
        return x
    B = rt.B
    if p == 1:
        other = rt.tensor(B.zeros(()), dtype=x.dtype)
    else:
        if mask is None:
            raise ProblemError(loc, "dropout in training mode keeps elements at random, which no prediction can know; "
                                    "use a Dropout module with mask: [...] (1 keeps, 0 drops), or training=False")
        if tuple(B.shape(mask)) != tuple(x.shape):
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
