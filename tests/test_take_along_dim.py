"""``torch.take_along_dim`` was refused ("a PyTorch function adjoint does not model yet"). With a
dim, at::take_along_dim broadcasts the indices and the input against each other (``broadcast_to``:
ExpandBackward0 for the input, a same-shape one too) and gathers (GatherBackward0); with none,
``input.view(-1).gather(0, indices.view(-1))``. Expected values come from real torch, run here:
the nodes, the hooks' gradients, the leaf's gradient, a hook's ``grad.view(-1)``, and PyTorch's
errors."""

from __future__ import annotations

import pytest
from conftest import require_torch

torch = require_torch()

import glue_harness as glue  # noqa: E402

X = [[1, 2, 3], [4, 5, -6]]
INDICES = {"same": [[0, 2, 2], [1, 0, 1]], "column": [[2], [0]], "row": [[1, 0, 2]], "flat": [5, 0, 3, 3],
           "float": [[0.0], [1.0]], "out": [[3], [0]],
           "rows01": [[0, 1, 1], [1, 0, 0]], "row01": [[1, 0, 1]]}

TEXT = """
name: take_along_dim
dtype: float64
inputs:
  x: {value: VALUE, requires_grad: true}
  i: {value: IVALUE, dtype: IDTYPE}
model:
  inputs: [x, i]
  forward: |
    h = x * 2
    o = FORWARD
    return (o * o * o).sum() + (o * o).reshape(-1)[0]
loss: "y"
hooks:
  - {tensor: h, label: on_h, does: "DOES"}
  - {tensor: o, label: on_o}
  - {node: o, next: [0], kind: pre, label: below}
"""

CASES = {
    "dim1": ("torch.take_along_dim(h, i, dim=1)", lambda h, i: torch.take_along_dim(h, i, dim=1)),
    "dim0": ("torch.take_along_dim(h, i, 0)", lambda h, i: torch.take_along_dim(h, i, 0)),
    "negative": ("h.take_along_dim(i, dim=-1)", lambda h, i: h.take_along_dim(i, dim=-1)),
    "no_dim": ("torch.take_along_dim(h, i)", lambda h, i: torch.take_along_dim(h, i)),
    "transposed_no_dim": ("torch.take_along_dim(h.t(), i)", lambda h, i: torch.take_along_dim(h.t(), i)),
    "argmax": ("torch.take_along_dim(h, h.argmax(1, keepdim=True), dim=1)",
               lambda h, i: torch.take_along_dim(h, h.argmax(1, keepdim=True), dim=1)),
    "rank": ("torch.take_along_dim(h[0], i, dim=0)", lambda h, i: torch.take_along_dim(h[0], i, dim=0)),
    "dim_range": ("torch.take_along_dim(h, i, dim=2)", lambda h, i: torch.take_along_dim(h, i, dim=2)),
}


def _torch(build, ivalue, view_hook):
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    h = x * 2
    h.register_hook(glue.h_hook(view_hook))
    calls, below = [], []
    try:
        o = build(h, torch.tensor(ivalue, dtype=torch.float64 if "." in str(ivalue) else torch.int64))
        o.register_hook(lambda g: calls.append(g.tolist()))
        nxt = o.grad_fn.next_functions[0][0]
        nxt.register_prehook(lambda g: below.append([t.tolist() for t in g]))
        ((o * o * o).sum() + (o * o).reshape(-1)[0]).backward()
    except (RuntimeError, IndexError) as exc:
        return glue.raised(exc)
    return x.grad.tolist(), calls, below, type(o.grad_fn).__name__


def _solve(expr, ivalue, does):
    idtype = "float64" if isinstance(ivalue[0][0] if isinstance(ivalue[0], list) else ivalue[0], float) else "int64"
    got = glue.solve(glue.fill(TEXT, IVALUE=ivalue, IDTYPE=idtype, VALUE=X, FORWARD=expr, DOES=does))
    return glue.error(got) or (got["grads"]["x"]["value"], glue.hook_grads(got, "on_o"),
                               [[g["value"] for g in c["args"]["grad_outputs"]] for c in got["hook_calls"]
                                if c["label"] == "below"], got["values"]["o"]["grad_fn"])


#: every index in range (PyTorch does not check the range here: tested below)
PAIRS = [(c, i) for c in sorted(CASES) for i in ("same", "column", "row", "flat", "float", "rows01", "row01")
         if not (c == "argmax" and i != "same") and not (c == "dim0" and i in ("same", "column", "row"))
         and not (c == "rank" and i == "flat")]


@pytest.mark.parametrize("view_hook", [False, True])
@pytest.mark.parametrize("case,indices", PAIRS)
def test_take_along_dim_matches_torch(case, indices, view_hook):
    expr, build = CASES[case]
    assert _solve(expr, INDICES[indices], glue.does(view_hook)) == _torch(build, INDICES[indices], view_hook)


def test_an_out_of_range_index_is_refused():
    """PyTorch 2.13 does not check the bounds on this path (a result, not gather's error)."""
    torch.take_along_dim(torch.zeros(2, 3), torch.tensor(INDICES["out"]), dim=1)
    from adjoint.format.errors import ProblemError
    with pytest.raises(ProblemError):
        _solve("torch.take_along_dim(h, i, dim=1)", INDICES["out"], glue.PLAIN)
