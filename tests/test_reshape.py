"""reshape and flatten as at::reshape decides, checked against real torch: ``view`` of a
contiguous tensor (ViewBackward0), ``_reshape_alias`` when a non-contiguous tensor's strides allow
a view (ReshapeAliasBackward0), else ``clone`` then ``_unsafe_view`` (UnsafeViewBackward0)."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import require_torch  # noqa: E402

torch = require_torch()

from opcheck import case  # noqa: E402

X = [[[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]], [[1, -2, 3, -4], [5, -6, 7, -8], [9, -10, 11, -12]]]

CASES = [
    ("x.reshape(6, 4)", lambda x: x.reshape(6, 4), "ViewBackward0"),
    ("x[:, :, :2].reshape(6, 2)", lambda x: x[:, :, :2].reshape(6, 2), "ReshapeAliasBackward0"),
    ("x.transpose(1, 2).reshape(2, 4, 3)", lambda x: x.transpose(1, 2).reshape(2, 4, 3), "ReshapeAliasBackward0"),
    ("x.transpose(1, 2).reshape(8, 3)", lambda x: x.transpose(1, 2).reshape(8, 3), "UnsafeViewBackward0"),
    ("x[:, 1:2, :].flatten(1, 2)", lambda x: x[:, 1:2, :].flatten(1, 2), "ReshapeAliasBackward0"),
    ("x[:, :2].flatten()", lambda x: x[:, :2].flatten(), "UnsafeViewBackward0"),
]


@pytest.mark.parametrize("expr, fn, node", CASES, ids=[c[0] for c in CASES])
def test_reshape_builds_the_node_torch_builds(expr, fn, node):
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    assert type(fn(x).grad_fn).__name__ == node   # the case is what it says, in this torch
    assert case({"x": (X, True)}, expr, fn) == []


def test_linear_of_a_non_contiguous_batch_is_matmul_then_add_in_place():
    """at::linear: a contiguous N-D input is flattened for addmm; a non-contiguous one (a
    transposed batch) goes through matmul and then ``add_(bias)`` (AddBackward0)."""
    from torch import nn
    X3 = [[[1, 2, 3, 4], [5, 6, 7, 8]], [[1, -2, 3, -4], [5, -6, 7, -8]], [[0.5, 2, -3, 4], [5, 1, 7, 8]]]
    W, b = [[1, 2, 3, 4], [0, 1, 0, -1], [2, 2, 1, 1]], [1, 2, 3]
    lin = nn.Linear(4, 3).double()
    with torch.no_grad():
        lin.weight.copy_(torch.tensor(W))
        lin.bias.copy_(torch.tensor(b))
    x = torch.tensor(X3, dtype=torch.float64, requires_grad=True)
    assert type(lin(x.transpose(0, 1)).grad_fn).__name__ == "AddBackward0"
    child = ('{"type": "Linear", "params": {"weight": %s, "bias": %s}}' % (W, b))
    from opcheck import Lambda, compare
    got = compare({"x": (X3, True)}, child, Lambda(lambda x: lin(x.transpose(0, 1))),
                  forward="h = m(x.transpose(0, 1))\nreturn (h * W).sum()")
    assert got == []


def test_elementwise_results_keep_the_operands_memory_order():
    """adjoint.values.strides.iterator_strides against the strides real torch gives elementwise results
    (unary, binary with broadcasting, a wrapped number) of permuted, sliced and expanded inputs."""
    import random

    from adjoint.values.strides import iterator_strides

    rng = random.Random(0)

    def operand(shape, expand=True):
        nd = len(shape)
        t = torch.zeros(shape)
        if nd >= 2 and rng.random() < 0.6:
            perm = list(range(nd))
            rng.shuffle(perm)
            t = torch.zeros([shape[p] for p in perm]).permute([perm.index(i) for i in range(nd)])
        if nd >= 1 and rng.random() < 0.2:
            d = rng.randrange(nd)
            big = list(t.shape)
            big[d] *= 2
            t = torch.zeros(big).narrow(d, 0, t.shape[d])
        if expand and nd >= 1 and rng.random() < 0.15:
            d = rng.randrange(nd)
            if t.shape[d] == 1:
                t = t.expand(*[3 if i == d else n for i, n in enumerate(t.shape)])
        return t

    for _ in range(600):
        a = operand([rng.choice([1, 2, 3]) for _ in range(rng.randint(1, 5))])
        kind = rng.random()
        if kind < 0.3:
            out, ops = torch.exp(a), [(tuple(a.shape), a.stride())]
        elif kind < 0.6:
            bshape = [1 if rng.random() < 0.3 else n for n in a.shape][rng.random() < 0.3:]
            b = operand(bshape, expand=False) if bshape else torch.zeros(())
            out, ops = a + b, [(tuple(a.shape), a.stride()), (tuple(b.shape), b.stride())]
        else:
            out, ops = a * 2, [(tuple(a.shape), a.stride()), ((), ())]
        assert iterator_strides(ops, tuple(out.shape)) == out.stride(), (ops, out.stride())


def test_view_of_a_permuted_elementwise_result_is_a_predicted_error():
    x = torch.tensor([[-2.0, -2.0], [1.25, 2.0]], dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        torch.exp(x.permute(1, 0)).view(-1)
    text = ("name: v\ndtype: float64\ninputs:\n  x: {value: [[-2, -2], [1.25, 2]], requires_grad: true}\n"
            "model:\n  forward: |\n    h = exp(x.permute((1, 0)))\n    return h.view(-1)\nloss: \"sum(y)\"\n")
    import adjoint
    v = adjoint.loads(text).solve().variants[0]
    assert v.error is not None and v.error.message.startswith("view size is not compatible")


@pytest.mark.parametrize("expr, fn", [
    ("exp(x.transpose(1, 2)).reshape(2, 4, 3)", lambda x: torch.exp(x.transpose(1, 2)).reshape(2, 4, 3)),
    ("(x.transpose(1, 2) * 2).reshape(8, 3)", lambda x: (x.transpose(1, 2) * 2).reshape(8, 3)),
    ("(x.permute(2, 0, 1) + x.permute(2, 0, 1)).flatten()",
     lambda x: (x.permute(2, 0, 1) + x.permute(2, 0, 1)).flatten()),
], ids=["exp-then-reshape", "mul-then-reshape", "add-then-flatten"])
def test_reshape_after_an_elementwise_op_on_a_permuted_tensor(expr, fn):
    assert case({"x": (X, True)}, expr, fn) == []
