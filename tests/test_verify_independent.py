"""``verify``'s torch side shares no answer with the engine: a wrong prediction fails verify.

Each test plants one plausible mistake where the engine reads it (never on the torch side) and
checks that ``adjoint verify`` reports a mismatch: a verify that passed it would report a wrong
answer as verified."""

from dataclasses import replace
from fractions import Fraction

import pytest

from adjoint.format import module_signatures as nn_types
from adjoint.torchside import verify

# every default of the three layers comes from the format's table of signatures: LeakyReLU's
# negative_slope, BatchNorm1d's eps and momentum, MaxPool1d's stride (derived from kernel_size)
DEFAULTS = """
name: defaults
inputs:
  x: {value: [[1.0, -2.0, 0.5], [-1.5, 3.0, -0.25]], requires_grad: true}
model:
  children:
    act: {type: LeakyReLU}
    bn: {type: BatchNorm1d, args: {num_features: 3}}
    pool: {type: MaxPool1d, args: {kernel_size: 2}}
  forward: |
    h = act(x)
    z = bn(h)
    p = pool(z.unsqueeze(0))
    return p.sum() + (z * z).sum()
loss: "y"
hooks:
  - {module: act, kind: full_backward, label: act}
"""


def run_quiet(path):
    out: list[str] = []
    code = verify.run([str(path)], dtype=None, as_json=False, fd=False, variant=None, echo=out.append)
    return code, "\n".join(out)


def _with_default(monkeypatch, type_name: str, arg: str, default):
    t = nn_types.TYPES[type_name]
    args = tuple(replace(a, default=default) if a.name == arg else a for a in t.args)
    monkeypatch.setitem(nn_types.TYPES, type_name, replace(t, args=args))


@pytest.mark.torch
def test_the_defaults_file_verifies(tmp_path):
    path = tmp_path / "defaults.yaml"
    path.write_text(DEFAULTS)
    code, text = run_quiet(path)
    assert code == 0, text


@pytest.mark.torch
@pytest.mark.parametrize("type_name, arg, wrong", [
    ("LeakyReLU", "negative_slope", Fraction(1, 50)),
    ("BatchNorm1d", "momentum", Fraction(1, 5)),
    ("BatchNorm1d", "eps", Fraction(1, 1000)),
])
def test_a_wrong_default_in_the_signature_table_fails_verify(tmp_path, monkeypatch, type_name, arg, wrong):
    """The torch side hands the constructor only the args the file wrote, so PyTorch's own
    defaults run there; before, it handed it every arg with the table's defaults filled in, and
    a wrong default was the same on both sides (verify passed a wrong answer)."""
    path = tmp_path / "defaults.yaml"
    path.write_text(DEFAULTS)
    _with_default(monkeypatch, type_name, arg, wrong)
    code, text = run_quiet(path)
    assert code == 1, text
    assert "MISMATCH" in text


@pytest.mark.torch
def test_a_wrongly_derived_default_fails_verify(tmp_path, monkeypatch):
    """MaxPool1d's stride defaults to its kernel_size in PyTorch's constructor; a table that
    derived 1 instead is caught (shapes differ)."""
    path = tmp_path / "defaults.yaml"
    path.write_text(DEFAULTS)
    t = nn_types.TYPES["MaxPool1d"]
    monkeypatch.setitem(nn_types.TYPES, "MaxPool1d",
                        replace(t, resolve=lambda a: dict(a, stride=1 if a.get("stride") is None else a["stride"])))
    code, text = run_quiet(path)
    assert code == 1, text


ENCODER_LAYER = """
name: encoder_layer_defaults
init: {seed: 0}
inputs:
  x: {value: [[[1.0, -2.0, 0.5, 0.25], [-1.5, 3.0, -0.25, 2.0]]], requires_grad: true}
model:
  children:
    layer: {type: TransformerEncoderLayer, args: {d_model: 4, nhead: 2, dim_feedforward: 4, dropout: 0}}
  forward: |
    return layer(x)
loss: "(y * y).sum()"
"""


