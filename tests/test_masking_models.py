"""masked_fill / masked_fill_ (bool masks, number and 0-d tensor values, broadcasting, in
place) and the activations relu6, hardswish, mish (F. forms and the modules Hardtanh, ReLU6,
Hardswish, Mish) against real torch: node chains, values, grads, the legacy hook's grad_input
and the saved-tensor pack / unpack sequence (tests/opcheck.py), at the kinks too."""

import pytest
from conftest import require_torch

torch = require_torch()
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402
from opcheck import Lambda, case, compare, expr_child  # noqa: E402

M = [[True, False, True], [False, False, True]]
XM = {"a": ([[1, -2, 0.5], [3, 0.25, -1]], True), "k": (M, False, "bool")}
XMV = dict(XM, v=(-1.5, True))
XMV_FIXED = dict(XM, v=(2, False))

MASKED = [
    ("a.masked_fill(k, 0.5)", lambda a, k: a.masked_fill(k, 0.5), XM),
    ("torch.masked_fill(a, k, -2)", lambda a, k: torch.masked_fill(a, k, -2), XM),
    ("a.masked_fill(k[0], 0)", lambda a, k: a.masked_fill(k[0], 0), XM),
    ("a[0].masked_fill(k, 3)", lambda a, k: a[0].masked_fill(k, 3), XM),     # the result broadcasts to the mask
    ("a.masked_fill(k, v)", lambda a, k, v: a.masked_fill(k, v), XMV),
    ("a.masked_fill(k, v) * v", lambda a, k, v: a.masked_fill(k, v) * v, XMV),
    ("torch.masked_fill(a, k, v)", lambda a, k, v: torch.masked_fill(a, k, v), XMV_FIXED),
    ("a[1].masked_fill(k, v)", lambda a, k, v: a[1].masked_fill(k, v), XMV),
]


@pytest.mark.parametrize("expr,fn,inputs", MASKED, ids=[c[0] for c in MASKED])
def test_masked_fill_against_torch(expr, fn, inputs):
    assert case(inputs, expr, fn) == []


INPLACE = [
    ("c.masked_fill_(k, 0.5)", lambda c, k, v: c.masked_fill_(k, 0.5)),
    ("c.masked_fill_(k[1], -1)", lambda c, k, v: c.masked_fill_(k[1], -1)),
    ("c.masked_fill_(k, v)", lambda c, k, v: c.masked_fill_(k, v)),
    ("c[0].masked_fill_(k[0], v)", lambda c, k, v: c[0].masked_fill_(k[0], v)),
]


@pytest.mark.parametrize("call,fn", INPLACE, ids=[i[0] for i in INPLACE])
def test_masked_fill_in_place_against_torch(call, fn):
    # on a non-leaf (c = a * 1): the node's first edge is MulBackward0; on a view of c,
    # CopySlices; the mask has no edge
    child = expr_child(["a", "m", "v"], f"c = a * 1\nd = {call}\nreturn c * 2")

    def run(a, k, v):
        c = a * 1
        fn(c, k, v)
        return c * 2
    assert compare(XMV, child, Lambda(run)) == []


def _solve(forward: str, mask: str = "[[true, false], [false, true]]", mask_dtype: str = "bool"):
    text = f"""
name: mf
inputs:
  x: {{value: [[1, -2], [3, 4]], requires_grad: true}}
  m: {{value: {mask}, dtype: {mask_dtype}}}
  v: {{value: [1, 2], requires_grad: true}}
model:
  inputs: [x, m, v]
  forward: "{forward}"
"""
    return adjoint.loads(text).solve().variants[0].to_json()


def test_a_mask_that_is_not_bool_is_pytorchs_error():
    v = _solve("x.masked_fill(m, 0).sum()", "[[1, 0], [0, 1]]", "int64")
    x = torch.tensor([[1., -2], [3, 4]], requires_grad=True)
    with pytest.raises(RuntimeError) as err:
        x.masked_fill(torch.tensor([[1, 0], [0, 1]]), 0)
    assert v["error"]["message"] == str(err.value)
    assert "only supports boolean masks" in str(err.value)


def test_a_value_with_dims_is_pytorchs_error_an_answer():
    x = torch.tensor([[1., -2], [3, 4]], requires_grad=True)
    m = torch.tensor([[True, False], [False, True]])
    with pytest.raises(RuntimeError) as err:
        x.masked_fill(m, torch.tensor([1., 2.], requires_grad=True))
    error = _solve("x.masked_fill(m, v).sum()")["error"]
    assert (error["type"], error["message"], error["during"]) == ("RuntimeError", str(err.value), "forward")


@pytest.mark.parametrize("forward,torch_call", [
    ("x[0].masked_fill_(m, 1).sum()", lambda x, m, v: (x * 1)[0].masked_fill_(m, 1)),
])
def test_in_place_errors_are_pytorchs(forward, torch_call):
    """A mask broadcast past the row written in place: PyTorch's error, the answer."""
    x = torch.tensor([[1., -2], [3, 4]], requires_grad=True)
    m = torch.tensor([[True, False], [False, True]])
    with pytest.raises(RuntimeError) as err:
        torch_call(x, m, torch.tensor([1., 2.], requires_grad=True))
    error = _solve(forward.replace("x[0]", "(x * 1)[0]"))["error"]
    assert (error["type"], error["message"], error["during"]) == ("RuntimeError", str(err.value), "forward")


