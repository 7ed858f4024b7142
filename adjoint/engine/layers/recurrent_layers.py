"""The recurrent layers ``RNN`` (tanh, relu), ``LSTM``, ``GRU``: each forward as PyTorch 2.13 runs
it on the CPU. ``torch/nn/modules/rnn.py`` prepares the input and the state, then calls
``_VF.rnn_tanh`` / ``rnn_relu`` / ``lstm`` / ``gru``, which on the CPU are compositions in ATen's
``aten/src/ATen/native/RNN.cpp`` (their nodes and sequence numbers were probed in torch):

* the module: a 2-D input is unbatched: ``input.unsqueeze(batch_dim)`` (and ``hx.unsqueeze(1)``
  for each given state), the results squeezed back at the end (``output.squeeze(batch_dim)``,
  then ``hidden.squeeze(1)``: ``SqueezeBackward1``); no state given: zeros (no node); the checks
  of ``check_forward_args`` with PyTorch's messages;
* ATen: ``batch_first``: ``input.transpose(0, 1)``; the state ``hx.unbind(0)`` (LSTM: ``h``
  then ``c``); then per layer (and direction) the input projection over all time steps at once,
  ``linear(input, w_ih, b_ih)`` (a 3-D linear: ``view``, ``addmm``, ``view``), ``unbind(0)`` into
  steps, and per step the cell with that pre-computed input: ``linear(h, w_hh, b_hh).add_(x_t)``
  then ``tanh`` / ``relu`` (RNN), the LSTM and GRU cells of ``engine/layers/recurrent.py`` with
  ``x_t`` in place of their input linear; the step outputs ``stack``ed; a bidirectional layer
  runs the reverse direction after the forward one (its own projection, the steps in reverse
  order, outputs put back in time order and stacked) and ``cat``s the two on the last dim;
* the final states ``stack``ed over layers (LSTM: ``c`` first, then ``h``: the arguments of
  ``std::make_tuple`` as GCC evaluates them, right to left); ``batch_first``: the output
  transposed back, in place for RNN and GRU (``transpose_``: ``TransposeBackward1``), a view for
  LSTM (``TransposeBackward0``).

The output is ``(output, h_n)`` (LSTM: ``(output, (h_n, c_n))``). Dropout between layers draws at
random: a file gives ``dropout: 0`` or ``training: false``. An LSTM with ``proj_size`` projects
each step's ``h`` (``hy.matmul(w_hr.t())``: ``TBackward0``, ``MmBackward0``) before it is the
step's output and the next step's state. An LSTM in float32 without ``proj_size`` runs oneDNN's
fused kernel on the CPU instead (:func:`_mkldnn_lstm`: one ``MkldnnRnnLayerBackward0`` per layer
and direction); with ``proj_size`` the loop above, and PyTorch warns once.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.engine.bindings import call_function
from adjoint.engine.bindings.core import _contiguous, binary
from adjoint.engine.graph import Tensor
from adjoint.engine.inplace import call_inplace
from adjoint.engine.ops.recurrent import MkldnnLstmSpec
from adjoint.engine.warns import LSTM_PROJECTIONS, warn_once
from adjoint.engine.layers.recurrent import state_dim, state_item
from adjoint.engine.torch_errors import TorchError
from adjoint.format.errors import ProblemError
from adjoint.values.strides import contiguous_strides


def _fn(c, name: str, *args):
    return call_function(c.rt, name, list(args), {}, c.loc)


def _inplace(c, name: str, t: Tensor, *args) -> Tensor:
    return call_inplace(c.rt, name, t, list(args), {}, c.loc)


def _chunks(c, t: Tensor, n: int):
    return c.rt.apply("unsafe_split", [t], (t.shape[1] // n, 1), c.loc)


def _linear(c, x: Tensor, which: str, sfx: str) -> Tensor:
    return _fn(c, "linear", x, c.params[f"weight_{which}{sfx}"], c.params.get(f"bias_{which}{sfx}"))


# ----------------------------------------------------------------------------- cells (pre-computed input)

def _simple_cell(act: str):
    def cell(c, x_t, h, sfx):
        return _fn(c, act, _inplace(c, "add_", _linear(c, h, "hh", sfx), x_t))
    return cell


def _lstm_cell(c, x_t, hidden, sfx):
    hx, cx = hidden
    gates = _inplace(c, "add_", _linear(c, hx, "hh", sfx), x_t)
    ingate, forget, cell, outgate = _chunks(c, gates, 4)
    ingate = _inplace(c, "sigmoid_", ingate)
    forget = _inplace(c, "sigmoid_", forget)
    cell = _inplace(c, "tanh_", cell)
    outgate = _inplace(c, "sigmoid_", outgate)
    cy = _inplace(c, "add_", binary(c.rt, "*", forget, cx, c.loc), binary(c.rt, "*", ingate, cell, c.loc))
    hy = binary(c.rt, "*", outgate, _fn(c, "tanh", cy), c.loc)
    w_hr = c.params.get(f"weight_hr{sfx}")
    if w_hr is not None:   # proj_size: params.matmul_hr(hy), hy.matmul(w_hr.t())
        hy = _fn(c, "matmul", hy, _fn(c, "t", w_hr))
    return hy, cy


def _gru_cell(c, x_t, h, sfx):
    i_r, i_z, i_n = _chunks(c, x_t, 3)
    h_r, h_z, h_n = _chunks(c, _linear(c, h, "hh", sfx), 3)
    reset = _inplace(c, "sigmoid_", _inplace(c, "add_", h_r, i_r))
    update = _inplace(c, "sigmoid_", _inplace(c, "add_", h_z, i_z))
    new = _inplace(c, "tanh_", binary(c.rt, "+", i_n, _inplace(c, "mul_", h_n, reset), c.loc))
    return _inplace(c, "add_", _inplace(c, "mul_", binary(c.rt, "-", h, new, c.loc), update), new)


# ----------------------------------------------------------------------------- ATen's layers

def _run_steps(c, cell, steps, hidden, sfx: str, lstm: bool):
    """FullLayer over pre-computed step inputs: (step outputs, final hidden)."""
    outs = []
    for x_t in steps:
        hidden = cell(c, x_t, hidden, sfx)
        for t in hidden if lstm else (hidden,):
            t.step_state = True   # the derivation's states: one cell per step (else its trees grow exponentially)
        outs.append(hidden[0] if lstm else hidden)
    return outs, hidden


def _layer(c, cell, x: Tensor, hiddens: list, layer: int, dirs: int, lstm: bool):
    """FullLayer / FullBidirectionalLayer on the CPU: (output, [final hidden per direction])."""
    sfx = f"_l{layer}"
    steps = _fn(c, "unbind", _linear(c, x, "ih", sfx), Fraction(0))
    outs, fw_hidden = _run_steps(c, cell, steps, hiddens[0], sfx, lstm)
    fw = _fn(c, "stack", outs, Fraction(0))
    if dirs == 1:
        return fw, [fw_hidden]
    sfx += "_reverse"
    steps = _fn(c, "unbind", _linear(c, x, "ih", sfx), Fraction(0))
    outs, rev_hidden = _run_steps(c, cell, list(reversed(steps)), hiddens[1], sfx, lstm)
    rev = _fn(c, "stack", list(reversed(outs)), Fraction(0))
    return _fn(c, "cat", [fw, rev], Fraction(len(fw.shape) - 1)), [fw_hidden, rev_hidden]


def cell_and_hiddens(c, kind: str, states: list, lstm: bool) -> tuple:
    """The layer's cell function and its initial states unbound per layer and direction (an
    LSTM's (h, c) pairs, h unbound first), as ATen's RNN implementations start."""
    if lstm:
        hs = _fn(c, "unbind", states[0], Fraction(0))
        cs = _fn(c, "unbind", states[1], Fraction(0))
        return _lstm_cell, list(zip(hs, cs))
    cell = {"RNN": _simple_cell("tanh" if c.arg("nonlinearity", "tanh") == "tanh" else "relu"),
            "GRU": _gru_cell}[kind]
    return cell, list(_fn(c, "unbind", states[0], Fraction(0)))


def _stack(c, ts: list) -> Tensor:
    return _fn(c, "stack", ts, Fraction(0))


# ----------------------------------------------------------------------------- the module's forward

def _hidden_check(c, t: Tensor, expected: tuple, msg: str) -> None:
    if tuple(t.shape) != expected:
        raise TorchError("RuntimeError", msg.format(expected, list(t.shape)))


def _lstm_hx_tensor(x: Tensor, hx: Tensor) -> None:
    """An LSTM handed one tensor as hx: LSTM.forward indexes it as the pair, ``hx[0].dim()`` and
    ``hx[1].dim()`` against the input's rank: PyTorch's IndexError or RuntimeError (checked in
    torch 2.13). Where they pass (a stacked (2, ...) state), it is not modelled (a batched one is
    _VF.lstm's TypeError, an unbatched one runs as (hx[0], hx[1]))."""
    want = 3 if len(x.shape) == 3 else 2
    n = hx.shape[0] if hx.shape else None
    if n is not None and n < 2:
        raise TorchError("IndexError", f"index {n} is out of bounds for dimension 0 with size {n}")
    if n is not None and len(hx.shape) - 1 != want:
        d = len(hx.shape) - 1
        raise TorchError("RuntimeError", f"For {'batched 3-D' if want == 3 else 'unbatched 2-D'} input, hx and cx "
                                         f"should also be {want}-D but got ({d}-D, {d}-D) tensors")


def _lstm_states(c, hx: tuple, batched: bool) -> list:
    """LSTM.forward's reads of the pair it is handed: ``hx[0].dim()``, then ``hx[1].dim()``
    (Python's IndexError for a shorter tuple or list, AttributeError for an item that is no
    tensor), then both ranks against the input's. Only ``hx[0]`` and ``hx[1]`` go on: an
    unbatched input's are unsqueezed into a new pair, and a batched one hands ``hx`` itself to
    ``_VF.lstm``, whose count check comes after ``check_forward_args`` (in :func:`_forward`)."""
    dims = []
    for i in (0, 1):
        dims.append(state_dim(c, "LSTM", state_item(hx, i)))
    want = 3 if batched else 2
    if any(d != want for d in dims):
        what = "batched 3-D" if batched else "unbatched 2-D"
        raise TorchError("RuntimeError", f"For {what} input, hx and cx should also be {want}-D but got "
                                         f"({dims[0]}-D, {dims[1]}-D) tensors")
    return [hx[0], hx[1]]


def check_dropout(c, kind: str, layers: int) -> None:
    """Dropout between layers in training mode draws at random: refused."""
    if c.arg("dropout") != 0 and c.training and layers > 1:
        raise ProblemError(c.loc, f"{kind} drops the outputs between layers at random in training mode, which no "
                                  "prediction can know; give args: {dropout: 0} or training: false")


def layer_forward(c, kind: str, x: Tensor, hx):
    """The module's forward of a tensor input ``x`` (and state ``hx``) as ``_args`` bound them
    (a PackedSequence's: engine/layers/recurrent_packed.py, whose FORWARDS dispatch)."""
    lstm = kind == "LSTM"
    if x.dtype != c.rt.dtype:
        raise ProblemError(c.loc, f"{kind} needs a tensor input of the problem's dtype ({c.rt.dtype})")
    if lstm and hx is not None and not isinstance(hx, (Tensor, tuple)):
        raise ProblemError(c.loc, "LSTM: hx must be a tuple (h_0, c_0) of tensors")
    hidden_size, layers = c.arg("hidden_size"), c.arg("num_layers")
    batch_first, dirs = c.arg("batch_first"), 2 if c.arg("bidirectional") else 1
    # with num_layers 1 a dropout draws nothing (ATen drops between layers only): the constructor's
    # warning is the only trace (engine/layers/setup_warnings.py)
    check_dropout(c, kind, layers)
    if len(x.shape) not in (2, 3):
        tail = "D tensor instead" if kind == "RNN" else "D instead"
        raise TorchError("ValueError", f"{kind}: Expected input to be 2D or 3D, got {len(x.shape)}{tail}")
    batched = len(x.shape) == 3
    batch_dim = 0 if batch_first else 1
    if lstm and isinstance(hx, Tensor):
        _lstm_hx_tensor(x, hx)
    states = _lstm_states(c, hx, batched) if lstm and hx is not None else [hx] if hx is not None else []
    if not batched:
        x = _fn(c, "unsqueeze", x, Fraction(batch_dim))
        if states and not lstm:
            if state_dim(c, kind, states[0]) != 2:
                raise TorchError("RuntimeError", f"For unbatched 2-D input, hx should also be 2-D but got "
                                                 f"{len(states[0].shape)}-D tensor")
            states = [_fn(c, "unsqueeze", states[0], Fraction(1))]
    elif states and not lstm and state_dim(c, kind, states[0]) != 3:
        raise TorchError("RuntimeError", f"For batched 3-D input, hx should also be 3-D but got "
                                         f"{len(states[0].shape)}-D tensor")
    if states and lstm and not batched:
        states = [_fn(c, "unsqueeze", s, Fraction(1)) for s in states]
    batch = x.shape[0] if batch_first else x.shape[1]
    expected = (layers * dirs, batch, c.arg("proj_size", 0) or hidden_size)
    expected_c = (layers * dirs, batch, hidden_size)
    if not states:
        zeros = c.rt.tensor(c.rt.B.zeros(expected), dtype=x.dtype)
        states = [zeros, c.rt.tensor(c.rt.B.zeros(expected_c), dtype=x.dtype)] if lstm else [zeros]
    # check_forward_args
    if x.shape[-1] != c.arg("input_size"):
        raise TorchError("RuntimeError", f"input.size(-1) must be equal to input_size. Expected {c.arg('input_size')}, "
                                         f"got {x.shape[-1]}")
    if lstm:
        _hidden_check(c, states[0], expected, "Expected hidden[0] size {}, got {}")
        _hidden_check(c, states[1], expected_c, "Expected hidden[1] size {}, got {}")
    else:
        _hidden_check(c, states[0], expected, "Expected hidden size {}, got {}")
    if lstm and batched and hx is not None and len(hx) != 2:   # _VF.lstm's first check
        raise TorchError("RuntimeError", "lstm expects two hidden states")
    # ATen (RNN.cpp): a float32 LSTM without projections runs oneDNN's kernel (use_mkldnn: a CPU float32
    # input with elements; has_projections: h's last size differs from c's)
    if lstm and x.dtype == "float32" and _numel(x.shape) != 0:
        if not c.arg("proj_size", 0):
            output, hidden = _mkldnn_lstm(c, x, states, layers, dirs, batch_first)
            return _squeezed(c, output, hidden, batched, batch_dim, lstm)
        warn_once(c.rt, "UserWarning", LSTM_PROJECTIONS)
    if batch_first:
        x = _fn(c, "transpose", x, Fraction(0), Fraction(1))
    cell, hiddens = cell_and_hiddens(c, kind, states, lstm)
    finals = []
    for layer in range(layers):
        x, last = _layer(c, cell, x, hiddens[layer * dirs:(layer + 1) * dirs], layer, dirs, lstm)
        finals += last
    output = x
    if lstm:
        # std::make_tuple(outputs, at::stack(hy, 0), at::stack(cy, 0)): GCC evaluates the arguments
        # right to left, so c's stack is made first
        c_n = _stack(c, [s for _, s in finals])
        hidden = (_stack(c, [h for h, _ in finals]), c_n)
    else:
        hidden = _stack(c, finals)
    if batch_first:
        if lstm:
            output = _fn(c, "transpose", output, Fraction(0), Fraction(1))
        else:
            stacked = output
            output = c.rt.apply("transpose_", [stacked], (0, 1), c.loc)
            strides = contiguous_strides(stacked.shape)
            output.strides = (strides[1], strides[0]) + tuple(strides[2:])
    return _squeezed(c, output, hidden, batched, batch_dim, lstm)


def _squeezed(c, output, hidden, batched: bool, batch_dim: int, lstm: bool):
    """The module's end: an unbatched input's results squeezed back."""
    if not batched:
        output = _fn(c, "squeeze", output, Fraction(batch_dim))
        if lstm:
            hidden = (_fn(c, "squeeze", hidden[0], Fraction(1)), _fn(c, "squeeze", hidden[1], Fraction(1)))
        else:
            hidden = _fn(c, "squeeze", hidden, Fraction(1))
    return output, hidden


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _mkldnn_lstm(c, x: Tensor, states: list, layers: int, dirs: int, batch_first: bool):
    """``at::native::mkldnn_rnn`` (aten/src/ATen/native/mkldnn/RNN.cpp), an LSTM in float32 on the
    CPU: the input transposed (``batch_first``) and made contiguous, the states made contiguous;
    per layer and direction the states' rows ``hx[index]``, ``cx[index]`` (``SelectBackward0``, h's
    first) and one ``mkldnn_rnn_layer`` (``MkldnnRnnLayerBackward0``: the direction's whole
    recurrence, its output, ``hy`` and ``cy``; without biases it is handed zeros of ``w_ih``'s and
    ``w_hh``'s shapes, which carry no gradient); a bidirectional layer's two outputs ``cat`` on
    the last dim; then ``stack`` of the ``hy``s, then of the ``cy``s (two statements, in that
    order), and the output transposed back (a view, ``TransposeBackward0``)."""
    if c.rt.saved_hooks:
        raise ProblemError(c.loc, "saved-tensor hooks around nn.LSTM in float32 are not modelled: oneDNN's node "
                                  "also saves its workspace, a uint8 buffer whose size is oneDNN's own; give "
                                  "dtype: float64")
    if batch_first:
        x = _fn(c, "transpose", x, Fraction(0), Fraction(1))
    x = _contiguous(c.rt, x, c.loc)
    hx, cx = (_contiguous(c.rt, s, c.loc) for s in states)
    has_biases = c.arg("bias", True)
    hys, cys = [], []
    for layer in range(layers):
        outs = []
        for d in range(dirs):
            index = layer * dirs + d
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            w_ih, w_hh = c.params[f"weight_ih{sfx}"], c.params[f"weight_hh{sfx}"]
            if has_biases:
                b_ih, b_hh = c.params[f"bias_ih{sfx}"], c.params[f"bias_hh{sfx}"]
            else:
                b_ih, b_hh = (c.rt.tensor(c.rt.B.zeros(w.shape), dtype=w.dtype) for w in (w_ih, w_hh))
            h_i = c.rt.apply("select", [hx], (0, index), c.loc)
            c_i = c.rt.apply("select", [cx], (0, index), c.loc)
            spec = MkldnnLstmSpec(bool(d), c.arg("hidden_size"), layers, bool(has_biases), dirs == 2,
                                  bool(batch_first), bool(c.training))
            out, hy, cy = c.rt.apply("mkldnn_lstm_layer", [x, w_ih, w_hh, b_ih, b_hh, h_i, c_i], spec, c.loc)
            outs.append(out)
            hys.append(hy)
            cys.append(cy)
        x = outs[0] if dirs == 1 else _fn(c, "cat", outs, Fraction(-1))
    hy = _stack(c, hys)
    cy = _stack(c, cys)
    if batch_first:
        x = _fn(c, "transpose", x, Fraction(0), Fraction(1))
    return x, (hy, cy)


