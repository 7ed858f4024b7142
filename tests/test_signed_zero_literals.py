"""A -0.0 written in a problem file is PyTorch's negative zero, as ``torch.tensor([-0.0])`` keeps it:
in an input, a parameter, a target, a side file and under a positive scale (a negative one makes
it +0.0); ``-0`` is Python's int 0, a +0.0. sqrt's result keeps the sign and its derivative at
-0.0 is -inf. adjoint read every written zero as an unsigned exact 0 (+0.0, +inf), and verify built
+0.0 too, so it passed the wrong answer. The expectations are plain torch, built from the same
Python literals.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import require_torch

from adjoint.cli import main

torch = require_torch()

PROBLEM = """\
name: written-negative-zero
dtype: float64
inputs:
  x: {value: [-0.0, 4, -.0, -0e0, -0, 0.0, "-0.0"], requires_grad: true}
  w: {value: [-0.0, 0.5], scale: 8, requires_grad: true}
  v: {value: [-0.0, 0.5], scale: -8, requires_grad: true}
  f: {value: {file: zeros.npy}, requires_grad: true}
  k: {value: [-0.0, 1], dtype: int64}
targets:
  t: [-0.0, 0.0]
model:
  inputs: [x, w, v, f, k]
  params: {z: [-0.0, 0.0]}
  forward: |
    r = sqrt(z) + sqrt(w) + sqrt(-v) + sqrt(f) + t * k
    return sum(sqrt(x)) + sum(r)
loss: "y"
"""


def _torch():
    """The same run in plain torch, each tensor from the Python literal the file writes."""
    f64 = torch.float64
    x = torch.tensor([-0.0, 4, -.0, -0e0, -0, 0.0, -0.0], dtype=f64, requires_grad=True)
    w = (torch.tensor([-0.0, 0.5], dtype=f64) * 8).requires_grad_()
    v = (torch.tensor([-0.0, 0.5], dtype=f64) * -8).requires_grad_()
    f = torch.from_numpy(np.array([-0.0, 4.0], dtype=np.float32)).to(f64).requires_grad_()
    k = torch.tensor([-0.0, 1], dtype=torch.int64)
    t = torch.tensor([-0.0, 0.0], dtype=f64)
    z = torch.nn.Parameter(torch.tensor([-0.0, 0.0], dtype=f64))
    r = torch.sqrt(z) + torch.sqrt(w) + torch.sqrt(-v) + torch.sqrt(f) + t * k
    y = torch.sqrt(x).sum() + r.sum()
    y.backward()
    values = {"x": x, "w": w, "v": v, "f": f, "t": t, "z": z, "r": r}
    grads = {"x": x.grad, "w": w.grad, "v": v.grad, "f": f.grad, "z": z.grad}
    return ({k: t.detach().reshape(-1).tolist() for k, t in values.items()},
            {k: t.reshape(-1).tolist() for k, t in grads.items()})


def _same(a: float, b: float) -> bool:
    """The same float, the sign of a zero or an infinity included."""
    return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))


def _floats(value) -> list[float]:
    return [float(v) for v in (value if isinstance(value, list) else [value])]


@pytest.fixture
def problem(tmp_path):
    np.save(tmp_path / "zeros.npy", np.array([-0.0, 4.0], dtype=np.float32))
    path = tmp_path / "p.yaml"
    path.write_text(PROBLEM)
    return path


@pytest.mark.parametrize("mode", [[], ["--float64"]])
def test_solve_holds_the_written_negative_zeros(problem, mode):
    values, grads = _torch()
    assert math.copysign(1, values["x"][0]) == -1 and math.copysign(1, values["x"][4]) == 1   # -0 is int 0
    result = CliRunner().invoke(main, ["solve", "--json", *mode, str(problem)])
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)["variants"]["default"]
    for name, expected in values.items():
        shown = _floats(got["values"][name]["value"])
        assert all(_same(a, b) for a, b in zip(shown, expected)), (name, shown, expected)
    assert _floats(got["values"]["k"]["value"]) == [0, 1]
    for name, expected in grads.items():
        shown = _floats(got["grads"][name]["value"])
        assert all(_same(a, b) for a, b in zip(shown, expected)), (name, shown, expected)


def test_verify_builds_the_negative_zeros(problem):
    from adjoint.api import load
    from adjoint.torchside.values import leaf_tensor

    p = load(str(problem))
    x = leaf_tensor(next(d for d in p.variants[0].inputs if d.name == "x"), torch.float32, {})
    assert torch.signbit(x).tolist() == [True, False, True, True, False, False, True]


def test_a_negative_zero_in_an_expression_is_refused(problem):
    path = problem.parent / "e.yaml"
    path.write_text(PROBLEM.replace("return sum(sqrt(x))", "return sum(sqrt(x * -0.0))"))
    result = CliRunner().invoke(main, ["solve", str(path)])
    assert result.exit_code == 2
    assert "e.yaml:16:25:" in result.output and "negative zero" in result.output


POWERS = """\
name: half-powers-at-negative-zero
dtype: float64
inputs:
  x: {value: [-0.0, 4.0], requires_grad: true}
  u: {value: [-0.0, 4.0], requires_grad: true}
model:
  inputs: [x, u]
  forward: "x ** 0.5 + u ** -0.5"
loss: "sum(y)"
"""
#: exact mode refuses -0.5's infinity at 0 (it answers in doubles only: docs/not-modelled.md)
EXACT_POWERS = POWERS.replace("u ** -0.5", "u * 2")


@pytest.mark.parametrize("mode", [[], ["--float64"]])
def test_half_powers_keep_the_sign_of_a_negative_zero(tmp_path, mode):
    """x ** 0.5 and x ** -0.5 run as sqrt and 1 / sqrt in PyTorch's CPU kernel: at -0.0 the
    results are -0.0 and -inf, and x ** 0.5's derivative -inf. --float64 used C's pow, which
    gives +0.0 and +inf there (the exact answer was right); plain torch is the expectation."""
    x = torch.tensor([-0.0, 4.0], dtype=torch.float64, requires_grad=True)
    u = torch.tensor([-0.0, 4.0], dtype=torch.float64, requires_grad=True)
    y = x ** 0.5 + (u ** -0.5 if mode else u * 2)
    y.sum().backward()
    path = tmp_path / "p.yaml"
    path.write_text(POWERS if mode else EXACT_POWERS)
    result = CliRunner().invoke(main, ["solve", "--json", *mode, str(path)])
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)["variants"]["default"]
    for name, expected in (("y", y.detach()), ("x", x.grad), ("u", u.grad)):
        shown = _floats((got["values"] if name == "y" else got["grads"])[name]["value"])
        assert all(_same(a, b) for a, b in zip(shown, expected.tolist())), (name, shown, expected)
