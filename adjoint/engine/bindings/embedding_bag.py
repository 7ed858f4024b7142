"""``F.embedding_bag`` (and ``nn.EmbeddingBag``'s forward), as PyTorch 2.13 runs it on the CPU
(torch/nn/functional.py, then ATen's at::embedding_bag and _embedding_bag; checked in real torch):

* Python's checks first, in F.embedding_bag's order (ValueError, NotImplementedError): the
  per-sample weights' shape against the input's, the weight's rank, the input's rank against
  ``offsets``, the mode (max with ``scale_grad_by_freq``), then ``max_norm``'s in-place renorm
  (adjoint.engine.bindings.embedding_renorm), then per-sample weights with a mode other than sum;
* a 2-D input is ``B`` bags of its row length: ``offsets = arange(0, numel, row length)`` and the
  input and the per-sample weights reshaped to 1-D (``ViewBackward0`` for weights that require grad);
* at::embedding_bag's ``padding_idx`` range check (a negative one counts from the end), then the
  node (adjoint.engine.ops.embedding_bag) and its kernel's checks, after the node packed its inputs:
  the index dtypes, ``offsets[0] == 0``, ``offsets[-1]`` within the input, include_last_offset's one
  offset, an index out of range (the slow path's words: float64, max mode, a padding_idx).

Refused: ``sparse=True`` (a sparse gradient), int32 indices, no offsets at all (PyTorch's float64
kernel crashes), decreasing offsets, include_last_offset with a last offset short of the input's
end (PyTorch's float32 fast path and its other paths then disagree on the last bag), and an index
out of range on the float32 fast path (sum or mean without padding_idx), whose fbgemm message names
positions by how the bags were split among threads.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from adjoint.engine.bindings.core import aten_reshape
from adjoint.engine.bindings.embedding_renorm import embedding_renorm
from adjoint.engine.bindings.signature import Function, Param, after_packs
from adjoint.engine.graph import Tensor
from adjoint.engine.ops.embedding_bag import MODES, BagSpec
from adjoint.engine.torch_errors import TorchError
from adjoint.format.errors import Loc, ProblemError
from adjoint.values.strides import contiguous_strides


def _size(shape) -> str:
    return f"torch.Size({list(shape)})"


def _python_checks(x: Tensor, weight: Tensor, offsets, psw, mode, scale_grad_by_freq: bool, sparse: bool) -> None:
    if psw is not None and tuple(x.shape) != tuple(psw.shape):
        raise TorchError("ValueError", f"embedding_bag: If per_sample_weights ({_size(psw.shape)}) is not None, then "
                                       f"it must have the same shape as the input ({_size(x.shape)})")
    if len(weight.shape) != 2:
        raise TorchError("ValueError", f"weight has to be a 2D Tensor, but got Tensor of dimension {len(weight.shape)}")
    if len(x.shape) == 2:
        if offsets is not None:
            raise TorchError("ValueError", "if input is 2D, then offsets has to be None, as input is treated is a "
                                           "mini-batch of fixed length sequences. However, found offsets of type "
                                           "<class 'torch.Tensor'>")
    elif len(x.shape) == 1:
        if offsets is None:
            raise TorchError("ValueError", "offsets has to be a 1D Tensor but got None")
        if len(offsets.shape) != 1:
            raise TorchError("ValueError", "offsets has to be a 1D Tensor")
    else:
        raise TorchError("ValueError", f"input has to be 1D or 2D Tensor, but got Tensor of dimension {len(x.shape)}")
    if mode == "max":
        if scale_grad_by_freq:
            raise TorchError("ValueError", "max mode does not support scaling the gradient by the frequency")
        if sparse:
            raise TorchError("ValueError", "max mode does not support sparse weights")
    elif mode not in MODES:
        raise TorchError("ValueError", "mode has to be one of sum, mean or max")


def embedding_bag(rt, x: Tensor, weight: Tensor, offsets, max_norm, norm_type, scale_grad_by_freq: bool, mode,
                  sparse: bool, psw, include_last_offset: bool, padding_idx, loc: Loc) -> Tensor:
    if x.dtype != "int64" or (offsets is not None and offsets.dtype != "int64"):
        raise ProblemError(loc, f"embedding_bag of {x.dtype} indices or offsets is not modelled here; declare them "
                                "with dtype: int64")
    _python_checks(x, weight, offsets, psw, mode, scale_grad_by_freq, sparse)
    if len(x.shape) == 2:
        rows, length = x.shape
        if length == 0:
            raise ProblemError(loc, "embedding_bag of a 2-D input with rows of length 0 is not modelled (PyTorch's "
                                    "arange step of 0); give rows of at least one index")
        offsets = rt.tensor(rt.B.integers(list(range(0, rows * length, length)), (rows,)), dtype="int64")
        include_last_offset = False
        x = aten_reshape(rt, x, (rows * length,), loc)
        if psw is not None:
            psw = aten_reshape(rt, psw, (rows * length,), loc)
    if max_norm is not None:
        embedding_renorm(rt, x, weight, max_norm, norm_type, loc)
    if psw is not None and mode != "sum":
        raise TorchError("NotImplementedError", "embedding_bag: per_sample_weights was not None. per_sample_weights "
                                                f"is only supported for mode='sum' (got mode='{mode}'). Please open a "
                                                "feature request on GitHub.")
    if sparse:
        raise ProblemError(loc, "embedding_bag with sparse=True makes a sparse gradient, which adjoint does not model; "
                                "use sparse=False")
    if mode == "max" and rt.B.is_symbolic(weight.value):
        raise ProblemError(loc, "embedding_bag in max mode over a weight with free symbols is not modelled (which row "
                                "is largest depends on their values); give numbers, or solve with --numeric")
    n = weight.shape[0]
    if padding_idx is not None:
        if not -n <= padding_idx < n:
            raise TorchError("RuntimeError", f"padding_idx must be within the number of embeddings, -{n} through "
                                             f"{n - 1}, but got {padding_idx}")
        padding_idx = padding_idx + n if padding_idx < 0 else padding_idx
    pad = -1 if padding_idx is None else padding_idx
    idx = rt.B.as_indices(x.value).reshape(-1)
    offs = rt.B.as_indices(offsets.value).reshape(-1)
    _refusals(idx, offs, include_last_offset, loc)
    fast = weight.dtype == "float32" and pad < 0 and (weight.strides or contiguous_strides(weight.shape))[1] == 1 \
        and (psw is None or (psw.strides or contiguous_strides(psw.shape))[0] == 1)
    spec = BagSpec(MODES.index(mode), pad, scale_grad_by_freq, include_last_offset, fast)
    ins = [weight, psw, x, offsets]
    needs_node = weight.requires_grad or (psw is not None and psw.requires_grad)

    def checks():
        """_embedding_bag's kernel, after the node packed its inputs."""
        if offs.size and offs[0] != 0:
            raise TorchError("RuntimeError", "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has "
                                             f"to start from position 0. However, got {offs[0]}\n[ torch.LongTensor{{}} ]")
        if offs.size and offs[-1] > idx.size:
            raise TorchError("RuntimeError", f"offsets[-1] can not be greater than input's length {idx.size} but got "
                                             f"offsets[-1] of {offs[-1]}")
        if include_last_offset and not offs.size:
            raise TorchError("RuntimeError", "include_last_offset: number of offset should be at least 1")
        bad = np.nonzero((idx < 0) | (idx >= n))[0]
        if bad.size:
            if fast and mode != "max":
                raise ProblemError(loc, f"embedding_bag: index {idx[bad[0]]} is out of range for {n} embeddings; "
                                        "PyTorch's float32 fast path (sum or mean, no padding_idx) words this error "
                                        "by how it split the bags among threads, which no prediction can know; give "
                                        "indices in range, or dtype: float64")
            raise TorchError("RuntimeError", "embedding_bag: Expected idx >= 0 && idx < num_embeddings but found idx "
                                             f"to be {idx[bad[0]]}")
    if needs_node:
        after_packs(rt, "embedding_bag", ins, loc, checks)
    else:
        checks()
    return rt.apply("embedding_bag", ins, spec, loc)[0]


