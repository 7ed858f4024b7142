"""Activations, clamp, softmax, maximum / minimum, where and pow against real torch: node chains,
values, grads, the legacy hook's grad_input and the saved-tensor pack / unpack sequence
(tests/opcheck.py), at the kinks too (0 for the relu family, the bounds for clamp and
hardtanh, ties for maximum)."""

from fractions import Fraction

import pytest
from conftest import require_torch

torch = require_torch()
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402
from adjoint.engine.runtime import Runtime  # noqa: E402
from adjoint.values.backends.exact import ExactBackend  # noqa: E402
from adjoint.values.exact import Exact  # noqa: E402
from adjoint.engine.bindings import call_function  # noqa: E402
from nodechain import chain  # noqa: E402
from opcheck import Lambda, compare, case, expr_child  # noqa: E402

X = {"a": ([[1, -2, 0, 3], [0.5, -1, 2, -0.25]], True)}
X_BOUNDS = {"a": ([[-1, 1, 0, -2], [2, 0.5, -0.5, 1]], True)}
AB = {"a": ([[1, -2, 0], [3, 0.5, 2]], True), "b": ([1, 0, 2], True)}

UNARY = [
    ("F.relu(a)", lambda a: F.relu(a), X),
    ("torch.relu(a)", lambda a: torch.relu(a), X),
    ("a.relu()", lambda a: a.relu(), X),
    ("F.leaky_relu(a)", lambda a: F.leaky_relu(a), X),
    ("F.leaky_relu(a, 0.2)", lambda a: F.leaky_relu(a, 0.2), X),
    ("F.leaky_relu(a, negative_slope=-0.5)", lambda a: F.leaky_relu(a, negative_slope=-0.5), X),
    ("F.gelu(a)", lambda a: F.gelu(a), X),
    ("F.gelu(a, approximate='tanh')", lambda a: F.gelu(a, approximate="tanh"), X),
    ("F.silu(a)", lambda a: F.silu(a), X),
    ("F.elu(a)", lambda a: F.elu(a), X),
    ("F.elu(a, 0.5)", lambda a: F.elu(a, 0.5), X),
    ("F.softplus(a)", lambda a: F.softplus(a), X),
    ("F.softplus(a, 2, 2)", lambda a: F.softplus(a, 2, 2), {"a": ([[1, -2, 0, 3], [0.5, 1.5, 2, -0.25]], True)}),
    ("F.hardtanh(a)", lambda a: F.hardtanh(a), X_BOUNDS),
    ("F.hardtanh(a, -0.5, 2)", lambda a: F.hardtanh(a, -0.5, 2), X_BOUNDS),
    ("torch.clamp(a, -1, 1)", lambda a: torch.clamp(a, -1, 1), X_BOUNDS),
    ("a.clamp(min=0)", lambda a: a.clamp(min=0), X_BOUNDS),
    ("a.clamp(max=0.5)", lambda a: a.clamp(max=0.5), X_BOUNDS),
    ("torch.clamp(a, 1, -1)", lambda a: torch.clamp(a, 1, -1), X_BOUNDS),
    ("a.clip(-0.5, 0.5)", lambda a: a.clip(-0.5, 0.5), X_BOUNDS),
    ("torch.softmax(a, 1)", lambda a: torch.softmax(a, 1), X),
    ("F.softmax(a, dim=0)", lambda a: F.softmax(a, dim=0), X),
    ("a.softmax(-1)", lambda a: a.softmax(-1), X),
    ("F.log_softmax(a, 1)", lambda a: F.log_softmax(a, 1), X),
    ("a.log_softmax(dim=0)", lambda a: a.log_softmax(dim=0), X),
    ("a.exp()", lambda a: a.exp(), X),
    ("a.tanh()", lambda a: a.tanh(), X),
    ("a.sigmoid()", lambda a: a.sigmoid(), X),
    ("a.abs()", lambda a: a.abs(), X),
    ("a.sin()", lambda a: a.sin(), X),
    ("a.cos()", lambda a: a.cos(), X),
    ("a.log()", lambda a: a.log(), {"a": ([[1, 2, 0.5], [3, 0.25, 4]], True)}),
    ("a.sqrt()", lambda a: a.sqrt(), {"a": ([[1, 2, 0.5], [3, 0.25, 4]], True)}),
    ("torch.pow(a, 2)", lambda a: torch.pow(a, 2), X),
    ("a.pow(3)", lambda a: a.pow(3), X),
    ("torch.pow(2, a)", lambda a: torch.pow(2, a), X),
]


