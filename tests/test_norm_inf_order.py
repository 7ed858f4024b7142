"""``x.norm(p=float("inf"))`` (the max-norm; ``-inf`` the smallest ``|x|``): the op had the order
(ties split evenly, as PyTorch's norm_backward), but the binding refused ``float("inf")`` as "a p
other than a number". Found by an import trial; expected values from real torch, run here."""

from __future__ import annotations

from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from gen import check  # noqa: E402

TEXT = """
name: inf_norm
dtype: float64
inputs:
  x: {value: [[1, -3, 3], [0.5, 2, -1]], requires_grad: true}
model:
  forward: |
    a = x.norm(p=float("inf"))
    b = torch.norm(x, p=float("inf"), dim=1)
    c = x.norm(p=float("-inf"), dim=0)
    return a + (b * b).sum() + c.sum()
"""


def test_inf_orders_are_torchs():
    x = torch.tensor([[1, -3, 3], [0.5, 2, -1]], dtype=torch.float64, requires_grad=True)
    a = x.norm(p=float("inf"))
    b = torch.norm(x, p=float("inf"), dim=1)
    c = x.norm(p=float("-inf"), dim=0)
    (a + (b * b).sum() + c.sum()).backward()
    got = adjoint.loads(TEXT).solve().to_json()["variants"]["default"]
    assert got["grads"]["x"]["value"] == x.grad.tolist()
    assert [got["values"][n]["grad_fn"] for n in "abc"] == [t.grad_fn.name() for t in (a, b, c)]


def test_verify_agrees():
    outcome = check(TEXT, timeout=60)
    assert outcome.ok, outcome.report()
