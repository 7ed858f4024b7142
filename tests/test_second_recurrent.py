"""Second order through the recurrent layers as torch 2.13's CPU runs them: ``create_graph`` through
``MkldnnRnnLayerBackward0`` (nn.LSTM in float32: ``mkldnn_rnn_layer_differentiable_backward``, the layer
recomputed and differentiated op by op; adjoint.engine.second_recurrent) and through the cells and the
loops of nn.RNN / nn.GRU (compositions of ops: ``UnsafeSplitBackward0``'s ``cat``). The first gradient's
graph node for node (names and sequence_nr) and its value against real torch; the second backward's values
are verified by the regression files (tests/data/regressions/second_order_lstm_*.yaml)."""

import numpy as np
import pytest
from conftest import require_torch

torch = require_torch()

from adjoint.format import init_draw  # noqa: E402
from test_second_order import assert_same_graph, chain_ours, chain_torch, ours, start_seq  # noqa: E402

nn = torch.nn

TEMPLATE = """
name: rnn-cg
inputs:
  x: {value: X, requires_grad: true}
EXTRA
model:
  INPUTS
  children:
    rnn: {type: KIND, args: ARGS}
    fc: {type: Linear, args: {in_features: FEAT, out_features: 1}}
  forward: |
FORWARD
init: {seed: 1}
loss: "sum(y)"
steps:
  - forward
  - {backward: {method: grad, inputs: [x], create_graph: true, as: [gx]}}
  - {backward: {root: "loss + sum(gx ** 2)"}}
"""

X3 = [[[0.5, -1.0]], [[0.25, 0.75]], [[-0.5, 0.3]]]
XB = [[[0.5, -1.0], [0.25, 0.75]], [[-0.5, 0.3], [0.1, 0.2]]]
X2 = [[0.5, -1.0], [0.25, 0.75]]
H0 = [[[0.1, -0.2]]]
C0 = [[[0.3, 0.4]]]

# (id, kind, args, feat, x, forward (adjoint), the same in torch of (rnn, fc, x, h0, c0), states given)
CASES = [
    ("lstm", "LSTM", {"input_size": 2, "hidden_size": 2}, 2, X3,
     "out, (h, c) = rnn(x)\nreturn fc(out[-1])", lambda r, f, x, h0, c0: f(r(x)[0][-1]), False),
    ("lstm-2-layers", "LSTM", {"input_size": 2, "hidden_size": 2, "num_layers": 2}, 2, X3,
     "out, (h, c) = rnn(x)\nreturn fc(out[-1] + c[0])", lambda r, f, x, h0, c0: (lambda o: f(o[0][-1] + o[1][1][0]))(r(x)),
     False),
    ("lstm-bidirectional", "LSTM", {"input_size": 2, "hidden_size": 2, "bidirectional": True}, 4, X3,
     "out, (h, c) = rnn(x)\nreturn fc(out[-1])", lambda r, f, x, h0, c0: f(r(x)[0][-1]), False),
    ("lstm-batch-first", "LSTM", {"input_size": 2, "hidden_size": 3, "batch_first": True}, 3, XB,
     "out, (h, c) = rnn(x)\nreturn fc(out[:, -1]) + fc(c[0])",
     lambda r, f, x, h0, c0: (lambda o: f(o[0][:, -1]) + f(o[1][1][0]))(r(x)), False),
    ("lstm-no-bias-h", "LSTM", {"input_size": 2, "hidden_size": 2, "bias": False}, 2, X3,
     "out, (h, c) = rnn(x)\nreturn fc(h[0])", lambda r, f, x, h0, c0: f(r(x)[1][0][0]), False),
    ("lstm-states", "LSTM", {"input_size": 2, "hidden_size": 2}, 2, X3,
     "out, (h, c) = rnn(x, (h0, c0))\nreturn fc(out[-1] * c[0])",
     lambda r, f, x, h0, c0: (lambda o: f(o[0][-1] * o[1][1][0]))(r(x, (h0, c0))), True),
    ("lstm-cell", "LSTMCell", {"input_size": 2, "hidden_size": 2}, 2, X2,
     "h, c = rnn(x)\nh2, c2 = rnn(x * 2, (h, c))\nreturn fc(h2 + c2)",
     lambda r, f, x, h0, c0: (lambda s: (lambda s2: f(s2[0] + s2[1]))(r(x * 2, s)))(r(x)), False),
    ("gru-cell", "GRUCell", {"input_size": 2, "hidden_size": 2}, 2, X2,
     "h = rnn(x)\nreturn fc(rnn(x, h))", lambda r, f, x, h0, c0: f(r(x, r(x))), False),
    ("rnn-cell-relu", "RNNCell", {"input_size": 2, "hidden_size": 2, "nonlinearity": "relu"}, 2, X2,
     "h = rnn(x)\nreturn fc(rnn(x, h))", lambda r, f, x, h0, c0: f(r(x, r(x))), False),
    ("rnn-tanh-2-bidirectional", "RNN", {"input_size": 2, "hidden_size": 2, "num_layers": 2, "bidirectional": True},
     2, X3, "out, h = rnn(x)\nreturn fc(out[-1][:, 2:] + h[-1])",
     lambda r, f, x, h0, c0: (lambda o: f(o[0][-1][:, 2:] + o[1][-1]))(r(x)), False),
    ("rnn-relu-batch-first", "RNN", {"input_size": 2, "hidden_size": 2, "batch_first": True, "nonlinearity": "relu"},
     2, X3, "out, h = rnn(x)\nreturn fc(out[-1] + h[-1])", lambda r, f, x, h0, c0: (lambda o: f(o[0][-1] + o[1][-1]))(r(x)),
     False),
    ("gru-2-layers", "GRU", {"input_size": 2, "hidden_size": 2, "num_layers": 2}, 2, X3,
     "out, h = rnn(x)\nreturn fc(out[-1] + h[-1])", lambda r, f, x, h0, c0: (lambda o: f(o[0][-1] + o[1][-1]))(r(x)),
     False),
]