@pytest.mark.parametrize("expr,fn,inputs", UNARY, ids=[u[0] for u in UNARY])
def test_unary_against_torch(expr, fn, inputs):
    assert case(inputs, expr, fn) == []


POSITIVE = {"a": ([[1, 2, 0.5], [3, 0.25, 4]], True), "b": ([[2, 0.5, 1], [1, 3, 0.5]], True)}

BINARY = [
    ("torch.maximum(a, b)", lambda a, b: torch.maximum(a, b), AB),
    ("torch.minimum(a, b)", lambda a, b: torch.minimum(a, b), AB),
    ("a.maximum(b)", lambda a, b: a.maximum(b), AB),
    ("torch.max(a, b)", lambda a, b: torch.max(a, b), AB),
    ("torch.min(a, other=b)", lambda a, b: torch.min(a, other=b), AB),
    ("torch.pow(a, b)", lambda a, b: torch.pow(a, b), POSITIVE),
    ("a.pow(b)", lambda a, b: a.pow(b), POSITIVE),
    ("torch.clamp(a, b, b + 1)", lambda a, b: torch.clamp(a, b, b + 1), AB),
    ("torch.clamp(a, min=b)", lambda a, b: torch.clamp(a, min=b), AB),
    ("torch.clamp(a, max=b)", lambda a, b: torch.clamp(a, max=b), AB),
    ("torch.clamp(a, b + 1, b)", lambda a, b: torch.clamp(a, b + 1, b), AB),
]


@pytest.mark.parametrize("expr,fn,inputs", BINARY, ids=[b[0] for b in BINARY])
def test_binary_against_torch(expr, fn, inputs):
    assert case(inputs, expr, fn) == []


def test_maximum_with_one_side_not_requiring_grad():
    inputs = {"a": AB["a"], "b": (AB["b"][0], False)}
    assert case(inputs, "torch.maximum(a, b)", lambda a, b: torch.maximum(a, b)) == []
    assert case(inputs, "torch.clamp(a, b - 1, b)", lambda a, b: torch.clamp(a, b - 1, b)) == []


# ----------------------------------------------------------------------------- in place

INPLACE = [
    ("F.relu(c, inplace=True)", lambda c: F.relu(c, inplace=True)),
    ("torch.relu_(c)", lambda c: torch.relu_(c)),
    ("F.relu_(c)", lambda c: F.relu_(c)),
    ("c.relu_()", lambda c: c.relu_()),
    ("F.leaky_relu(c, 0.1, True)", lambda c: F.leaky_relu(c, 0.1, True)),
    ("F.leaky_relu_(c, 0.3)", lambda c: F.leaky_relu_(c, 0.3)),
    ("F.elu(c, inplace=True)", lambda c: F.elu(c, inplace=True)),
    ("F.elu_(c, 2)", lambda c: F.elu_(c, 2)),
    ("F.hardtanh(c, inplace=True)", lambda c: F.hardtanh(c, inplace=True)),
    ("F.hardtanh_(c, -0.5, 0.5)", lambda c: F.hardtanh_(c, -0.5, 0.5)),
    ("F.silu(c, inplace=True)", lambda c: F.silu(c, inplace=True)),
    ("c.clamp_(-1, 1)", lambda c: c.clamp_(-1, 1)),
    ("c.clamp_(min=0)", lambda c: c.clamp_(min=0)),
    ("c.clip_(max=0)", lambda c: c.clip_(max=0)),
]


