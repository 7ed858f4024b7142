"""Assigning through index tensors (``x[idx] = v``, ``x[mask] = v``, ``x[idx] += v``:
``index_put_``, IndexPutBackward0, CopySlices on a view) in a forward and in hook bodies,
against real torch: node chains, values, grads, the legacy hook's grad_input, the saved-tensor
pack / unpack sequence (tests/opcheck.py), PyTorch's errors and the hook bodies' writes."""

import numpy as np
import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402
from opcheck import case  # noqa: E402

X = [[1, -2, 3], [0.5, 2, -1]]
Y3 = [[[1, -2, 3, 0.5], [0.25, 2, -1, 4], [3, 1, -0.5, 2]], [[2, 0, 1, -3], [1.5, -1, 0.75, 1], [0, 2, 2, -2]]]
R = ([1, 0], False, "int64")
I = ([2, 0], False, "int64")
MASK = ([[True, False, True], [False, False, True]], False, "bool")
ROWS = ([False, True], False, "bool")
V3 = ([4, -2, 0.5], True)
V2 = ([7, -3], True)


def _put(a, idx, v):
    h = a * 2
    h[idx] = v
    return h


def _rows_then_add(a, r, v):
    h = a * 2
    h[r] += v
    return h


def _view_put(a, i, v):
    h = a * 2
    t = h[1:]
    t[:, i] = v
    return h


def _slice_then_index(a, i, v):
    h = a * 2
    h[1:, i] = v
    return h


def _mask_fill(a, k):
    h = a * 2
    h[k] = 0
    return h


def _mask_values(a, k, v):
    h = a * 2
    h[k] = v
    return h


def _two_indices(a, r, i, v):
    h = a * 2
    h[r, i] = v
    return h


def _broadcast_scalar(a, r, v):
    h = a * 2
    h[r] = v
    return h


def _into_constant(a, r, v):
    h = a.detach() * 1
    h[r] = v
    return h * a


def _list_cols(a, v):
    h = a * 2
    h[:, [2, 0]] = v
    return h


def _lead_one(a, r, v):
    h = a * 2
    h[r] = v
    return h


def _3d(a, r, v):
    h = a * 2
    h[r, :, r] = v
    return h


CASES = [
    ("h = a * 2\nh[r] = v\nreturn h", _put, {"a": (X, True), "r": R, "v": ([[1, 2, 3], [4, 5, 6]], True)}),
    ("h = a * 2\nh[r] += v\nreturn h", _rows_then_add, {"a": (X, True), "r": R, "v": V3}),
    ("h = a * 2\nt = h[1:]\nt[:, i] = v\nreturn h", _view_put, {"a": (X, True), "i": I, "v": V2}),
    ("h = a * 2\nh[1:, i] = v\nreturn h", _slice_then_index, {"a": (X, True), "i": I, "v": ([[7, -3]], True)}),
    ("h = a * 2\nh[k] = 0\nreturn h", _mask_fill, {"a": (X, True), "k": MASK}),
    ("h = a * 2\nh[k] = v\nreturn h", _mask_values, {"a": (X, True), "k": MASK, "v": V3}),
    ("h = a * 2\nh[k] = v\nreturn h", _mask_values, {"a": (X, True), "k": ROWS, "v": V3}),
    ("h = a * 2\nh[k] = v\nreturn h", _mask_values, {"a": (X, True), "k": MASK, "v": (5, True)}),
    ("h = a * 2\nh[r, i] = v\nreturn h", _two_indices, {"a": (X, True), "r": R, "i": I, "v": V2}),
    ("h = a * 2\nh[r] = v\nreturn h", _broadcast_scalar, {"a": (X, True), "r": R, "v": (3, True)}),
    ("h = a.detach() * 1\nh[r] = v\nreturn h * a", _into_constant, {"a": (X, True), "r": R, "v": V3}),
    ("h = a * 2\nh[:, [2, 0]] = v\nreturn h", _list_cols, {"a": (X, True), "v": ([[1, 2], [3, 4]], True)}),
    ("h = a * 2\nh[r] = v\nreturn h", _lead_one, {"a": (X, True), "r": R, "v": ([[[4, -2, 0.5]]], True)}),
    ("h = a * 2\nh[r, :, r] = v\nreturn h", _3d, {"a": (Y3, True), "r": R, "v": ([[1, 2, 3], [4, 5, 6]], True)}),
]


