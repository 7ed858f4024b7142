"""The recurrent cells ``RNNCell``, ``GRUCell``, ``LSTMCell``: each forward as PyTorch 2.13 runs
it on the CPU (``torch/nn/modules/rnn.py``, then ATen's ``aten/src/ATen/native/RNN.cpp`` cells,
which are compositions of ordinary ops: their nodes and sequence numbers were probed):

* the module: a 1-D input (and state) is unsqueezed to a batch of one and the result squeezed
  back; no state given: zeros (``torch.zeros``, no node);
* ``rnn_tanh_cell`` / ``rnn_relu_cell``: ``tanh(linear(hx, w_hh, b_hh) + linear(x, w_ih, b_ih))``
  (the hidden linear first);
* ``lstm_cell``: ``gates = linear(hx, w_hh, b_hh).add_(linear(x, w_ih, b_ih))``, ``unsafe_chunk(4,
  1)``, ``sigmoid_``, ``sigmoid_``, ``tanh_``, ``sigmoid_`` (in place on the pieces: input,
  forget, cell, output gates), ``cy = (forget * cx).add_(input * cell)``, ``hy = output *
  cy.tanh()``; returns ``(hy, cy)``;
* ``gru_cell``: ``linear(x, w_ih, b_ih).unsafe_chunk(3, 1)``, ``linear(hx, w_hh,
  b_hh).unsafe_chunk(3, 1)``, ``r = h[0].add_(i[0]).sigmoid_()``, ``z = h[1].add_(i[1]).sigmoid_()``,
  ``n = i[2].add(h[2].mul_(r)).tanh_()``, ``(hx - n).mul_(z).add_(n)``.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.errors import ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.return_types import PackedSequence
from adjoint.engine.torch_errors import TorchError
from adjoint.engine.bindings import call_function
from adjoint.engine.bindings.core import binary
from adjoint.engine.inplace import call_inplace
from adjoint.engine.layers.input_type import not_a_tensor_error
from adjoint.engine.pylist import sequence_name


def _linear(c, x, which: str):
    b = c.params.get(f"bias_{which}")
    return call_function(c.rt, "linear", [x, c.params[f"weight_{which}"], b], {}, c.loc)


def _inplace(c, name: str, t: Tensor, *args) -> Tensor:
    return call_inplace(c.rt, name, t, list(args), {}, c.loc)


def _chunks(c, t: Tensor, n: int):
    return c.rt.apply("unsafe_split", [t], (t.shape[1] // n, 1), c.loc)


def _args(c, kind: str):
    """(input, hx) as the module's forward takes them (positional or by keyword)."""
    names = ("input", "hx")
    if len(c.args) > 2:
        raise ProblemError(c.loc, f"{kind}.forward() takes at most 2 arguments (input, hx), got {len(c.args)}: "
                                  "Python raises TypeError")
    bound = dict(zip(names, c.args))
    for k, v in c.kwargs.items():
        if k not in names or k in bound:
            raise ProblemError(c.loc, f"{kind}.forward() got an unexpected or repeated argument '{k}': Python raises "
                                      "TypeError")
        bound[k] = v
    x = bound.get("input")
    if not isinstance(x, Tensor) and not (kind in ("RNN", "GRU", "LSTM") and isinstance(x, PackedSequence)):
        raise ProblemError(c.loc, f"{kind} needs a tensor input")
    return x, bound.get("hx")


def state_dim(c, kind: str, value) -> int:
    """``value.dim()`` as a recurrent module's forward reads a state it was handed: the tensor's
    rank, or Python's AttributeError for what is no tensor (a tuple, as a GRU handed an LSTM's
    ``(h, c)`` meets it: "'tuple' object has no attribute 'dim'"; a list, None). A number stays
    refused."""
    if isinstance(value, Tensor):
        return len(value.shape)
    known = not_a_tensor_error(kind, value)
    if known is None:
        raise ProblemError(c.loc, f"{kind} is handed a state that is neither a tensor, a tuple, a list nor None, "
                                  "which is not modelled; give it tensors")
    raise TorchError(*known)


def state_item(hx, i: int):
    """``hx[i]`` of a tuple or list of states, Python's IndexError past its end."""
    if i >= len(hx):
        raise TorchError("IndexError", f"{sequence_name(hx)} index out of range")
    return hx[i]


def _check_dims(c, kind: str, x: Tensor, states: list, what: list) -> None:
    """The cell module's own ValueError for an input, then each state it was handed, of neither 1
    nor 2 dims (a state that is no tensor, None among them: :func:`state_dim`'s AttributeError)."""
    for t, w in [(x, "input")] + list(zip(states, what)):
        if state_dim(c, kind, t) not in (1, 2):
            raise TorchError("ValueError", f"{kind}: Expected {w} to be 1D or 2D, got {len(t.shape)}D instead")


