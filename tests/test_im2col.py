"""``F.unfold`` (im2col) and ``F.fold`` (col2im) were refused. Each is one node saving no tensor:
Im2ColBackward0, whose backward is col2im of the gradient (each block's gradient added back into
its place, overlapping blocks adding up), and Col2ImBackward0, whose backward is im2col of the
gradient; a 3-d input to unfold (2-d to fold) is one batch entry, with no node of its own.
Expected values come from real torch, run here: the node, the shapes and values, the hooks'
gradients (and a hook's ``grad.view(-1)``), the leaf's gradient."""

from __future__ import annotations

import pytest
from conftest import require_torch

torch = require_torch()

import glue_harness as glue  # noqa: E402

X = [[[[1, 2, 3, 4, 5], [5, -6, 7, 8, 0], [9, 10, 11, -12, 3], [1, 1, 2, 3, 5]],
      [[2, 4, 6, 8, 1], [1, 3, 5, 7, 9], [-1, 0, 2, 1, -2], [0, 1, 0, 1, 0]]],
     [[[0, 1, -1, 2, 3], [2, 2, 1, 0, -3], [4, -5, 6, 1, 1], [3, 0, 1, -1, 2]],
      [[1, 0, 0, 2, 1], [-2, 1, 3, 1, 0], [5, 1, -1, 0, 2], [1, 2, 3, 4, 5]]]]

TEXT = """
name: im2col
dtype: float64
inputs:
  x: {value: VALUE, requires_grad: true}
model:
  forward: |
    h = x * 2
    o = FORWARD
    return (o * o * o).sum() + (o * o).reshape(-1)[0]
loss: "y"
hooks:
  - {tensor: h, label: on_h, does: "DOES"}
  - {tensor: o, label: on_o, does: "DOES"}
"""

CASES = {
    "unfold_int": "F.unfold(h, 2)",
    "unfold_pair": "F.unfold(h, (2, 3))",
    "unfold_all": "F.unfold(h, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1))",
    "unfold_positional": "F.unfold(h, 3, 1, 1, 2)",
    "unfold_keywords": "F.unfold(input=h, kernel_size=(3, 2), stride=2)",
    "unfold_3d": "F.unfold(h[1], (2, 2), padding=(0, 1))",
    "unfold_of_transpose": "F.unfold(h.transpose(2, 3), 2, stride=(1, 2))",
    "unfold_whole": "F.unfold(h, (4, 5))",
    "fold_inverse": "F.fold(F.unfold(h, (2, 3), padding=1, stride=(2, 1)), (4, 5), (2, 3), padding=1, stride=(2, 1))",
    "fold_overlap": "F.fold(F.unfold(h, 2), (4, 5), 2)",
    "fold_2d": "F.fold(h[0].reshape(4, 5), (3, 6), (2, 1), dilation=(1, 2), stride=(1, 1), padding=(0, 1))",
    "fold_keywords": "F.fold(h.reshape(2, 8, 5), output_size=(2, 6), kernel_size=(2, 2), stride=(1, 1))",
    "fold_of_transpose": "F.fold(h.reshape(2, 10, 4).transpose(1, 2), (3, 6), 2)",
    "unfold_fold_module_free": "F.unfold(F.fold(h.reshape(2, 8, 5), (2, 6), 2), 2)",
}


def _torch(expr, does):
    import torch.nn.functional as F
    x, o, calls, error = glue.hooked_run(X, expr, does, {"F": F})
    return error or (x.grad.tolist(), calls, type(o.grad_fn).__name__, list(o.shape), o.tolist())


def _solve(expr, does):
    got = glue.solve(glue.fill(TEXT, VALUE=X, FORWARD=expr, DOES=does))
    return glue.error(got) or (got["grads"]["x"]["value"], glue.hook_grads(got, "on_o"), got["values"]["o"]["grad_fn"],
                               got["values"]["o"]["shape"], got["values"]["o"]["value"])


@pytest.mark.parametrize("does", [glue.PLAIN, glue.VIEW])
@pytest.mark.parametrize("case", sorted(CASES))
def test_unfold_and_fold_match_torch(case, does):
    assert _solve(CASES[case], does) == _torch(CASES[case], does)


def test_no_tensor_is_saved():
    import torch.nn.functional as F
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    packed = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        u = F.unfold(x, 2)
        F.fold(u, (4, 5), 2)
    assert packed == []


@pytest.mark.parametrize("forward", ["F.unfold(h, (2,))", "F.unfold(h, 0)", "F.unfold(h, 6)", "F.unfold(h[0, 0], 2)",
                                     "F.unfold(h, 2.0)", "F.fold(h.reshape(2, 8, 5), (2, 6), 3)",
                                     "F.fold(h.reshape(2, 8, 5), (3, 6), 2)", "F.unfold(h, 2, padding=-1)"])
def test_what_pytorch_refuses_is_refused_not_guessed(forward):
    import torch.nn.functional as F
    from adjoint.format.errors import ProblemError
    with pytest.raises((RuntimeError, TypeError, IndexError)):
        eval(forward, {"F": F, "h": torch.ones(2, 2, 4, 5)})   # noqa: S307 -- the test's own expressions
    with pytest.raises(ProblemError):
        _solve(forward, glue.PLAIN)
