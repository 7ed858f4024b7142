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
])
def test_said_at_the_line(line, said, tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(FILE.format(line=line))
    with pytest.raises(ProblemError) as err:
        adjoint.load(str(path)).solve()
    assert str(err.value).startswith(f"{path}:6:") and said in str(err.value), str(err.value)
