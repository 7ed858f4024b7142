"""A TransformerEncoderLayer (and the other composites) without init: takes PyTorch's own values
for the parameters PyTorch makes the same whatever the random state -- the norms' ones and zeros,
the attention's in_proj_bias and out_proj.bias zeros -- as a single built-in module already did
(docs/format.md); it refused the file until they were given by hand (found by a user trial).
The constants are compared with a real torch layer's."""

from __future__ import annotations

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402
from gen import check  # noqa: E402

LAYER = """
name: encoder_layer_defaults
dtype: float64
inputs:
  x: {value: [[[1, 0.5]], [[0.25, -1]]], requires_grad: true}
model:
  children:
    enc:
      type: TYPE
      args: ARGS
      params:
        PARAMS
  forward: "enc(x)"
loss: "(y * y).sum()"
"""

RANDOM = {"self_attn.in_proj_weight": "[[1, 0], [0, 1], [0.5, 0.5], [1, -1], [0.25, 0], [0, 1]]",
          "self_attn.out_proj.weight": "[[1, 0], [0, 1]]", "linear1.weight": "[[1, 0.5], [0.5, 1]]",
          "linear1.bias": "[0, 0.5]", "linear2.weight": "[[1, -0.5], [0.25, 1]]", "linear2.bias": "[0.25, 0]"}


def _text(drop: str | None = None) -> str:
    params = "\n        ".join(f"{k}: {v}" for k, v in RANDOM.items() if k != drop)
    return (LAYER.replace("TYPE", "TransformerEncoderLayer")
            .replace("ARGS", "{d_model: 2, nhead: 1, dim_feedforward: 2, dropout: 0}").replace("PARAMS", params))


def test_the_constant_parameters_are_pytorchs():
    layer = torch.nn.TransformerEncoderLayer(2, 1, 2, 0)
    problem = adjoint.loads(_text())
    decls = {p.name: p for m in problem.model.children for c in _walk(m) for p in c.params}
    for name, p in layer.named_parameters():
        if name in RANDOM:
            continue
        assert [float(v) for v in decls[f"enc.{name}"].value.items] == p.detach().flatten().tolist(), name


def _walk(m):
    yield m
    for c in m.children:
        yield from _walk(c)


def test_a_random_parameter_left_out_is_still_refused():
    with pytest.raises(ProblemError, match="has no values for linear1.weight;"):
        adjoint.loads(_text(drop="linear1.weight"))


def test_it_verifies_against_torch():
    outcome = check(_text(), timeout=60)
    assert outcome.ok, outcome.report()
