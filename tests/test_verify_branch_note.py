"""verify says when a bound covers both sides of a branch point: a value that is exactly 0 at a
ReLU while PyTorch's float32 computes it as a tiny positive number (the helper that tried
adjoint as a user saw a bound of 0.35 on gradients of 0.04, with nothing saying why)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from adjoint.cli import main

KINK = """
name: kink
inputs:
  x: {value: [%s, 0.3], requires_grad: true}
model:
  inputs: [x]
  forward: |
    return torch.relu(x * 0.1 - 0.01)
loss: "sum(y)"
"""


def _verify(tmp_path, first: str) -> dict:
    path = tmp_path / "kink.yaml"
    path.write_text(KINK % first)
    result = CliRunner().invoke(main, ["verify", str(path), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["results"][0]


@pytest.mark.torch
def test_a_value_at_a_kink_in_exact_arithmetic_is_noted(tmp_path):
    """0.1 * 0.1 - 0.01 is 0 exactly, so relu'(0) = 0 and x.grad[0] = 0; in float32 it is
    0.1f * 0.1f - 0.01f > 0, so PyTorch's x.grad[0] is 0.1. verify passes (either side is
    PyTorch's rounding) and says why the bound is that large."""
    import torch

    x = torch.tensor([0.1, 0.3], requires_grad=True)
    torch.relu(x * 0.1 - 0.01).sum().backward()
    assert x.grad[0].item() == pytest.approx(0.1)   # PyTorch took the other side of the kink

    rows = _verify(tmp_path, "0.1")["rows"]
    grad = next(r for r in rows if r["item"] == "grad x")
    assert grad["ok"] and grad["max_abs"] == pytest.approx(0.1, rel=1e-6) and grad["bound"] >= 0.1
    notes = [r for r in rows if r["section"] == "note"]
    assert len(notes) == 1 and "at a branch point" in notes[0]["detail"]


@pytest.mark.torch
def test_inputs_away_from_the_kink_have_no_note(tmp_path):
    rows = _verify(tmp_path, "0.2")["rows"]   # 0.02 - 0.01 = 0.01: far from 0 in any float
    assert not [r for r in rows if r["section"] == "note"]
    grad = next(r for r in rows if r["item"] == "grad x")
    assert grad["ok"] and grad["bound"] < 1e-6