@pytest.mark.parametrize("expr,fn,inputs", CASES, ids=[f"{k}:{c[0].splitlines()[1]}" for k, c in enumerate(CASES)])
def test_index_assignment_in_a_forward_against_torch(expr, fn, inputs):
    assert case(inputs, expr, fn) == []


def _solve(forward: str, **inputs):
    lines = ["name: ip", "dtype: float64", "inputs:",
             "  x: {value: [[1, -2, 3], [0.5, 2, -1]], requires_grad: true}"]
    lines += [f"  {k}: {v}" for k, v in inputs.items()]
    lines += ["model:", f"  inputs: [x, {', '.join(inputs)}]", "  forward: |"]
    lines += ["    " + s for s in forward.splitlines()]
    lines += ["loss: sum(y)", "hooks:", '  - {saved_tensors: {pack: "x", unpack: "x"}}']
    return adjoint.loads("\n".join(lines) + "\n").solve().variants[0].to_json()


def _torch_error(fn, *args):
    packed = []
    with pytest.raises((IndexError, RuntimeError)) as theirs:
        with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
            fn(*args)
    return type(theirs.value).__name__, str(theirs.value), len(packed)


XT = torch.tensor(X, dtype=torch.float64, requires_grad=True)
IDX = "{value: [1, 0], dtype: int64}"
ERRORS = [
    # (index, value as the file gives them, the same in torch)
    ("{value: [1, 2], dtype: int64}", "{value: [4, -2, 0.5], requires_grad: true}",
     torch.tensor([1, 2]), torch.tensor([4, -2, 0.5], dtype=torch.float64)),
    ("{value: [-3, 0], dtype: int64}", "[4, -2, 0.5]", torch.tensor([-3, 0]), torch.tensor([4, -2, 0.5],
                                                                                          dtype=torch.float64)),
    (IDX, "[4, -2]", torch.tensor([1, 0]), torch.tensor([4., -2], dtype=torch.float64)),
    (IDX, "{value: [4, -2, 1], dtype: int64}", torch.tensor([1, 0]), torch.tensor([4, -2, 1])),
    ("[1, 0]", "[4, -2, 0.5]", torch.tensor([1., 0]), torch.tensor([4, -2, 0.5], dtype=torch.float64)),
    ("{value: [true, false, true], dtype: bool}", "[4, -2, 0.5]", torch.tensor([True, False, True]),
     torch.tensor([4, -2, 0.5], dtype=torch.float64)),
    ("{value: [1, 2], dtype: int64}", "[4, -2]", torch.tensor([1, 2]), torch.tensor([4., -2], dtype=torch.float64)),
]


@pytest.mark.parametrize("index,value,i,v", ERRORS, ids=range(len(ERRORS)))
def test_pytorchs_index_put_errors_are_answers_after_the_packs(index, value, i, v):
    def fn(i, v):
        h = XT * 2
        h[i] = v
    kind, message, packs = _torch_error(fn, i, v)
    out = _solve("h = x * 2\nh[i] = v\nreturn h", i=index, v=value)
    assert (out["error"]["type"], out["error"]["message"], out["error"]["during"]) == (kind, message, "forward")
    assert len([c for c in out["hook_calls"] if c["kind"] == "pack"]) == packs   # the indices, before the error


def test_pytorchs_mask_shape_error_names_the_mismatched_dim():
    # expandTensors names the first dim of the mask that differs, and the dim of x it stands for
    y = torch.zeros(2, 3, 4, dtype=torch.float64, requires_grad=True)
    m = torch.ones(2, 4, dtype=torch.bool)
    for fn, forward in ((lambda: y[m], "x[m].sum()"), (lambda: y[:, m], "x[:, m].sum()")):
        with pytest.raises(IndexError) as theirs:
            fn()
        text = f"""
name: m
inputs:
  x: {{value: {np.zeros((2, 3, 4)).tolist()}, requires_grad: true}}
  m: {{value: {np.ones((2, 4), dtype=bool).tolist()}, dtype: bool}}
model:
  inputs: [x, m]
  forward: "{forward}"
"""
        error = adjoint.loads(text.replace("True", "true")).solve().variants[0].to_json()["error"]
        assert (error["type"], error["message"]) == ("IndexError", str(theirs.value))


