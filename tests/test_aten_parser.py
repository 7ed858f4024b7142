"""``torch.relu`` / ``torch.selu`` / ``torch.celu`` / ``torch.threshold`` / ``torch.dropout``: ATen's
own bindings, which take fewer (or other) arguments than ``F.X`` (adjoint.engine.bindings.aten_parser).
A call torch's argument parser refuses (``torch.relu(x, inplace=True)``, ``torch.dropout(x, 0.0,
training=False)``) was answered with F's signature; it is PyTorch's TypeError, compared here with
real torch 2.13's words, and a call it takes gives torch's values. Also torch.as_tensor's keyword-only
dtype, torch.einsum(*args)'s keywords and tensor_split's keyword no overload takes."""

from __future__ import annotations

import textwrap

import pytest

from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402

X = [[0.5, -1.0, 2.0, 1.0], [1.5, 0.25, -0.5, 3.0]]


def _solve(expr: str) -> dict:
    text = textwrap.dedent(f"""\
        name: aten
        dtype: float64
        inputs:
          x: {{value: {X}, requires_grad: true}}
        model:
          forward: |
            h = {expr}
            return h
        loss: "sum(y * y)"
        """)
    return adjoint.loads(text).solve().variants[0].to_json()


def _torch(expr: str):
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    return x, eval(expr, {"torch": torch, "x": x})   # the test's own literal expressions


ERRORS = [
    "torch.relu(x, True)", "torch.relu(x, inplace=False)", "torch.relu(x, True, inplace=True)",
    "torch.relu(x * 1, inplace=True, foo=1)", "torch.selu(x, False)", "torch.selu(x, inplace=False)",
    "torch.celu(x, 1.0, False)", "torch.celu(x, inplace=True)", "torch.threshold(x, 0.5, 2.0, False)",
    "torch.threshold(x, 0.5, 2.0, inplace=True)", "torch.threshold(x, 0.5)", "torch.threshold(x)",
    "torch.threshold(x, value=1.0)", "torch.dropout(x)", "torch.dropout(x, 0.0)", "torch.dropout(x, train=True)",
    "torch.dropout(x, 0.0, training=False)", "torch.dropout(x, 0.0, True, training=True)",
    "torch.dropout(x, 0.0, True, False)", "torch.dropout(x, p=0.0, train=False, inplace=False)",
    "torch.dropout(x, 0.0, True, p=0.1)",
    # torch.as_tensor(data, *, dtype=None, device=None); torch.einsum(*args)
    "torch.as_tensor(x, torch.float64)", "torch.as_tensor(x, torch.float64, None)",
    "torch.einsum(equation='ij->ji', operands=[x])",
]


@pytest.mark.parametrize("expr", ERRORS)
def test_the_argument_parsers_type_error_is_torchs(expr):
    with pytest.raises(TypeError) as theirs:
        _torch(expr)
    js = _solve(expr)
    assert js["error"]["type"] == "TypeError"
    assert js["error"]["message"] == str(theirs.value)


@pytest.mark.parametrize("expr", [
    "torch.relu(input=x)", "torch.selu(x)", "torch.celu(x, alpha=0.5)", "torch.celu(x, 0.25)",
    "torch.threshold(x, 0.5, value=1.0)", "torch.dropout(x, 0.0, True)", "torch.dropout(input=x, p=0.0, train=False)",
    "torch.dropout(x, 0.5, train=False)",
])
def test_a_call_aten_takes_is_torchs_value(expr):
    x, h = _torch(expr)
    (h * h).sum().backward()
    js = _solve(expr)
    assert "error" not in js or js["error"] is None
    assert torch.allclose(torch.tensor(js["values"]["h"]["value"], dtype=torch.float64), h.detach(), rtol=1e-12)
    assert torch.allclose(torch.tensor(js["grads"]["x"]["value"], dtype=torch.float64), x.grad, rtol=1e-12)


@pytest.mark.parametrize("expr", ["torch.tensor_split(x, indices_or_sections=2)[0]",
                                  "x.tensor_split(indices_or_sections=2)[0]"])
def test_a_keyword_no_overload_takes_is_refused(expr):
    """tensor_split's overloads name it sections / indices / tensor_indices_or_sections: PyTorch's
    'invalid combination of arguments' TypeError lists them (not modelled: refused in one line)."""
    with pytest.raises(TypeError, match="invalid combination of arguments"):
        _torch(expr)
    with pytest.raises(adjoint.ProblemError, match="indices_or_sections"):
        _solve(expr)
