"""index_fill, index_copy and masked_scatter (out of place and in place) against real torch
(float64): the node chain (IndexFillBackward0/1, IndexCopyBackward0, MaskedScatterBackward0,
CopySlices for a view written in place), values and the gradients of both differentiable
operands; PyTorch's errors, exact type and message (tests/data/regressions/index_fill_*.yaml,
index_copy_*.yaml check hooks, saved tensors and version counters through verify)."""

import warnings

import pytest

from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from nn_harness import (Case, assert_close, assert_error_matches_torch, distinct, lit, t64, torch_chain)  # noqa: E402

X = distinct((3, 4), 1)
S = distinct((2, 4), 2)


def problem(expr: str, idx, mask, s=S) -> str:
    """A problem of ``x`` (3x4) and ``s`` requiring grad, an int64 ``i`` and a bool ``m``:
    ``h = EXPR``, loss ``sum(h^3)``."""
    return (f"name: t\ndtype: float64\ninputs:\n  x: {{value: {lit(X)}, requires_grad: true}}\n"
            f"  s: {{value: {lit(s)}, requires_grad: true}}\n  i: {{value: {lit(idx)}, dtype: int64}}\n"
            f"  m: {{value: {lit(mask)}, dtype: bool}}\n"
            f"model:\n  inputs: [x, s, i, m]\n  forward: |\n    h = {expr}\n    return h\n"
            "loss: \"sum(y * y * y)\"\n")


def torch_run(fn, idx, mask, s=S):
    x, st = t64(X, True), t64(s, True)
    h = fn(x, st, torch.tensor(idx), torch.tensor(mask))
    (h * h * h).sum().backward()
    return h, x, st


MASK = [[True, False, True, False], [False, False, True, True], [True, True, False, False]]


@pytest.mark.parametrize("expr, fn, idx", [
    ("x.index_fill(1, i, 0.5)", lambda x, s, i, m: x.index_fill(1, i, 0.5), [0, 2, 0]),
    ("torch.index_fill(x * 2, 0, i, -3)", lambda x, s, i, m: torch.index_fill(x * 2, 0, i, -3), [2, -1]),
    ("x.index_fill(1, i, s[1, 2] * 3)", lambda x, s, i, m: x.index_fill(1, i, s[1, 2] * 3), [3, 0, 3]),
    ("(x * 1).index_fill_(0, i, s.sum())", lambda x, s, i, m: (x * 1).index_fill_(0, i, s.sum()), [1]),
    ("x.index_copy(0, i, s * 2)", lambda x, s, i, m: x.index_copy(0, i, s * 2), [2, 0]),
    ("torch.index_copy(x, 1, i, s.t()[:3])", lambda x, s, i, m: torch.index_copy(x, 1, i, s.t()[:3]), [3, 1]),
    ("(x * 2).index_copy_(0, i, s)", lambda x, s, i, m: (x * 2).index_copy_(0, i, s), [0, 1]),
    ("x.masked_scatter(m, s)", lambda x, s, i, m: x.masked_scatter(m, s), [0]),
    ("torch.masked_scatter(x[0], m, s * s)", lambda x, s, i, m: torch.masked_scatter(x[0], m, s * s), [0]),
    ("(x * 1).masked_scatter_(m, s)", lambda x, s, i, m: (x * 1).masked_scatter_(m, s), [0]),
])
def test_matches_torch(expr, fn, idx):
    case = Case(problem(expr, idx, MASK))
    h, x, s = torch_run(fn, idx, MASK)
    assert case.chain("h") == torch_chain(h, {"x": x, "s": s})
    assert_close(case.value("h"), h, "h")
    assert_close(case.grad("x"), x.grad, "grad of x")
    assert_close(case.grad("s"), s.grad, "grad of s")


def test_view_written_in_place_matches_torch():
    """A slice written in place: the base gets CopySlices around the node."""
    expr = "x * 2\n    h[1:].index_fill_(1, i, s[0, 0])\n    h[:, 1:].masked_scatter_(m[:, 1:], s)"

    def fn(x, s, i, m):
        h = x * 2
        h[1:].index_fill_(1, i, s[0, 0])
        h[:, 1:].masked_scatter_(m[:, 1:], s)
        return h
    case = Case(problem(expr, [2, 0], MASK))
    h, x, s = torch_run(fn, [2, 0], MASK)
    assert case.chain("h") == torch_chain(h, {"x": x, "s": s})
    assert_close(case.value("h"), h, "h")
    assert_close(case.grad("x"), x.grad, "grad of x")
    assert_close(case.grad("s"), s.grad, "grad of s")


