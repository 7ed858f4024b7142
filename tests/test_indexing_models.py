"""Advanced indexing (x[idx], x[mask], lists, several index tensors), index_select, gather,
scatter, scatter_add, index_add, argmax / argmin against real torch: node chains, values,
grads, the legacy hook's grad_input and the saved-tensor pack / unpack sequence (which index
tensors each node saves, in order: tests/opcheck.py)."""

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402
from opcheck import case  # noqa: E402

X = [[1, -2, 3], [0.5, 2, -1]]
Y3 = [[[1, -2, 3, 0.5], [0.25, 2, -1, 4], [3, 1, -0.5, 2]], [[2, 0, 1, -3], [1.5, -1, 0.75, 1], [0, 2, 2, -2]]]
I = ([2, 0, 2], False, "int64")
R = ([1, 0], False, "int64")
J = ([[0, 0], [2, 1]], False, "int64")
K = ([[0, 2], [1, 0]], False, "int64")
MASK = ([[True, False, True], [False, True, True]], False, "bool")
ROWS = ([False, True], False, "bool")
S = ([[10, 20], [30, 40]], True)

CASES = [
    ("a[r]", lambda a, r: a[r], {"a": (X, True), "r": R}),
    ("a[:, i]", lambda a, i: a[:, i], {"a": (X, True), "i": I}),
    ("a[r, i[:2]]", lambda a, r, i: a[r, i[:2]], {"a": (X, True), "r": R, "i": I}),
    ("a[j]", lambda a, j: a[j], {"a": (X, True), "j": ([[1, 0], [0, 0]], False, "int64")}),   # a 2-d index
    ("a[[1, 0, 1]]", lambda a: a[[1, 0, 1]], {"a": (X, True)}),
    ("a[k]", lambda a, k: a[k], {"a": (X, True), "k": MASK}),
    ("a[k] * 2", lambda a, k: a[k] * 2, {"a": (X, True), "k": ROWS}),
    ("a[:, k]", lambda a, k: a[:, k], {"a": (Y3, True), "k": ([True, False, True], False, "bool")}),
    ("a[r, :, r]", lambda a, r: a[r, :, r], {"a": (Y3, True), "r": R}),    # separated: broadcast dims first
    ("a[:, r, r]", lambda a, r: a[:, r, r], {"a": (Y3, True), "r": R}),
    ("a[0, r]", lambda a, r: a[0, r], {"a": (Y3, True), "r": R}),
    ("a[r, 1:3]", lambda a, r: a[r, 1:3], {"a": (Y3, True), "r": R}),
    ("a[None, r]", lambda a, r: a[None, r], {"a": (Y3, True), "r": R}),
    ("a[..., r]", lambda a, r: a[..., r], {"a": (Y3, True), "r": R}),
    ("a[r[:, None], r]", lambda a, r: a[r[:, None], r], {"a": (Y3, True), "r": R}),
    ("a.index_select(1, i)", lambda a, i: a.index_select(1, i), {"a": (X, True), "i": I}),
    ("torch.index_select(a, 0, r)", lambda a, r: torch.index_select(a, 0, r), {"a": (X, True), "r": R}),
    ("torch.gather(a, 1, j)", lambda a, j: torch.gather(a, 1, j), {"a": (X, True), "j": J}),
    ("a.gather(0, j[:1])", lambda a, j: a.gather(0, j[:1]), {"a": (X, True), "j": ([[0, 1]], False, "int64")}),
    ("torch.scatter(a, 1, k, s)", lambda a, k, s: torch.scatter(a, 1, k, s),
     {"a": (X, True), "k": K, "s": S}),
    ("a.scatter(1, k[:, :1], s[:, :1])", lambda a, k, s: a.scatter(1, k[:, :1], s[:, :1]),
     {"a": (X, True), "k": K, "s": S}),
    ("a.scatter(1, k, value=0.5)", lambda a, k: a.scatter(1, k, value=0.5), {"a": (X, True), "k": K}),
    ("torch.scatter_add(a, 1, j, s)", lambda a, j, s: torch.scatter_add(a, 1, j, s),
     {"a": (X, True), "j": J, "s": S}),
    ("torch.index_add(a, 1, r, s)", lambda a, r, s: torch.index_add(a, 1, r, s),
     {"a": (X, True), "r": R, "s": S}),
    ("a.index_add(0, r, s, alpha=-2)", lambda a, r, s: a.index_add(0, r, s, alpha=-2),
     {"a": (X, True), "r": R, "s": ([[10, 20, 5], [30, 40, 6]], True)}),
    ("a[a.argmax(dim=1)]", lambda a: a[a.argmax(dim=1)], {"a": ([[1, 3, 3], [0.5, 0.25, 0.5]], True)}),
    ("a.flatten()[a.argmin()] * a", lambda a: a.flatten()[a.argmin()] * a, {"a": (X, True)}),
    ("a[torch.argmax(a, 0, keepdim=True)[0]]", lambda a: a[torch.argmax(a, 0, keepdim=True)[0]],
     {"a": ([[1, 3], [2, 0.5]], True)}),
]


