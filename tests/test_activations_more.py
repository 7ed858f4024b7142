"""logsigmoid, selu, celu, hardsigmoid, threshold, softshrink, hardshrink (F. forms, their in-place
forms and the modules LogSigmoid, SELU, CELU, Hardsigmoid, Threshold, Softshrink, Hardshrink)
against real torch 2.13 CPU: node chains, values, grads, the legacy hook's grad_input and the
saved-tensor pack / unpack sequence (tests/opcheck.py, rtol 1e-10), at the kinks too, and the
kernels' own constants and errors compared with torch's exactly."""

from fractions import Fraction

import pytest
from conftest import require_torch

torch = require_torch()
import numpy as np  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import adjoint  # noqa: E402
from opcheck import Lambda, case, compare, expr_child  # noqa: E402

#: every kink of these ops: 0, +-0.5 (shrinks' default lambd), +-3 (hardsigmoid), 1
KINKS = {"a": ([[-4, -3, -1, -0.5, 0], [0.5, 1, 3, 4, 0.25]], True)}

ACTS = [
    ("F.logsigmoid(a)", lambda a: F.logsigmoid(a)),
    ("F.selu(a)", lambda a: F.selu(a)),
    ("torch.selu(a)", lambda a: torch.selu(a)),
    ("F.celu(a)", lambda a: F.celu(a)),
    ("F.celu(a, 0.3)", lambda a: F.celu(a, 0.3)),         # backward's input_scale is 1 / float32(0.3)
    ("torch.celu(a, alpha=2)", lambda a: torch.celu(a, alpha=2)),
    ("F.hardsigmoid(a)", lambda a: F.hardsigmoid(a)),      # slope 1.0f / 6.0f, 0 at -3 and 3
    ("F.threshold(a, 0.5, -2)", lambda a: F.threshold(a, 0.5, -2)),
    ("F.threshold(a, 0, 0)", lambda a: F.threshold(a, 0, 0)),
    ("torch.threshold(a, -3, 7)", lambda a: torch.threshold(a, -3, 7)),
    ("F.softshrink(a)", lambda a: F.softshrink(a)),
    ("F.softshrink(a, 1)", lambda a: F.softshrink(a, 1)),
    ("F.softshrink(a, 0)", lambda a: F.softshrink(a, 0)),
    ("F.hardshrink(a)", lambda a: F.hardshrink(a)),
    ("a.hardshrink(3)", lambda a: a.hardshrink(3)),
    ("torch.hardshrink(a, -1)", lambda a: torch.hardshrink(a, -1)),
    # signed zeros: softshrink's x * 0 inside keeps x's sign (sqrt'(-0.0) = -inf shows it)
    ("F.softshrink(a * -1).sqrt()", lambda a: F.softshrink(a * -1).sqrt()),
]


@pytest.mark.parametrize("expr,fn", ACTS, ids=[c[0] for c in ACTS])
def test_activations_against_torch(expr, fn):
    inputs = {"a": ([0.5, 0.25, -0.5, 0, -0.25], True)} if "sqrt" in expr else KINKS
    assert case(inputs, expr, fn) == []


IN_PLACE = [
    ("F.selu(c, inplace=True)", lambda c: F.selu(c, inplace=True)),      # EluBackward1
    ("torch.selu_(c)", lambda c: torch.selu_(c)),
    ("F.celu(c, 0.3, True)", lambda c: F.celu(c, 0.3, True)),           # CeluBackward1
    ("torch.celu_(c, 2)", lambda c: torch.celu_(c, 2)),
    ("F.hardsigmoid(c, inplace=True)", lambda c: F.hardsigmoid(c, inplace=True)),
    ("F.threshold(c, 0.5, 7, inplace=True)", lambda c: F.threshold(c, 0.5, 7, inplace=True)),   # ThresholdBackward1
    ("F.threshold_(c, -1, 2)", lambda c: F.threshold_(c, -1, 2)),
]


@pytest.mark.parametrize("call,fn", IN_PLACE, ids=[i[0] for i in IN_PLACE])
def test_activations_in_place_against_torch(call, fn):
    child = expr_child(["a"], f"c = a * 1\nd = {call}\nreturn d * 2")
    assert compare(KINKS, child, Lambda(lambda a: fn(a * 1) * 2)) == []