@pytest.mark.parametrize("call,fn", INPLACE, ids=[i[0] for i in INPLACE])
def test_inplace_against_torch(call, fn):
    # the in-place op runs on a non-leaf (c = a * 1): its node's first edge is MulBackward0,
    # and ops that save self clone it first (one more sequence_nr)
    child = expr_child(["a"], "")
    child = child.replace('"forward": ""', '"forward": ' + '"c = a * 1\\nd = ' + call.replace('"', '\\"')
                          + '\\nreturn d * 2"')
    assert compare(X_BOUNDS, child, Lambda(lambda a: fn(a * 1) * 2)) == []


@pytest.mark.parametrize("call,slope", [("F.leaky_relu_(c, -0.5)", "leakyReLu"), ("F.elu_(c, -0.5)", "elu")])
def test_inplace_negative_slope_raises_in_backward(call, slope):
    text = f"""
name: neg
inputs:
  a: {{value: [1, -2], requires_grad: true}}
model:
  inputs: [a]
  forward: |
    c = a * 1
    d = {call}
    return d.sum()
"""
    v = adjoint.loads(text).solve().variants[0].to_json()
    x = torch.tensor([1., -2.], requires_grad=True)
    c = x * 1
    d = eval(call, {"F": F, "c": c})  # the same call, in torch
    with pytest.raises(RuntimeError) as err:
        d.sum().backward()
    assert v["error"]["during"] == "backward"
    assert v["error"]["message"] == str(err.value)
    assert f"In-place {slope} backward calculation is triggered with a negative slope" in str(err.value)


# ----------------------------------------------------------------------------- modules

MODULES = [
    ("{type: LeakyReLU}", nn.LeakyReLU(), X),
    ("{type: LeakyReLU, args: {negative_slope: 0.2, inplace: true}}", None, X),
    ("{type: GELU}", nn.GELU(), X),
    ("{type: GELU, args: {approximate: tanh}}", nn.GELU(approximate="tanh"), X),
    ("{type: SiLU}", nn.SiLU(), X),
    ("{type: ELU, args: {alpha: 0.5}}", nn.ELU(alpha=0.5), X),
    ("{type: Softplus, args: {beta: 2, threshold: 2}}", nn.Softplus(beta=2, threshold=2), X),
    ("{type: Softmax, args: {dim: 1}}", nn.Softmax(dim=1), X),
    ("{type: Softmax}", nn.Softmax(), X),
    ("{type: LogSoftmax, args: {dim: 0}}", nn.LogSoftmax(dim=0), X),
    ("{type: LogSoftmax}", nn.LogSoftmax(), {"a": ([[1, -2], [0, 3], [0.5, 1]], True)}),
    ("{type: Flatten}", nn.Flatten(), {"a": ([[[1, 2], [3, 4]], [[5, 6], [7, 8]]], True)}),
    ("{type: Flatten, args: {start_dim: 0, end_dim: 1}}", nn.Flatten(0, 1), {"a": ([[[1, 2], [3, 4]]], True)}),
    ("{type: Unflatten, args: {dim: 1, unflattened_size: [2, 2]}}", nn.Unflatten(1, (2, 2)), X),
]


@pytest.mark.parametrize("child,module,inputs", MODULES, ids=[m[0] for m in MODULES])
def test_module_against_torch(child, module, inputs):
    if module is None:  # an in-place module cannot run on a leaf: feed it a * 1 in both
        inner = nn.LeakyReLU(0.2, inplace=True)
        module = Lambda(lambda a: inner(a * 1))
        forward = "h = m(a * 1)\nreturn (h * W).sum()"
        assert compare(inputs, child, module, forward) == []
        return
    assert compare(inputs, child, module) == []


# ----------------------------------------------------------------------------- where

def _runtime():
    return Runtime(ExactBackend("float64"), "float64")


