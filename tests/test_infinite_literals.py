"""``-inf`` and ``inf`` in tensor literals (contract v3: "-inf in masks"): a float mask given as
an input, a target or a buffer that does not require grad. Every spelling YAML and Python users
write is read; an infinity where it is not modelled (a tensor that requires grad, an int64 or
bool tensor, a grad_output, a Dropout mask, a complex part) is one line naming the place; NaN
stays refused. Expected values come from real torch, run here on the same numbers.
"""

from __future__ import annotations

import textwrap

import pytest
from conftest import import_and_verify, require_torch

torch = require_torch()

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402
from adjoint.format.problem import Infinite  # noqa: E402

MASKED = """
name: masked_softmax
dtype: float64
inputs:
  s: {value: [[1, 2, 3], [4, 5, 6]], requires_grad: true}
  m: {value: MASK}
  c: [[1, 2, 3], [1, 2, 3]]
model:
  inputs: [s, m, c]
  forward: |
    p = torch.softmax(s + m, dim=-1)
    return p * c
loss: "sum(y)"
hooks:
  - {tensor: s}
"""


def _solve(text: str, mode: str = "exact") -> dict:
    return adjoint.loads(text).solve(mode=mode).to_json()


@pytest.mark.parametrize("spelling", ["-inf", "-.inf", "-Infinity", '"-inf"', "-INF"])
def test_every_spelling_is_minus_infinity(spelling):
    problem = adjoint.loads(MASKED.replace("MASK", f"[[0, {spelling}, 0], [0, 0, {spelling}]]"))
    items = next(d for d in problem.variants[0].inputs if d.name == "m").value.items
    assert items[1] == Infinite(True) and items[5] == Infinite(True)
    assert [float(e) for e in items] == [0, float("-inf"), 0, 0, 0, float("-inf")]


@pytest.mark.parametrize("mode", ["exact", "float64"])
def test_a_float_mask_gives_torchs_softmax_and_gradient(mode):
    out = _solve(MASKED.replace("MASK", "[[0, -inf, 0], [0, 0, -inf]]"), mode)["variants"]["default"]
    s = torch.tensor([[1., 2, 3], [4, 5, 6]], dtype=torch.float64, requires_grad=True)
    m = torch.tensor([[0, float("-inf"), 0], [0, 0, float("-inf")]], dtype=torch.float64)
    c = torch.tensor([[1., 2, 3], [1, 2, 3]], dtype=torch.float64)
    (torch.softmax(s + m, dim=-1) * c).sum().backward()
    assert out["values"]["m"]["value"] == m.tolist()
    if mode == "exact":
        assert out["values"]["m"]["exact"] == [["0", "-inf", "0"], ["0", "0", "-inf"]]
    got = torch.tensor(out["grads"]["s"]["value"], dtype=torch.float64)
    assert torch.allclose(got, s.grad, rtol=1e-14, atol=0), (got, s.grad)
    assert got[0, 1] == 0 and got[1, 2] == 0   # the masked scores get no gradient


def test_a_negative_scale_flips_the_infinity():
    problem = adjoint.loads(MASKED.replace("{value: MASK}", "{value: [[0, -inf, 0], [0, 0, inf]], scale: -2}"))
    items = next(d for d in problem.variants[0].inputs if d.name == "m").value.items
    assert items[1] == Infinite(False) and items[5] == Infinite(True)


@pytest.mark.parametrize("replace, message", [
    ("m: {value: MASK}", "holds an infinity and requires grad"),                     # requires_grad: true below
    ("m: {value: MASK, dtype: int64}", "the int64 tensor 'm' holds an infinity"),
    ("m: {value: MASK, dtype: bool}", "the bool tensor 'm' holds an infinity"),
    ("m: {value: MASK, scale: 0}", "0 * inf is nan"),
    ("m: {value: [[0, nan, 0], [0, 0, 1]]}", "'nan' is not a finite number"),
])
def test_infinities_where_they_are_not_modelled_are_one_line(replace, message):
    text = MASKED.replace("m: {value: MASK}", replace).replace("MASK", "[[0, -inf, 0], [0, 0, -inf]]")
    if "requires grad" in message:
        text = text.replace("m: {value: [[0, -inf, 0], [0, 0, -inf]]}",
                            "m: {value: [[0, -inf, 0], [0, 0, -inf]], requires_grad: true}")
    with pytest.raises(ProblemError, match=message.replace("*", r"\*")):
        adjoint.loads(text)


def test_a_parameter_or_a_grad_output_holding_an_infinity_is_refused():
    param = """
name: p
inputs:
  x: [[1, 2]]
model:
  type: Linear
  params: {weight: [[1, -inf]], bias: [0]}
loss: "sum(y)"
"""
    with pytest.raises(ProblemError, match="parameter 'weight' holds an infinity and requires grad"):
        adjoint.loads(param)
    grad_output = """
name: g
inputs:
  x: {value: [[1, 2]], requires_grad: true}
model:
  type: Linear
  params: {weight: [[1, 2]], bias: [0]}
backward: {grad_output: [[-inf]]}
"""
    with pytest.raises(ProblemError, match="backward.grad_output holds an infinity"):
        adjoint.loads(grad_output)


def test_a_causal_mask_buffer_imports_with_its_infinities_and_verifies(tmp_path):
    """A registered buffer ``triu(full(-inf), 1)``: import used to refuse it ("finite values only")."""
    user = tmp_path / "causal.py"
    user.write_text(textwrap.dedent('''
        import torch
        import torch.nn as nn

        class Causal(nn.Module):
            def __init__(self):
                super().__init__()
                self.q = nn.Linear(4, 4)
                self.register_buffer("mask", torch.triu(torch.full((3, 3), float("-inf")), diagonal=1))

            def forward(self, x):
                h = self.q(x)
                return torch.softmax(h @ h.transpose(-2, -1) / 2.0 + self.mask, dim=-1) @ h

        def make():
            torch.manual_seed(0)
            return Causal()
        '''))
    text = import_and_verify(f"{user}:make", ["x=3x4"], "sum(y)", str(tmp_path / "causal.yaml"))
    assert "mask: [[0, -inf, -inf], [0, 0, -inf], [0, 0, 0]]" in text
