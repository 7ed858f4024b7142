"""Reductions against real torch (tests/opcheck.py): sum / mean with and without dim, var,
max / min (every element, along a dim, with ties), amax / amin, the vector norm of every
order at the zero vector and away from it."""

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402
from opcheck import case  # noqa: E402

X = {"a": ([[1, -2, 0.5], [3, 0.25, -1]], True)}
TIES = {"a": ([[3, 1, 3], [2, 2, -1]], True)}
TIES_ALL = {"a": ([[3, 1, 3], [2, 3, -1]], True)}
X3 = {"a": ([[[1, -2], [0.5, 3]], [[0.25, -1], [2, 1]]], True)}
ZERO_ROW = {"a": ([[0, 0, 0], [3, 0, -4]], True)}

REDUCTIONS = [
    ("a.sum()", lambda a: a.sum(), X),
    ("torch.sum(a, 1)", lambda a: torch.sum(a, 1), X),
    ("a.sum(dim=(0, 1))", lambda a: a.sum(dim=(0, 1)), X),
    ("a.sum(dim=None)", lambda a: a.sum(dim=None), X),
    ("a.sum(-1, keepdim=True)", lambda a: a.sum(-1, keepdim=True), X),
    ("a.sum(dim=())", lambda a: a.sum(dim=()), X),
    ("a.sum((2, 0))", lambda a: a.sum((2, 0)), X3),
    ("a.mean()", lambda a: a.mean(), X),
    ("a.mean(0)", lambda a: a.mean(0), X),
    ("torch.mean(a, (0, 2), True)", lambda a: torch.mean(a, (0, 2), True), X3),
    ("a.var()", lambda a: a.var(), X),
    ("a.var(1)", lambda a: a.var(1), X),
    ("torch.var(a, 0, False, True)", lambda a: torch.var(a, 0, False, True), X),
    ("a.var(1, correction=0)", lambda a: a.var(1, correction=0), X),
    ("a.var(unbiased=False)", lambda a: a.var(unbiased=False), X),
    ("torch.var(a, True)", lambda a: torch.var(a, True), X),
    ("a.var((0, 2), keepdim=True)", lambda a: a.var((0, 2), keepdim=True), X3),
    ("a.max()", lambda a: a.max(), X),
    ("a.max()  # ties", lambda a: a.max(), TIES_ALL),
    ("torch.min(a)", lambda a: torch.min(a), TIES),
    ("a.max(dim=1)[0]", lambda a: a.max(dim=1)[0], TIES),
    ("torch.max(a, 0, True)[0]", lambda a: torch.max(a, 0, True)[0], TIES),
    ("a.min(1)[0]", lambda a: a.min(1)[0], TIES),
    ("a.min(-1, keepdim=True)[0]", lambda a: a.min(-1, keepdim=True)[0], X3),
    ("a.amax()", lambda a: a.amax(), TIES_ALL),
    ("torch.amax(a, 1)", lambda a: torch.amax(a, 1), TIES),
    ("a.amax((0, 1), True)", lambda a: a.amax((0, 1), True), TIES_ALL),
    ("torch.amin(a, dim=0)", lambda a: torch.amin(a, dim=0), TIES),
    ("a.amin(dim=(0, 2))", lambda a: a.amin(dim=(0, 2)), X3),
    ("torch.norm(a)", lambda a: torch.norm(a), X),
    ("a.norm()", lambda a: a.norm(), X),
    ("a.norm(dim=1)", lambda a: a.norm(dim=1), ZERO_ROW),
    ("torch.norm(a, 1)", lambda a: torch.norm(a, 1), ZERO_ROW),
    ("a.norm(p=1, dim=1)", lambda a: a.norm(p=1, dim=1), ZERO_ROW),
    ("a.norm(3, 1, True)", lambda a: a.norm(3, 1, True), ZERO_ROW),
    ("a.norm(p=1.5, dim=0)", lambda a: a.norm(p=1.5, dim=0), ZERO_ROW),
    ("a.norm(p=0.5, dim=1)", lambda a: a.norm(p=0.5, dim=1), ZERO_ROW),
    ("a.norm(p=0)", lambda a: a.norm(p=0), ZERO_ROW),
    ("a.norm(p='fro', dim=(0, 1))", lambda a: a.norm(p="fro", dim=(0, 1)), X),
    ("norm(a)", lambda a: torch.linalg.vector_norm(a), X),
]


