"""float32 tensors in a float64 problem (adjoint.engine.float32_tensors): a constant made without
``dtype=`` is PyTorch's default dtype, float32, and meets the problem's float64 tensors by type
promotion. Each expression is run in real torch (float64 input) and solved: the dtypes, values, nodes
and the gradient agree; where PyTorch's float32 kernel would round, the file is refused in one line."""

from __future__ import annotations

import textwrap

import pytest

import adjoint
from adjoint import ProblemError

torch = pytest.importorskip("torch")

from nn_harness import assert_close, t64, torch_chain, Case  # noqa: E402

X = [0.5, -1, 2]


def _file(expr: str) -> str:
    return textwrap.dedent(f"""\
        name: f32
        dtype: float64
        inputs:
          x: {{value: {X}, requires_grad: true}}
        model:
          forward: |
            c = {expr}
            h = x * c
            return h
        loss: "sum(y * y * y)"
        """)


#: (expression of x in the file, the same in torch): c's dtype is what torch makes it
CASES = [
    ("torch.ones(3)", lambda x: torch.ones(3)),
    ("torch.ones(3) * 3 + 1", lambda x: torch.ones(3) * 3 + 1),
    ("torch.arange(3) * 0.5", lambda x: torch.arange(3) * 0.5),
    ("(x > 0) * 1.0", lambda x: (x > 0) * 1.0),
    ("torch.full((3,), 0.25) - torch.ones(3)", lambda x: torch.full((3,), 0.25) - torch.ones(3)),
    ("torch.zeros(3).double() + 2", lambda x: torch.zeros(3).double() + 2),
    ("torch.ones(1, 3).squeeze(0)", lambda x: torch.ones(1, 3).squeeze(0)),
    ("torch.where(x > 0, x, torch.zeros(3))", lambda x: torch.where(x > 0, x, torch.zeros(3))),
    ("torch.ones(3) + x.sum().detach()", lambda x: torch.ones(3) + x.sum().detach()),
    ("x.detach().float()", lambda x: x.detach().float()),
    ("torch.ones(3).clamp(0.5, 2) * torch.ones(3).neg()", lambda x: torch.ones(3).clamp(0.5, 2) * torch.ones(3).neg()),
    ("torch.eye(3)[0] / 4", lambda x: torch.eye(3)[0] / 4),
]


@pytest.mark.parametrize("expr, made", CASES, ids=[c[0] for c in CASES])
def test_a_float32_constant_meets_float64_as_in_torch(expr, made):
    x = t64(X, True)
    c = made(x)
    h = x * c
    (h * h * h).sum().backward()
    case = Case(_file(expr))
    got = case.json["values"]["c"]
    assert got.get("dtype", "float64") == str(c.dtype).replace("torch.", ""), (got, c.dtype)
    assert "dtype" not in case.json["values"]["h"] and h.dtype == torch.float64
    assert got["value"] == c.tolist()
    assert case.chain("h") == torch_chain(h, {"x": x})
    assert_close(case.value("h"), h, "h")
    assert_close(case.grad("x"), x.grad, "grad of x")


@pytest.mark.parametrize("expr, message", [
    ("torch.ones(3) / 3", "div computed in float32 (PyTorch's default dtype"),             # 1/3 rounds
    ("torch.ones(3) * 0.1", "mul in float32 of the Python number 0.1"),                    # 0.1 rounds to float32 first
    ("torch.ones(3) * x.sum()", "mul makes a float32 tensor that requires grad"),          # float32 result: dims first
    ("torch.ones(3).exp()", "exp computed in float32"),                                    # not one rounding
    ("torch.ones(3, 3) @ x", "of a float32 tensor in a float64 problem"),                  # a product of two dtypes
    ("torch.ones(3).sum() + 0", "of a float32 tensor in a float64 problem"),               # a float32 reduction
])
def test_where_float32_would_round_it_is_one_line(expr, message):
    with pytest.raises(ProblemError, match=message.replace("(", r"\(").replace(")", r"\)")):
        adjoint.loads(_file(expr)).solve()


def test_the_refused_float32_results_are_float32_in_torch():
    """What the refusals above say of PyTorch: each result is float32 (and rounds where said)."""
    x = t64(X, True)
    assert (torch.ones(3) / 3).dtype == torch.float32 and (torch.ones(3) / 3)[0].item() != 1 / 3
    assert (torch.ones(3) * 0.1)[0].item() != 0.1
    assert (torch.ones(3) * x.sum()).dtype == torch.float32


def test_a_float32_constant_verifies_against_torch(tmp_path):
    from gen import check

    outcome = check(_file("torch.arange(3) * 0.5 + torch.ones(3)"), timeout=60)
    assert outcome.ok, outcome.report()
