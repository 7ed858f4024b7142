"""torch.clamp with a tensor bound holding nan: ATen's clamp.Tensor runs ``clamp_stub`` for two
bounds (``min != min || max != max ? nan : min(max(a, min), max)``) and ``maximum_stub`` /
``minimum_stub`` for one, so a nan bound makes that element nan (adjoint compared with the bound
and kept ``x``: 0 where PyTorch has nan). The backward at a nan bound is 0 for every input
(each of clamp_backward's comparisons is false). Expected numbers copied from torch 2.13.0 CPU."""

import math

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402

NAN = math.nan

TEXT = """
name: clamp_nan_bound
dtype: float64
inputs:
  m: {value: [inf, 0, 0, 0, 0]}
  x: {value: [0, 1, 2, 3, 4], requires_grad: true}
  l: {value: [0, 1, 1, 5, 0], requires_grad: true}
  h: {value: [2, 2, 2, 4, 4], requires_grad: true}
model:
  inputs: [m, x, l, h]
  forward: |
    n = m - m
    a = torch.clamp(x, min=l + n)
    b = torch.clamp(x, max=h + n)
    c = torch.clamp(x, l + n, h)
    d = torch.clamp(x, l, h + n)
    e = x.clone()
    e.clamp_(min=l + n)
    return a.sum() + 2 * b.sum() + 3 * c.sum() + 5 * d.sum() + 7 * e.sum()
loss: "y"
"""

# torch 2.13.0 CPU, float64
VALUES = {
    "a": [NAN, 1.0, 2.0, 5.0, 4.0],
    "b": [NAN, 1.0, 2.0, 3.0, 4.0],
    "c": [NAN, 1.0, 2.0, 4.0, 4.0],
    "d": [NAN, 1.0, 2.0, 4.0, 4.0],
    "e": [NAN, 1.0, 2.0, 5.0, 4.0],
}
GRADS = {"x": [0.0, 18.0, 18.0, 2.0, 18.0], "l": [0.0, 0.0, 0.0, 8.0, 0.0], "h": [0.0, 0.0, 0.0, 8.0, 0.0]}


def _same(a, b):
    return len(a) == len(b) and all((math.isnan(p) and math.isnan(q)) or p == q for p, q in zip(a, b))


def test_expected_numbers_are_torchs():
    t = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True)
         for k, v in {"x": [0, 1, 2, 3, 4.0], "l": [0, 1, 1, 5, 0.0], "h": [2, 2, 2, 4, 4.0]}.items()}
    m = torch.tensor([math.inf, 0, 0, 0, 0], dtype=torch.float64)
    n = m - m
    x, lo, hi = t["x"], t["l"], t["h"]
    e = x.clone()
    e.clamp_(min=lo + n)
    got = {"a": torch.clamp(x, min=lo + n), "b": torch.clamp(x, max=hi + n), "c": torch.clamp(x, lo + n, hi),
           "d": torch.clamp(x, lo, hi + n), "e": e}
    (got["a"].sum() + 2 * got["b"].sum() + 3 * got["c"].sum() + 5 * got["d"].sum() + 7 * got["e"].sum()).backward()
    for k, v in VALUES.items():
        assert _same(got[k].tolist(), v), k
    for k, v in GRADS.items():
        assert t[k].grad.tolist() == v, k


@pytest.mark.parametrize("mode", ["exact", "float64"])
def test_a_nan_tensor_bound_makes_the_element_nan(mode):
    v = adjoint.loads(TEXT).solve(mode=mode).variants[0].to_json()
    for k, want in VALUES.items():
        assert _same([float(e) for e in v["values"][k]["value"]], want), (mode, k, v["values"][k]["value"])
    for k, want in GRADS.items():
        assert [float(e) for e in v["grads"][k]["value"]] == want, (mode, k)
