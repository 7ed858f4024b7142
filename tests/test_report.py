"""The glanceable report of ``adjoint solve`` (issue 13): what comes first, what is said once,
what the hooks changed, decimals and --exact, wrapping, colour, and the v2 answers (steps,
errors, saved-tensor hooks, global and multi-grad hooks).

Expected numbers are derived by hand below (SLinear: x = 0.3, f0 = 0.3x + 0.1 = 0.19,
f1.f = 0.4 f0 + 0.2 = 0.276, s = 0.276^2, loss = (s - 1)^2) or are the problem's own
constants; none is read from the code under test.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from fractions import Fraction as F

import pytest
from click.testing import CliRunner

import adjoint
from adjoint.cli import main
from adjoint.answer.effects import hook_effects
from adjoint.render.console import render
from adjoint.render.report import Options

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLINEAR = os.path.join(ROOT, "problems", "slinear.yaml")

# ---- SLinear by hand ----------------------------------------------------------------------
X, F0 = F(3, 10), F(3, 10) * F(3, 10) + F(1, 10)
F1F = F(2, 5) * F0 + F(1, 5)
S = F1F ** 2
LOSS = (S - 1) ** 2
DL_DS = 2 * (S - 1)
DL_DF1F = DL_DS * 2 * F1F            # through the square
DL_DF0 = DL_DF1F * F(2, 5)          # through f1.f's weight: what the full hook sees as grad_input
X_GRAD = DL_DF0 * F(3, 10)          # through f0's weight


def dec(q: F) -> str:
    return f"{float(q):.7g}"


def solve_text(path: str = SLINEAR, *args: str, width: int = 100) -> str:
    result = CliRunner().invoke(main, ["solve", path, *args], env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_hand_derivation_is_what_the_readme_says():
    assert DL_DF0 == F(-3983991, 9765625) and X_GRAD == F(-11951973, 97656250)


def test_hook_calls_come_first_then_changes_then_grads():
    out = solve_text()
    rescaled = out[out.index("rescaled ─"):out.index("legacy ─")]
    assert rescaled.index("hook calls") < rescaled.index("what the hooks changed") < rescaled.index("final .grad")
    full = out[out.index("full ─"):out.index("rescaled ─")]
    assert full.index("hook calls") < full.index("final .grad")
    assert "\nforward values\n" not in out and "\nadjoint recursion" not in out  # slinear's are long: on request


def test_hook_call_shows_what_it_was_handed_and_returned_in_decimals():
    out = solve_text()
    rescaled = out[out.index("rescaled ─"):out.index("legacy ─")]
    assert f"grad_input   ([{dec(DL_DF0)}],)" in rescaled
    assert f"grad_output  ([{dec(DL_DS)}],)" in rescaled
    assert f"returned     ([{dec(2 * DL_DF0)}],)" in rescaled
    legacy = out[out.index("legacy ─"):]
    assert "backward on module f1 at PowBackward0" in legacy
    assert f"grad_input   ([{dec(DL_DF1F)}],)" in legacy       # dL/d(f1.f): the square's own input
    assert "/" not in rescaled.split("what the hooks changed")[0]  # no fractions without --exact


def test_what_the_hooks_changed_is_before_and_after():
    out = solve_text()
    rescaled = out[out.index("rescaled ─"):out.index("legacy ─")]
    assert f"x.grad          [{dec(X_GRAD)}] → [{dec(2 * X_GRAD)}]  ×2" in rescaled
    assert f"f0.bias.grad    [{dec(DL_DF0)}] → [{dec(2 * DL_DF0)}]  ×2" in rescaled
    assert "unchanged: f1.f.weight.grad, f1.f.bias.grad" in rescaled   # inside SLinear: downstream of the hook
    full = out[out.index("full ─"):out.index("rescaled ─")]
    assert "what the hooks changed" not in full                         # an observing hook changes nothing


def test_nothing_said_twice_across_variants():
    out = solve_text()
    assert out.count("loss =") == 1 and f"loss = [{dec(LOSS)}]  (every variant)" in out
    assert out.count(f"x.grad            [{dec(X_GRAD)}]") == 1       # full's; legacy refers to it
    legacy = out[out.index("legacy ─"):]
    assert "x, f0.weight, f0.bias, f1.f.weight, f1.f.bias as in full" in legacy
    assert out.count("The classic hook puzzle") == 1


def test_exact_on_request():
    out = solve_text(SLINEAR, "--exact", "--variant", "rescaled")
    q = 2 * X_GRAD
    assert f"[{q.numerator}/{q.denominator}] (≈ [{dec(q)}])" in out
    assert "--exact" not in out.splitlines()[-1]  # the hint no longer offers it


def test_values_and_recursion_on_request_or_when_short(tmp_path):
    out = solve_text(SLINEAR, "--values", "--recursion", "--variant", "full")
    assert "forward values" in out and f"f1.f         [{dec(F1F)}]" in out
    assert "adjoint recursion" in out and "f1.f [Linear]" in out
    hidden = solve_text()
    assert "--values: the 11 forward values" in hidden and "--recursion: the adjoints at 4 module boundaries" in hidden
    short = tmp_path / "short.yaml"
    short.write_text("name: short\ninputs:\n  x: {value: [2], requires_grad: true}\nmodel: {forward: \"x * 3\"}\n"
                     "loss: \"sum(y)\"\n")
    out = solve_text(str(short))
    assert "forward values" in out and "model  [6]" in out          # 3 * 2
    assert "x <- x" in out and "lambda_in = [3]" in out
    assert "\nforward values\n" not in solve_text(str(short), "--no-values")


def test_wrapped_to_the_width_without_trailing_spaces():
    for width in (60, 100):
        out = solve_text(SLINEAR, "--exact", width=width)
        lines = out.splitlines()
        assert max(len(line) for line in lines) <= width
        assert not any(line != line.rstrip() for line in lines)


def test_colour_on_a_terminal_only():
    pred = adjoint.load(SLINEAR).solve(variant="rescaled")
    assert "\x1b[" in render(pred, color=True) and "\x1b[" not in render(pred, color=False)
    env = {**os.environ, "PYTHONPATH": ROOT}
    env.pop("FORCE_COLOR", None)
    env.pop("NO_COLOR", None)
    piped = subprocess.run([sys.executable, "-m", "adjoint", "solve", SLINEAR], capture_output=True, text=True,
                           env=env, timeout=120)
    assert piped.returncode == 0 and "\x1b" not in piped.stdout
    forced = subprocess.run([sys.executable, "-m", "adjoint", "solve", SLINEAR], capture_output=True, text=True,
                            env={**env, "FORCE_COLOR": "1"}, timeout=120)
    assert "\x1b[" in forced.stdout
    no_color = subprocess.run([sys.executable, "-m", "adjoint", "solve", SLINEAR], capture_output=True, text=True,
                              env={**env, "FORCE_COLOR": "1", "NO_COLOR": "1"}, timeout=120)
    params = [int(p) for code in re.findall(r"\x1b\[([0-9;]*)m", no_color.stdout) for p in code.split(";") if p]
    assert not [p for p in params if 30 <= p <= 49 or 90 <= p <= 107]   # bold and dim stay; no colour


def test_rich_markup_in_a_file_is_text(tmp_path):
    path = tmp_path / "markup.yaml"
    path.write_text("name: markup\ndescription: \"[bold red]not bold[/] :smile:\"\ninputs:\n"
                    "  x: {value: [2], requires_grad: true}\nmodel: {forward: \"x * 3\"}\nloss: \"sum(y)\"\n"
                    "hooks:\n  - {tensor: x, label: \"[link=http://x]l[/link]\"}\n")
    pred = adjoint.load(str(path)).solve()
    out = render(pred, color=True, width=200)
    assert "[bold red]not bold[/] :smile:" in out and "[link=http://x]l[/link]" in out


# ---- what the hooks changed ----------------------------------------------------------------

V2 = """\
name: v2
inputs:
  x: {value: [1.5], requires_grad: true}
