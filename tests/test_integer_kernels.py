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
    with pytest.raises(ProblemError, match="of an int64 tensor is not modelled"):
        adjoint.load(str(path)).solve()


ALONE = {
    "k @ k": lambda k: k @ k,
    "torch.mm(k, k)": lambda k: torch.mm(k, k),
    "F.max_pool2d(k[None], 2)[0]": lambda k: torch.nn.functional.max_pool2d(k[None], 2)[0],
}


@pytest.mark.parametrize("expr", list(ALONE))
def test_int64_alone_is_computed_as_torch_computes_it(expr, tmp_path):
    """mm and max pooling of int64 operands alone compute (an int64 result), as PyTorch's CPU
    kernels do: answered, not refused (an over-broad refusal once refused them)."""
    got = ALONE[expr](torch.tensor([[3, 1], [0, 2]]))
    assert got.dtype == torch.int64
    torch_value = got.tolist()
    path = tmp_path / "p.yaml"
    path.write_text(FILE.format(expr=expr) + "loss: \"y\"\n")
    answer = adjoint.load(str(path)).solve().to_json()["variants"]["default"]
    assert answer["loss"]["value"] == 10 * sum(sum(r) for r in torch_value)