def _refusals(idx: np.ndarray, offs: np.ndarray, include_last_offset: bool, loc: Loc) -> None:
    if not offs.size and not include_last_offset:   # (with include_last_offset: the kernel's error)
        raise ProblemError(loc, "embedding_bag with no offsets (no bags) is not modelled (PyTorch's float64 kernel "
                                "crashes on it); give at least one offset")
    if np.any(np.diff(offs) < 0):
        raise ProblemError(loc, f"embedding_bag with decreasing offsets {offs.tolist()} is not modelled; give "
                                "non-decreasing offsets")
    if include_last_offset and offs[-1] != idx.size and 0 <= offs[-1] <= idx.size and offs[0] == 0:
        raise ProblemError(loc, f"embedding_bag with include_last_offset=True and a last offset ({offs[-1]}) short of "
                                f"the input's length ({idx.size}) is not modelled: PyTorch's float32 fast path ends "
                                "the last bag there, its other paths at the input's end; end offsets with the "
                                "input's length")


def lower_embedding_bag(rt, a, loc: Loc):
    if getattr(a, "prefix", "") == "torch.":
        raise ProblemError(loc, "torch.embedding_bag is ATen's own binding (weight first, four results), not "
                                "F.embedding_bag; it is not modelled: call F.embedding_bag(input, weight, offsets, ...)")
    return embedding_bag(rt, a["input"], a["weight"], a["offsets"], a["max_norm"], a["norm_type"],
                         a["scale_grad_by_freq"], a["mode"], a["sparse"], a["per_sample_weights"],
                         a["include_last_offset"], a["padding_idx"], loc)


FUNCTIONS = (
    Function("embedding_bag", (Param("input", "tensor"), Param("weight", "tensor"),
                               Param("offsets", "tensor", None), Param("max_norm", "number", None),
                               Param("norm_type", "number", Fraction(2)), Param("scale_grad_by_freq", "bool", False),
                               Param("mode", "str", "mean"), Param("sparse", "bool", False),
                               Param("per_sample_weights", "tensor", None),
                               Param("include_last_offset", "bool", False), Param("padding_idx", "int", None)),
             lower_embedding_bag, where="function",
             doc="EmbeddingBagBackward0 (edges: weight, per_sample_weights); a 2-D input's per-sample weights "
                 "ViewBackward0 first"),
)