def _args(args: dict) -> str:
    return "{" + ", ".join(f"{k}: {str(v).lower() if isinstance(v, bool) else v}" for k, v in args.items()) + "}"


def _problem(kind, args, feat, x, forward, states):
    extra = (f"  h0: {{value: {H0}, requires_grad: true}}\n  c0: {{value: {C0}, requires_grad: true}}"
             if states else "")
    return (TEMPLATE.replace("X,", f"{x},", 1).replace("EXTRA", extra)
            .replace("INPUTS", "inputs: [x, h0, c0]" if states else "")
            .replace("KIND", kind).replace("ARGS", _args(args)).replace("FEAT", str(feat))
            .replace("FORWARD", "\n".join("    " + line for line in forward.splitlines())))


def _init(module, prefix, kind):
    """The module's parameters as ``init: {seed: 1}`` draws them (adjoint.format.init_draw)."""
    shapes = {n: tuple(p.shape) for n, p in module.named_parameters()}
    with torch.no_grad():
        for n, p in module.named_parameters():
            vals = init_draw.values(1, f"{prefix}.{n}", tuple(p.shape), init_draw.param_fan_in(kind, n, shapes))
            p.copy_(torch.tensor([float(v) for v in vals]).reshape(p.shape))
    return module


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_create_graph_through_recurrent_layers_is_torchs(case):
    _, kind, args, feat, x, forward, twin, states = case
    run, gx = ours(_problem(kind, args, feat, x, forward, states))
    base = start_seq()
    rnn = _init(getattr(nn, kind)(**args), "rnn", kind)
    fc = _init(nn.Linear(feat, 1), "fc", "Linear")
    tx = torch.tensor(x, requires_grad=True)
    h0 = torch.tensor(H0, requires_grad=True)
    c0 = torch.tensor(C0, requires_grad=True)
    loss = twin(rnn, fc, tx, h0, c0).sum()
    tgx, = torch.autograd.grad(loss, [tx], create_graph=True)
    assert_same_graph(chain_ours(gx), chain_torch(tgx, base), case[0])
    np.testing.assert_allclose(np.asarray(gx.value, dtype=np.float64), tgx.detach().double().numpy(),
                               rtol=1e-5, atol=1e-6)


def _graphs_match(text, name, torch_grads, base):
    run, g = ours(text, name)
    assert_same_graph(chain_ours(g), chain_torch(torch_grads, base), name)
    np.testing.assert_allclose(np.asarray(g.value, dtype=np.float64), torch_grads.detach().double().numpy(),
                               rtol=1e-5, atol=1e-6)


def test_saved_tensor_hooks_keep_the_saved_clones_node():
    """With saved_tensors hooks the GRU cell's in-place mul_ saves self.clone() packed by the hook:
    the unpacked value sits on the clone's CloneBackward0 as well (SavedVariable::unpack sets the
    grad_fn it saved)."""
    _, kind, args, feat, x, forward, twin, states = next(c for c in CASES if c[0] == "gru-cell")
    text = _problem(kind, args, feat, x, forward, states) + \
        'hooks:\n  - {saved_tensors: {pack: "x * 2", unpack: "x / 2"}}\n'
    base = start_seq()
    rnn = _init(getattr(nn, kind)(**args), "rnn", kind)
    fc = _init(nn.Linear(feat, 1), "fc", "Linear")
    tx = torch.tensor(x, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t * 2, lambda t: t / 2):
        loss = twin(rnn, fc, tx, None, None).sum()
        tgx, = torch.autograd.grad(loss, [tx], create_graph=True)
    _graphs_match(text, "gx", tgx, base)


def test_a_third_backward_through_the_lstm_layers_recorded_ops():
    """grad of grad through what mkldnn_rnn_layer_differentiable_backward recorded: every node an op
    with its own formula; the graph of the second gradient node for node."""
    _, kind, args, feat, x, forward, twin, states = next(c for c in CASES if c[0] == "lstm-2-layers")
    text = _problem(kind, args, feat, x, forward, states).replace(
        '  - {backward: {root: "loss + sum(gx ** 2)"}}',
        '  - {backward: {method: grad, root: "sum(gx ** 2)", inputs: [x], create_graph: true, as: [ggx]}}')
    base = start_seq()
    rnn = _init(getattr(nn, kind)(**args), "rnn", kind)
    fc = _init(nn.Linear(feat, 1), "fc", "Linear")
    tx = torch.tensor(x, requires_grad=True)
    loss = twin(rnn, fc, tx, None, None).sum()
    tgx, = torch.autograd.grad(loss, [tx], create_graph=True)
    tggx, = torch.autograd.grad((tgx ** 2).sum(), [tx], create_graph=True)
    _graphs_match(text, "ggx", tggx, base)