MODULES = [
    ("{type: LogSigmoid}", nn.LogSigmoid()),
    ("{type: SELU}", nn.SELU()),
    ("{type: CELU, args: {alpha: 0.3}}", nn.CELU(0.3)),
    ("{type: Hardsigmoid}", nn.Hardsigmoid()),
    ("{type: Threshold, args: {threshold: 0.5, value: -2}}", nn.Threshold(0.5, -2)),
    ("{type: Softshrink, args: {lambd: 1}}", nn.Softshrink(1)),
    ("{type: Hardshrink}", nn.Hardshrink()),
]


@pytest.mark.parametrize("child,module", MODULES, ids=[m[0] for m in MODULES])
def test_modules_against_torch(child, module):
    assert compare(KINKS, child, module) == []


@pytest.mark.parametrize("child,module", [
    ("{type: SELU, args: {inplace: true}}", nn.SELU(inplace=True)),
    ("{type: CELU, args: {inplace: true}}", nn.CELU(inplace=True)),
    ("{type: Hardsigmoid, args: {inplace: true}}", nn.Hardsigmoid(inplace=True)),
    ("{type: Threshold, args: {threshold: 0.5, value: -2, inplace: true}}", nn.Threshold(0.5, -2, inplace=True)),
])
def test_in_place_modules_against_torch(child, module):
    forward = "h = m(a * 1)\nreturn (h * W).sum()"
    assert compare(KINKS, child, Lambda(lambda a: module(a * 1)), forward) == []


def _solve(forward: str, value="[-3, 0, 3, -1]", dtype="float64"):
    text = f"""
name: act
dtype: {dtype}
inputs:
  x: {{value: {value}, requires_grad: true}}
model:
  inputs: [x]
  forward: "{forward}"
"""
    return adjoint.loads(text).solve().variants[0].to_json()


def _torch_grad(fn, value, dtype=torch.float64):
    x = torch.tensor(value, dtype=dtype, requires_grad=True)
    fn(x).sum().backward()
    return x.grad


def test_hardsigmoid_slope_is_float32_one_sixth_in_float64():
    """The CPU kernel's ``1.0f / 6.0f``: 0.1666666716337204 in a float64 tensor, 0 at -3 and 3."""
    theirs = _torch_grad(F.hardsigmoid, [-3., 0., 3., -1.])
    assert theirs.tolist() == [0.0, 0.1666666716337204, 0.0, 0.1666666716337204]
    grads = _solve("F.hardsigmoid(x).sum()")["grads"]["x"]
    assert grads["value"] == theirs.tolist()
    assert [Fraction(s) for s in grads["exact"]] == [Fraction(float(v)) for v in theirs]


def test_celu_backward_rounds_alpha_to_float32():
    """CeluBackward0's input_scale is ``1.0 / alpha.toFloat()``: celu(x, 0.3)'(0) = 0.3 / float32(0.3)."""
    theirs = _torch_grad(lambda x: F.celu(x, 0.3), [0.0])
    assert theirs.item() == 0.9999999602635717
    ours = _solve("F.celu(x, 0.3).sum()", "[0]")["grads"]["x"]
    assert ours["value"] == [theirs.item()]
    # alpha * input_scale, input_scale the double 1.0 / float32(0.3) as C++ computes it
    assert Fraction(ours["exact"][0]) == Fraction(3, 10) * Fraction(1.0 / float(np.float32(0.3)))


def test_selu_at_zero_is_alpha_times_scale():
    theirs = _torch_grad(F.selu, [0.0, -0.0, 1.0])
    ours = _solve("F.selu(x).sum()", "[0, 0, 1]")["grads"]["x"]["value"]
    assert ours == theirs.tolist() == [1.7580993408473766, 1.7580993408473766, 1.0507009873554805]


def test_logsigmoid_backward_reads_the_unpacked_buffer():
    """LogSigmoidBackward0 packs self and buffer (exp(-|x|)) and its kernel computes from both as
    unpacked: an unpack hook doubling them changes the gradient as in torch."""
    text = """
name: ls
inputs:
  x: {value: [-1, 0, 2], requires_grad: true}
model:
  inputs: [x]
  forward: "F.logsigmoid(x).sum()"
hooks:
  - {saved_tensors: {pack: "x", unpack: "x * 2"}}
"""
    v = adjoint.loads(text).solve().variants[0].to_json()
    x = torch.tensor([-1., 0., 2.], dtype=torch.float64, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t * 2):
        y = F.logsigmoid(x).sum()
    y.backward()
    assert np.allclose(v["grads"]["x"]["value"], x.grad.tolist(), rtol=1e-12)
    assert x.grad.tolist() != [0.7310585786300049, 0.5, 0.11920292202211755]   # the plain gradient