def test_a_leaf_that_requires_grad_is_pytorchs_error():
    with pytest.raises(RuntimeError) as theirs:
        XT[torch.tensor([1, 0])] = 0.
    out = _solve("x[i] = 0\nreturn x", i=IDX)
    assert (out["error"]["type"], out["error"]["message"]) == ("RuntimeError", str(theirs.value))
    with pytest.raises(RuntimeError) as theirs:
        XT[1:][0, torch.tensor([1, 0])] = 0.
    out = _solve("r = x[1:]\nr[0, i] = 0\nreturn r", i=IDX)
    assert (out["error"]["type"], out["error"]["message"]) == ("RuntimeError", str(theirs.value))


def test_a_position_written_twice_with_different_values_is_refused():
    with pytest.raises(ProblemError) as err:
        _solve("h = x * 2\nh[i] = v\nreturn h", i="{value: [1, 1], dtype: int64}", v="[4, -2, 0.5]")
    assert "one position twice" in str(err.value)
    # one value written twice is PyTorch's one result
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    h = x * 2
    h[torch.tensor([1, 1])] = 3.
    h.sum().backward()
    out = _solve("h = x * 2\nh[i] = 3\nreturn h", i="{value: [1, 1], dtype: int64}")
    np.testing.assert_allclose(out["values"]["h"]["value"], h.detach().numpy())
    np.testing.assert_allclose(out["grads"]["x"]["value"], x.grad.numpy())


def _hook_problem(body: str, target: str) -> dict:
    text = f"""
name: hk
dtype: float64
inputs:
  x: {{value: {X}, requires_grad: true}}
  i: {IDX}
  m: {{value: [false, true, true], dtype: bool}}
model:
  inputs: [x, i, m]
  forward: |
    a = x * 2
    b = a + x
    return b * b + a
loss: "sum(y)"
hooks:
  - tensor: {target}
    does: |
""" + "".join(f"      {s}\n" for s in body.splitlines())
    return adjoint.loads(text).solve().variants[0].to_json()


def _torch_hook(body, target: str):
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    i, m = torch.tensor([1, 0]), torch.tensor([False, True, True])
    a = x * 2
    b = a + x
    {"a": a, "b": b, "x": x}[target].register_hook(lambda g: body(g, i, m))
    (b * b + a).sum().backward()
    return x.grad.numpy()


def _zero_rows(g, i, m):
    g[i[:1]] = 0


def _mask_cols(g, i, m):
    g[:, m] = -1


def _pairs(g, i, m):
    g[i, [2, 0]] = g[0, :2] * 3


def _add_rows(g, i, m):
    g[[1]] += 5


@pytest.mark.parametrize("body,fn", [
    ("grad[i[:1]] = 0", _zero_rows), ("grad[:, m] = -1", _mask_cols),
    ("grad[i, [2, 0]] = grad[0, :2] * 3", _pairs), ("grad[[1]] += 5", _add_rows),
])
@pytest.mark.parametrize("target", ["a", "b", "x"])
def test_index_assignment_in_a_hook_body_writes_the_gradient(body, fn, target):
    # a's gradient and b's are one tensor with AddBackward0's (semantics.md): a write into b's
    # reaches a's branch too
    out = _hook_problem(body, target)
    np.testing.assert_allclose(out["grads"]["x"]["value"], _torch_hook(fn, target), rtol=1e-12)


def _call_inplace_acc(a, r, j, v):
    h = a * 2
    h.index_put_((r, j), v, accumulate=True)
    return h


def _call_function(a, r, v):
    return torch.index_put(a * 2, (r,), v, accumulate=True)


def _call_method(a, k, v):
    return (a * 2).index_put([k], v)


def _call_inplace(a, r, v):
    h = a * 2
    h.index_put_((r,), v)
    return h


CALLS = [
    ("h = a * 2\nh.index_put_((r, j), v, accumulate=True)\nreturn h", _call_inplace_acc,
     {"a": (X, True), "r": ([1, 1, 0], False, "int64"), "j": ([0, 0, 2], False, "int64"), "v": V3}),
    ("return torch.index_put(a * 2, (r,), v, accumulate=True)", _call_function,
     {"a": (X, True), "r": ([1, 1, 0, 1], False, "int64"), "v": ([[1, 2, 3]], True)}),
    ("return (a * 2).index_put([k], v)", _call_method, {"a": (X, True), "k": MASK, "v": V3}),
    ("return (a * 2).index_put([k], v)", _call_method, {"a": (X, True), "k": ROWS, "v": ([7], True)}),
    ("h = a * 2\nh.index_put_((r,), v)\nreturn h", _call_inplace, {"a": (X, True), "r": R, "v": ([[1, 2, 3]], True)}),
]


