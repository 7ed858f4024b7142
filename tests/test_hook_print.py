"""``print(...)`` in a hook body or a forward: Python's print has no effect on the graph or the
gradients (its arguments are evaluated, so reading a non-leaf's ``.grad`` there still warns). It
was refused as an unknown function ("did you mean 'split'?"), so a user's debugging hook could
not be checked. Expected values from real torch, run here."""

from __future__ import annotations

import contextlib
import io

from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from gen import check  # noqa: E402

TEXT = """
name: print_hook
dtype: float64
inputs:
  x: {value: [0.5, -1], requires_grad: true}
model:
  forward: |
    h = x * 3
    print("h is", h)
    return h.sum()
hooks:
  - {tensor: x, does: "print(grad)"}
  - {tensor: x, does: "print('grad norm', grad.norm())", returns: "grad * 2"}
"""


def test_print_changes_nothing_as_in_torch():
    x = torch.tensor([0.5, -1], dtype=torch.float64, requires_grad=True)
    x.register_hook(lambda g: print(g))
    x.register_hook(lambda g: (print("grad norm", g.norm()), g * 2)[1])
    with contextlib.redirect_stdout(io.StringIO()):
        h = x * 3
        print("h is", h)
        h.sum().backward()
    got = adjoint.loads(TEXT).solve().to_json()["variants"]["default"]
    assert got["grads"]["x"]["value"] == x.grad.tolist() == [6, 6]
    assert [c["returned"] is None for c in got["hook_calls"]] == [True, False]


def test_verify_agrees():
    outcome = check(TEXT, timeout=60)
    assert outcome.ok, outcome.report()
