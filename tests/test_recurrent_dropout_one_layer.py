"""``nn.RNN`` / ``LSTM`` / ``GRU`` with ``dropout > 0`` and one layer: PyTorch's constructor warns
(``RNNBase.__init__``), and the dropout, which ATen applies only between layers, draws nothing, so
training mode runs as dropout 0. adjoint refused such a file (a common way to write a one-layer
LSTM). Expected warnings and gradients come from real torch, built here with the file's arguments
(float arguments as Python floats, as the torch side passes them)."""

import textwrap
import warnings

import pytest

import adjoint

torch = pytest.importorskip("torch")
nn = torch.nn

X = [[[0.5, -1], [1, 0.25]], [[0.25, 0.5], [-0.5, 0.75]]]
LSTM_W = {"weight_ih_l0": [[0.5, -0.25], [0.25, 0.5], [-0.5, 0.25], [0.75, 0], [0.125, 0.25], [-0.25, 0.5],
                           [0.5, 0.5], [0, -0.75]],
          "weight_hh_l0": [[0.25, 0], [0.5, -0.25], [-0.25, 0.125], [0.5, 0.25], [0, 0.5], [0.25, 0.25],
                           [-0.5, 0], [0.125, -0.125]],
          "bias_ih_l0": [0, 0.25, 0, -0.25, 0.125, 0, 0.5, 0], "bias_hh_l0": [0.25, 0, 0, 0, 0, -0.125, 0, 0.25]}
GRU_W = {"weight_ih_l0": [[0.5, -0.25], [0.25, 0.5], [-0.5, 0.25], [0.75, 0], [0.125, 0.25], [-0.25, 0.5]],
         "weight_hh_l0": [[0.25, 0], [0.5, -0.25], [-0.25, 0.125], [0.5, 0.25], [0, 0.5], [0.25, 0.25]],
         "bias_ih_l0": [0, 0.25, 0, -0.25, 0.125, 0], "bias_hh_l0": [0.25, 0, 0, 0, 0, -0.125]}


def _yaml(params: dict) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in params.items()) + "}"


FILE = textwrap.dedent(f"""\
    name: one-layer-dropout
    dtype: float64
    inputs:
      x: {{value: {X}, requires_grad: true}}
    model:
      children:
        lstm: {{type: LSTM, args: {{input_size: 2, hidden_size: 2, batch_first: true, dropout: 0.3}}, params: {_yaml(LSTM_W)}}}
        gru: {{type: GRU, args: {{input_size: 2, hidden_size: 2, dropout: 1}}, params: {_yaml(GRU_W)}}}
      inputs: [x]
      forward: |
        o, (hn, cn) = lstm(x)
        r, gh = gru(o)
        return r[:, -1].sum() + hn.sum()
    hooks:
      - {{module: lstm, kind: full_backward}}
    """)


def _torch_run():
    """The same script in torch: the modules built (their warnings recorded), trained once."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lstm = nn.LSTM(input_size=2, hidden_size=2, batch_first=True, dropout=0.3).double()
        gru = nn.GRU(input_size=2, hidden_size=2, dropout=1.0).double()
    with torch.no_grad():
        for mod, table in ((lstm, LSTM_W), (gru, GRU_W)):
            for name, value in table.items():
                getattr(mod, name).copy_(torch.tensor(value, dtype=torch.float64))
    seen = []
    lstm.register_full_backward_hook(lambda m, gi, go: seen.append((gi[0].tolist(), go[0].tolist())))
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    assert lstm.training and gru.training
    o, (hn, cn) = lstm(x)
    r, gh = gru(o)
    (r[:, -1].sum() + hn.sum()).backward()
    return [(w.category.__name__, str(w.message)) for w in caught], x.grad.tolist(), seen


def _close(a, b):
    return torch.allclose(torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64),
                          rtol=1e-12, atol=1e-14)


@pytest.mark.torch
def test_the_constructors_warning_and_a_run_without_dropout():
    want_warnings, want_grad, want_calls = _torch_run()
    assert len(want_warnings) == 2 and "dropout=0.3 and num_layers=1" in want_warnings[0][1]
    answer = adjoint.loads(FILE, name="one-layer-dropout").solve(mode="float64").variants[0].to_json()
    assert [(w["category"], w["message"], w["during"]) for w in answer["warnings"]] == \
        [(c, m, "setup") for c, m in want_warnings]
    assert _close(answer["grads"]["x"]["value"], want_grad)
    (call,) = [c for c in answer["hook_calls"] if c["kind"] == "full_backward"]
    assert _close(call["args"]["grad_input"][0]["value"], want_calls[0][0])
    assert _close(call["args"]["grad_output"][0]["value"], want_calls[0][1])


@pytest.mark.torch
def test_verifys_torch_side_reports_the_warning():
    from adjoint.torchside import run_variant

    want_warnings, _, _ = _torch_run()
    problem = adjoint.loads(FILE, name="one-layer-dropout")
    observed = run_variant(problem, problem.variants[0], problem.dtype)
    assert [(w["category"], w["message"]) for w in observed["warnings"] if w["during"] == "setup"] == want_warnings


@pytest.mark.torch
def test_the_warning_comes_before_a_later_constructors_error():
    """RNNBase.__init__ warns before its proj_size checks: a one-layer LSTM with dropout and a
    proj_size not below hidden_size warns, then raises."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError) as raised:
            nn.LSTM(input_size=2, hidden_size=2, dropout=0.5, proj_size=3)
    text = FILE.replace("gru: {type: GRU, args: {input_size: 2, hidden_size: 2, dropout: 1}",
                        "gru: {type: LSTM, args: {input_size: 2, hidden_size: 2, dropout: 0.5, proj_size: 3}")
    text = text.replace(f"params: {_yaml(GRU_W)}", "params: {}")
    answer = adjoint.loads(text, name="one-layer-dropout").solve(mode="float64").variants[0].to_json()
    assert answer["error"] == {"type": "ValueError", "message": str(raised.value), "during": "setup", "after_call": None}
    assert [w["message"] for w in answer["warnings"]][-1] == str(caught[0].message)
    assert [w["message"] for w in answer["warnings"]][0].endswith("dropout=0.3 and num_layers=1")


def test_a_stacked_layers_dropout_in_training_stays_refused():
    """Two layers: ATen draws a dropout mask between them at random, which no file can hold."""
    text = FILE.replace("batch_first: true, dropout: 0.3}", "batch_first: true, dropout: 0.5, num_layers: 2}")
    text = text.replace("dtype: float64\n", "dtype: float64\ninit: {seed: 0}\n")
    with pytest.raises(adjoint.ProblemError, match="at random in training mode"):
        adjoint.loads(text, name="one-layer-dropout").solve(mode="float64")
