"""PyTorch's argument parser takes NumPy's names too: ``x.sum(axis=0, keepdims=True)`` is
``x.sum(dim=0, keepdim=True)`` (python_arg_parser.cpp). adjoint refused them as PyTorch's
TypeError; a keyword adjoint does not model is now said to be that, not a user's mistake.
Found by a contract audit; expected values from real torch, run here."""

from __future__ import annotations

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402

TEXT = """
name: axis
dtype: float64
inputs:
  x: {value: [[0.5, 1], [2, 0.25]], requires_grad: true}
model:
  forward: |
    a = x.sum(axis=0, keepdims=True)
    b = torch.mean(x, axis=1)
    c = x.amax(axis=1)
    return (a * a).sum() + (b * x).sum() + c.sum()
"""


def test_numpy_names_are_the_same_call():
    x = torch.tensor([[0.5, 1], [2, 0.25]], dtype=torch.float64, requires_grad=True)
    a = x.sum(axis=0, keepdims=True)
    b = torch.mean(x, axis=1)
    c = x.amax(axis=1)
    ((a * a).sum() + (b * x).sum() + c.sum()).backward()
    got = adjoint.loads(TEXT).solve().to_json()["variants"]["default"]
    assert got["grads"]["x"]["value"] == x.grad.tolist()
    assert [got["values"][n]["grad_fn"] for n in "abc"] == [t.grad_fn.name() for t in (a, b, c)]
    assert got["values"]["a"]["shape"] == list(a.shape)


def test_an_unmodelled_keyword_is_said_to_be_one():
    with pytest.raises(ProblemError, match=r"'rounding_mode=' of Tensor.div\(\) is not modelled \(a PyTorch argument "
                                           r"adjoint does not model yet, .*\); call it with input, other"):
        adjoint.loads(TEXT.replace("x.sum(axis=0, keepdims=True)", "x.div(2, rounding_mode='floor')")).solve()


@pytest.mark.parametrize("line, call", [
    ("F.softmax(x, axis=1)", lambda x: torch.nn.functional.softmax(x, axis=1)),
    ("x.norm(dim=1, keepdims=True)", lambda x: x.norm(dim=1, keepdims=True)),
    ("x.split(1, axis=1)[0]", lambda x: x.split(1, axis=1)[0]),
    ("x.sum(dim=1, axis=1)", lambda x: x.sum(dim=1, axis=1)),
])
def test_python_level_functions_do_not_take_numpy_names(line, call):
    """Only PyTorch's C++ argument parser maps axis= to dim=: F.softmax, Tensor.norm and
    Tensor.split are Python functions, and both names at once is the parser's TypeError. adjoint
    answered them with gradients (found by an adversarial review); they are refused now."""
    with pytest.raises(TypeError):
        call(torch.tensor([[0.5, 1], [2, 0.25]]))
    with pytest.raises(ProblemError, match="'(axis|keepdims)=' of|one argument twice"):
        adjoint.loads(TEXT.replace("x.amax(axis=1)", line)).solve()
