"""``tile`` was refused ("a PyTorch method / function adjoint does not model yet"). at::tile is
``repeat`` (RepeatBackward0) with the reps padded by leading 1s to the tensor's dims where fewer
are given (``repeat(1, ..., 1)`` too: a RepeatBackward0, not the tensor). Expected values come
from real torch, run here: the node, the hooks' gradients, the leaf's gradient, a hook's
``grad.view(-1)``, and repeat's error for a negative rep."""

from __future__ import annotations

import pytest
from conftest import require_torch

torch = require_torch()

import glue_harness as glue  # noqa: E402

X = [[1, 2, 3], [4, 5, -6]]

TEXT = """
name: tile
dtype: float64
inputs:
  x: {value: VALUE, requires_grad: true}
model:
  forward: |
    h = x * 2
    o = FORWARD
    return (o * o * o).sum() + (o * o).view(-1)[1]
loss: "y"
hooks:
  - {tensor: h, label: on_h, does: "DOES"}
  - {tensor: o, label: on_o}
"""

CASES = {
    "tuple": ("h.tile((2,))", lambda h: h.tile((2,))),
    "varargs": ("h.tile(2, 1)", lambda h: h.tile(2, 1)),
    "one_int": ("h.tile(2)", lambda h: h.tile(2)),
    "more_dims": ("torch.tile(h, (2, 1, 1))", lambda h: torch.tile(h, (2, 1, 1))),
    "ones": ("torch.tile(h, (1, 1))", lambda h: torch.tile(h, (1, 1))),
    "empty": ("h.tile(())", lambda h: h.tile(())),
    "negative": ("h.tile((-1,))", lambda h: h.tile((-1,))),
    "keyword": ("torch.tile(h, dims=(1, 2))", lambda h: torch.tile(h, dims=(1, 2))),
    "list": ("torch.tile(h, [2])", lambda h: torch.tile(h, [2])),
    "transposed": ("h.t().tile((1, 2))", lambda h: h.t().tile((1, 2))),
    "zero_d": ("h[0, 0].tile((3,))", lambda h: h[0, 0].tile((3,))),
    "one_d": ("h[0].tile(2, 2)", lambda h: h[0].tile(2, 2)),
}


def _torch(build, view_hook):
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    h = x * 2
    h.register_hook(glue.h_hook(view_hook))
    calls = []
    try:
        o = build(h)
        o.register_hook(lambda g: calls.append(g.tolist()))
        ((o * o * o).sum() + (o * o).view(-1)[1]).backward()
    except RuntimeError as exc:
        return glue.raised(exc)
    return x.grad.tolist(), calls, type(o.grad_fn).__name__


def _solve(expr, does):
    got = glue.solve(glue.fill(TEXT, VALUE=X, FORWARD=expr, DOES=does))
    return glue.error(got) or (got["grads"]["x"]["value"], glue.hook_grads(got, "on_o"), got["values"]["o"]["grad_fn"])


@pytest.mark.parametrize("view_hook", [False, True])
@pytest.mark.parametrize("case", sorted(CASES))
def test_tile_matches_torch(case, view_hook):
    expr, build = CASES[case]
    assert _solve(expr, glue.does(view_hook)) == _torch(build, view_hook)


def test_a_lone_int_to_torch_tile_is_refused():
    """torch.tile(x, 2) is PyTorch's parser TypeError (dims has no size: no lone int), not a tile."""
    with pytest.raises(TypeError):
        torch.tile(torch.ones(2), 2)
    from adjoint.format.errors import ProblemError
    with pytest.raises(ProblemError):
        _solve("torch.tile(h, 2)", glue.PLAIN)
