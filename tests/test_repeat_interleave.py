"""``repeat_interleave`` with an int ``repeats`` against real torch: ATen's composite (no dim:
flatten first; unsqueeze, expand, contiguous clone, flatten), compared on the node chain, values,
grads, the legacy hook's grad_input and the saved-tensor packs (tests/opcheck.py); its errors as
PyTorch words them; a tensor of repeats with output_size refused (a tensor of repeats:
tests/test_repeat_interleave_tensor.py)."""

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402
from opcheck import case  # noqa: E402

X = {"a": ([[[1, -2], [0.5, 3]], [[2, 1], [-1, 0.25]]], True)}
V = {"a": ([1, -2, 0.5], True)}
S = {"a": (1.5, True)}


@pytest.mark.parametrize("expr,fn,inputs", [
    ("a.repeat_interleave(2, dim=2)", lambda a: a.repeat_interleave(2, dim=2), X),
    ("a.repeat_interleave(2, dim=2).repeat_interleave(2, dim=1)",
     lambda a: a.repeat_interleave(2, dim=2).repeat_interleave(2, dim=1), X),
    ("torch.repeat_interleave(a, 3, -1)", lambda a: torch.repeat_interleave(a, 3, -1), X),
    ("torch.repeat_interleave(a, 2)", lambda a: torch.repeat_interleave(a, 2), X),
    ("a.repeat_interleave(2)", lambda a: a.repeat_interleave(2), V),
    ("a.repeat_interleave(3, 0)", lambda a: a.repeat_interleave(3, 0), V),
    ("a.repeat_interleave(2)", lambda a: a.repeat_interleave(2), S),
    ("a.transpose(0, 2).repeat_interleave(2, 1, output_size=4)",
     lambda a: a.transpose(0, 2).repeat_interleave(2, 1, output_size=4), X),
])
def test_against_torch(expr, fn, inputs):
    assert case(inputs, expr, fn) == []


@pytest.mark.parametrize("expr,fn,kind", [
    ("a.repeat_interleave(-1, 0)", lambda a: a.repeat_interleave(-1, 0), RuntimeError),
    ("a.repeat_interleave(-1)", lambda a: a.repeat_interleave(-1), RuntimeError),
    ("a.repeat_interleave(2, 3)", lambda a: a.repeat_interleave(2, 3), IndexError),
    ("a.repeat_interleave(2, 1, output_size=5)", lambda a: a.repeat_interleave(2, 1, output_size=5), RuntimeError),
])
def test_errors_are_pytorchs(expr, fn, kind):
    text = f"""
name: e
dtype: float64
inputs:
  a: {{value: [[1, 2], [3, 4]], requires_grad: true}}
model:
  inputs: [a]
  forward: "{expr}.sum()"
"""
    v = adjoint.loads(text).solve().variants[0]
    with pytest.raises(kind) as theirs:
        fn(torch.tensor([[1., 2], [3, 4]], dtype=torch.float64, requires_grad=True))
    assert (v.error.type, v.error.message) == (kind.__name__, str(theirs.value))


def test_a_tensor_of_repeats_with_output_size_is_refused():
    text = """
name: r
inputs:
  a: {value: [1, 2], requires_grad: true}
  r: {value: [1, 2], dtype: int64}
model:
  inputs: [a, r]
  forward: "a.repeat_interleave(r, output_size=3).sum()"
"""
    with pytest.raises(ProblemError) as err:
        adjoint.loads(text).solve()
    assert "output_size" in str(err.value) and "\n" not in str(err.value)