def test_masked_fill_of_an_int64_tensor_is_refused():
    text = """
name: mf
inputs:
  k: {value: [1, 2], dtype: int64}
  m: {value: [true, false], dtype: bool}
  x: {value: [1, 2], requires_grad: true}
model:
  inputs: [k, m, x]
  forward: "(x * k.masked_fill(m, 0)).sum()"
"""
    with pytest.raises(ProblemError) as err:
        adjoint.loads(text).solve()
    assert "masked_fill of an int64 tensor is not modelled" in str(err.value)


# ----------------------------------------------------------------------------- relu6, hardswish, mish

KINKS = {"a": ([[-4, -3, -1, 0], [3, 6, 7, 2.5]], True)}
SMOOTH = {"a": ([[-2, -0.5, 0, 1], [0.25, 3, -3, 1.5]], True)}

ACTS = [
    ("F.relu6(a)", lambda a: F.relu6(a), KINKS),
    ("F.hardswish(a)", lambda a: F.hardswish(a), KINKS),
    ("F.mish(a)", lambda a: F.mish(a), SMOOTH),
    ("F.hardswish(a * -1).sqrt()", lambda a: F.hardswish(a * -1).sqrt(), {"a": ([4, 3, 0, -1], True)}),
    ("F.mish(a * -1).sqrt()", lambda a: F.mish(a * -1).sqrt(), {"a": ([0, -1], True)}),
]


@pytest.mark.parametrize("expr,fn,inputs", ACTS, ids=[c[0] for c in ACTS])
def test_activations_against_torch(expr, fn, inputs):
    # hardswish'(-3) = 0, hardswish'(3) = 1, relu6'(0) = relu6'(6) = 0; hardswish of x <= -3 is
    # -0.0 (sqrt'(-0.0) = -inf shows it), mish keeps a -0.0
    assert case(inputs, expr, fn) == []


@pytest.mark.parametrize("call,fn", [
    ("F.relu6(c, inplace=True)", lambda c: F.relu6(c, inplace=True)),
    ("F.hardswish(c, True)", lambda c: F.hardswish(c, True)),
    ("F.mish(c, inplace=True)", lambda c: F.mish(c, inplace=True)),
])
def test_activations_in_place_against_torch(call, fn):
    child = expr_child(["a"], f"c = a * 1\nd = {call}\nreturn d * 2")
    assert compare(KINKS, child, Lambda(lambda a: fn(a * 1) * 2)) == []


@pytest.mark.parametrize("child,module", [
    ("{type: ReLU6}", nn.ReLU6()),
    ("{type: Hardswish}", nn.Hardswish()),
    ("{type: Mish}", nn.Mish()),
    ("{type: Hardtanh, args: {min_val: -0.5, max_val: 3}}", nn.Hardtanh(-0.5, 3)),
])
def test_modules_against_torch(child, module):
    assert compare(KINKS, child, module) == []


@pytest.mark.parametrize("child,module", [
    ("{type: ReLU6, args: {inplace: true}}", nn.ReLU6(inplace=True)),
    ("{type: Hardswish, args: {inplace: true}}", nn.Hardswish(inplace=True)),
    ("{type: Mish, args: {inplace: true}}", nn.Mish(inplace=True)),
])
def test_in_place_modules_against_torch(child, module):
    forward = "h = m(a * 1)\nreturn (h * W).sum()"
    assert compare(KINKS, child, Lambda(lambda a: module(a * 1)), forward) == []


def test_hardtanh_bounds_are_checked_as_pytorch_does():
    with pytest.raises(AssertionError) as theirs:
        nn.Hardtanh(1.0, 1.0)
    text = """
name: h
inputs:
  x: {value: [1], requires_grad: true}
model:
  type: Hardtanh
  args: {min_val: 1, max_val: 1}
"""
    error = adjoint.loads(text).solve().variants[0].to_json()["error"]   # the constructor's error is the answer
    assert error == {"type": "AssertionError", "message": str(theirs.value), "during": "setup", "after_call": None}


# ----------------------------------------------------------------------------- float("-inf")

CAUSAL = [[False, True, True], [False, False, True], [False, False, False]]
SCORES = {"a": ([[[1, -2, 0.5], [3, 0.25, -1], [0, 2, -0.5]], [[0.5, 1, 2], [-1, 0, 1], [2, 2, 1]]], True),
          "k": (CAUSAL, False, "bool")}


