"""std / var / var_mean over no more elements than the correction: PyTorch warns "degrees of
freedom is <= 0" (a TORCH_WARN, each call) and the result is inf or nan. The warning was missing
(``--float64`` answered the nan without it). Found by an import trial; the expected warnings are
real torch's, run here."""

from __future__ import annotations

import warnings

from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402

TEXT = """
name: dof
dtype: float64
inputs:
  x: {value: [[0.5], [0.25]], requires_grad: true}
  w: {value: [[1, 2, 4]], requires_grad: true}
model:
  inputs: [x, w]
  forward: |
    a = x.std(-1, keepdim=True)
    b = torch.var(w, dim=1, correction=3)
    c = torch.var_mean(w, dim=1, correction=1)
    d = w.std()
    return a.sum() + b.sum() + c[0].sum() + d
"""


def test_the_warnings_are_torchs():
    x = torch.tensor([[0.5], [0.25]], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([[1., 2, 4]], dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        a = x.std(-1, keepdim=True)
        b = torch.var(w, dim=1, correction=3)
        c = torch.var_mean(w, dim=1, correction=1)
        d = w.std()
        (a.sum() + b.sum() + c[0].sum() + d).backward()
    got = adjoint.loads(TEXT).solve(mode="float64").to_json()["variants"]["default"]
    assert [w["message"] for w in got["warnings"]] == [str(w.message) for w in caught]
    assert len(caught) == 2 and all(w["during"] == "forward" for w in got["warnings"])
