"""The differential harness's "overflow" category (tests/gen/check.py) excuses a disagreement
only where an exact forward value is finite but beyond the dtype's range (PyTorch's floats
overflowed there). A value that is inf exactly -- a ``-inf`` attention mask the file gives, what
is computed from it -- is no overflow: a disagreement beside it must stay a mismatch (it was
excused, which hid a wrong MultiheadAttention mask gradient from the regression suite)."""

from __future__ import annotations

import adjoint
from gen.check import _forward_beyond_range

MASKED = """\
name: masked
inputs:
  x: {value: [1.0, 2.0], requires_grad: true}
  m: [0.0, -inf]
model:
  inputs: [x, m]
  forward: "x + m"
loss: "sum(y.exp())"
"""


def test_an_exact_infinity_given_in_the_file_is_no_overflow(tmp_path):
    path = tmp_path / "masked.yaml"
    path.write_text(MASKED)
    problem = adjoint.load(str(path))
    vp = problem.solve().variants[0]
    assert _forward_beyond_range(vp, problem.dtype) is False
