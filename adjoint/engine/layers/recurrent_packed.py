"""``nn.RNN`` / ``nn.GRU`` / ``nn.LSTM`` handed a ``PackedSequence`` (``pack_padded_sequence``'s),
as PyTorch 2.13 runs it on the CPU (torch/nn/modules/rnn.py, then the packed overloads of
``_VF.rnn_tanh`` / ``rnn_relu`` / ``gru`` / ``lstm``: ATen's ``PackedLayer`` in
``aten/src/ATen/native/RNN.cpp``; nodes and sequence numbers probed in torch):

* the module: no state given: zeros of ``batch_sizes[0]`` sequences (no node); a given state
  ``index_select(1, sorted_indices)`` when the pack was sorted (``permute_hidden``: LSTM ``h``
  then ``c``); RNN and GRU then ``check_forward_args`` (the data 2-D, its last size, the state's
  shape: PyTorch's messages); an LSTM's packed path makes no such check (a mismatch is refused);
* ATen: the state ``unbind(0)`` (LSTM: ``h``, then ``c``); per layer the input projection of the
  whole packed data at once (``linear``: ``TBackward0``, ``AddmmBackward0``), then per time step
  its rows ``narrow(0, offset, batch_size)`` (``SliceBackward0``); where the batch shrinks, the
  finished sequences' state ``narrow``ed off and kept, then the state narrowed to the batch
  (LSTM: ``c`` before ``h``, ``std::make_tuple``'s arguments right to left); the cell of
  ``engine/layers/recurrent_layers.py`` with the step's projected rows; the step outputs
  ``cat``ed (``CatBackward0``), and the kept states, last step's first, ``cat``ed into the
  layer's final state (LSTM: ``c``'s first); the layers' final states ``stack``ed;
* the output: ``PackedSequence(output, batch_sizes, sorted_indices, unsorted_indices)`` and the
  final state ``index_select(1, unsorted_indices)`` when the pack was sorted (LSTM: ``h``, then ``c``).

A module hook sees the PackedSequence as one argument that is no tensor: a full backward hook
gets ``grad_input`` ``(None,)`` (``(None, grad of h_0)`` with a state given) and, for RNN and GRU,
``grad_output`` ``(None, grad of h_n)``
(an LSTM's output ``(packed, (h_n, c_n))`` holds no tensor at its top, so its full backward hook
never fires).

A bidirectional layer is ATen's ``PackedBidirectionalLayer``: the forward ``PackedLayer`` above,
then ``ReversedPackedLayer`` with the ``_reverse`` weights (its own input projection; the state
``narrow``ed to the sequences still running at the last step, even when that is all of them; the
steps from the last to the first, the state growing where the batch grows by ``cat`` with the
next rows of the initial state, an LSTM's ``c`` before ``h``; the step outputs ``cat``ed back in
time order; its final state the last cell's), then the two outputs ``cat``ed on the last dim.
The final states are per layer the forward direction's, then the reverse one's.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from adjoint.engine.graph import Tensor
from adjoint.engine.layers.recurrent import _args
from adjoint.engine.layers.recurrent_layers import _fn, _hidden_check, _linear, _stack, cell_and_hiddens, \
    check_dropout, layer_forward
from adjoint.engine.return_types import PackedSequence
from adjoint.engine.torch_errors import TorchError
from adjoint.format.errors import ProblemError


def _narrow(c, t: Tensor, start: int, end: int) -> Tensor:
    return c.rt.apply("slice", [t], (0, start, end, 1), c.loc)


def _hidden_slice(c, hidden, start: int, end: int, lstm: bool):
    if not lstm:
        return _narrow(c, hidden, start, end)
    cy = _narrow(c, hidden[1], start, end)   # std::make_tuple's arguments, right to left
    return _narrow(c, hidden[0], start, end), cy


def _packed_layer(c, cell, data: Tensor, sizes: list, hidden, layer: int, lstm: bool):
    """PackedLayer on the CPU: (the layer's packed output, its final state)."""
    sfx = f"_l{layer}"
    projected = _linear(c, data, "ih", sfx)
    outs, finished = [], []
    offset, last = 0, sizes[0]
    for size in sizes:
        step = _narrow(c, projected, offset, offset + size)
        offset += size
        if last > size:
            finished.append(_hidden_slice(c, hidden, size, last, lstm))
            hidden = _hidden_slice(c, hidden, 0, size, lstm)
        last = size
        hidden = cell(c, step, hidden, sfx)
        for t in hidden if lstm else (hidden,):
            t.step_state = True   # the derivation's states: one cell per step
        outs.append(hidden[0] if lstm else hidden)
    finished.append(hidden)
    finished.reverse()
    output = _fn(c, "cat", outs, Fraction(0))
    if lstm:
        c_n = _fn(c, "cat", [s for _, s in finished], Fraction(0))
        return output, (_fn(c, "cat", [h for h, _ in finished], Fraction(0)), c_n)
    return output, _fn(c, "cat", finished, Fraction(0))


def _reversed_packed_layer(c, cell, data: Tensor, sizes: list, hidden, layer: int, lstm: bool):
    """ReversedPackedLayer on the CPU: the steps from the last to the first, the state starting
    as the rows of the sequences still running at the last step and growing (``cat`` of the
    state with the next rows of the initial one) where the batch grows; (the layer's packed
    output, its final state)."""
    sfx = f"_l{layer}_reverse"
    projected = _linear(c, data, "ih", sfx)
    initial = hidden
    outs = []
    offset, last = data.shape[0], sizes[-1]
    hidden = _hidden_slice(c, initial, 0, last, lstm)
    for size in reversed(sizes):
        if size > last:
            more = _hidden_slice(c, initial, last, size, lstm)
            if lstm:   # std::make_tuple(cat of the hs, cat of the cs), right to left
                cy = _fn(c, "cat", [hidden[1], more[1]], Fraction(0))
                hidden = (_fn(c, "cat", [hidden[0], more[0]], Fraction(0)), cy)
            else:
                hidden = _fn(c, "cat", [hidden, more], Fraction(0))
        step = _narrow(c, projected, offset - size, offset)
        offset -= size
        last = size
        hidden = cell(c, step, hidden, sfx)
        for t in hidden if lstm else (hidden,):
            t.step_state = True
        outs.append(hidden[0] if lstm else hidden)
    outs.reverse()
    return _fn(c, "cat", outs, Fraction(0)), hidden


def _permute(c, t: Tensor, index) -> Tensor:
    return t if index is None else _fn(c, "index_select", t, Fraction(1), index)


def _states(c, kind: str, hx, sorted_indices, shapes: list) -> list:
    """The module's state: zeros, or the given one permuted (``permute_hidden``)."""
    lstm = kind == "LSTM"
    if hx is None:
        return [c.rt.tensor(c.rt.B.zeros(s), dtype=c.rt.dtype) for s in shapes]
    given = list(hx) if lstm and isinstance(hx, tuple) and len(hx) == 2 else [hx] if not lstm else None
    if given is None or not all(isinstance(t, Tensor) for t in given):
        raise ProblemError(c.loc, f"{kind} with a PackedSequence is handed a state that is not "
                                  f"{'a pair (h_0, c_0) of tensors' if lstm else 'a tensor'}, which is not modelled")
    return [_permute(c, t, sorted_indices) for t in given]


def packed_forward(c, kind: str, packed: PackedSequence, hx):
    lstm = kind == "LSTM"
    data, batch_sizes, sorted_indices, unsorted_indices = packed
    dirs = 2 if c.arg("bidirectional") else 1
    if data.dtype != c.rt.dtype:
        raise ProblemError(c.loc, f"{kind} needs a PackedSequence of the problem's dtype ({c.rt.dtype})")
    layers, hidden_size = c.arg("num_layers"), c.arg("hidden_size")
    check_dropout(c, kind, layers)
    sizes = [int(i) for i in np.asarray(c.rt.B.as_indices(batch_sizes.value)).reshape(-1)]
    expected = (layers * dirs, sizes[0], c.arg("proj_size", 0) or hidden_size)
    expected_c = (layers * dirs, sizes[0], hidden_size)
    states = _states(c, kind, hx, sorted_indices, [expected, expected_c] if lstm else [expected])
    if len(data.shape) != 2 or data.shape[-1] != c.arg("input_size") or \
            (lstm and (tuple(states[0].shape) != expected or tuple(states[1].shape) != expected_c)):
        if lstm:   # LSTM.forward checks nothing for a packed input: ATen fails somewhere inside
            raise ProblemError(c.loc, "an LSTM handed a PackedSequence whose data or state does not fit the module "
                                      "is not modelled (PyTorch's LSTM.forward makes no check there)")
        if len(data.shape) != 2:
            raise TorchError("RuntimeError", f"input must have 2 dimensions, got {len(data.shape)}")
        raise TorchError("RuntimeError", f"input.size(-1) must be equal to input_size. Expected "
                                         f"{c.arg('input_size')}, got {data.shape[-1]}")
    if not lstm:
        _hidden_check(c, states[0], expected, "Expected hidden size {}, got {}")
    cell, hiddens = cell_and_hiddens(c, kind, states, lstm)
    finals = []
    x = data
    for layer in range(layers):
        fw, last = _packed_layer(c, cell, x, sizes, hiddens[layer * dirs], layer, lstm)
        finals.append(last)
        if dirs == 2:   # PackedBidirectionalLayer: the reverse direction after, outputs cat'ed on the last dim
            rev, last = _reversed_packed_layer(c, cell, x, sizes, hiddens[layer * dirs + 1], layer, lstm)
            finals.append(last)
            fw = _fn(c, "cat", [fw, rev], Fraction(-1))
        x = fw
    if lstm:
        c_n = _stack(c, [s for _, s in finals])   # right to left, as the unpacked LSTM
        h_n = _stack(c, [h for h, _ in finals])
        hidden = (_permute(c, h_n, unsorted_indices), _permute(c, c_n, unsorted_indices))
    else:
        hidden = _permute(c, _stack(c, finals), unsorted_indices)
    return PackedSequence(x, batch_sizes, sorted_indices, unsorted_indices), hidden


def _module_forward(kind: str):
    def forward(c):
        x, hx = _args(c, kind)
        if isinstance(x, PackedSequence):
            return packed_forward(c, kind, x, hx)
        return layer_forward(c, kind, x, hx)
    return forward


#: the recurrent layer modules: a PackedSequence input here, a tensor one in recurrent_layers.py
FORWARDS = {kind: _module_forward(kind) for kind in ("RNN", "LSTM", "GRU")}