@pytest.mark.parametrize("expr, fn, idx, mask", [
    ("x.index_fill(2, i, 1.0)", lambda x, s, i, m: x.index_fill(2, i, 1.0), [0], MASK),
    ("x.index_fill(1, i, 1.0)", lambda x, s, i, m: x.index_fill(1, i, 1.0), [[0, 1]], MASK),
    ("x.index_fill(1, i, 1.0)", lambda x, s, i, m: x.index_fill(1, i, 1.0), [4, 0], MASK),
    ("x.index_fill(1, i, 1.0)", lambda x, s, i, m: x.index_fill(1, i, 1.0), [-5], MASK),
    ("x.index_fill(1, i, s[0])", lambda x, s, i, m: x.index_fill(1, i, s[0]), [0], MASK),
    ("x.index_fill(0, m, 1.0)", lambda x, s, i, m: x.index_fill(0, m, 1.0), [0], MASK),
    ("x.index_copy(0, i, s)", lambda x, s, i, m: x.index_copy(0, i, s), [3, 0], MASK),
    ("x.index_copy(0, i, s)", lambda x, s, i, m: x.index_copy(0, i, s), [-1, 0], MASK),
    ("x.index_copy(0, i, s)", lambda x, s, i, m: x.index_copy(0, i, s), [1], MASK),
    ("x.index_copy(0, i, s[:, :3])", lambda x, s, i, m: x.index_copy(0, i, s[:, :3]), [1, 2], MASK),
    ("x.index_copy(0, i, s[0])", lambda x, s, i, m: x.index_copy(0, i, s[0]), [1], MASK),
    ("x.index_copy(0, i, s[0, 0])", lambda x, s, i, m: x.index_copy(0, i, s[0, 0]), [1], MASK),
    ("x.index_copy(0, i, s[0, 0])", lambda x, s, i, m: x.index_copy(0, i, s[0, 0]), [1, 2], MASK),
    ("x.index_copy(0, m, s)", lambda x, s, i, m: x.index_copy(0, m, s), [0], [True, False]),
    ("x.masked_scatter(m, s[0])", lambda x, s, i, m: x.masked_scatter(m, s[0]), [0], MASK),
    ("x.masked_scatter(m, s)", lambda x, s, i, m: x.masked_scatter(m, s), [0], [True, False]),
    ("x.masked_scatter(i, s)", lambda x, s, i, m: x.masked_scatter(i, s), [1, 0, 0, 1], MASK),
    ("(x * 1).masked_scatter_(m, s)", lambda x, s, i, m: (x * 1).masked_scatter_(m, s), [0], [[[True]]]),
    ("(x * 1).masked_scatter_(m, s)", lambda x, s, i, m: (x * 1).masked_scatter_(m, s), [0], [True, False, True]),
])
def test_torchs_errors(expr, fn, idx, mask):
    assert_error_matches_torch(problem(expr, idx, mask), lambda: torch_run(fn, idx, mask))


def test_negative_index_fails_the_value_backward_as_in_torch():
    """IndexFillBackward1's value gradient is index_select(dim, unique(index)): a negative index,
    which the forward accepts, fails there (its message depends on the dim)."""
    for dim in (0, 1):
        expr = f"x.index_fill({dim}, i, s[0, 1])"
        js = adjoint.loads(problem(expr, [-1], MASK)).solve().variants[0].to_json()
        with pytest.raises(Exception) as info:
            torch_run(lambda x, s, i, m: x.index_fill(dim, i, s[0, 1]), [-1], MASK)
        assert (js["error"]["type"], js["error"]["message"], js["error"]["during"]) == \
            (type(info.value).__name__, str(info.value), "backward")


def test_duplicate_index_copy_is_refused():
    with pytest.raises(adjoint.ProblemError, match="nondeterministic"):
        adjoint.loads(problem("x.index_copy(0, i, s)", [1, 1], MASK)).solve()


IDX2 = [[0, 0, 3, 0], [1, 1, 1, 1]]


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin", "prod"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("inplace", [False, True])
def test_scatter_reduce_matches_torch(reduce, include_self, inplace):
    """Rows of ``s`` reduced into rows 0 and 1 of ``x`` (positions named several times)."""
    if inplace:
        expr = f"(x * 2).scatter_reduce_(1, i[:2], s, '{reduce}', include_self={include_self})"

        def fn(x, s, i, m):
            return (x * 2).scatter_reduce_(1, i[:2], s, reduce, include_self=include_self)
    else:
        expr = f"torch.scatter_reduce(x[:2], 1, i, s * 3, reduce='{reduce}', include_self={include_self})"

        def fn(x, s, i, m):
            return torch.scatter_reduce(x[:2], 1, i, s * 3, reduce=reduce, include_self=include_self)
    case = Case(problem(expr, IDX2, MASK))
    h, x, s = torch_run(fn, IDX2, MASK)
    assert case.chain("h") == torch_chain(h, {"x": x, "s": s})
    assert_close(case.value("h"), h, "h")
    assert_close(case.grad("x"), x.grad, "grad of x")
    assert_close(case.grad("s"), s.grad, "grad of s")


