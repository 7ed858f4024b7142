"""Sizes known before work (issue 28): tensors of 33 to 64 dimensions in every mode (numpy's
iterators stop at 32), the init: generator on whole arrays, limits checked before values
are made. Expected values from real torch (verify's comparison) or from adjoint.format.init_draw's
one-at-a-time reference."""

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import require_torch

import adjoint
from adjoint.format import init_draw as init
from adjoint.cli import main
from adjoint.format.init_items import generated


def _deep(tmp_path, nd: int) -> str:
    v = "[" * nd + "1, -2" + "]" * nd
    path = tmp_path / f"d{nd}.yaml"
    path.write_text(f"name: d{nd}\ninputs:\n  x: {{value: {v}, requires_grad: true}}\nmodel: {{forward: \"where(x > 0, "
                    "relu(x) / (x * x + 1), tanh(x) * 2) - mean(x) + x.exp().sum(dim=-1, keepdim=True)\"}\n"
                    "loss: \"sum(y * y)\"\nhooks: [{tensor: x}, {module: model, kind: full_backward}]\n")
    return str(path)


@pytest.mark.parametrize("nd", [33, 40, 60])
@pytest.mark.parametrize("mode", [[], ["--structure"], ["--float64"]])
def test_many_dimensions_solve_in_every_mode(tmp_path, nd, mode):
    result = CliRunner().invoke(main, ["solve", *mode, _deep(tmp_path, nd)])
    assert result.exit_code == 0, (result.stderr, result.exception)
    assert "x.grad" in result.stdout


@pytest.mark.torch
@pytest.mark.parametrize("nd", [33, 60])
def test_many_dimensions_agree_with_torch(tmp_path, nd):
    require_torch()
    from adjoint.torchside.compare import compare
    from adjoint.torchside import run_variant
    problem = adjoint.load(_deep(tmp_path, nd))
    for vp in problem.solve().variants:
        rows = compare(vp.to_json(), run_variant(problem, problem.variant(vp.name), "float32"), "float32")
        assert rows and all(r.ok for r in rows), [r for r in rows if not r.ok]


@pytest.mark.parametrize("shape", [(3, 4), (7,), (5, 3, 2, 2), (1,), (64, 33)])
def test_generated_items_are_the_reference_values(shape):
    assert tuple(generated(None, 3, "enc.0.weight", shape, "w")) == init.values(3, "enc.0.weight", shape)


def test_embedding_padding_row_is_zero_with_array_init(tmp_path):
    path = tmp_path / "e.yaml"
    path.write_text("name: e\ninit: {seed: 2}\ninputs:\n  i: {value: [1, 2], dtype: int64}\nmodel:\n  type: Embedding\n"
                    "  args: {num_embeddings: 4, embedding_dim: 3, padding_idx: 1}\n")
    (w,) = adjoint.load(str(path)).model.params
    expected = list(init.values(2, "weight", (4, 3)))
    expected[3:6] = [0, 0, 0]
    assert list(w.value.items) == expected


def test_init_past_the_limit_is_refused_before_drawing(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("name: big\ninit: {seed: 1}\ninputs:\n  x: {value: [[1, 2]], requires_grad: true}\nmodel:\n"
                    "  type: Sequential\n  children:\n    a: {type: Linear, args: {in_features: 2, out_features: 100000}}\n"
                    "    b: {type: Linear, args: {in_features: 100000, out_features: 100000}}\n")
    result = CliRunner().invoke(main, ["solve", "--structure", str(path)])
    assert result.exit_code == 2
    assert result.stderr == (f"{path}:9:8: init: would generate 10,000,000,000 values for parameter 'b.weight' "
                             "(shape [100000, 100000]), more than 50,000,000; use smaller shapes\n")


def test_a_large_init_model_reports_only_what_it_shows(tmp_path):
    """2000 x 2000 from init: the report converts the six elements it shows, not four million
    (guarded by a generous timeout only: it hung for minutes)."""
    path = tmp_path / "lin.yaml"
    path.write_text("name: lin\ninit: {seed: 1}\ninputs:\n  x: {value: [[1, 2]], requires_grad: true}\nmodel:\n"
                    "  type: Sequential\n  children:\n    a: {type: Linear, args: {in_features: 2, out_features: 2000}}\n"
                    "    b: {type: Linear, args: {in_features: 2000, out_features: 2000}}\nloss: \"sum(y)\"\n")
    result = CliRunner().invoke(main, ["solve", str(path)])
    assert result.exit_code == 0, (result.stderr, result.exception)
    assert "b.weight.grad  tensor 2000x2000 [" in result.stdout and "(4000000 elements)" in result.stdout
    assert "b.bias.grad    tensor 2000 [1, 1, 1, 1, 1, 1, ...] (2000 elements)" in result.stdout


def test_a_huge_padding_and_dilation_is_refused_in_structure_mode_too(tmp_path):
    path = tmp_path / "conv.yaml"
    path.write_text("name: conv\ninputs:\n  x: {value: [[[1, 2, 3]]], requires_grad: true}\nmodel:\n  type: Conv1d\n"
                    "  args: {in_channels: 1, out_channels: 1, kernel_size: 1, padding: 99999999, dilation: 99999999}\n"
                    "  params: {weight: [[[1]]], bias: [0]}\nloss: \"sum(y)\"\n")
    result = CliRunner().invoke(main, ["solve", "--structure", str(path)])
    assert result.exit_code == 2
    assert result.stderr == (f"{path}:5:3: this op (ConvolutionBackward0) would make 200,000,001 intermediate elements "
                             "(padded input or patches), more than the structure mode holds (100,000,000); use smaller "
                             "padding, dilation or shapes\n")


@pytest.mark.torch
def test_import_refuses_a_huge_input_before_drawing_it():
    require_torch()
    result = CliRunner().invoke(main, ["import", "examples/mlp.py:make_model", "--input", "x=100000x100000"])
    assert result.exit_code == 2, (result.stderr, result.exception)
    assert result.stderr == ("--input x=100000x100000: 10,000,000,000 elements, more than a problem file's tensor may "
                             "have (100,000); give a smaller shape\n")


def test_a_large_tensor_is_compared_as_element_by_element():
    """compare's whole-array pass: the same verdicts, messages and largest differences as the
    one-element-at-a-time loop (written out here by hand)."""
    from adjoint.torchside.compare import _Diff
    n = 200_000
    pred = [0.5] * n
    obs = [0.5] * n
    obs[7] = 0.5 + 1e-3             # over the tolerance
    obs[11] = float("inf")          # a non-finite value where the prediction is finite
    obs[13] = 0.5 + 1e-9            # within it
    d = _Diff(rtol=1e-5, atol=1e-6, dtype="float32")
    d.value("w", {"shape": [n], "dtype": "float32", "value": pred}, {"shape": [n], "dtype": "float32", "value": obs})
    assert len(d.problems) == 2
    assert d.problems[0].startswith("w[7]: predicted 0.5, observed 0.501 (|diff| 0.001 > ")
    assert d.problems[1].startswith("w[11]: predicted 0.5, observed inf")
    assert d.max_abs == abs((0.5 + 1e-3) - 0.5) and d.max_rel == abs((0.5 + 1e-3) - 0.5) / 0.5
