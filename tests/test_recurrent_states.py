"""The state a recurrent module is handed, as its Python forward reads it, against real torch: a
GRU, an RNN or a cell handed a tuple or a list (an LSTM's ``(h, c)`` left in place after
switching the type) meets ``hx.dim()``, Python's AttributeError; an LSTM or LSTMCell handed a
tuple of another length reads ``hx[0]``, ``hx[1]`` (IndexError) and hands a batched input's
tuple as it is to ATen, which wants two ("lstm expects two hidden states"), while an unbatched
input's pair is rebuilt from the first two. Each was refused (a GRUCell's or RNNCell's tuple
crashed with an internal error); each is now PyTorch's answer, or its run. The forward keeps
the module's result whole (``out = m(x, hx)``, then ``out[0]``), which for an LSTM's nested
``(output, (h_n, c_n))`` was refused too."""

import json

import numpy as np
import pytest
from conftest import require_torch

torch = require_torch()
from torch import nn  # noqa: E402

import adjoint  # noqa: E402

F64 = torch.float64
X3 = [[[0.5, -1]], [[1, 0.25]], [[0.25, 0.75]]]   # (seq 3, batch 1, input 2)
X2 = [[0.5, -1], [1, 0.25], [0.25, 0.75]]          # the same unbatched
XC = [[0.5, -1]]                                    # a cell's batch of one
XC1 = [0.5, -1]                                     # a cell's unbatched input
H = [[[0.125, 0.25, -0.375]]]
H2 = [[0.125, 0.25, -0.375]]
HC = [[0.125, 0.25, -0.375]]
HC1 = [0.125, 0.25, -0.375]
VALUES = {"x3": X3, "x2": X2, "xc": XC, "xc1": XC1, "h": H, "h2": H2, "hc": HC, "hc1": HC1}

CASES = [
    # (module type, its input, the state as written)
    ("GRU", "x3", "(h, h)"),
    ("GRU", "x2", "[h2, h2]"),
    ("RNN", "x3", "(h,)"),
    ("RNN", "x2", "(h2, h2)"),
    ("LSTM", "x3", "(h,)"),
    ("LSTM", "x3", "[h]"),
    ("LSTM", "x3", "(h, h, h)"),
    ("LSTM", "x2", "(h2, h2, h2)"),
    ("LSTM", "x2", "(h2,)"),
    ("LSTM", "x3", "((h, h),)"),
    ("LSTM", "x3", "(h, None)"),
    ("LSTM", "x3", "[h, h]"),
    ("GRUCell", "xc", "(hc, hc)"),
    ("GRUCell", "xc1", "[hc1]"),
    ("RNNCell", "xc", "(hc,)"),
    ("LSTMCell", "xc", "(hc,)"),
    ("LSTMCell", "xc", "(hc, hc, hc)"),
    ("LSTMCell", "xc1", "(hc1,)"),
    ("LSTMCell", "xc1", "(hc1, hc1, hc1)"),
    ("LSTMCell", "xc", "(hc, None)"),
]


def _params(kind: str) -> dict:
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind.replace("Cell", "")]
    sfx = "" if kind.endswith("Cell") else "_l0"
    vals = lambda rows, cols, k: [[((r * cols + c + k) % 7 - 3) / 8 for c in range(cols)] for r in range(rows)]  # noqa
    return {f"weight_ih{sfx}": vals(gates * 3, 2, 0), f"weight_hh{sfx}": vals(gates * 3, 3, 2),
            f"bias_ih{sfx}": [((r + 1) % 5 - 2) / 8 for r in range(gates * 3)],
            f"bias_hh{sfx}": [((r + 2) % 5 - 2) / 8 for r in range(gates * 3)]}


def _text(kind: str, x: str, state: str) -> str:
    inputs = "\n".join(f"  {k}: {{value: {json.dumps(v)}, requires_grad: true}}" for k, v in VALUES.items())
    return f"""
name: state
dtype: float64
inputs:
{inputs}
model:
  children:
    m: {{type: {kind}, args: {{input_size: 2, hidden_size: 3}}, params: {json.dumps(_params(kind))}}}
  inputs: [{", ".join(VALUES)}]
  forward: |
    out = m({x}, {state})
    return out[0]
loss: "(y * y).sum()"
hooks:
  - {{module: m, kind: forward_pre}}
"""


def _torch(kind: str, x: str, state: str):
    m = getattr(nn, kind)(2, 3).double()
    with torch.no_grad():
        for name, v in _params(kind).items():
            getattr(m, name).copy_(torch.tensor(v, dtype=F64))
    env = {k: torch.tensor(v, dtype=F64, requires_grad=True) for k, v in VALUES.items()}
    try:
        y = m(env[x], eval(state, {}, env))[0]   # noqa: S307 -- the case's own literal
        (y * y).sum().backward()
    except Exception as exc:   # noqa: BLE001 -- PyTorch's error is the expected answer
        return (type(exc).__name__, str(exc)), env
    return None, env


@pytest.mark.parametrize("kind,x,state", CASES, ids=[f"{k}-{x}-{s}" for k, x, s in CASES])
def test_a_recurrent_modules_state_is_read_as_its_forward_reads_it(kind, x, state):
    theirs, env = _torch(kind, x, state)
    v = adjoint.loads(_text(kind, x, state)).solve(mode="float64").variants[0]
    ours = None if v.error is None else (v.error.type, v.error.message)
    assert ours == theirs
    if theirs is None:
        for name, t in env.items():
            if t.grad is None:
                assert v.grads.get(name) is None, name
            else:
                assert np.allclose(np.array(v.grads[name].floats()), t.grad.numpy(), rtol=1e-10, atol=1e-14), name
    else:
        assert v.error.during == "forward"


def test_an_lstm_state_checked_after_a_bad_input_rank():
    """LSTM.forward checks the input's rank before it reads hx: a 4-D input with a one-tensor hx
    is the input's ValueError, not hx's IndexError (adjoint read hx first)."""
    with pytest.raises(ValueError) as theirs:
        nn.LSTM(2, 3).double()(torch.zeros(1, 1, 1, 2, dtype=F64), torch.zeros(1, 1, 3, dtype=F64))
    text = _text("LSTM", "x3.unsqueeze(0)", "h[0]")
    error = adjoint.loads(text).solve().variants[0].error
    assert (error.type, error.message) == ("ValueError", str(theirs.value))
