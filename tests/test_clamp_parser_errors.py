"""clamp with one Tensor bound and one number: no overload of PyTorch's argument parser takes it,
so its TypeError lists clamp's two overloads, worded by the call form (torch.clamp, x.clamp,
x.clamp_, clip), by how each argument was passed (the keywords in the order the parser's map
holds them) and by each argument's Python type (int, float, complex, read from the literal);
the method's overloads add why they did not match. Every message compared with real torch
2.13's (signature.invalid_combination); regression clamp_mixed_bounds_is_a_type_error checks
the run through verify."""

import itertools

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402

X = torch.tensor([1., 2, 3], requires_grad=True)
T = torch.tensor([0.5, 1, 1.5])


def _error(call: str) -> tuple:
    text = f"""
name: c
inputs:
  x: {{value: [1, 2, 3], requires_grad: true}}
  t: {{value: [0.5, 1, 1.5]}}
model:
  inputs: [x, t]
  forward: |
    {call if "return" in call else "return " + call}
"""
    v = adjoint.loads(text).solve().variants[0]
    error = v.to_json()["error"]
    assert not v.hook_calls
    return error["type"], error["message"]


def _torch(call: str) -> tuple:
    namespace = {"torch": torch, "x": X, "t": T}
    with pytest.raises(TypeError) as theirs:
        eval(call, namespace)   # the test's own torch call, not the engine's
    return "TypeError", str(theirs.value)


_KEYWORDS = [", ".join(f"{k}={v}" for k, v in order)
             for n in (2, 3) for order in itertools.permutations((("input", "x"), ("min", "t"), ("max", "2.5")), n)
             if n == 3 or "input" not in dict(order)]


@pytest.mark.parametrize("call", [
    "torch.clamp(x, t, 2.5)", "torch.clamp(x, 0.5, t)", "torch.clamp(x, t, 2)", "torch.clamp(x, t, 2.0)",
    "torch.clamp(x, t, max=1)", "torch.clamp(x, -1, max=t)", "torch.clip(x, t, 2.5)", "torch.clamp(x, t, 2 + 1j)",
    "x.clamp(t, 2.5)", "x.clamp(1, t)", "x.clamp(t, max=2)", "x.clamp(1.5, max=t)", "x.clamp(min=t, max=2.5)",
    "x.clamp(max=-1, min=t)", "x.clip(t, 0.5)", "x.clip(max=t, min=0.5)", "x.clamp(t, 3j)",
    "(x * 1).clamp_(t, 2.5)", "(x * 1).clamp_(min=2, max=t)", "(x * 1).clip_(t, max=2.5)",
    *(f"torch.clamp({'' if 'input' in k else 'x, '}{k})" for k in _KEYWORDS),
    *(f"x.clamp({k})" for k in _KEYWORDS if "input" not in k),
])
def test_one_tensor_bound_and_one_number_is_the_parsers_type_error(call):
    assert _error(call) == _torch(call)


def test_a_number_bound_from_a_name_is_refused():
    # a name bound where its int or float is not told (a tuple unpacked): refused rather than guessed
    with pytest.raises(adjoint.ProblemError) as err:
        _error("n, m = (3, 4)\n    return torch.clamp(x, t, n)")
    assert "Python type" in str(err.value)


def test_a_size_is_an_int():
    # x.shape[0] and x.size(0) are Python ints: the parser's TypeError says so
    for call in ("torch.clamp(x, t, x.shape[0])", "x.clamp(t, x.size(0))"):
        assert _error(call) == _torch(call)