@pytest.mark.parametrize("expr,fn", [
    ("F.softmax(a.masked_fill(k, float('-inf')), dim=-1)",
     lambda a, k: F.softmax(a.masked_fill(k, float("-inf")), dim=-1)),
    ("torch.softmax(a.masked_fill(k, float(' -Infinity ')), -1)",
     lambda a, k: torch.softmax(a.masked_fill(k, float(" -Infinity ")), -1)),
    ("F.log_softmax(torch.masked_fill(a, k, float('-inf')), 2)",
     lambda a, k: F.log_softmax(torch.masked_fill(a, k, float("-inf")), 2).masked_fill(k, 0)),
])
def test_a_causal_mask_with_minus_infinity_against_torch(expr, fn):
    # exp(-inf) = 0 exactly: the masked scores get probability 0 and gradient 0
    if "log_softmax" in expr:
        expr = expr + ".masked_fill(k, 0)"
    assert case(SCORES, expr, fn) == []


def test_minus_infinity_in_place_against_torch():
    child = expr_child(["a", "k"], "c = a * 1\nc.masked_fill_(k, float('-inf'))\nreturn c.softmax(-1)")

    def run(a, k):
        c = a * 1
        c.masked_fill_(k, float("-inf"))
        return c.softmax(-1)
    assert compare(SCORES, child, Lambda(run)) == []


@pytest.mark.parametrize("forward,needle", [
    ("(x + float('-inf')).sum()", "arithmetic with an infinite number is not modelled"),
    ("x.masked_fill(m, float('nan')).sum()", "float('nan') is not modelled"),
    ("x.masked_fill(m, float('abc')).sum()", "only float(\"inf\") and float(\"-inf\")"),
    ("x.masked_fill(m, 'a').sum()", "argument 'value' must be a number or a Tensor"),
])
def test_infinite_numbers_elsewhere_are_refused(forward, needle):
    with pytest.raises(ProblemError) as err:
        _solve(forward)
    assert needle in str(err.value)


def test_a_fully_masked_row_is_nan_as_in_torch():
    v = _solve("F.softmax(x.masked_fill(m, float('-inf')), dim=1)[0].sum()", "[[true, true], [false, true]]")
    x = torch.tensor([[1., -2], [3, 4]], requires_grad=True)
    y = F.softmax(x.masked_fill(torch.tensor([[True, True], [False, True]]), float("-inf")), dim=1)[0].sum()
    y.backward()
    assert torch.isnan(y) and v["values"]["y"]["exact"] == "nan"
    # the softmax row is nan, its gradient too, but masked_fill's backward zeroes the masked slots
    assert v["grads"]["x"]["value"] == x.grad.tolist() == [[0.0, 0.0], [0.0, 0.0]]


@pytest.mark.parametrize("forward,fn", [
    ("(x * 2).masked_fill_(m, 0)", lambda x, m: (x * 2).masked_fill_(m, 0.)),
    ("(x * 2).masked_fill_(mi, 0)", lambda x, m: (x * 2).masked_fill_(m.long(), 0.)),
    ("(x * 2).masked_fill_(m, v)", lambda x, m: (x * 2).masked_fill_(m, torch.tensor([1., 2.]))),
    ("(x[0] * 2).expand(2, 3).masked_fill_(m, 0)", lambda x, m: (x[0] * 2).expand(2, 3).masked_fill_(m, 0.)),
    ("x.masked_fill_(m, v)", lambda x, m: x.masked_fill_(m, torch.tensor([1., 2.]))),
])
def test_masked_fill_in_place_errors_come_after_the_pack_of_the_mask(forward, fn):
    """masked_fill_'s kernel errors come after MaskedFillBackward packed the mask, the expanded
    tensor's warning between the pack and the broadcast error; a leaf's in-place error first,
    with no pack (verify's torch side cannot name the dropped node: pinned here)."""
    text = f"""
name: mf
inputs:
  x: {{value: [[1, -2, 3], [4, 5, 6]], requires_grad: true}}
  m: {{value: [true, false, true, false], dtype: bool}}
  mi: {{value: [1, 0, 1, 0], dtype: int64}}
  v: [1, 2]
model:
  inputs: [x, m, mi, v]
  forward: "{forward}"
hooks:
  - {{saved_tensors: {{pack: "x", unpack: "x"}}}}
"""
    import warnings
    v = adjoint.loads(text).solve().variants[0]
    packs = []
    with warnings.catch_warnings(record=True) as caught, pytest.raises(RuntimeError) as theirs:
        warnings.simplefilter("always")
        with torch.autograd.graph.saved_tensors_hooks(lambda t: packs.append(t.detach().clone()) or t, lambda t: t):
            fn(torch.tensor([[1., -2, 3], [4, 5, 6]], requires_grad=True), torch.tensor([True, False, True, False]))
    assert [c.kind for c in v.hook_calls] == ["pack"] * len(packs)
    assert all(c.node == "MaskedFillBackward0" or c.node == "MaskedFillBackward1" for c in v.hook_calls)
    assert [(c.args["x"].dtype, c.args["x"].shape) for c in v.hook_calls] == \
        [(str(p.dtype).replace("torch.", ""), tuple(p.shape)) for p in packs]
    assert [w.message for w in v.warnings] == [str(w.message) for w in caught]
    assert (v.error.type, v.error.message) == ("RuntimeError", str(theirs.value))
