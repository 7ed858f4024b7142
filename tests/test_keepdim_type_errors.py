"""A keepdim PyTorch's argument parser refuses (torch 2.13): without dim, no overload takes it
and the parser lists them all, by call form (``x.sum(keepdim=True)``, ``torch.max(x,
keepdim=1)``); with dim, a keepdim that is not a bool is the dim overload's own TypeError,
"(position N)" when passed by position. Both compared here with real torch's type and message
(signature.keepdim_without_dim and keepdim_flag); the regression files
keepdim_without_dim_is_an_answer.yaml and reduction_keepdim_and_empty_errors_are_answers.yaml
check the run through verify."""

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402

X = torch.tensor([[1., 2, 3], [4, 5, 6]])
VALUES = (("True", True), ("1", 1), ("1.5", 1.5), ("1.0", 1.0))


def _error(call: str) -> tuple:
    text = f"""
name: k
inputs:
  x: {{value: [[1, 2, 3], [4, 5, 6]], requires_grad: true}}
model:
  inputs: [x]
  forward: "{call}"
"""
    error = adjoint.loads(text).solve().variants[0].to_json()["error"]
    return error["type"], error["message"]


@pytest.mark.parametrize("fn", ["sum", "mean", "prod", "max", "min"])
@pytest.mark.parametrize("method", [True, False])
@pytest.mark.parametrize("literal,value", VALUES)
def test_keepdim_without_dim_lists_the_overloads_as_torch(fn, method, literal, value):
    with pytest.raises(TypeError) as theirs:
        getattr(X, fn)(keepdim=value) if method else getattr(torch, fn)(X, keepdim=value)
    call = f"x.{fn}(keepdim={literal})" if method else f"torch.{fn}(x, keepdim={literal})"
    assert _error(call) == ("TypeError", str(theirs.value))


@pytest.mark.parametrize("call", ["x.sum(0, 1)", "torch.sum(x, 0, keepdim=1.5)", "x.mean((0,), keepdim=2)",
                                  "x.logsumexp(0, 1)", "torch.logsumexp(x, (0, 1), 0.5)", "x.prod(1, 1.5)",
                                  "torch.prod(x, 1, keepdim=2)", "x.max(1, 1)", "x.min(0, keepdim=1.5)",
                                  "torch.sum(x, 0, x)", "x.sum(0, 1.0)", "torch.prod(x, 1, keepdim=2.0)"])
def test_a_keepdim_that_is_not_a_bool_is_torchs_error(call):
    namespace = {"torch": torch, "x": X}
    with pytest.raises(TypeError) as theirs:
        eval(call, namespace)   # the test's own torch call, not the engine's
    assert _error(call) == ("TypeError", str(theirs.value))