def test_where_node_edges_and_saves_match_torch():
    # a bool condition cannot come from a problem file (no comparisons, no bool dtype): the
    # engine is driven directly, as a lowering would
    rt = _runtime()
    x = rt.leaf(Exact.of([1, -2, 3], (3,)), True, name="x")
    y = rt.leaf(Exact.of([4, 5, 6], (3,)), True, name="y")
    cond = rt.leaf(Exact.of([1, 0, 1], (3,)), False, dtype="bool", name="c")
    out = call_function(rt, "where", [cond, x, y], {}, None)
    tx = torch.tensor([1., -2, 3], dtype=torch.float64, requires_grad=True)
    ty = torch.tensor([4., 5, 6], dtype=torch.float64, requires_grad=True)
    tout = torch.where(torch.tensor([True, False, True]), tx, ty)
    assert chain(out, {id(x): "x", id(y): "y"}) == chain(tout, {id(tx): "x", id(ty): "y"})
    assert out.value.strings() == ["1", "5", "3"]
    assert [sv.name for sv in out.grad_fn.saved] == ["condition"]
    number = call_function(rt, "where", [cond, x, Fraction(0)], {}, None)
    tnum = torch.where(torch.tensor([True, False, True]), tx, 0.)
    assert chain(number, {id(x): "x"}) == chain(tnum, {id(tx): "x"})
    first = call_function(rt, "where", [cond, Fraction(1, 2), y], {}, None)
    tfirst = torch.where(torch.tensor([True, False, True]), 0.5, ty)
    assert chain(first, {id(y): "y"}) == chain(tfirst, {id(ty): "y"})
    assert first.value.strings() == ["1/2", "5", "1/2"]


@pytest.mark.parametrize("expr,fn", [
    ("torch.where(c, x, 0)", lambda c, x: torch.where(c, x, 0.)),
    ("torch.clamp(x)", lambda c, x: torch.clamp(x)),
    ("(x * 2).clamp_()", lambda c, x: (x * 2).clamp_()),
    ("F.gelu(x, approximate='erf')", lambda c, x: F.gelu(x, approximate="erf")),
])
def test_argument_errors_of_the_kernel_are_answers(expr, fn):
    """where's condition that is not bool, clamp with no bound, gelu's unknown approximate:
    the kernel's RuntimeError (after the node's packs: tests/data/regressions/
    activation_argument_errors_are_answers.yaml), the answer."""
    text = f"""
name: w
dtype: float64
inputs:
  x: {{value: [1, -2], requires_grad: true}}
  c: [1, 0]
model:
  inputs: [x, c]
  forward: "{expr}.sum()"
"""
    v = adjoint.loads(text).solve().variants[0]
    with pytest.raises(RuntimeError) as theirs:
        fn(torch.tensor([1., 0.], dtype=torch.float64), torch.tensor([1., -2.], dtype=torch.float64, requires_grad=True))
    assert (v.error.type, v.error.message, v.error.during) == ("RuntimeError", str(theirs.value), "forward")


@pytest.mark.parametrize("forward,fn", [
    ("torch.clamp(x * 2)", lambda x: torch.clamp(x * 2)),
    ("(x * 2).clamp_()", lambda x: (x * 2).clamp_()),
])
def test_clamp_with_no_bound_packs_self_first(forward, fn):
    """ClampBackward1 packs self before clamp's kernel refuses no bound, in place too (verify's
    torch side cannot name the dropped node of clamp's overloads, so the pack is pinned here)."""
    text = f"""
name: c
dtype: float64
inputs:
  x: {{value: [1, -2], requires_grad: true}}
model:
  inputs: [x]
  forward: "{forward}"
hooks:
  - {{saved_tensors: {{pack: "x", unpack: "x"}}}}
"""
    v = adjoint.loads(text).solve().variants[0]
    packs = []
    with pytest.raises(RuntimeError) as theirs:
        with torch.autograd.graph.saved_tensors_hooks(lambda t: packs.append(t.detach().clone()) or t, lambda t: t):
            fn(torch.tensor([1., -2.], dtype=torch.float64, requires_grad=True))
    assert [(c.kind, c.node) for c in v.hook_calls] == [("pack", "ClampBackward1")] * len(packs) == \
        [("pack", "ClampBackward1")]
    assert [float(e) for e in v.hook_calls[0].args["x"].strings()] == packs[0].tolist() == [2., -4.]
    assert (v.error.type, v.error.message) == ("RuntimeError", str(theirs.value))


# ----------------------------------------------------------------------------- refusals