def test_scatter_reduce_errors_match_torch():
    cases = [("x.scatter_reduce(1, i, s, 'sum')", [[0, 4]], lambda x, s, i, m: x.scatter_reduce(1, i, s, "sum")),
             ("x.scatter_reduce(2, i, s, 'sum')", [[0, 1]], lambda x, s, i, m: x.scatter_reduce(2, i, s, "sum")),
             ("x.scatter_reduce(1, i, s, 'mean')", [0, 1], lambda x, s, i, m: x.scatter_reduce(1, i, s, "mean"))]
    for expr, idx, fn in cases:
        js = adjoint.loads(problem(expr, idx, MASK)).solve().variants[0].to_json()
        with pytest.raises(Exception) as info:
            torch_run(fn, idx, MASK)
        assert (js["error"]["type"], js["error"]["message"]) == (type(info.value).__name__, str(info.value))


def test_scatter_reduce_ties_share_the_gradient_as_in_torch():
    """amax with self and two src values equal to the result: each gets a third (self counted
    even without include_self)."""
    s = [[2.0, 2.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]
    for include_self in (True, False):
        expr = f"(x[:2] * 0 + 2).scatter_reduce(1, i, s, 'amax', include_self={include_self})"

        def fn(x, s, i, m):
            return (x[:2] * 0 + 2).scatter_reduce(1, i, s, "amax", include_self=include_self)
        case = Case(problem(expr, [[0, 0, 1, 2], [3, 3, 3, 3]], MASK, s=s))
        h, x, st = torch_run(fn, [[0, 0, 1, 2], [3, 3, 3, 3]], MASK, s=s)
        assert_close(case.value("h"), h, "h")
        assert_close(case.grad("s"), st.grad, "grad of s")


def test_scatter_reduce_max_is_refused():
    """PyTorch also takes 'max' (as amax, undocumented): refused, not guessed."""
    with pytest.raises(adjoint.ProblemError, match="not modelled"):
        adjoint.loads(problem("x.scatter_reduce(1, i, s, 'max')", [[0, 1]], MASK)).solve()


@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_reduce_argument_values_and_its_not_implemented_backward(reduce):
    """scatter(..., reduce=) has no derivative: a NotImplemented node whose backward raises; the
    values sum (multiply) every value sent to a position."""
    idx = [[0, 0, 3, 0], [1, 1, 1, 1]]
    for expr, fn in ((f"x[:2].scatter(1, i, s, reduce='{reduce}')",
                      lambda x, s, i, m: x[:2].scatter(1, i, s, reduce=reduce)),
                     (f"(x[:2] * 1).scatter_(1, i, 1.5, reduce='{reduce}')",
                      lambda x, s, i, m: (x[:2] * 1).scatter_(1, i, 1.5, reduce=reduce))):
        js = adjoint.loads(problem(expr, idx, MASK)).solve().variants[0].to_json()
        x, st = t64(X, True), t64(S, True)
        with warnings.catch_warnings():   # the src overload's deprecation (TORCH_WARN_ONCE: once a process)
            warnings.simplefilter("ignore")
            h = fn(x, st, torch.tensor(idx), torch.tensor(MASK))
        assert h.grad_fn.name() == "torch::autograd::NotImplemented"
        with pytest.raises(RuntimeError) as info:
            (h * h * h).sum().backward()
        assert (js["error"]["type"], js["error"]["message"], js["error"]["during"]) == \
            ("RuntimeError", str(info.value), "backward")
        fwd = Case(problem(expr, idx, MASK).replace('loss: "sum(y * y * y)"', 'loss: "sum(x * x)"'))
        assert_close(fwd.value("h"), h, "h")


@pytest.mark.parametrize("shape, dim, idx", [((3, 4), 0, [5]), ((3, 4), 0, [-1]), ((4,), 0, [4]),
                                             ((2, 3, 4), 2, [7, 0]), ((2, 3, 4), 1, [3]), ((3, 4), -1, [9])])
def test_index_select_out_of_bounds_is_worded_by_the_dim(shape, dim, idx):
    """index_select's CPU kernel: dim 1 of a tensor of 2 or more dims has its own loop ("INDICES
    element is out of DATA bounds, id=5 axis_dim=4"); every other dim IndexError "index out of
    range in self" (IndexFillBackward1's value gradient goes through the same kernel)."""
    n = 1
    for d in shape:
        n *= d
    x = torch.arange(float(n), dtype=torch.float64).reshape(shape)
    text = (f"name: t\ndtype: float64\ninputs:\n  x: {{value: {lit(x.tolist())}, requires_grad: true}}\n"
            f"  j: {{value: {lit(idx)}, dtype: int64}}\nmodel:\n  inputs: [x, j]\n  forward: |\n"
            f"    h = x.index_select({dim}, j)\n    return h\nloss: \"sum(y)\"\n")
    js = adjoint.loads(text).solve().variants[0].to_json()
    with pytest.raises(Exception) as info:
        x.requires_grad_().index_select(dim, torch.tensor(idx))
    assert (js["error"]["type"], js["error"]["message"]) == (type(info.value).__name__, str(info.value))
