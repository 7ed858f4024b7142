"""An int64 (or bool) tensor handed to a kernel that takes floats only (mm, addmm, softmax, the
norms, convolutions, pools, var): PyTorch raises, in words of each kernel's own; adjoint refuses
to answer in one located line (it computed as if the tensor were float). Checked here that torch
does raise for each."""

from __future__ import annotations

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402

FILE = """name: ik
dtype: float64
inputs:
  x: {{value: [[1, 2], [3, 4]], requires_grad: true}}
  k: {{value: [[3, 1], [0, 2]], dtype: int64}}
model:
  inputs: [x, k]
  children:
    lin: {{type: Linear, params: {{weight: [[1, 2], [0.5, -1]], bias: [0, 1]}}}}
  forward: "x.sum() * ({expr}).sum()"
"""

CASES = {
    "k @ x": lambda x, k, lin: k @ x,
    "lin(k)": lambda x, k, lin: lin(k),
    "torch.softmax(k, dim=1)": lambda x, k, lin: torch.softmax(k, dim=1),
    "F.layer_norm(k, [2])": lambda x, k, lin: torch.nn.functional.layer_norm(k, [2]),
    "torch.var(k)": lambda x, k, lin: torch.var(k),
}


@pytest.mark.parametrize("expr", list(CASES))
def test_refused_where_torch_raises(expr, tmp_path):
    x = torch.tensor([[1., 2], [3, 4]], dtype=torch.float64)
    k = torch.tensor([[3, 1], [0, 2]])
    lin = torch.nn.Linear(2, 2).double()
    with pytest.raises((RuntimeError, NotImplementedError)):
        CASES[expr](x, k, lin)
    path = tmp_path / "p.yaml"
    path.write_text(FILE.format(expr=expr))
    with pytest.raises(ProblemError, match="of an int64 tensor: PyTorch refuses it"):
        adjoint.load(str(path)).solve()
