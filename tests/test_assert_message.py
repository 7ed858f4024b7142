"""``assert EXPR, "text"``: Python's AssertionError with that text (``str(exc)``), an answer;
a message that is not a string literal is refused at its column. Formerly every message was
refused. The expected text is CPython's: ``str(AssertionError("grad too small"))``."""

from __future__ import annotations

import pytest

import adjoint
from adjoint.format.errors import ProblemError

FILE = """
name: assert_message
inputs:
  x: {value: [[0.5, -1]], requires_grad: true}
model:
  children:
    lin: {type: Linear, params: {weight: [[1, 2], [0.5, -1]], bias: [0.25, 0.5]}}
  forward: |
    h = lin(x)
    return h * h
loss: "sum(y)"
hooks:
  - {tensor: h}
  - {tensor: lin.weight, kind: post_accumulate_grad, does: "DOES"}
"""


def test_failing_assert_has_its_message():
    got = adjoint.loads(FILE.replace("DOES", "assert tensor.grad.sum() > 100, 'grad too small'")).solve().to_json()
    err = got["variants"]["default"]["error"]
    assert (err["type"], err["message"], err["during"], err["after_call"]) == \
        ("AssertionError", "grad too small", "backward", 1)


def test_message_not_a_literal_is_refused():
    with pytest.raises(ProblemError, match="string literal"):
        adjoint.loads(FILE.replace("DOES", "assert tensor.grad.sum() > 100, tensor.grad")).solve()
