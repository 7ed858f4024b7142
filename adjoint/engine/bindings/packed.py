"""``torch.nn.utils.rnn.pack_padded_sequence`` and ``pad_packed_sequence`` (the ``nn.utils.rnn.``
prefix), as PyTorch 2.13 runs them on the CPU (torch/nn/utils/rnn.py, then ATen's
``aten/src/ATen/native/PackedSequence.cpp``; node order and sequence numbers probed in torch):

* ``pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True)``: the lengths
  as an int64 tensor; ``enforce_sorted=False``: ``torch.sort(lengths, descending=True)`` (no
  node) and ``input.index_select(batch_dim, sorted_indices)`` (``IndexSelectBackward0``); then
  ``_pack_padded_sequence`` (``PackPaddedSequenceBackward0``, its checks in ATen's order) and the
  ``PackedSequence`` (data, batch_sizes, sorted_indices, unsorted_indices: the inverse
  permutation, no node);
* ``pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None)``:
  ``total_length``'s ValueError, then ``_pad_packed_sequence``: ``at::full`` of the padding (no
  node), and for each run of equal batch sizes ``data.slice`` (``SliceBackward0``), the output's
  block ``output.slice(0, ...).slice(1, ...)`` (views: nodes once the output requires grad)
  ``.copy_(tmp.view(...))`` (``ViewBackward0``, then ``CopySlices``); ``batch_first``:
  ``transpose(0, 1)``; a sorted pack's output ``index_select(batch_dim, unsorted_indices)``
  and its lengths ``lengths[unsorted_indices]`` (int64, no node). Returns (padded, lengths).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from adjoint.engine.bindings.signature import Function, Param
from adjoint.engine.graph import Tensor
from adjoint.engine.ops.recurrent import PackSpec
from adjoint.engine.return_types import PackedSequence
from adjoint.engine.torch_errors import TorchError
from adjoint.format.errors import Loc, ProblemError
from adjoint.format.problem import Literal

_LENGTHS_ERROR = "'lengths' argument should be a 1D CPU int64 tensor, but got {}D cpu Long tensor"


def _int64(rt, items: list[int]) -> Tensor:
    """A new 1-D int64 tensor (no node), as ``torch.as_tensor`` or an index computation makes it."""
    return rt.tensor(rt.B.literal(Literal((len(items),), tuple(Fraction(i) for i in items), None)), dtype="int64")


def _ints(rt, t: Tensor) -> list[int]:
    return [int(i) for i in np.asarray(rt.B.as_indices(t.value)).reshape(-1)]


def _lengths(rt, value, loc: Loc) -> tuple[list[int], int]:
    """``lengths`` as ``torch.as_tensor(lengths, dtype=torch.int64)`` (a list of ints) or an int64
    tensor reads: its ints and its number of dims."""
    if isinstance(value, Tensor):
        if value.dtype != "int64":
            raise ProblemError(loc, f"pack_padded_sequence(lengths=...) of a {value.dtype} tensor is not modelled "
                                    "(PyTorch converts it with .to(torch.int64)); give an int64 tensor or a list")
        return _ints(rt, value), len(value.shape)
    if isinstance(value, (tuple, list)) and all(isinstance(i, Fraction) and not isinstance(i, bool)
                                                and i.denominator == 1 for i in value):
        return [int(i) for i in value], 1
    raise ProblemError(loc, "pack_padded_sequence(input, lengths): give lengths as a list of ints or an int64 "
                            "tensor")


def aten_full(rt, shape: tuple, value, dtype: str, loc: Loc, what: str) -> Tensor:
    """``at::full`` called inside an ATen composite (``_pad_packed_sequence``, ``pad_sequence``): no
    node, and ``empty(...).fill_(value)`` passes ADInplaceOrView, so the new tensor's ``_version``
    is 1 (``torch.full`` from Python runs below it: 0; both probed in torch 2.13)."""
    from adjoint.engine.bindings.glue import constant
    out = constant(rt, shape, value, dtype, loc, f"{what} with the padding value", " (PyTorch would round it)")
    out.version.value += 1
    return out


def _batch_sizes(lengths: list[int]) -> list[int]:
    return [sum(1 for n in lengths if n > t) for t in range(max(lengths))]


def lower_pack(rt, a, loc: Loc):
    from adjoint.engine.bindings import call_function
    x, batch_first, enforce = a["input"], bool(a["batch_first"]), bool(a["enforce_sorted"])
    lengths, ndim = _lengths(rt, a["lengths"], loc)
    if len(x.shape) < 2:
        raise ProblemError(loc, "pack_padded_sequence of an input of fewer than 2 dims is not modelled; give "
                                "(T, B, *) or, batch_first, (B, T, *)")
    sorted_indices = None
    if not enforce and ndim != 1:
        raise ProblemError(loc, "pack_padded_sequence(enforce_sorted=False) with lengths of other than 1 dim is not "
                                "modelled (torch.sort sorts its rows, index_select refuses the index)")
    if not enforce:   # torch.sort(lengths, descending=True): no node (int64)
        if len(lengths) > 16 and len(set(lengths)) < len(lengths):
            raise ProblemError(loc, "pack_padded_sequence(enforce_sorted=False) of more than 16 sequences with equal "
                                    "lengths: torch.sort's CPU kernel (std::sort) orders the ties in no documented "
                                    "way, which adjoint does not model")
        # up to 16 elements std::sort's insertion sort keeps ties in index order: a stable sort
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        sorted_indices = _int64(rt, order)
        lengths = [lengths[i] for i in order]
        x = call_function(rt, "index_select", [x, Fraction(0 if batch_first else 1), sorted_indices], {}, loc)
    # _pack_padded_sequence's checks, in ATen's order
    if not all(x.shape):
        raise TorchError("RuntimeError", "Cannot pack empty tensors.")
    if ndim != 1:
        raise TorchError("RuntimeError", _LENGTHS_ERROR.format(ndim))
    batch, steps = (x.shape[0], x.shape[1]) if batch_first else (x.shape[1], x.shape[0])
    if len(lengths) != batch:
        raise TorchError("RuntimeError", f"Expected `len(lengths)` to be equal to batch_size, but got {len(lengths)} "
                                         f"(batch_size={batch})")
    if lengths[-1] <= 0:
        raise TorchError("RuntimeError", "Length of all samples has to be greater than 0, but found an element in "
                                         "'lengths' that is <= 0")
    if any(lengths[i + 1] > lengths[i] for i in range(batch - 1)):
        raise TorchError("RuntimeError", "`lengths` array must be sorted in decreasing order when `enforce_sorted` "
                                         "is True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
                                         "pack_sequence to sidestep this requirement if you do not need ONNX "
                                         "exportability.")
    if lengths[0] > steps:
        raise ProblemError(loc, f"pack_padded_sequence with a length {lengths[0]} beyond the input's {steps} time "
                                "steps: PyTorch reads past the tensor's end, which adjoint does not model")
    sizes = _batch_sizes(lengths)
    batch_sizes = _int64(rt, sizes)
    data = rt.apply("pack_padded_sequence", [x, batch_sizes], PackSpec(batch_first, tuple(sizes)), loc)
    unsorted = None
    if sorted_indices is not None:   # invert_permutation: empty_like(...).scatter_(0, perm, arange(n)), no node
        perm = _ints(rt, sorted_indices)
        inverse = [0] * len(perm)
        for i, j in enumerate(perm):
            inverse[j] = i
        unsorted = _int64(rt, inverse)
    return PackedSequence(data, batch_sizes, sorted_indices, unsorted)


def lower_pad(rt, a, loc: Loc):
    from adjoint.engine.bindings import call_function
    from adjoint.engine.inplace import call_inplace
    seq = a["sequence"]
    if not isinstance(seq, PackedSequence):
        raise ProblemError(loc, "pad_packed_sequence(sequence): give the PackedSequence that pack_padded_sequence "
                                "or an RNN module returned")
    data, batch_sizes, _, unsorted = seq
    sizes = _ints(rt, batch_sizes)
    length = len(sizes)
    total = a["total_length"]
    if total is not None:
        if isinstance(total, bool) or not isinstance(total, Fraction) or total.denominator != 1:
            raise ProblemError(loc, "pad_packed_sequence(total_length=...): give an int")
        if total < length:
            raise TorchError("ValueError", "Expected total_length to be at least the length of the longest sequence "
                                           f"in input, but got total_length={int(total)} and max sequence length "
                                           f"being {length}")
        length = int(total)
    pad = a["padding_value"]
    if isinstance(pad, bool) or not isinstance(pad, Fraction):
        raise ProblemError(loc, "pad_packed_sequence(padding_value=...): give a number")
    rest = tuple(data.shape[1:])
    out = aten_full(rt, (length, sizes[0]) + rest, pad, data.dtype, loc, "pad_packed_sequence()")
    offset, prev_size, prev_i = 0, sizes[0], 0
    for i in range(len(sizes) + 1):
        size = sizes[i] if i < len(sizes) else 0
        if size != prev_size:
            n = prev_size * (i - prev_i)
            tmp = rt.apply("slice", [data], (0, offset, offset + n, 1), loc)
            block = rt.apply("slice", [rt.apply("slice", [out], (0, prev_i, i, 1), loc)], (1, 0, prev_size, 1), loc)
            view = call_function(rt, "view", [(Fraction(i - prev_i), Fraction(prev_size))
                                              + tuple(Fraction(d) for d in rest)], {}, loc, method_of=tmp)
            call_inplace(rt, "copy_", block, [view], {}, loc)
            offset += n
            prev_i = i
        prev_size = size
    lengths = [sum(1 for s in sizes if s > b) for b in range(sizes[0])]
    batch_first = bool(a["batch_first"])
    if batch_first:
        out = call_function(rt, "transpose", [out, Fraction(0), Fraction(1)], {}, loc)
    if unsorted is not None:
        perm = _ints(rt, unsorted)
        out = call_function(rt, "index_select", [out, Fraction(0 if batch_first else 1), unsorted], {}, loc)
        lengths = [lengths[j] for j in perm]
    return out, _int64(rt, lengths)


FUNCTIONS = (
    Function("pack_padded_sequence", (Param("input", "tensor"), Param("lengths", "any"),
                                      Param("batch_first", "bool", False), Param("enforce_sorted", "bool", True)),
             lower_pack, where="function",
             doc="(nn.utils.rnn.) enforce_sorted=False: IndexSelectBackward0 (the batch sorted by length); "
                 "PackPaddedSequenceBackward0; a PackedSequence"),
    Function("pad_packed_sequence", (Param("sequence", "any"), Param("batch_first", "bool", False),
                                     Param("padding_value", "any", Fraction(0)), Param("total_length", "any", None)),
             lower_pad, where="function",
             doc="(nn.utils.rnn.) per run of equal batch sizes SliceBackward0, ViewBackward0, CopySlices (into a "
                 "full of the padding); batch_first: TransposeBackward0; a sorted pack: IndexSelectBackward0"),
)

__all__ = ["FUNCTIONS"]