@pytest.mark.parametrize("expr,fn,inputs", REDUCTIONS, ids=[r[0] for r in REDUCTIONS])
def test_reduction_against_torch(expr, fn, inputs):
    assert case(inputs, expr.split("  #")[0], fn) == []


def test_max_dim_unpacks_into_values_and_indices():
    # values, indices = x.max(dim=1): only the values have a grad_fn; the int64 indices are the
    # node's only saved tensor (packed, unpacked) and the first index among ties
    text = """
name: maxdim
dtype: float64
inputs:
  a: {value: [[3, 1, 3], [2, 2, -1]], requires_grad: true}
model:
  inputs: [a]
  forward: |
    v, i = a.max(dim=1)
    return (v * v).sum()
hooks:
  - {saved_tensors: {pack: "x", unpack: "x"}}
"""
    v = adjoint.loads(text).solve().variants[0]
    names = v.run.forward.names
    a = torch.tensor([[3., 1, 3], [2, 2, -1]], dtype=torch.float64, requires_grad=True)
    packed = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        tv, ti = a.max(dim=1)
        (tv * tv).sum().backward()
    assert names["i"].grad_fn is None and not names["i"].requires_grad and names["i"].dtype == "int64"
    assert ti.grad_fn is None and ti.dtype == torch.int64
    assert names["i"].value.strings() == [str(k) for k in ti.tolist()] == ["0", "0"]
    assert names["v"].grad_fn.name == tv.grad_fn.name() == "MaxBackward0"
    assert len(names["v"].grad_fn.edges) == len(tv.grad_fn.next_functions) == 1
    assert v.grads["a"].strings() == [[str(int(g)) for g in row] for row in a.grad.tolist()]
    packs = [c for c in v.hook_calls if c.kind == "pack"]
    assert [c.node for c in packs] == ["MaxBackward0", "MulBackward0", "MulBackward0"]
    assert packed[0].dtype == torch.int64 and packed[0].tolist() == [0, 0]


@pytest.mark.parametrize("expr,needle", [
    ("a.sum(keepdim=None)", "PyTorch's TypeError is not modelled"),
    ("a.max(dim=None)", "dim must be one int"),
    ("a.norm(p='nuc')", "matrix norm"),
    ("a.var(1, True, correction=0)", "not both"),
])
def test_refusals(expr, needle):
    text = f"""
name: r
inputs:
  a: {{value: [[1, -2], [3, 4]], requires_grad: true}}
model:
  inputs: [a]
  forward: "{expr}.sum()"
"""
    with pytest.raises(ProblemError) as err:
        adjoint.loads(text).solve()
    assert needle in str(err.value)


def test_max_over_free_symbols_is_refused():
    text = """
name: s
inputs:
  a: {value: [w, 1], requires_grad: true}
model:
  inputs: [a]
  forward: "a.max()"
"""
    with pytest.raises(ProblemError) as err:
        adjoint.loads(text).solve()
    assert "free symbols" in str(err.value)


def test_variance_over_too_few_elements_is_refused():
    # PyTorch gives nan (and warns): a forward value no exact prediction follows
    text = """
name: v
inputs:
  a: {value: [[1, 2]], requires_grad: true}
model:
  inputs: [a]
  forward: "a.var(0).sum()"
"""
    with pytest.raises(ProblemError) as err:
        adjoint.loads(text).solve()
    assert "VarBackward0" in str(err.value) and "nan" in str(err.value)
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        assert torch.tensor([[1., 2.]]).var(0).isnan().all()


@pytest.mark.parametrize("expr,fn", [
    ("a.max()", lambda a: a.max()),
    ("a.sum(0)", lambda a: a.sum(0)),
    ("a.amax(-1)", lambda a: a.amax(-1)),
    ("a.norm(dim=0)", lambda a: a.norm(dim=0)),
    ("a.max(0)[0]", lambda a: a.max(0)[0]),
])
def test_zero_d_reductions(expr, fn):
    assert case({"a": (-0.5, True)}, expr, fn) == []


def test_kink_notes_name_the_convention():
    text = """
name: k
inputs:
  a: {value: [[3, 1, 3]], requires_grad: true}
model:
  inputs: [a]
  forward: "a.amax() + a.max(1)[0].sum()"
"""
    notes = adjoint.loads(text).solve().variants[0].kinks
    assert any("split the gradient evenly" in n for n in notes)
