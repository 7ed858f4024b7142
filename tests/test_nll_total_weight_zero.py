"""cross_entropy / nll_loss averaged over a total weight of 0 (every target ignore_index, or every
target's class weighted 0): PyTorch's loss is 0 / 0 = nan, its gradient zeros (every row ignored)
or nan (weighted 0: 0 * (g / 0)). adjoint refused the whole file, even with --float64 (found by a
user trial); now exact mode refuses only the nan (it has no nan), and --float64 answers as torch.
Expected values from real torch, run here."""

from __future__ import annotations

import math

import pytest
from conftest import require_torch

torch = require_torch()
F = torch.nn.functional

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402

TEXT = """
name: ce_over_nothing
dtype: float64
inputs:
  x: {value: [[1, 2, 0.5], [0.5, -1, 2]], requires_grad: true}
targets:
  t: {value: TARGETS, dtype: int64}
  w: [0, 1, 1]
model: {type: Identity}
loss: "LOSS"
hooks:
  - {tensor: x}
"""

CASES = {"ignored": ("[1, 1]", "cross_entropy(y, t, ignore_index=1)", dict(ignore_index=1)),
         "weighted_zero": ("[0, 0]", "cross_entropy(y, t, weight=w)", dict(weight="w"))}


def _torch(targets: str, kwargs: dict):
    x = torch.tensor([[1, 2, 0.5], [0.5, -1, 2]], dtype=torch.float64, requires_grad=True)
    t = torch.tensor(eval(targets))   # the test's own literal
    kw = {k: torch.tensor([0., 1, 1], dtype=torch.float64) if v == "w" else v for k, v in kwargs.items()}
    loss = F.cross_entropy(x, t, **kw)
    loss.backward()
    return loss.item(), x.grad.tolist()


@pytest.mark.parametrize("case", list(CASES))
def test_float64_answers_torchs_nan(case):
    targets, loss, kwargs = CASES[case]
    text = TEXT.replace("TARGETS", targets).replace("LOSS", loss)
    got = adjoint.loads(text).solve(mode="float64").to_json()["variants"]["default"]
    want_loss, want_grad = _torch(targets, kwargs)
    assert math.isnan(got["loss"]["value"]) and math.isnan(want_loss)
    assert str(got["grads"]["x"]["value"]) == str(want_grad)   # zeros, or nan everywhere
    assert str(got["hook_calls"][0]["args"]["grad"]["value"]) == str(want_grad)


@pytest.mark.parametrize("case", list(CASES))
def test_exact_mode_refuses_only_the_nan(case):
    targets, loss, _ = CASES[case]
    with pytest.raises(ProblemError, match="a mean over a total weight of 0 .* gives nan in PyTorch.*--float64"):
        adjoint.loads(TEXT.replace("TARGETS", targets).replace("LOSS", loss)).solve()