@pytest.mark.parametrize("expr,fn", [
    ("torch.where(F.logsigmoid(a) < 0, 0, F.logsigmoid(a)).sqrt()",
     lambda a: torch.where(F.logsigmoid(a) < 0, 0, F.logsigmoid(a)).sqrt()),
    ("1 / (F.logsigmoid(a) - 1)", lambda a: 1 / (F.logsigmoid(a) - 1)),
])
def test_logsigmoid_underflows_to_plus_zero(expr, fn):
    """Above x = 745 (float64) the kernel's min(x, 0) - log1p(exp(-|x|)) is 0 - log1p(0) = +0.0:
    not below 0 (the where keeps it) and sqrt'(+0.0) = +inf; before, the exact -log(1 + exp(-x))
    was a ball around 0 that later compared below 0."""
    assert case({"a": ([800, 1000, 750, -1, 746, 700], True)}, expr, fn) == []


@pytest.mark.parametrize("forward,fn,dtype", [
    ("F.softshrink(x, -0.5).sum()", lambda x: F.softshrink(x, -0.5), torch.float64),
    ("F.softshrink(x, -1).sum()", lambda x: F.softshrink(x, -1), torch.float32),
    ("F.celu(x, 0).sum()", lambda x: F.celu(x, 0.), torch.float64),
    ("F.celu(x * 1, 0, inplace=True).sum()", lambda x: F.celu(x * 1, 0., inplace=True), torch.float64),
])
def test_kernel_errors_are_pytorchs(forward, fn, dtype):
    x = torch.tensor([1.0], dtype=dtype, requires_grad=True)
    with pytest.raises(RuntimeError) as theirs:
        fn(x)
    error = _solve(forward, "[1]", "float32" if dtype == torch.float32 else "float64")["error"]
    assert (error["type"], error["message"]) == ("RuntimeError", str(theirs.value))


def test_in_place_celu_with_a_negative_alpha_raises_in_backward():
    x = torch.tensor([-1.0, 2.0], dtype=torch.float64, requires_grad=True)
    y = F.celu(x * 1, -0.5, inplace=True).sum()
    with pytest.raises(RuntimeError) as theirs:
        y.backward()
    error = _solve("F.celu(x * 1, -0.5, inplace=True).sum()", "[-1, 2]")["error"]
    assert (error["type"], error["message"], error["during"]) == ("RuntimeError", str(theirs.value), "backward")


def test_second_order_through_the_shrinks_against_torch():
    """create_graph through SoftshrinkBackward0 / HardshrinkBackward0 (their BackwardBackward0 nodes,
    tests/data/regressions/second_order_softshrink_hardshrink.yaml), then a backward of the penalty."""
    import os
    path = os.path.join(os.path.dirname(__file__), "data", "regressions", "second_order_softshrink_hardshrink.yaml")
    v = adjoint.load(path).solve().variants[0].to_json()
    f32 = torch.float32
    x = torch.tensor([[0.5, -1], [0.2, 0.3]], dtype=f32, requires_grad=True)
    fc1 = nn.Linear(2, 3)
    fc2 = nn.Linear(3, 2)
    fc3 = nn.Linear(2, 1)
    with torch.no_grad():
        for m, w, b in ((fc1, [[0.2, -0.4], [0.6, 0.1], [-0.3, 0.5]], [0.1, 0, -0.2]),
                        (fc2, [[0.7, -0.5, 0.3], [0.1, 0.2, -0.6]], [0.05, 0.01]), (fc3, [[0.4, -0.9]], [0.02])):
            m.weight.copy_(torch.tensor(w))
            m.bias.copy_(torch.tensor(b))
    y = fc3(F.hardshrink(fc2(F.softshrink(fc1(x), 0.1)), 0.1))
    loss = (y ** 2).mean()
    gx, = torch.autograd.grad(loss, [x], create_graph=True)
    assert type(gx.grad_fn).__name__ != "NotImplemented"
    (loss + 10 * ((gx.norm(2, dim=1) - 1) ** 2).mean()).backward()
    assert np.allclose(v["grads"]["x"]["value"], x.grad.tolist(), rtol=1e-5, atol=1e-7)
    assert np.allclose(v["grads"]["fc1.weight"]["value"], fc1.weight.grad.tolist(), rtol=1e-5, atol=1e-7)