@pytest.mark.parametrize("expr,fn,inputs", CASES, ids=[c[0] for c in CASES])
def test_indexing_against_torch(expr, fn, inputs):
    assert case(inputs, expr, fn) == []


def _solve(forward: str):
    text = f"""
name: ix
inputs:
  x: {{value: [[1, -2, 3], [0.5, 2, -1]], requires_grad: true}}
  i: {{value: [2, 0, 5], dtype: int64}}
  m: {{value: [true, false, true], dtype: bool}}
  f: [0, 1]
model:
  inputs: [x, i, m, f]
  forward: "{forward}"
"""
    return adjoint.loads(text).solve().variants[0].to_json()


X_T = torch.tensor([[1., -2, 3], [0.5, 2, -1]], requires_grad=True)
I_T = torch.tensor([2, 0, 5])
M_T = torch.tensor([True, False, True])
F_T = torch.tensor([0., 1.])


@pytest.mark.parametrize("forward,fn", [
    ("x[i].sum()", lambda: X_T[I_T]),
    ("x[:, i].sum()", lambda: X_T[:, I_T]),
    ("x[f].sum()", lambda: X_T[F_T]),
    ("x[m].sum()", lambda: X_T[M_T]),
    ("x[:, m[:2]].sum()", lambda: X_T[:, M_T[:2]]),
    ("x[i[:2], i].sum()", lambda: X_T[I_T[:2], I_T]),
    ("x.index_select(1, i).sum()", lambda: X_T.index_select(1, I_T)),
    ("x.gather(1, i).sum()", lambda: X_T.gather(1, I_T)),
])
def test_pytorchs_index_errors_are_answers(forward, fn):
    with pytest.raises((IndexError, RuntimeError)) as theirs:
        fn()
    error = _solve(forward)["error"]
    assert (error["type"], error["message"], error["during"]) == \
        (type(theirs.value).__name__, str(theirs.value), "forward")


def test_a_dim_out_of_range_is_pytorchs_error_an_answer():
    with pytest.raises(IndexError) as theirs:
        X_T.argmax(dim=2)
    error = _solve("x.argmax(dim=2).sum()")["error"]
    assert (error["type"], error["message"], error["during"]) == ("IndexError", str(theirs.value), "forward")


@pytest.mark.parametrize("call", ["scatter", "scatter_add"])
def test_a_src_larger_than_the_index_fails_in_backward_as_in_torch(call):
    # grad.gather(dim, index) has the index's shape, which autograd refuses for a larger src
    x = torch.tensor([[1., -2, 3], [0.5, 2, -1]], requires_grad=True)
    s = torch.tensor([[1., 2], [3, 4]], requires_grad=True)
    y = getattr(torch, call)(x, 1, torch.tensor([[0], [2]]), s)
    with pytest.raises(RuntimeError) as theirs:
        y.sum().backward()
    text = f"""
name: big
inputs:
  x: {{value: [[1, -2, 3], [0.5, 2, -1]], requires_grad: true}}
  s: {{value: [[1, 2], [3, 4]], requires_grad: true}}
  k: {{value: [[0], [2]], dtype: int64}}
model:
  inputs: [x, s, k]
  forward: "torch.{call}(x, 1, k, s).sum()"
"""
    error = adjoint.loads(text).solve().variants[0].to_json()["error"]
    assert (error["type"], error["message"], error["during"]) == ("RuntimeError", str(theirs.value), "backward")


def test_repeated_scatter_targets_are_refused():
    with pytest.raises(ProblemError) as err:
        _solve("x.scatter(1, i[None, 1:2].expand(1, 2), x).sum()")
    assert "writes one position twice" in str(err.value)


def test_assigning_one_position_twice_through_an_index_tensor_is_refused():
    """x[idx] = v is modelled (tests/test_index_put.py); an index naming one position twice with
    values that may differ is not: PyTorch's result is unspecified."""
    text = """
name: ix
inputs:
  x: {value: [1, 2, 3], requires_grad: true}
  i: {value: [0, 0], dtype: int64}
  v: [4, 5]
model:
  inputs: [x, i, v]
  forward: |
    h = x * 1
    h[i] = v
    return h.sum()
"""
    with pytest.raises(ProblemError) as err:
        adjoint.loads(text).solve()
    assert "one position twice" in str(err.value)


@pytest.mark.parametrize("mode", ["float64", "structure"])
def test_other_answer_modes_give_the_same_structure(mode):
    text = """
name: ix
dtype: float64
inputs:
  x: {value: [[1, -2, 3], [0.5, 2, -1]], requires_grad: true}
  i: {value: [2, 0, 2], dtype: int64}
  m: {value: [[true, false, true], [false, true, true]], dtype: bool}
model:
  inputs: [x, i, m]
  forward: "(x[:, i] * x.index_select(1, i)).sum() + x[m].sum() + x.gather(1, i[None, :2].expand(2, 2)).sum()"
"""
    p = adjoint.loads(text)
    exact = p.solve().variants[0]
    other = p.solve(mode=mode).variants[0]
    from nodechain import chain
    assert chain(other.run.forward.names["model"]) == chain(exact.run.forward.names["model"])
    if mode == "float64":
        assert other.grads["x"].floats() == exact.grads["x"].floats()   # small integers: exact in doubles
