"""Values too small for a float64, and zeros PyTorch holds as -0.0, as the report and --json show
them (issue 28, round three). A product or an exp whose exact value is below the dtype's
smallest denormal number is the 0 PyTorch's float holds (IEEE underflow), and everything after
it computes with that 0, as PyTorch does; the report's "why" says which element underflowed
and what its exact value was, so no value that is not zero is shown as a bare 0 without it.

The expectations are worked by hand: (1e-200)**2 = 10**-400 is below the smallest float64
(about 4.9e-324), so PyTorch's float64 x * x is +0.0 and its negation -0.0; exp(-1000) =
5.0759588975...e-435 (a decimal any table gives) is +0.0; -0 + 0 is +0.0 while -x at 0 is -0.0.
The torch lines check the zeros PyTorch holds.
"""

from __future__ import annotations

import json
import math

import torch
from click.testing import CliRunner

from adjoint.cli import main

PROBLEM = """\
name: tiny
dtype: float64
inputs:
  x: {value: [1e-200, 3, 0, -1000], requires_grad: true}
model:
  forward: |
    a = -(x * x)
    b = -x
    c = exp(x)
    return a + c
loss: "sum(y)"
"""


def _run(tmp_path, *args):
    path = tmp_path / "tiny.yaml"
    path.write_text(PROBLEM)
    result = CliRunner().invoke(main, ["solve", *args, str(path)])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_torch_holds_these_zeros():
    x = torch.tensor([1e-200, 3, 0, -1000], dtype=torch.float64)
    a, b, c = -(x * x), -x, torch.exp(x)
    assert math.copysign(1, a[0].item()) == -1 and a[0].item() == 0
    assert math.copysign(1, b[2].item()) == -1
    assert c[3].item() == 0 and math.copysign(1, c[3].item()) == 1


def test_report_shows_the_exact_decimal_and_the_float(tmp_path):
    out = _run(tmp_path, "--values")
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ") and line.split()}
    assert lines["a"].split(None, 1)[1] == "[-0, -9, -0, -1000000]"
    assert lines["b"].split(None, 1)[1] == "[-1e-200, -3, -0, 1000]"
    assert lines["c"].split(None, 1)[1] == "[1, 20.08554, 1, 0]"
    why = " ".join(out.split())   # the report wraps its lines
    assert "MulBackward0: element [0] is about 1.0e-400, below float64's smallest denormal number: " \
           "PyTorch's value is 0" in why
    assert "ExpBackward0: element [3] is about 5.08e-435, below float64's smallest denormal number" in why


def test_json_value_is_the_float_and_exact_the_value(tmp_path):
    doc = json.loads(_run(tmp_path, "--json"))
    values = doc["variants"]["default"]["values"]
    a, b = values["a"], values["b"]
    assert a["exact"][0] == "0"   # x * x underflowed to +0.0; its negation is -0.0
    assert a["value"][0] == 0 and math.copysign(1, a["value"][0]) == -1
    assert values["c"]["exact"][3] == "0" and math.copysign(1, values["c"]["value"][3]) == 1
    assert a["value"][2] == 0 and math.copysign(1, a["value"][2]) == -1      # -(0 * 0)
    assert b["value"][2] == 0 and math.copysign(1, b["value"][2]) == -1      # -0
    assert b["exact"][2] == "0"
    assert math.copysign(1, values["x"]["value"][2]) == 1
