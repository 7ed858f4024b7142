"""A hook whose body runs a backward that reaches the same hook again recurses without end (a
script doing it in PyTorch does not finish); the file is refused at the backward's own line, one
located line, not "input nested too deeply" (found by the contract audit)."""

from __future__ import annotations

import pytest

import adjoint
from adjoint.format.errors import ProblemError

FILE = """name: recursive
inputs:
  x: {value: [1, 2], requires_grad: true}
model:
  params: {w: [2, 3]}
  forward: |
    h = w * x
    p = sum(h ** 2)
    return sum(exp(h))
hooks:
  - {tensor: h, does: "backward(p, retain_graph=True)"}
"""


def test_a_hook_backward_that_reaches_itself_is_refused_at_its_line(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(FILE)
    with pytest.raises(ProblemError) as err:
        adjoint.load(str(path)).solve()
    assert str(err.value).startswith(f"{path}:11:")
    assert "never finishes" in str(err.value) and "\n" not in str(err.value)


def test_the_same_with_autograd_grad(tmp_path):
    """The autograd.grad form (a hook handing its own grad on as grad_outputs) likewise."""
    path = tmp_path / "p.yaml"
    path.write_text(FILE.replace('does: "backward(p, retain_graph=True)"',
                                 'does: "autograd.grad(h, [x], grad_outputs=grad, retain_graph=True)"'))
    with pytest.raises(ProblemError) as err:
        adjoint.load(str(path)).solve()
    assert str(err.value).startswith(f"{path}:11:")
    assert "autograd.grad(...)" in str(err.value) and "never finishes" in str(err.value)
