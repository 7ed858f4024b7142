"""``F.cosine_similarity`` / ``torch.cosine_similarity`` against real torch 2.13: ATen's composite
(Distance.cpp): shapes that differ are both expanded (x2 first), ``linalg_vector_norm(x, 2, dim,
keepdim=True).clone()`` for x1 then x2, the clones ``clamp_min_(eps)`` under NoGradGuard (no
node), ``x2 / n2`` made before ``x1 / n1``, then ``mul`` and ``sum(dim)``. Compared on the node
chain (names, edges, creation order), values, grads, the legacy hook's grad_input and the
saved-tensor packs (tests/opcheck.py); the zero vector's gradient (its norm clamped to eps) is
also pinned with numbers copied from torch."""

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from opcheck import case  # noqa: E402

F = torch.nn.functional

A = [[0.5, -1.0, 2.0], [0.0, 0.0, 0.0], [1.0, 2.0, 2.0]]
B = [[1.0, 0.5, -2.0], [2.0, 1.0, 2.0], [0.25, 0.0, 1.0]]


@pytest.mark.parametrize("expr, fn, b, brg", [
    ("F.cosine_similarity(a, b)", lambda a, b: F.cosine_similarity(a, b), B, True),
    ("F.cosine_similarity(a, b, dim=0)", lambda a, b: F.cosine_similarity(a, b, dim=0), B, True),
    ("torch.cosine_similarity(a, b, -1, 0.5)", lambda a, b: torch.cosine_similarity(a, b, -1, 0.5), B, True),
    ("F.cosine_similarity(a, b, dim=-1)", lambda a, b: F.cosine_similarity(a, b, dim=-1), [3.0, -4.0, 0.0], True),
    ("F.cosine_similarity(b, a, dim=1)", lambda a, b: F.cosine_similarity(b, a, dim=1), [[3.0, -4.0, 0.0]], True),
    ("F.cosine_similarity(a, b, dim=1)", lambda a, b: F.cosine_similarity(a, b, dim=1), [3.0, -4.0, 0.0], False),
])
def test_cosine_similarity_matches_torch(expr, fn, b, brg):
    assert case({"a": (A, True), "b": (b, brg)}, expr, fn) == []


TEXT = """
name: cosine_zero_row
dtype: float64
inputs:
  x: {value: [[0, 0, 0], [1, 2, 2]], requires_grad: true}
  w: {value: [[1, 2, 3], [2, -1, 2]], requires_grad: true}
model:
  inputs: [x, w]
  forward: "F.cosine_similarity(x, w)"
loss: "sum(y * y) + sum(y)"
"""

# torch 2.13.0 CPU, float64: the zero row's norm is clamped to eps = 1e-8, so its gradient is
# w / (1e-8 * |w|) (the loss's gradient there is 1), and w's is 0 (x / eps is 0)
GRADS = {"x": [[26726124.191242438, 53452248.382484876, 80178372.57372732],
               [0.326474622770919, -0.3964334705075445, 0.23319615912208502]],
         "w": [[0.0, 0.0, 0.0], [0.02331961591220852, 0.513031550068587, 0.23319615912208502]]}


def test_expected_numbers_are_torchs():
    x = torch.tensor([[0, 0, 0], [1, 2, 2.0]], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([[1, 2, 3], [2, -1, 2.0]], dtype=torch.float64, requires_grad=True)
    y = F.cosine_similarity(x, w)
    ((y * y).sum() + y.sum()).backward()
    assert y.grad_fn.name() == "SumBackward1"
    for k, t in (("x", x), ("w", w)):
        assert t.grad.tolist() == [pytest.approx(r, rel=1e-15) for r in GRADS[k]], k


def test_a_zero_row_takes_its_gradient_through_eps():
    v = adjoint.loads(TEXT).solve().variants[0].to_json()
    assert v["values"]["y"]["grad_fn"] == "SumBackward1"
    for k, want in GRADS.items():
        got = v["grads"][k]["value"]
        assert got == [pytest.approx(r, rel=1e-14) for r in want], k


@pytest.mark.parametrize("args, module", [
    ("{type: CosineSimilarity}", lambda: torch.nn.CosineSimilarity()),
    ("{type: CosineSimilarity, args: {dim: 0, eps: 0.5}}", lambda: torch.nn.CosineSimilarity(dim=0, eps=0.5)),
])
def test_the_module_matches_torch(args, module):
    from opcheck import compare
    assert compare({"a": (A, True), "b": ([[3.0, -4.0, 0.0]], True)}, args, module()) == []