@pytest.mark.parametrize("expr,needle", [
    ("torch.softmax(a)", "needs dim="),   # (F.softmax(a) and a bare softmax(a): the implicit dim, with its warning)
    ("torch.maximum(a, 2)", "must be a Tensor"),
    # PyTorch errors at run time are predictions, not bad input
    ("F.hardtanh(a, 1, -1)", ("ValueError", "min_val cannot be greater than max_val")),
    ("F.leaky_relu(a, 0.1, inplace=True)",
     ("RuntimeError", "a leaf Variable that requires grad is being used in an in-place operation.")),
])
def test_refusals(expr, needle):
    text = f"""
name: r
inputs:
  a: {{value: [1, -2], requires_grad: true}}
model:
  inputs: [a]
  forward: "{expr}.sum()"
"""
    if isinstance(needle, tuple):
        v = adjoint.loads(text).solve().variants[0].to_json()
        assert (v["error"]["type"], v["error"]["message"]) == needle
        return
    with pytest.raises(ProblemError) as err:
        adjoint.loads(text).solve()
    assert needle in str(err.value)


def test_inplace_on_a_view_rewrites_the_base_history():
    # F.relu(c[0], inplace=True): ReluBackward0 inside CopySlices, c's new grad_fn
    child = expr_child(["a"], "c = a * 1\nd = F.leaky_relu(c[0], 0.5, inplace=True)\nreturn c * 2")

    def fn(a):
        c = a * 1
        F.leaky_relu(c[0], 0.5, inplace=True)
        return c * 2
    assert compare(X, child, Lambda(fn)) == []


@pytest.mark.parametrize("child,module", [
    ("{type: ELU, args: {alpha: 2, inplace: true}}", nn.ELU(alpha=2, inplace=True)),
    ("{type: SiLU, args: {inplace: true}}", nn.SiLU(inplace=True)),
    ("{type: ReLU, args: {inplace: true}}", nn.ReLU(inplace=True)),
])
def test_inplace_modules_against_torch(child, module):
    forward = "h = m(a * 1)\nreturn (h * W).sum()"
    assert compare(X, child, Lambda(lambda a: module(a * 1)), forward) == []


ZERO_D = [
    ("F.leaky_relu(a, 0.5)", lambda a: F.leaky_relu(a, 0.5)),
    ("a.clamp(0, 1)", lambda a: a.clamp(0, 1)),
    ("a.softmax(0)", lambda a: a.softmax(0)),
    ("F.log_softmax(a, -1)", lambda a: F.log_softmax(a, -1)),
]


@pytest.mark.parametrize("expr,fn", ZERO_D, ids=[z[0] for z in ZERO_D])
def test_zero_d_inputs(expr, fn):
    assert case({"a": (-0.5, True)}, expr, fn) == []


def test_softmax_of_a_3d_tensor_along_each_dim():
    x3 = {"a": ([[[1, -2], [0.5, 3]], [[0.25, -1], [2, 1]]], True)}
    for d in (0, 1, 2):
        assert case(x3, f"F.softmax(a, {d})", lambda a, d=d: F.softmax(a, d)) == []
        assert case(x3, f"a.log_softmax({d})", lambda a, d=d: a.log_softmax(d)) == []


def test_free_symbols_give_piecewise_closed_forms_that_match_torch():
    # a kink test on a free symbol is a Piecewise; bound by symbols:, it is PyTorch's number
    text = """
name: sym
dtype: float64
inputs:
  a: {value: [w, -0.5, 2], requires_grad: true}
symbols: {w: -1.5}
model:
  inputs: [a]
  forward: "(F.leaky_relu(a, 0.25) * F.hardtanh(a, -1, 1) + F.elu(a) * torch.clamp(a, -1)).sum()"
"""
    p = adjoint.loads(text)
    exact = p.solve().variants[0]
    assert "Piecewise" in str(exact.grads["a"].strings()[0])
    numeric = p.solve(numeric=True).variants[0]
    a = torch.tensor([-1.5, -0.5, 2], dtype=torch.float64, requires_grad=True)
    (F.leaky_relu(a, 0.25) * F.hardtanh(a, -1, 1) + F.elu(a) * torch.clamp(a, -1)).sum().backward()
    assert numeric.grads["a"].floats() == pytest.approx(a.grad.tolist(), rel=1e-12)