@pytest.mark.torch
def test_a_wrong_default_of_a_layer_made_of_layers_fails_verify(tmp_path, monkeypatch):
    """TransformerEncoderLayer's layer_norm_eps (1e-5) as the table says, then as a wrong table would."""
    path = tmp_path / "layer.yaml"
    path.write_text(ENCODER_LAYER)
    code, text = run_quiet(path)
    assert code == 0, text
    _with_default(monkeypatch, "TransformerEncoderLayer", "layer_norm_eps", Fraction(1, 10))
    code, text = run_quiet(path)
    assert code == 1, text
    assert "MISMATCH" in text


CLAMP_AT_A_COMPUTED_TIE = """
name: clamp_at_a_computed_tie
dtype: {dtype}
inputs:
  x: {{value: [1.0, 0.25, 3.0], requires_grad: true}}
model:
  inputs: [x]
  forward: |
    h = x * 2
    return h.clamp(max=2.0) + (h - 0.5).clamp(min=0)
loss: "(y * 3).sum()"
"""


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_wrong_convention_at_a_tie_reached_by_exact_ops_fails_verify(tmp_path, monkeypatch, dtype):
    """``x * 2`` of a given 1 is exactly 2 in PyTorch's floats, on clamp's max: the gradient passes
    there (clamp_backward's closed interval). The bounds used to charge every product a rounding,
    so the decision counted as one PyTorch's floats might take either way, the bound on the
    gradient grew to its size, and a clamp that cut the gradient at the bound passed verify."""
    from adjoint.engine.ops import activations

    path = tmp_path / "tie.yaml"
    path.write_text(CLAMP_AT_A_COMPUTED_TIE.format(dtype=dtype))
    code, text = run_quiet(path)
    assert code == 0, text
    assert "branch point" not in text

    def open_interval(B, x, g, lo, hi):
        zero = B.zeros(activations.broadcast_shapes(B.shape(x), B.shape(g), None))
        out = g
        if hi is not None:
            out = B.choose(B.sub(x, hi), "<", out, zero)
        if lo is not None:
            out = B.choose(B.sub(x, lo), ">", out, zero)
        return out

    monkeypatch.setattr(activations, "_closed_interval", open_interval)
    code, text = run_quiet(path)
    assert code == 1, text
    assert "grad x" in text and "MISMATCH" in text


@pytest.mark.torch
def test_wrong_checkpoint_sequential_segments_fail_verify(monkeypatch):
    """The torch side cuts checkpoint_sequential's segments as PyTorch's loop does, not with the
    engine's ``segment_function`` (which it used to call, so a segment of one item too many was
    the same on both sides and verified)."""
    from adjoint.engine import checkpoint_sequential as engine_segments

    path = "tests/data/regressions/checkpoint_sequential.yaml"
    code, text = run_quiet(path)
    assert code == 0, text
    right = engine_segments.segment_function
    monkeypatch.setattr(engine_segments, "segment_function",
                        lambda container, start, end, k, loc: right(container, start, end + 1, k, loc))
    code, text = run_quiet(path)
    assert code == 1, text


@pytest.mark.torch
@pytest.mark.parametrize("type_name, spec", [
    ("BatchNorm1d", "buffers"),   # running_var's ones (compared as a value after the training forward)
    ("BatchNorm1d", "params"),    # weight's ones
])
def test_a_wrong_default_tensor_in_the_signature_table_fails_verify(tmp_path, monkeypatch, type_name, spec):
    """A parameter or buffer the file does not write is the constructor's own on the torch side
    (``TensorDecl.default``); it used to be the format's value from its table, the one the engine
    reads, so a wrong default (zeros for ones) verified."""
    path = tmp_path / "defaults.yaml"
    path.write_text(DEFAULTS)
    t = nn_types.TYPES[type_name]
    made = getattr(t, spec)

    def wrong(args):
        return tuple(replace(s, default="zeros") if s.default == "ones" else s for s in made(args))

    monkeypatch.setitem(nn_types.TYPES, type_name, replace(t, **{spec: wrong}))
    code, text = run_quiet(path)
    assert code == 1, text
    assert "MISMATCH" in text
