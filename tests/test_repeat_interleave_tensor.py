"""``repeat_interleave`` with a tensor of repeats was refused. ATen's composite: no dim flattens
first (ViewBackward0, none for 1-D); a 0-d or one-element ``repeats`` expanded to the dim's size, a
1-d one checked against it; then ``index_select`` (IndexSelectBackward0) with the index vector
``repeat_interleave(repeats)``. Expected values come from real torch, run here: the node chain, the
shape and values, the hooks' gradients, the leaf's gradient, and PyTorch's errors."""

from __future__ import annotations

import pytest
from conftest import require_torch

torch = require_torch()

import glue_harness as glue  # noqa: E402

X = [[1, 2, 3], [4, -5, 6]]

TEXT = """
name: ri
dtype: float64
inputs:
  x: {value: VALUE, requires_grad: true}
  r: {value: REPEATS, dtype: int64}
model:
  inputs: [x, r]
  forward: |
    h = x * 2
    o = FORWARD
    return (o * o * o).sum() + (o * o).reshape(-1)[0]
loss: "y"
hooks:
  - {tensor: h, label: on_h, does: "DOES"}
  - {tensor: o, label: on_o, does: "DOES"}
"""

CASES = [
    ("h.repeat_interleave(r, 1)", [1, 2, 0]),
    ("torch.repeat_interleave(h, r, dim=0)", [2, 1]),
    ("h.repeat_interleave(r)", [1, 2, 1, 0, 1, 3]),
    ("h.repeat_interleave(r, dim=-1)", [2]),
    ("h.repeat_interleave(r, 0)", 3),
    ("h[0].repeat_interleave(r)", [0, 2, 1]),
    ("h.t().repeat_interleave(r, 0)", [1, 0, 2]),
    ("h.repeat_interleave(r, 1)", [1, 2]),
    ("h.repeat_interleave(r, 2)", [1, 2, 1]),
    ("h.repeat_interleave(r, 1)", [[1, 2, 1]]),
    ("h.repeat_interleave(r, 1)", [1, -1, 1]),
    ("h.repeat_interleave(r, 5)", [[1, 2, 1]]),
]


def _torch(expr, repeats, does):
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    r = torch.tensor(repeats, dtype=torch.int64)
    h = x * 2
    hook = glue.h_hook(does == glue.VIEW)
    h.register_hook(hook)
    calls = []
    try:
        o = eval(expr, {"torch": torch, "h": h, "r": r})   # noqa: S307 -- the test's own expressions
        o.register_hook(hook)
        o.register_hook(lambda g: calls.append(g.tolist()))
        ((o * o * o).sum() + (o * o).reshape(-1)[0]).backward()
    except (RuntimeError, IndexError, NotImplementedError) as exc:
        return glue.raised(exc)
    chain, f = [], o.grad_fn
    while f is not None and f.next_functions:
        chain.append(f.name())
        f = f.next_functions[0][0]
    return x.grad.tolist(), calls, chain[:2], list(o.shape), o.tolist()


def _solve(expr, repeats, does):
    got = glue.solve(glue.fill(TEXT, VALUE=X, REPEATS=repeats, FORWARD=expr, DOES=does))
    return glue.error(got) or (got["grads"]["x"]["value"], glue.hook_grads(got, "on_o"), [got["values"]["o"]["grad_fn"]],
                               got["values"]["o"]["shape"], got["values"]["o"]["value"])


@pytest.mark.parametrize("does", [glue.PLAIN, glue.VIEW])
@pytest.mark.parametrize("expr,repeats", CASES)
def test_repeat_interleave_with_tensor_repeats_matches_torch(expr, repeats, does):
    want = _torch(expr, repeats, does)
    got = _solve(expr, repeats, does)
    if isinstance(want, tuple) and len(want) == 2:
        assert got == want
    else:
        assert got[:2] == want[:2] and got[2][0] == want[2][0] == "IndexSelectBackward0" and got[3:] == want[3:]
