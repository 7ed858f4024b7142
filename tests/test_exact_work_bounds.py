"""Exact work bounded by the size of what it would make, before making it (issue 28, round
three): a custom Function's exact check (J^T g for a symbolic g) and the exact text of an
answer's closed forms (each simplified by SymPy). Each is refused with one located line naming
the size and what would be right; the limits are lowered here so the tests stay cheap. The sizes
in the messages are counted by hand: ``x @ x`` on a 3x3 input has 9 output elements (9 symbols)
and 9 input elements, 81 terms; sqrt of [2, 3, 4] is sqrt(2), sqrt(3) (closed forms) and 2."""

from __future__ import annotations

import json

from click.testing import CliRunner

from adjoint.answer import text_budget
from adjoint.cli import main
from adjoint.engine import function_checks

FUNCTION = """\
name: fn
inputs:
  x: {value: [[1, 2, 0], [0, 1, -1], [2, 0, 1]], requires_grad: true}
model:
  forward: "x @ x"
  function:
    name: Sq
    backward:
      x: "grad_output @ x.T + x.T @ grad_output"
loss: "sum(y)"
"""

ROOTS = """\
name: roots
dtype: float64
inputs:
  x: {value: [2, 3, 4], requires_grad: true}
model: {forward: "sqrt(x)"}
loss: "sum(y)"
"""


def _solve(tmp_path, text, *args):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return CliRunner().invoke(main, ["solve", *args, str(path)]), str(path)


def test_function_check_within_the_limit_runs(tmp_path):
    result, _ = _solve(tmp_path, FUNCTION)
    assert result.exit_code == 0, result.stderr
    assert "equals the true derivative" in " ".join(result.stdout.split())


def test_function_check_past_the_limit_is_refused_at_the_function(tmp_path, monkeypatch):
    monkeypatch.setattr(function_checks, "MAX_CHECK_TERMS", 80)
    result, path = _solve(tmp_path, FUNCTION)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"{path}:7:5: checking Function Sq's declared backward exactly expands J^T g for 9 gradient symbols "
        "over 9 input elements (81 terms, more than 80); use --float64 (no exact check), or check the Function "
        "on smaller inputs"]
    assert _solve(tmp_path, FUNCTION, "--float64")[0].exit_code == 0


def test_closed_forms_past_the_limit_refuse_json_not_the_report(tmp_path, monkeypatch):
    monkeypatch.setattr(text_budget, "MAX_CLOSED_FORMS", 4)
    result, path = _solve(tmp_path, ROOTS, "--json")
    # y = [sqrt(2), sqrt(3), 2] (model and y: one tensor), the loss sqrt(2) + sqrt(3) + 2 and
    # x.grad = 1 / (2 sqrt(x)) = [sqrt(2)/4, sqrt(3)/6, 1/4]: 5 closed forms
    assert result.exit_code == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{path}:1:1: the exact answer holds 5 elements that are "
                                                   "closed forms (the largest tensor of them 3: 2), more than the 4")
    assert "use --float64" in lines[0]
    assert _solve(tmp_path, ROOTS)[0].exit_code == 0
    decimals = json.loads(_solve(tmp_path, ROOTS, "--json", "--float64")[0].stdout)
    assert decimals["variants"]["default"]["values"]["y"]["value"][2] == 2.0
    monkeypatch.setattr(text_budget, "MAX_CLOSED_FORMS", 5)
    doc = json.loads(_solve(tmp_path, ROOTS, "--json")[0].stdout)
    assert doc["variants"]["default"]["values"]["y"]["exact"] == ["sqrt(2)", "sqrt(3)", "2"]