@pytest.mark.parametrize("expr,fn,inputs", CALLS, ids=[f"{k}:{c[0].splitlines()[-1]}" for k, c in enumerate(CALLS)])
def test_index_put_calls_against_torch(expr, fn, inputs):
    assert case(inputs, expr, fn) == []


V_FLOAT = ("[4, -2, 0.5]", torch.tensor([4, -2, 0.5], dtype=torch.float64))
V_LONG = ("{value: [4, -2, 1], dtype: int64}", torch.tensor([4, -2, 1]))


@pytest.mark.parametrize("forward,fn,v", [
    ("h = x * 2\nh.index_put_((i, i, i), v)\nreturn h", lambda h, i, v: h.index_put_((i, i, i), v), V_FLOAT),
    ("h = x * 2\nh.index_put_((i,), v[None, None], True)\nreturn h",
     lambda h, i, v: h.index_put_((i,), v[None, None], True), V_FLOAT),
    ("h = x * 2\nh.index_put_((i,), v, True)\nreturn h", lambda h, i, v: h.index_put_((i,), v, True), V_LONG),
])
def test_index_put_call_errors_are_answers(forward, fn, v):
    def run(i, v):
        fn(XT * 2, i, v)
    kind, message, packs = _torch_error(run, torch.tensor([1, 0]), v[1])
    out = _solve(forward, i=IDX, v=v[0])
    assert (out["error"]["type"], out["error"]["message"]) == (kind, message)
    assert len([c for c in out["hook_calls"] if c["kind"] == "pack"]) == packs


def _behind_index_put(variant: str):
    """tests/data/regressions/hook_writes_behind_index_put.yaml written with torch: each hook
    registered right after its tensor's line, as the file's are."""
    x = torch.tensor([[0.5, -1, 2], [1.5, 0.25, -3]], dtype=torch.float64, requires_grad=True)
    v = torch.tensor([4, -2, 0.5], dtype=torch.float64, requires_grad=True)
    i = torch.tensor([1])
    seen = []

    def hook(name, write):
        def body(grad):
            seen.append(grad.detach().clone().numpy())
            write(grad)
        return body
    h = x * 2
    if variant == "fresh_self_gradient":
        h.register_hook(hook("h", lambda grad: grad.__setitem__((slice(None), [0, 2]), 1)))
    h[h > 0] = 0
    g = x * 3
    if variant != "fresh_self_gradient":
        g.register_hook(hook("g", lambda grad: grad.__setitem__(0, -1)))
    r = torch.index_put(g, (i,), v, accumulate=True)
    if variant != "fresh_self_gradient":
        r.retain_grad()
        r.register_hook(hook("r", lambda grad: grad.__setitem__(i, 5)))
    else:
        x.register_hook(hook("x", lambda grad: grad.mul_(2)))
    (h * h + r * r).sum().backward()
    grads = {"x": x.grad.numpy(), "v": v.grad.numpy()}
    if variant != "fresh_self_gradient":
        grads["r"] = r.grad.numpy()
    return grads, seen


@pytest.mark.parametrize("variant", ["fresh_self_gradient", "accumulate_hands_on_the_gradient"])
def test_hooks_write_what_index_put_backward_hands_on(variant):
    import os
    path = os.path.join(os.path.dirname(__file__), "data", "regressions", "hook_writes_behind_index_put.yaml")
    out = adjoint.load(path).solve().variant(variant).to_json()
    grads, seen = _behind_index_put(variant)
    assert sorted(out["grads"]) == sorted(grads)
    for name, value in grads.items():
        np.testing.assert_allclose(out["grads"][name]["value"], value, rtol=1e-12)
    handed = [c["args"]["grad"]["value"] for c in out["hook_calls"] if c["kind"] == "hook"]
    assert len(handed) == len(seen)
    for mine, theirs in zip(handed, seen):
        np.testing.assert_allclose(mine, theirs, rtol=1e-12)
