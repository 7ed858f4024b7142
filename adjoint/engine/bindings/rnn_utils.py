"""The list-of-sequences helpers of ``torch.nn.utils.rnn`` (the ``nn.utils.rnn.`` prefix), as
PyTorch 2.13 runs them on the CPU (torch/nn/utils/rnn.py, then ATen's ``pad_sequence`` in
``aten/src/ATen/native/PackedSequence.cpp``, a composite; nodes and sequence numbers probed in
torch):

* ``pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side='right')``: a tensor
  handed as ``sequences`` is iterated (``unbind(0)``: ``UnbindBackward0``); ATen checks the list is
  not empty, then the side; ``at::full`` of the padding in the first sequence's dtype (no node);
  per sequence, in list order, a view of the output's block and ``copy_`` of the sequence into it:
  ``out.select(0, i).narrow(0, start, length)`` (``batch_first``) or ``out.narrow(0, start,
  length).select(1, i)``, ``start`` = 0 on the right, ``max_len - length`` on the left; the
  output's history is one ``CopySlices`` per copy once a sequence requires grad (the views'
  nodes ``SelectBackward0`` / ``SliceBackward0`` once the output does);
* ``pack_sequence(sequences, enforce_sorted=True)``: the lengths, ``pad_sequence(sequences)``,
  then ``pack_padded_sequence(padded, lengths, enforce_sorted=...)``;
* ``unpad_sequence(padded_sequences, lengths, batch_first=False)``: not ``batch_first``: the
  padded tensor transposed in place (``transpose_``: the caller's tensor changes, a
  ``TransposeBackward1`` when it requires grad); then per
  sequence (iterating the tensor: ``unbind(0)``) its rows ``seq[arange(T) < length]`` (a boolean
  mask: ``IndexBackward0``); a list of tensors;
* ``unpack_sequence(packed)``: ``pad_packed_sequence(packed, batch_first=True)``, then
  ``unpad_sequence(padded, lengths, batch_first=True)``.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.engine.bindings.signature import Function, Param
from adjoint.engine.graph import Tensor
from adjoint.engine.torch_errors import TorchError
from adjoint.format.errors import Loc, ProblemError


def _sequences(rt, value, loc: Loc, what: str) -> list:
    """``tuple(sequences)`` as the Python wrapper takes it: a list or tuple of tensors, or a
    tensor iterated (``unbind(0)``)."""
    from adjoint.engine.bindings import call_function
    if isinstance(value, Tensor):
        if not value.shape:
            raise TorchError("TypeError", "iteration over a 0-d tensor")
        return list(call_function(rt, "unbind", [value, Fraction(0)], {}, loc))
    if isinstance(value, (tuple, list)) and all(isinstance(t, Tensor) for t in value):
        return list(value)
    raise ProblemError(loc, f"{what}(sequences): give a list or tuple of tensors, or a tensor")


def pad_sequences(rt, seqs: list, batch_first: bool, pad, side: str, loc: Loc) -> Tensor:
    """``at::pad_sequence`` over the tensors ``seqs``."""
    from adjoint.engine.bindings.packed import aten_full
    from adjoint.engine.inplace import call_inplace
    if not seqs:
        raise TorchError("RuntimeError", "received an empty list of sequences")
    if side not in ("left", "right"):
        raise TorchError("RuntimeError", f"Expected padding_side to be one of left or right, but got {side}.")
    if any(not t.shape for t in seqs):
        raise ProblemError(loc, "pad_sequence of a 0-d sequence is not modelled (PyTorch reads its size(0)); give "
                                "sequences of at least 1 dim")
    first = seqs[0]
    max_len = max(t.shape[0] for t in seqs)
    dims = ((len(seqs), max_len) if batch_first else (max_len, len(seqs))) + tuple(first.shape[1:])
    out = aten_full(rt, dims, pad, first.dtype, loc, "pad_sequence()")
    for i, seq in enumerate(seqs):
        length = seq.shape[0]
        start = max_len - length if side == "left" else 0
        if batch_first:
            block = rt.apply("slice", [rt.apply("select", [out], (0, i), loc)], (0, start, start + length, 1), loc)
        else:
            block = rt.apply("select", [rt.apply("slice", [out], (0, start, start + length, 1), loc)], (1, i), loc)
        call_inplace(rt, "copy_", block, [seq], {}, loc)
    return out


def _number(value, loc: Loc, what: str):
    if isinstance(value, bool) or not isinstance(value, Fraction):
        raise ProblemError(loc, f"{what}(padding_value=...): give a number")
    return value


def lower_pad_sequence(rt, a, loc: Loc):
    seqs = _sequences(rt, a["sequences"], loc, "pad_sequence")
    side = a["padding_side"]
    if not isinstance(side, str):
        raise ProblemError(loc, "pad_sequence(padding_side=...): give 'left' or 'right'")
    return pad_sequences(rt, seqs, bool(a["batch_first"]), _number(a["padding_value"], loc, "pad_sequence"),
                         side, loc)


def lower_pack_sequence(rt, a, loc: Loc):
    from adjoint.engine.bindings.packed import _int64, lower_pack
    value = a["sequences"]
    seqs = _sequences(rt, value, loc, "pack_sequence")   # [v.size(0) for v in sequences]
    if any(not t.shape for t in seqs):
        raise ProblemError(loc, "pack_sequence of a 0-d sequence is not modelled (PyTorch reads its size(0)); give "
                                "sequences of at least 1 dim")
    lengths = _int64(rt, [t.shape[0] for t in seqs])
    if isinstance(value, Tensor):   # pad_sequence iterates the tensor again
        seqs = _sequences(rt, value, loc, "pack_sequence")
    padded = pad_sequences(rt, seqs, False, Fraction(0), "right", loc)
    return lower_pack(rt, {"input": padded, "lengths": lengths, "batch_first": False,
                           "enforce_sorted": a["enforce_sorted"]}, loc)


def unpad(rt, padded, lengths, batch_first: bool, loc: Loc):
    """``unpad_sequence``: per sequence its rows ``seq[arange(T) < length]``; a list."""
    from adjoint.engine.bindings import call_function
    from adjoint.engine.bindings.packed import _ints
    from adjoint.engine.bindings.views import getitem
    from adjoint.engine.pylist import PyList, sequence_name
    from adjoint.format.problem import Literal
    if not isinstance(padded, Tensor):
        raise ProblemError(loc, "unpad_sequence(padded_sequences, lengths): give the padded sequences as a tensor")
    if not batch_first:
        from adjoint.engine.bindings.transpose_inplace import transpose_in_place
        transpose_in_place(rt, padded, "transpose_", (0, 1), loc,
                           "unpad_sequence(batch_first=False) of a view, or of a tensor with views, is not modelled "
                           "(PyTorch's transpose_ changes that tensor's sizes alone); give a tensor of its own "
                           "(x.clone()), or a (B, T, *) one and batch_first=True")
    if len(padded.shape) < 2:   # max_length = padded_sequences.shape[1]
        raise TorchError("IndexError", "tuple index out of range")
    if not isinstance(lengths, Tensor):   # arange(max_length, device=lengths.device)
        if isinstance(lengths, tuple):
            raise TorchError("AttributeError", f"'{sequence_name(lengths)}' object has no attribute 'device'")
        raise ProblemError(loc, "unpad_sequence(padded_sequences, lengths): give lengths as an int64 tensor")
    if lengths.dtype != "int64":
        raise ProblemError(loc, f"unpad_sequence with {lengths.dtype} lengths is not modelled; give an int64 tensor")
    if not lengths.shape:
        raise TorchError("TypeError", "iteration over a 0-d tensor")
    steps = padded.shape[1]
    seqs = call_function(rt, "unbind", [padded, Fraction(0)], {}, loc)   # zip(padded_sequences, lengths)
    out = []
    for seq, n in zip(seqs, _ints(rt, lengths)):
        mask = rt.tensor(rt.B.literal(Literal((steps,), tuple(Fraction(int(i < n)) for i in range(steps)), None)),
                         dtype="bool")
        out.append(getitem(rt, seq, [mask], loc, lone=True))
    if len(seqs) != lengths.shape[0]:
        word = "longer" if lengths.shape[0] > len(seqs) else "shorter"
        raise TorchError("ValueError", f"zip() argument 2 is {word} than argument 1")
    return PyList(out)


def lower_unpad_sequence(rt, a, loc: Loc):
    return unpad(rt, a["padded_sequences"], a["lengths"], bool(a["batch_first"]), loc)


def lower_unpack_sequence(rt, a, loc: Loc):
    from adjoint.engine.bindings.packed import lower_pad
    padded, lengths = lower_pad(rt, {"sequence": a["packed_sequences"], "batch_first": True,
                                     "padding_value": Fraction(0), "total_length": None}, loc)
    return unpad(rt, padded, lengths, True, loc)


FUNCTIONS = (
    Function("pad_sequence", (Param("sequences", "any"), Param("batch_first", "bool", False),
                              Param("padding_value", "any", Fraction(0)), Param("padding_side", "any", "right")),
             lower_pad_sequence, where="function",
             doc="(nn.utils.rnn.) a full of the padding (no node); per sequence SelectBackward0 and SliceBackward0 "
                 "of the output's block (once the output requires grad) and CopySlices (copy_); a tensor "
                 "argument: UnbindBackward0 first"),
    Function("pack_sequence", (Param("sequences", "any"), Param("enforce_sorted", "bool", True)),
             lower_pack_sequence, where="function",
             doc="(nn.utils.rnn.) pad_sequence(sequences), then pack_padded_sequence(padded, lengths, "
                 "enforce_sorted=...)"),
    Function("unpad_sequence", (Param("padded_sequences", "any"), Param("lengths", "any"),
                                Param("batch_first", "bool", False)),
             lower_unpad_sequence, where="function",
             doc="(nn.utils.rnn.) UnbindBackward0, then per sequence IndexBackward0 (a boolean mask of its "
                 "steps); a list"),
    Function("unpack_sequence", (Param("packed_sequences", "any"),), lower_unpack_sequence, where="function",
             doc="(nn.utils.rnn.) pad_packed_sequence(batch_first=True), then unpad_sequence(batch_first=True)"),
)

__all__ = ["FUNCTIONS", "pad_sequences"]
