"""A hook body's in-place index ops (scatter_, scatter_add_, index_add_): the prediction against a
plain torch script written by hand, and the refusals where they would be recorded or overlap."""

import numpy as np
import pytest

import adjoint
from adjoint.format.errors import ProblemError

FILE = "tests/data/regressions/hook_body_index_ops_in_place.yaml"


def _script(variant: str):
    """a.grad after the file's backward, or (error type, message)."""
    import torch
    d = torch.float64
    a = torch.tensor([[1.0, 2.0, 3.0], [3.0, -1.0, 0.5]], dtype=d, requires_grad=True)
    i1, i2, i3, i4 = torch.tensor([[0], [2]]), torch.tensor([[0, 0], [2, 1]]), torch.tensor([1, 1]), torch.tensor([0, 2])
    i5 = torch.tensor([[5], [0]])
    s = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=d)
    r = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=d)

    def post_accumulate(t):
        t.grad.index_add_(1, i4, s)

    if variant == "post_accumulate":
        a.register_post_accumulate_grad_hook(post_accumulate)
    h = a * 0.5
    k = h * h
    y = k + h

    def scatter_value(g):
        g.scatter_(1, i1, 5)

    def scatter_src(g):
        g.scatter_(1, i1, s)

    def scatter_add(g):
        g.scatter_add_(1, i2, s)

    def index_add(g):
        g.index_add_(0, i3, r, alpha=2)

    def version(g):
        h.scatter_(1, i1, 0)

    def kernel(g):
        g.scatter_(1, i5, 0)

    on = {"scatter_value": (h, scatter_value), "scatter_src": (h, scatter_src), "scatter_add_shared": (k, scatter_add),
          "index_add": (h, index_add), "version_error": (y, version), "kernel_error": (h, kernel)}
    if variant in on:
        on[variant][0].register_hook(on[variant][1])
    try:
        (y * y).sum().backward()
    except RuntimeError as e:
        return type(e).__name__, str(e)
    return a.grad.tolist()


@pytest.mark.torch
@pytest.mark.parametrize("variant", ["scatter_value", "scatter_src", "scatter_add_shared", "index_add", "post_accumulate"])
def test_writes_match_a_plain_script(variant):
    out = adjoint.load(FILE).solve(variant=variant).variants[0].to_json()
    want = _script(variant)
    assert want != _script("none")   # the write changes a.grad (else this test could not fail)
    np.testing.assert_allclose(out["grads"]["a"]["value"], want, rtol=1e-12, atol=1e-12)


@pytest.mark.torch
@pytest.mark.parametrize("variant", ["version_error", "kernel_error"])
def test_errors_match_a_plain_script(variant):
    out = adjoint.load(FILE).solve(variant=variant).variants[0].to_json()
    assert (out["error"]["type"], out["error"]["message"]) == _script(variant)


_REFUSED = """
name: refused
inputs:
  a: {value: [[1.0, 2.0, 3.0], [3.0, -1.0, 0.5]], requires_grad: true}
  i: {value: [[0], [2]], dtype: int64}
model:
  inputs: [a, i]
  forward: |
    h = a * 0.5
    LINE
    return h
loss: "sum(y)"
HOOKS
"""


@pytest.mark.parametrize("line, hooks, words", [
    ("h.scatter_(1, i, h)", "", "an operand on its memory"),
    ("z = h + 0", "hooks: [{tensor: y, does: 'grad.scatter_(1, i, 0)'}]", "whose elements share memory"),
    ("z = h + 0", "hooks: [{tensor: h, does: 'grad.scatter_add_(1, i, grad[:, :1])'}]", "an operand on its memory"),
])
def test_refused_where_not_modelled(line, hooks, words):
    text = _REFUSED.replace("LINE", line).replace("HOOKS", hooks)
    with pytest.raises(ProblemError, match=words):
        adjoint.loads(text).solve()