model:
  children:
    lin: {type: Linear, params: {weight: [[2]], bias: [1]}}
  forward: "lin(x) * x"
loss: "sum(y)"
variants:
  twice:
    hooks:
      - {tensor: x, returns: "grad * 2", label: doubler}
    steps: [forward, backward, forward, backward]
  packed:
    hooks:
      - {saved_tensors: {pack: "x", unpack: "x * 3"}, label: tripler}
  globally:
    hooks:
      - {global: full_backward, label: everywhere}
  multi:
    hooks:
      - {multi_grad: [x, lin.weight], label: both}
  forward_hook:
    hooks:
      - {module: lin, kind: forward, returns: "output * 2"}
  grad:
    hooks:
      - {tensor: x, returns: "grad * 2"}
    backward: {method: grad, inputs: [x]}
  raising:
    hooks:
      - {module: lin, kind: full_backward, raises: "boom from the hook"}
"""
# By hand: lin(x) = 2x + 1 = 4 at x = 1.5, y = lin(x) * x = 6, loss = 6.
# dloss/dx = (2x + 1) + 2x = 7; dloss/dlin.weight = x * x = 2.25; dloss/dlin.bias = x = 1.5.


@pytest.fixture(scope="module")
def v2():
    return adjoint.loads(V2, "v2.yaml").solve()


def changes(v):
    return {c.name: (c.before.floats(), c.after.floats(), str(c.ratio)) for c in hook_effects(v).changes}


def test_effects_of_a_tensor_hook_over_two_backward_steps(v2):
    # observing: .grad accumulates 7 + 7; doubling: 14 + 14
    assert changes(v2["twice"]) == {"x": ([14.0], [28.0], "2")}
    assert hook_effects(v2["twice"]).unchanged == ["lin.weight", "lin.bias"]


def test_effects_of_a_forward_hook_include_the_loss(v2):
    # lin's output doubled: y = 2 (2x + 1) x = 12; dx = 2 (4x + 1) = 14; dW = 2 x^2 = 4.5; db = 2x = 3
    assert changes(v2["forward_hook"]) == {"loss": (6.0, 12.0, "2"), "x": ([7.0], [14.0], "2"),
                                           "lin.weight": ([[2.25]], [[4.5]], "2"), "lin.bias": ([1.5], [3.0], "2")}


def test_effects_of_unpack_hooks(v2):
    # every saved tensor tripled: MulBackward0 gives lin * 3 = 12 to x and x * 3 = 4.5 to lin's output;
    # Addmm's saved x and W tripled: dW = 4.5 * 4.5, dx through lin = 4.5 * 2 * 3 = 27; db = 4.5
    assert changes(v2["packed"]) == {"x": ([7.0], [39.0], "39/7"), "lin.weight": ([[2.25]], [[20.25]], "9"),
                                     "lin.bias": ([1.5], [4.5], "3")}


def test_effects_of_autograd_grad_are_on_what_it_returns(v2):
    e = hook_effects(v2["grad"])
    assert [(c.name, c.what, str(c.ratio)) for c in e.changes] == [("x", "returned", "2")]


def test_observing_hooks_change_nothing(v2):
    for name in ("globally", "multi"):
        assert not hook_effects(v2[name]).ran


def test_v2_answers_in_the_report(v2):
    out = render(v2, width=120)
    twice = out[out.index("twice ─"):out.index("packed ─")]
    assert " backward 1" in twice and " backward 2" in twice and ".grad after backward 1" in twice
    assert "x.grad  [14] → [28]  ×2" in twice
    packed = out[out.index("packed ─"):out.index("globally ─")]
    assert "pack (saved_tensors_hooks)" in packed and "unpack (saved_tensors_hooks)" in packed
    assert "replaces the module's output" not in packed   # a pack hook's return is what it stores
    globally = out[out.index("globally ─"):out.index("multi ─")]
    assert "global full_backward fired for module lin" in globally
    assert "global full_backward fired for module model" in globally
    multi = out[out.index("multi ─"):out.index("forward_hook ─")]
    assert "multi_grad on tensors x, lin.weight" in multi and "grads     ([7], [[2.25]])" in multi
    raising = out[out.index("raising ─"):]
    assert "PyTorch raises RuntimeError: boom from the hook" in raising
    assert "raises       RuntimeError" in raising and "final .grad" not in raising


def test_values_convert_as_tensors_do(v2):
    import numpy as np

    g = v2["twice"].grads["x"]
    assert float(g) == 28.0 and g.tolist() == [28.0] and g.item() == 28
    assert np.asarray(g).dtype == np.float64 and np.asarray(g).tolist() == [28.0]
    w = adjoint.load(os.path.join(ROOT, "problems", "mlp_relu.yaml")).solve()["full"].grads["fc1.weight"]
    assert np.asarray(w).shape == (4, 3)
    with pytest.raises(RuntimeError, match="^a Tensor with 12 elements cannot be converted to Scalar$"):
        w.item()
    with pytest.raises(ValueError, match="^only one element tensors can be converted to Python scalars$"):
        float(w)


@pytest.mark.torch
def test_conversion_errors_are_pytorchs_own_words():
    import torch

    t = torch.zeros(4, 3)
    w = adjoint.load(os.path.join(ROOT, "problems", "mlp_relu.yaml")).solve()["full"].grads["fc1.weight"]
    for convert in (lambda v: v.item(), float):
        with pytest.raises(Exception) as theirs:
            convert(t)
        with pytest.raises(Exception) as ours:
            convert(w)
        assert type(ours.value) is type(theirs.value) and str(ours.value) == str(theirs.value)


def test_closed_forms_do_not_pretend_to_be_numbers(tmp_path):
    path = tmp_path / "sym.yaml"
    path.write_text("name: sym\ninputs:\n  x: {value: [w], requires_grad: true}\nmodel: {forward: \"x * x\"}\n"
                    "loss: \"sum(y)\"\nsymbols: {w: 0.5}\n")
    g = adjoint.load(str(path)).solve().variants[0].grads["x"]
    with pytest.raises(TypeError, match="free symbol"):
        float(g)
    assert g.strings() == ["2*w"]
    assert adjoint.load(str(path)).solve(numeric=True).variants[0].grads["x"].tolist() == [1.0]


def test_variants_by_name_and_short_reprs(v2):
    assert v2["multi"] is v2.variant("multi") is v2[3] and "multi" in v2 and len(v2) == 7
    with pytest.raises(KeyError, match="no variant named 'nope'; this prediction has: twice, packed, globally"):
        v2["nope"]
    pred = adjoint.load(SLINEAR).solve()
    assert repr(pred) == "<Prediction 'slinear': 3 variants (full, rescaled, legacy)>"
    assert repr(pred["legacy"]) == "<VariantPrediction 'legacy': 1 hook call, 5 grads>"
    assert repr(pred["legacy"].hook_calls[0]) == "<HookRecord backward on module 'f1' at PowBackward0: observed>"
    assert len(repr(pred)) + len(repr(pred["legacy"])) < 200
    assert repr(v2["raising"]).startswith("<VariantPrediction 'raising': RuntimeError during backward")


# ---- verify's report ----------------------------------------------------------------------------

SHORT = "name: short\ninputs:\n  x: {value: [2], requires_grad: true}\nmodel: {forward: \"x * 3\"}\nloss: \"sum(y)\"\n"


@pytest.mark.torch
def test_verify_rows_are_aligned_and_verdicts_coloured_on_a_terminal_only(tmp_path):
    path = tmp_path / "short.yaml"
    path.write_text(SHORT)
    env = {**os.environ, "PYTHONPATH": ROOT}
    env.pop("NO_COLOR", None)
    env.pop("FORCE_COLOR", None)
    plain = subprocess.run([sys.executable, "-m", "adjoint", "verify", str(path)], capture_output=True, text=True,
                           env=env, timeout=300)
    assert plain.returncode == 0 and "\x1b" not in plain.stdout
    rows = [line for line in plain.stdout.splitlines() if line.startswith("   ")]
    assert rows[-1].startswith("   forward values (")            # the aggregate row: as long as any
    column = rows[0].index("result")                                 # the header row
    assert all(line[column - 2:column] == "  " and line[column] != " " for line in rows)   # every result in one column
    forced = subprocess.run([sys.executable, "-m", "adjoint", "verify", str(path)], capture_output=True, text=True,
                            env={**env, "FORCE_COLOR": "1"}, timeout=300)
    assert "\x1b[1;32mPASS\x1b[0m" in forced.stdout and "\x1b[1;32mOK\x1b[0m:" in forced.stdout
