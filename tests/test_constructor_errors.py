"""A built-in module whose constructor refuses its arguments (``nn.Conv2d(3, 2, 1, groups=2)``):
PyTorch raises while the script builds the model, before any hook is registered, and that error
is the answer (``during: setup``), not a refusal of the file. Each case is checked against the
real constructor, called here with the arguments the file gives (float arguments as Python
floats, as the torch side passes them), and against verify's torch side."""

import textwrap

import pytest

import adjoint

nn = pytest.importorskip("torch.nn")

#: (module YAML, the torch.nn call a script makes with the same arguments)
CASES = [
    ("{type: Conv2d, args: {in_channels: 3, out_channels: 2, kernel_size: 1, groups: 2}}",
     lambda: nn.Conv2d(in_channels=3, out_channels=2, kernel_size=1, groups=2)),
    ("{type: Conv2d, args: {in_channels: 2, out_channels: 3, kernel_size: 1, groups: 2}}",
     lambda: nn.Conv2d(in_channels=2, out_channels=3, kernel_size=1, groups=2)),
    ("{type: Conv2d, args: {in_channels: 3, out_channels: 2, kernel_size: 1, groups: 2, padding: foo}}",
     lambda: nn.Conv2d(in_channels=3, out_channels=2, kernel_size=1, groups=2, padding='foo')),   # groups first
    ("{type: Conv1d, args: {in_channels: 2, out_channels: 2, kernel_size: 3, stride: 2, padding: same}}",
     lambda: nn.Conv1d(in_channels=2, out_channels=2, kernel_size=3, stride=2, padding='same')),
    ("{type: GroupNorm, args: {num_groups: 3, num_channels: 4}}", lambda: nn.GroupNorm(num_groups=3, num_channels=4)),
    ("{type: MultiheadAttention, args: {embed_dim: 5, num_heads: 2}}",
     lambda: nn.MultiheadAttention(embed_dim=5, num_heads=2)),
    ("{type: TransformerEncoderLayer, args: {d_model: 6, nhead: 4, dim_feedforward: 8}}",
     lambda: nn.TransformerEncoderLayer(d_model=6, nhead=4, dim_feedforward=8)),
    ("{type: Hardtanh, args: {min_val: 1, max_val: 0.5}}", lambda: nn.Hardtanh(min_val=1.0, max_val=0.5)),
    ("{type: Dropout, args: {p: 1.5}}", lambda: nn.Dropout(p=1.5)),
    ("{type: Embedding, args: {num_embeddings: 3, embedding_dim: 2, padding_idx: 3}}",
     lambda: nn.Embedding(num_embeddings=3, embedding_dim=2, padding_idx=3)),
    ("{type: LSTM, args: {input_size: 2, hidden_size: 3, dropout: 2}}",
     lambda: nn.LSTM(input_size=2, hidden_size=3, dropout=2.0)),
    ("{type: LSTM, args: {input_size: 2, hidden_size: 3, proj_size: 3}}",
     lambda: nn.LSTM(input_size=2, hidden_size=3, proj_size=3)),
    ("{type: TransformerEncoder, args: {encoder_layer: {d_model: 6, nhead: 4, dim_feedforward: 8, dropout: 0}, "
     "num_layers: 2}}",
     lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(d_model=6, nhead=4, dim_feedforward=8, dropout=0.0), 2)),
]


def _file(module: str) -> str:
    return textwrap.dedent(f"""\
        name: constructor-error
        dtype: float64
        inputs:
          x: {{value: [[1, 2]], requires_grad: true}}
        model:
          type: Sequential
          children:
            first: {{type: Tanh}}
            bad: {module}
        hooks:
          - {{module: first, kind: forward}}
          - {{tensor: x, returns: "grad * 2"}}
        steps: [forward, backward, forward, backward]
        """)


def _torch_raises(call):
    try:
        call()
    except (ValueError, AssertionError) as exc:
        return type(exc).__name__, str(exc)
    raise AssertionError("the constructor did not raise")


@pytest.mark.torch
@pytest.mark.parametrize("module,call", CASES, ids=[f"{i}-{c[0].split(',')[0][7:]}" for i, c in enumerate(CASES)])
def test_the_constructors_error_is_the_answer(module, call):
    from adjoint.torchside import run_variant

    kind, message = _torch_raises(call)
    problem = adjoint.loads(_file(module), name="constructor")
    answer = problem.solve().variants[0].to_json()
    assert answer == {"error": {"type": kind, "message": message, "during": "setup", "after_call": None},
                      "hook_calls": [], "warnings": []}
    observed = run_variant(problem, problem.variants[0], problem.dtype)
    assert observed["error"] == answer["error"] and observed["hook_calls"] == [] and observed["warnings"] == []


def test_a_module_without_values_is_not_refused_when_its_constructor_raises():
    """No params and no init: the constructor never gets as far as making them."""
    text = _file("{type: Conv2d, args: {in_channels: 3, out_channels: 2, kernel_size: 1, groups: 2}}")
    answer = adjoint.loads(text, name="c").solve().variants[0].to_json()
    assert answer["error"]["type"] == "ValueError"


@pytest.mark.torch
def test_the_first_constructor_in_the_files_order_raises():
    text = _file("{type: Sequential, children: {a: {type: Dropout, args: {p: -1}}, "
                 "b: {type: GroupNorm, args: {num_groups: 3, num_channels: 4}}}}")
    answer = adjoint.loads(text, name="c").solve().variants[0].to_json()
    assert (answer["error"]["type"], answer["error"]["message"]) == _torch_raises(lambda: nn.Dropout(p=-1.0))


@pytest.mark.torch
def test_hooks_inside_a_module_that_is_never_built_are_not_checked():
    """PyTorch stops at the constructor, before any hook is registered: a hook on the encoder's
    own layer (which never exists) is not refused as an unknown module."""
    text = _file("{type: TransformerEncoder, args: {encoder_layer: {d_model: 6, nhead: 4, dim_feedforward: 8, "
                 "dropout: 0}, num_layers: 1}}").replace("hooks:\n", "hooks:\n  - {module: bad.layers.0, kind: full_backward}\n")
    answer = adjoint.loads(text, name="c").solve().variants[0].to_json()
    assert (answer["error"]["type"], answer["error"]["message"]) == _torch_raises(
        lambda: nn.TransformerEncoderLayer(d_model=6, nhead=4, dim_feedforward=8, dropout=0.0))
