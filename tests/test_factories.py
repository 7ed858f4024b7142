"""Constants a forward or a hook body makes: ``torch.zeros``, ``ones``, ``full``, ``arange``, ``eye``
(with ``dtype=`` and ``device=x.device``), ``x.bool()`` and ``x.device``. They were "a PyTorch
function adjoint does not model yet", so a GPT-style ``pos = torch.arange(T)`` or a causal mask
``torch.ones(T, T).triu(1).bool()`` could not be written, and ``adjoint import`` refused them.

Every expected dtype, value and message comes from running the same call in real torch here.
"""

from __future__ import annotations

import textwrap

import pytest
from conftest import import_and_verify, require_torch

torch = require_torch()

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402
from gen import check  # noqa: E402

DTYPES = {torch.float32: "float32", torch.float64: "float64", torch.int64: "int64", torch.bool: "bool"}


def _file(expr: str, dtype: str = "float32", extra: str = "") -> str:
    return textwrap.dedent(f"""\
        name: constants
        dtype: {dtype}
        inputs:
          x: {{value: [[1, 2, 3], [4, 5, 6]], requires_grad: true}}
        model:
          inputs: [x]
          forward: |
            B, T = x.shape
            {extra}
            c = {expr}
            return x * 2
        loss: "sum(y)"
        """)


#: (expression in the file, the same in torch given x): dtype inference, sizes from names, dtype=, device=
CASES = [
    ("torch.zeros(2, 3)", lambda x: torch.zeros(2, 3)),
    ("torch.zeros((B, T))", lambda x: torch.zeros((2, 3))),
    ("torch.ones(T, dtype=torch.long)", lambda x: torch.ones(3, dtype=torch.long)),
    ("torch.ones(2, 2, dtype=torch.bool)", lambda x: torch.ones(2, 2, dtype=torch.bool)),
    ("torch.full((2,), 3)", lambda x: torch.full((2,), 3)),
    ("torch.full((2,), 3.0)", lambda x: torch.full((2,), 3.0)),
    ("torch.full((2, 2), True)", lambda x: torch.full((2, 2), True)),
    ("torch.full((2, 2), float('-inf')).triu(1)", lambda x: torch.full((2, 2), float("-inf")).triu(1)),
    ("torch.arange(T)", lambda x: torch.arange(3)),
    ("torch.arange(x.size(1))", lambda x: torch.arange(3)),
    ("torch.arange(1, 7, 2)", lambda x: torch.arange(1, 7, 2)),
    ("torch.arange(5, 1, -2)", lambda x: torch.arange(5, 1, -2)),
    ("torch.arange(2, 2)", lambda x: torch.arange(2, 2)),
    ("torch.arange(3.0)", lambda x: torch.arange(3.0)),
    ("torch.arange(0, T, dtype=torch.float32, device=x.device)", lambda x: torch.arange(0, 3, dtype=torch.float32)),
    ("torch.eye(3)", lambda x: torch.eye(3)),
    ("torch.eye(2, T)", lambda x: torch.eye(2, 3)),
    ("torch.ones(T, T).triu(1).bool()", lambda x: torch.ones(3, 3).triu(1).bool()),
    ("(x * 0).bool()", lambda x: (x * 0).bool()),
    ("torch.tensor([1, 2])", lambda x: torch.tensor([1, 2])),
    ("torch.tensor([[1, 2], [3, 4.5]])", lambda x: torch.tensor([[1, 2], [3, 4.5]])),
    ("torch.tensor([True, 2])", lambda x: torch.tensor([True, 2])),
    ("torch.tensor(2.5)", lambda x: torch.tensor(2.5)),
    ("torch.tensor([float('-inf'), 0.0])", lambda x: torch.tensor([float("-inf"), 0.0])),
    ("torch.tensor([])", lambda x: torch.tensor([])),
    ("torch.linspace(0, 1, 5)", lambda x: torch.linspace(0, 1, 5)),
    ("torch.linspace(1, -1, 3)", lambda x: torch.linspace(1, -1, 3)),
    ("torch.linspace(0, 4, 5, dtype=torch.long)", lambda x: torch.linspace(0, 4, 5, dtype=torch.long)),
    ("torch.linspace(0, 1, 1)", lambda x: torch.linspace(0, 1, 1)),
    ("torch.as_tensor([1, 2.5])", lambda x: torch.as_tensor([1, 2.5])),
    ("torch.as_tensor([[1, 0], [0, 1]])", lambda x: torch.as_tensor([[1, 0], [0, 1]])),
]


@pytest.mark.parametrize("expr, made", CASES, ids=[c[0] for c in CASES])
def test_a_constant_has_torchs_dtype_and_values(expr, made):
    x = torch.tensor([[1., 2, 3], [4, 5, 6]], requires_grad=True)
    want = made(x)
    got = adjoint.loads(_file(expr)).solve().to_json()["variants"]["default"]["values"]["c"]
    assert got.get("dtype", "float32") == DTYPES[want.dtype], (got, want)
    assert got["shape"] == list(want.shape)
    assert got["value"] == want.tolist()
    assert got["requires_grad"] is False and got["grad_fn"] is None


@pytest.mark.parametrize("expr, made", CASES, ids=[c[0] for c in CASES])
def test_a_constant_verifies_against_torch(expr, made):
    outcome = check(_file(expr), timeout=60)
    assert outcome.ok, outcome.report()


