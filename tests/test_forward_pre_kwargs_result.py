"""A with_kwargs forward_pre hook's result that is not a tuple of two: PyTorch's RuntimeError,
its message showing the result (torch 2.13, by hand: ``lin.register_forward_pre_hook(lambda m, a,
k: [1, 2], with_kwargs=True); lin(x)`` raises "forward pre-hook must return None or a tuple of
(new_args, new_kwargs), but got [1, 2]."). A list of two that holds tensors was taken as (args,
kwargs) -- an answer where PyTorch raises; its message would print the tensors, so it is refused."""

from __future__ import annotations

import pytest

import adjoint
from adjoint.format.errors import ProblemError

FILE = """
name: kw_result
inputs:
  x: {value: [[0.5, -1]], requires_grad: true}
model:
  children:
    lin: {type: Linear, params: {weight: [[1, 2], [0.5, -1]], bias: [0.25, 0.5]}}
  forward: |
    return lin(x)
loss: "sum(y)"
hooks: [{module: lin, kind: forward_pre, with_kwargs: true, returns: "RETURNS"}]
"""


@pytest.mark.parametrize("returns, shown", [("2", "2"), ("2.5", "2.5"), ("()", "()"), ("[1, 2]", "[1, 2]"),
                                            ("(1, None, 0.5)", "(1, None, 0.5)")])
def test_message_shows_the_result(returns, shown):
    got = adjoint.loads(FILE.replace("RETURNS", returns)).solve().to_json()["variants"]["default"]["error"]
    assert got == {"type": "RuntimeError", "during": "forward", "after_call": 0,
                   "message": f"forward pre-hook must return None or a tuple of (new_args, new_kwargs), but got {shown}."}


def test_a_list_pair_with_tensors_is_refused():
    with pytest.raises(ProblemError, match="tuple"):
        adjoint.loads(FILE.replace("RETURNS", "[(input[0] * 2,), kwargs]")).solve()


@pytest.mark.parametrize("returns, shown", [("0.1 + 0.2", "0.30000000000000004"), ("3 * 0.1", "0.30000000000000004"),
                                            ("2 / 3", "0.6666666666666666"), ("1e-7", "1e-07"), ("1e20", "1e+20"),
                                            ("(1 - 0.9, 2, None)", "(0.09999999999999998, 2, None)")])
def test_a_computed_float_is_printed_as_python_rounds_it(returns, shown):
    """Python's float arithmetic, not adjoint's exact numbers (3/10 printed 0.3): the messages of
    torch 2.13 for ``lambda m, a, k: 0.1 + 0.2`` and the rest."""
    got = adjoint.loads(FILE.replace("RETURNS", returns)).solve().to_json()["variants"]["default"]["error"]
    assert got["message"] == f"forward pre-hook must return None or a tuple of (new_args, new_kwargs), but got {shown}."


def test_a_float_local_is_refused():
    """A float the body computed into a local: Python's rounding along the way is not followed."""
    text = FILE.replace('returns: "RETURNS"', 'does: "s = 0.1 + 0.2", returns: "s"')
    with pytest.raises(ProblemError, match="float computed other than from number literals"):
        adjoint.loads(text).solve()
