"""``unsafe_split`` (``UnsafeSplitBackward0``): ``split`` whose pieces autograd does not track as
views, which the recurrent cells (``at::lstm_cell``, ``at::gru_cell``: ``gates.unsafe_chunk``)
write in place (``sigmoid_``, ``add_``) with no CopySlices. The same values and VJP as
``split`` (the pieces' gradients concatenated, undefined ones as zeros); the pieces are fresh
tensors here (contiguous copies), which they are not in memory, but nothing reads the split
input again in the cells."""

from __future__ import annotations

from dataclasses import replace

from adjoint.engine.ops.views import OPS as _VIEW_OPS

_SPLIT = next(op for op in _VIEW_OPS if op.name == "split")

OPS = (
    replace(_SPLIT, name="unsafe_split", node="UnsafeSplitBackward0", view=False, layout=None, scatter=None),
)

_TRANSPOSE = next(op for op in _VIEW_OPS if op.name == "transpose")

#: ``transpose_`` (``TransposeBackward1``): the in-place transpose ATen's ``rnn_tanh`` / ``rnn_relu`` /
#: ``gru`` apply to their fresh stacked output when ``batch_first`` (``std::get<0>(results).transpose_(0,
#: 1)``): not a view, the result's version is 1 and its strides are the stacked tensor's, permuted
#: (the layer sets them).
OPS = OPS + (
    replace(_TRANSPOSE, name="transpose_", node="TransposeBackward1", view=False, layout=None, scatter=None,
            result_version=1),
)