ERRORS = ["torch.linspace(0, 1, -1)", "torch.tensor([[1], [2, 3]])", "torch.tensor([[1], 2])", "torch.zeros(2, -1)", "torch.ones(-1)", "torch.full((2, -3), 1.0)", "torch.arange(5, 1)",
          "torch.arange(0, 5, 0)", "torch.eye(-1)", "torch.eye(2, -1)"]


@pytest.mark.parametrize("expr", ERRORS)
def test_pytorchs_errors_are_answers(expr):
    with pytest.raises((RuntimeError, ValueError, TypeError)) as info:
        eval(expr, {"torch": torch})   # the test's own constant expressions, to get torch's message
    error = adjoint.loads(_file(expr)).solve().to_json()["variants"]["default"]["error"]
    assert (error["type"], error["message"], error["during"]) == (type(info.value).__name__, str(info.value), "forward")


@pytest.mark.parametrize("expr, extra, message", [
    ("torch.zeros(2, 3, dtype=torch.float64)", "", "torch.zeros() makes a float64 tensor here (dtype=) and this run "
                                                   "is float32"),
    ("torch.arange(n)", "n, m = (3, 4)", "cannot tell it from these expressions"),
    ("torch.zeros(2, requires_grad=True)", "", "makes a new leaf"),
    ("torch.full((2,), 0.1)", "", "which float32 does not hold exactly"),
    ("torch.tensor([0.1, 1])", "", "which float32 does not hold exactly"),
    ("torch.tensor([1, [2]])", "", "holding both numbers and lists"),
    ("torch.tensor(x)", "", "torch.tensor() of a tensor"),
    ("torch.linspace(0, 1, 4)", "", "rounds in float32"),
    ("torch.arange(0.5, 2)", "", "arguments that are not integers"),
])
def test_what_is_not_modelled_is_one_line(expr, extra, message):
    dtype = "float64" if "run is float64" in message else "float32"
    with pytest.raises(ProblemError, match=message.replace("(", r"\(").replace(")", r"\)")):
        adjoint.loads(_file(expr, dtype, extra)).solve()


def test_a_gpt_style_forward_imports_and_verifies_against_the_users_module(tmp_path):
    """Positions from torch.arange(0, T, dtype=torch.long, device=idx.device), a causal mask from
    torch.ones(T, T).triu(1).bool(), masked_fill(..., float("-inf")): import refused all three."""
    user = tmp_path / "gpt.py"
    user.write_text(textwrap.dedent('''
        import torch
        import torch.nn as nn

        class Tiny(nn.Module):
            def __init__(self):
                super().__init__()
                self.tok = nn.Embedding(5, 4)
                self.pos = nn.Embedding(3, 4)
                self.head = nn.Linear(4, 5)

            def forward(self, idx):
                B, T = idx.size()
                pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
                h = self.tok(idx) + self.pos(pos)
                mask = torch.triu(torch.ones(T, T), diagonal=1).bool()
                s = (h @ h.transpose(-2, -1)).masked_fill(mask, float("-inf"))
                return self.head(torch.softmax(s, dim=-1) @ h)

        def make():
            torch.manual_seed(0)
            return Tiny()
        '''))
    text = import_and_verify(f"{user}:make", ["idx=2x3:int64:0-5"], "sum(y)", str(tmp_path / "gpt.yaml"), origin=True)
    assert "torch.arange(0, 3, dtype=torch.int64, " in text and 'float("-inf")' in text


def test_a_constant_of_another_float_dtype_returned_by_a_hook_is_pytorchs_type_error():
    """With grad mode off (a hook body) a float64 constant in a float32 file is made, as x.double()
    is there; returned by the hook it is PyTorch's error (it was refused as mixing dtypes; found by
    an adversarial check)."""
    x = torch.tensor([[1., 2], [3, 4]], requires_grad=True)
    h = x * x
    h.register_hook(lambda grad: torch.zeros(2, 2, dtype=torch.float64))
    with pytest.raises(RuntimeError) as info:
        (h * h).sum().backward()
    text = """
name: hook_returns_float64
inputs:
  x: {value: [[1, 2], [3, 4]], requires_grad: true}
model:
  inputs: [x]
  forward: |
    h = x * x
    return h
loss: "sum(y * y)"
hooks:
  - {tensor: h, returns: "torch.zeros(2, 2, dtype=torch.float64)"}
"""
    error = adjoint.loads(text).solve().to_json()["variants"]["default"]["error"]
    assert (error["type"], error["during"]) == ("RuntimeError", "backward")
    # PyTorch names the hook by its Python name ('<lambda>' here), a file's hook 'hook'
    assert error["message"] == str(info.value).replace("'<lambda>'", "'hook'")


def test_as_tensor_of_a_tensor_is_that_tensor():
    """torch.as_tensor(x) of a tensor of its own dtype is x itself (no copy, no node): the gradient
    flows through it into x, as in torch."""
    x = torch.tensor([[1., 2, 3], [4, 5, 6]], requires_grad=True)
    assert torch.as_tensor(x) is x
    text = _file("torch.as_tensor(x)").replace("return x * 2", "return c * 2")
    v = adjoint.loads(text).solve().to_json()["variants"]["default"]
    assert v["values"]["c"]["grad_fn"] is None and v["values"]["c"]["requires_grad"] is True
    assert v["grads"]["x"]["value"] == [[2.0] * 3] * 2

