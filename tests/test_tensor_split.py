"""``tensor_split`` was refused ("a PyTorch method adjoint does not model yet"). at::tensor_split
is one ``slice`` (SliceBackward0, a view) per piece: ``sections`` pieces, the first
``size % sections`` one element longer, or the pieces between given indices (wrapped and clamped
as at::slice does). Expected values come from real torch, run here: the pieces' nodes and
shapes, the hooks' gradients, the leaf's gradient, a hook's ``grad.view(-1)``, and PyTorch's
errors."""

from __future__ import annotations

import pytest
from conftest import require_torch

torch = require_torch()

import glue_harness as glue  # noqa: E402

X = [[1, 2, 3, 4, 5], [6, 7, -8, 9, 10]]

TEXT = """
name: tensor_split
dtype: float64
inputs:
  x: {value: VALUE, requires_grad: true}
model:
  forward: |
    h = x * 2
    p = FORWARD
    a = p[0]
    b = p[-1]
    return (a * a * a).sum() + (b * b).sum() * len(p)
loss: "y"
hooks:
  - {tensor: h, label: on_h, does: "DOES"}
  - {tensor: a, label: on_a}
  - {tensor: b, label: on_b}
"""

CASES = {
    "sections": "h.tensor_split(2, dim=1)",
    "three": "torch.tensor_split(h, 3, 1)",
    "one": "h.tensor_split(1)",
    "rows": "h.tensor_split(2)",
    "indices": "h.tensor_split((1, 3), dim=1)",
    "list": "torch.tensor_split(h, [2], dim=-1)",
    "negative": "h.tensor_split((-2,), dim=1)",
    "transposed": "h.t().tensor_split(2)",
    "one_d": "h[1].tensor_split(3)",
    "zero": "h.tensor_split(0, dim=1)",
    "zero_d": "h[0, 0].tensor_split(1)",
    "dim_range": "h.tensor_split(2, dim=2)",
}


def _torch(expr, view_hook):
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    h = x * 2
    h.register_hook(glue.h_hook(view_hook))
    calls = {"on_a": [], "on_b": []}
    try:
        p = eval(expr, {"torch": torch, "h": h})   # noqa: S307 -- the test's own expressions
        a, b = p[0], p[-1]
        a.register_hook(lambda g: calls["on_a"].append(g.tolist()))
        b.register_hook(lambda g: calls["on_b"].append(g.tolist()))
        ((a * a * a).sum() + (b * b).sum() * len(p)).backward()
    except (RuntimeError, IndexError) as exc:
        return glue.raised(exc)
    return x.grad.tolist(), calls, [type(t.grad_fn).__name__ for t in (a, b)], [list(t.shape) for t in (a, b)]


def _solve(expr, does):
    got = glue.solve(glue.fill(TEXT, VALUE=X, FORWARD=expr, DOES=does))
    return glue.error(got) or (got["grads"]["x"]["value"], {k: glue.hook_grads(got, k) for k in ("on_a", "on_b")},
                               [got["values"][n]["grad_fn"] for n in "ab"], [got["values"][n]["shape"] for n in "ab"])


@pytest.mark.parametrize("view_hook", [False, True])
@pytest.mark.parametrize("case", sorted(CASES))
def test_tensor_split_matches_torch(case, view_hook):
    expr = CASES[case]
    assert _solve(expr, glue.does(view_hook)) == _torch(expr, view_hook)


def test_an_empty_piece_is_refused():
    assert torch.zeros(2, 5).tensor_split((3, 1), dim=1)[1].shape == (2, 0)
    from adjoint.format.errors import ProblemError
    with pytest.raises(ProblemError):
        _solve("h.tensor_split((3, 1), dim=1)", glue.PLAIN)
