"""``//`` of Python numbers in a forward: Python's own floor division (checked against Python
itself here, torch against the regression file floor_division_of_sizes.yaml); of a tensor it is
refused in one located line."""

from __future__ import annotations

import pytest

import adjoint
from adjoint.format.errors import ProblemError

FILE = """name: fd
dtype: float64
inputs:
  x: {{value: [[1, 2, 3, 4, 5, 6, 7]], requires_grad: true}}
model:
  forward: |
    B, C = x.shape
    return x.sum() * ({expr})
loss: "y"
"""


@pytest.mark.parametrize("expr, python", [
    ("C // 2", 7 // 2), ("(-C) // 2", -7 // 2), ("C // -2", 7 // -2), ("(-C) // -2", -7 // -2),
    ("C // 7", 1), ("(C - 7) // 3", 0), ("C // 2.5", 7 // 2.5), ("(C / 2) // 1", 3.5 // 1),
])
def test_python_floor_division(expr, python, tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(FILE.format(expr=expr))
    loss = adjoint.load(str(path)).solve().to_json()["variants"]["default"]["loss"]["value"]
    assert loss == 28 * python


def test_of_a_tensor_is_refused_at_its_operator(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(FILE.format(expr="x // 2").replace("x.sum() * (x // 2)", "(x // 2).sum()"))
    with pytest.raises(ProblemError) as err:
        adjoint.load(str(path)).solve()
    assert str(err.value).startswith(f"{path}:8:") and "floor_divide" in str(err.value)


def test_floor_divide_assignment_stays_refused(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(FILE.format(expr="C").replace("    B, C = x.shape\n", "    B, C = x.shape\n    C //= 2\n"))
    with pytest.raises(ProblemError, match="operator '//=' is not allowed"):
        adjoint.load(str(path))


@pytest.mark.parametrize("expr, said", [
    ("x.view(B, C // 1.0).sum()", "a float among the sizes"),
    ("x.view(B, 7.0).sum()", "a float among the sizes"),
    ("x[:, :C // 1.0].sum()", "slice indices must be integers"),
    ("x[0, C // 2.0]", "a float index: PyTorch raises IndexError"),
    ("x.sum(dim=x.ndim // 2.0).sum()", "argument 'dim' is a float"),
])
def test_a_float_where_pytorch_takes_an_int_is_not_answered(expr, said, tmp_path):
    """C // 2.0 is a Python float (3.0): PyTorch's parser refuses it as a size, an index or a dim
    (TypeError), which adjoint refuses to answer rather than take it for the int 3."""
    path = tmp_path / "p.yaml"
    path.write_text(FILE.format(expr="1").replace("return x.sum() * (1)", f"return {expr}"))
    with pytest.raises(ProblemError, match=said):
        adjoint.load(str(path)).solve()