def _check_cell(c, x: Tensor, states: list) -> None:
    """check_rnn_cell_forward_input and _hidden (rnn_tanh_cell, lstm_cell, gru_cell, before any
    op of theirs), on the input and states as the module hands them (an unbatched input's states
    unsqueezed): dim 1 of the input, then each state's dim 0 and dim 1, PyTorch's RuntimeError."""
    n_in, hidden = c.arg("input_size"), c.arg("hidden_size")
    if x.shape[1] != n_in:
        raise TorchError("RuntimeError", f"input has inconsistent input_size: got {x.shape[1]} expected {n_in}")
    for i, s in enumerate(states):
        if s.shape[0] != x.shape[0]:
            raise TorchError("RuntimeError", f"Input batch size {x.shape[0]} doesn't match hidden{i} batch size "
                                             f"{s.shape[0]}")
        if len(s.shape) < 2:
            raise ProblemError(c.loc, "a 1-D hidden state beside a 2-D input is not modelled (PyTorch reads its dim 1); "
                                      "give states of the input's rank")
        if s.shape[1] != hidden:
            raise TorchError("RuntimeError", f"hidden{i} has inconsistent hidden_size: got {s.shape[1]}, expected "
                                             f"{hidden}")
    if any(len(s.shape) != 2 for s in states):
        raise ProblemError(c.loc, "2-D hidden states beside a 1-D input (3-D once the cell unsqueezes them) that pass "
                                  "the cell's checks are not modelled (PyTorch 2.13 crashes); give states of the "
                                  "input's rank")


def _batch(c, x: Tensor, states: list):
    """The module's unbatched handling: unsqueeze(0) the input and each given state; zeros for none."""
    batched = len(x.shape) == 2
    if not batched:
        x = call_function(c.rt, "unsqueeze", [x, Fraction(0)], {}, c.loc)
        states = [call_function(c.rt, "unsqueeze", [s, Fraction(0)], {}, c.loc) if s is not None else None
                  for s in states]
    zeros = None
    out = []
    for s in states:
        if s is None:
            if zeros is None:
                zeros = c.rt.tensor(c.rt.B.zeros((x.shape[0], c.arg("hidden_size"))), dtype=x.dtype)
            s = zeros
        out.append(s)
    return batched, x, out


def _unbatch(c, batched: bool, t: Tensor) -> Tensor:
    return t if batched else call_function(c.rt, "squeeze", [t, Fraction(0)], {}, c.loc)


def rnn_cell_forward(c):
    x, hx = _args(c, "RNNCell")
    _check_dims(c, "RNNCell", x, [hx] if hx is not None else [], ["hidden"])
    batched, x, (h,) = _batch(c, x, [hx])
    _check_cell(c, x, [h])
    s = binary(c.rt, "+", _linear(c, h, "hh"), _linear(c, x, "ih"), c.loc)
    act = "tanh" if c.arg("nonlinearity") == "tanh" else "relu"
    return _unbatch(c, batched, call_function(c.rt, act, [s], {}, c.loc))


def lstm_cell_forward(c):
    x, hx = _args(c, "LSTMCell")
    if hx is not None and not isinstance(hx, tuple):
        raise ProblemError(c.loc, "LSTMCell: hx must be a tuple (h_0, c_0) of tensors")
    # LSTMCell.forward checks every item's dim (for idx, value in enumerate(hx)); a batched input
    # hands hx as it is to lstm_cell, which wants two; an unbatched one takes hx[0] and hx[1]
    states = list(hx) if hx is not None else []
    _check_dims(c, "LSTMCell", x, states, [f"hx[{i}]" for i in range(len(states))])
    if hx is None:
        states = [None, None]
    elif len(x.shape) == 1:
        states = [state_item(hx, 0), state_item(hx, 1)]
    elif len(states) != 2:
        raise TorchError("RuntimeError", "lstm_cell expects two hidden states")
    batched, x, (h, cx) = _batch(c, x, states)
    _check_cell(c, x, [h, cx])
    gates = _inplace(c, "add_", _linear(c, h, "hh"), _linear(c, x, "ih"))
    ingate, forget, cell, outgate = _chunks(c, gates, 4)
    ingate = _inplace(c, "sigmoid_", ingate)
    forget = _inplace(c, "sigmoid_", forget)
    cell = _inplace(c, "tanh_", cell)
    outgate = _inplace(c, "sigmoid_", outgate)
    cy = _inplace(c, "add_", binary(c.rt, "*", forget, cx, c.loc), binary(c.rt, "*", ingate, cell, c.loc))
    hy = binary(c.rt, "*", outgate, call_function(c.rt, "tanh", [cy], {}, c.loc), c.loc)
    return _unbatch(c, batched, hy), _unbatch(c, batched, cy)


def gru_cell_forward(c):
    x, hx = _args(c, "GRUCell")
    _check_dims(c, "GRUCell", x, [hx] if hx is not None else [], ["hidden"])
    batched, x, (h,) = _batch(c, x, [hx])
    _check_cell(c, x, [h])
    i_r, i_z, i_n = _chunks(c, _linear(c, x, "ih"), 3)
    h_r, h_z, h_n = _chunks(c, _linear(c, h, "hh"), 3)
    reset = _inplace(c, "sigmoid_", _inplace(c, "add_", h_r, i_r))
    update = _inplace(c, "sigmoid_", _inplace(c, "add_", h_z, i_z))
    new = _inplace(c, "tanh_", binary(c.rt, "+", i_n, _inplace(c, "mul_", h_n, reset), c.loc))
    out = _inplace(c, "add_", _inplace(c, "mul_", binary(c.rt, "-", h, new, c.loc), update), new)
    return _unbatch(c, batched, out)


FORWARDS = {
    "RNNCell": rnn_cell_forward,
    "LSTMCell": lstm_cell_forward,
    "GRUCell": gru_cell_forward,
}
