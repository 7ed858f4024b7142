"""Refusals of legal PyTorch that adjoint does not model yet say what the call is and what to
write instead, in one located line (each found by a user trial, where the line misled)."""

from __future__ import annotations

import pytest

import adjoint
from adjoint.format.errors import ProblemError

FILE = """name: m
inputs:
  x: {{value: [1, -2], requires_grad: true}}
model:
  forward: |
    {line}
    return x.sum()
"""


@pytest.mark.parametrize("line, said", [
    ("i = where(x > 0)", "torch.where(condition) with one argument is torch.nonzero(condition, as_tuple=True)"),
    ("i = max(1, 2)", "in a problem file it is torch.max, not Python's builtin"),
    # PyTorch 2.13 raises "unflatten got an unexpected error:" followed by its C++ stack trace
    # PyTorch 2.13's x[..., ..., 0] reads past the tensor's sizes: "index 0 is out of bounds for dimension 2 with
    # size 0" here, by chance
    ("i = x.unsqueeze(0)[..., ..., 0]", "an index with two Ellipses (x[..., ..., 0])"),
    # PyTorch 2.13: nan, through -(input * target).sum().fill_(nan)
    ("i = cross_entropy(x[:0], x[:0] * 1)", "cross_entropy of an input with no element (reduction='mean')"),
    ("i = x.sum().unflatten(0, [1])", "unflatten of a 0-d tensor: PyTorch's RuntimeError 'unflatten got an "
                                      "unexpected error' is not modelled"),
])
def test_said_at_the_line(line, said, tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(FILE.format(line=line))
    with pytest.raises(ProblemError) as err:
        adjoint.load(str(path)).solve()
    assert str(err.value).startswith(f"{path}:6:") and said in str(err.value), str(err.value)


def test_a_view_of_another_leafs_grad_assigned_to_grad(tmp_path):
    """a.bias.grad = b.weight.grad[0]: the two share part of their memory, which later in-place
    accumulations would show through (PyTorch); not modelled, so refused rather than copied."""
    path = tmp_path / "p.yaml"
    path.write_text("name: v\ndtype: float64\ninputs:\n  x: {value: [[1, 2], [3, -1]]}\nmodel:\n  children:\n"
                    "    a: {type: Linear, params: {weight: [[0.5, -0.25], [1, 0.75]], bias: [0.125, -0.5]}}\n"
                    "    b: {type: Linear, params: {weight: [[2, -1], [1, 1]], bias: [0.25, 1]}}\n"
                    "  forward: \"b(a(x))\"\nloss: \"sum(y ** 2)\"\nhooks:\n"
                    "  - {tensor: b.weight, kind: post_accumulate_grad, does: \"a.bias.grad = b.weight.grad[0]\"}\n")
    with pytest.raises(ProblemError) as err:
        adjoint.load(str(path)).solve()
    assert str(err.value).startswith(f"{path}:12:") and "a view of another leaf's .grad" in str(err.value)