def test_where_gradients_with_broadcasting_match_torch():
    from adjoint.engine.ops import REGISTRY
    rt = _runtime()
    B = rt.B
    cond_v = [[1], [0]]
    x = rt.leaf(Exact.of([1, -2, 3, 4, 5, 6], (2, 3)), True)
    y = rt.leaf(Exact.of([7, 8, 9], (3,)), True)
    cond = rt.leaf(Exact.of([1, 0], (2, 1)), False, dtype="bool")
    out = call_function(rt, "where", [cond, x, y], {}, None)
    g = Exact.of([1, 2, 3, 4, 5, 6], (2, 3))
    gx, gy = REGISTRY["where"].vjp(B, [g], [x.value, y.value, cond.value], [out.value], None, [True, True])
    tx = torch.tensor([[1., -2, 3], [4, 5, 6]], dtype=torch.float64, requires_grad=True)
    ty = torch.tensor([7., 8, 9], dtype=torch.float64, requires_grad=True)
    tout = torch.where(torch.tensor(cond_v, dtype=torch.bool), tx, ty)
    tout.backward(torch.tensor([[1., 2, 3], [4, 5, 6]], dtype=torch.float64))
    assert out.value.floats() == tout.tolist()
    assert gx.floats() == tx.grad.tolist() and gy.floats() == ty.grad.tolist()


@pytest.mark.parametrize("call,fn", [
    ("c.clamp_(b)", lambda c, b: c.clamp_(b)),
    ("c.clamp_(b - 1, b)", lambda c, b: c.clamp_(b - 1, b)),
    ("c.clamp_(max=b)", lambda c, b: c.clamp_(max=b)),
])
def test_inplace_clamp_with_tensor_bounds(call, fn):
    child = expr_child(["a", "b"], f"c = a * 1\nd = {call}\nreturn d * 2")
    assert compare(AB, child, Lambda(lambda a, b: fn(a * 1, b) * 2)) == []


SIGNED_ZERO = [
    ("torch.clamp(a * -1, -1, 1).sqrt()", lambda a, b: torch.clamp(a * -1, -1, 1).sqrt()),
    ("F.hardtanh(a * -1).sqrt()", lambda a, b: F.hardtanh(a * -1).sqrt()),
    ("torch.maximum(a * -1, b * 0).sqrt()", lambda a, b: torch.maximum(a * -1, b * 0).sqrt()),
    ("torch.minimum(a * -1, b * 0 + 1).sqrt()", lambda a, b: torch.minimum(a * -1, b * 0 + 1).sqrt()),
    ("torch.clamp(a * -1, b * 0 - 1, b * 0 + 1).sqrt()", lambda a, b: torch.clamp(a * -1, b * 0 - 1, b * 0 + 1).sqrt()),
    ("F.elu(a * -1).sqrt()", lambda a, b: F.elu(a * -1).sqrt()),
    ("F.leaky_relu(a * -1).sqrt()", lambda a, b: F.leaky_relu(a * -1).sqrt()),
    ("F.gelu(a * -1).sqrt()", lambda a, b: F.gelu(a * -1).sqrt()),
    ("F.silu(a * -1).sqrt()", lambda a, b: F.silu(a * -1).sqrt()),
]


@pytest.mark.parametrize("expr,fn", SIGNED_ZERO, ids=[z[0] for z in SIGNED_ZERO])
def test_negative_zero_passes_through_as_in_torch(expr, fn):
    # a * -1 at a = 0 is -0.0; sqrt'(-0.0) = -inf: the sign of the gradient shows whether the op
    # returned -0.0 (clamp, maximum, elu, gelu, ... keep it; the chosen operand's float)
    inputs = {"a": ([0, -0.25, 0], True), "b": ([0, 1, -0.5], True)}
    assert case(inputs, expr, fn) == []
