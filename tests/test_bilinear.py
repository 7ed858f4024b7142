"""F.bilinear and nn.Bilinear against real torch (float64): at::bilinear's node chain (the inputs
reshaped to rows, TrilinearBackward0, the result reshaped, AddBackward0 for the bias), values,
gradients, what TrilinearBackward0 saves for each combination of requires_grad, and PyTorch's
checks in its order (tests/data/regressions/bilinear_modules.yaml checks hooks through verify)."""

import pytest

from conftest import require_torch

torch = require_torch()
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import adjoint  # noqa: E402
from nn_harness import (Case, assert_close, assert_error_matches_torch, distinct, dyadic, lit, t64,  # noqa: E402
                        torch_chain)


def _file(a, b, w, bias, expr: str, rg=(True, True, True, True), saved: bool = False) -> str:
    names = [("a", a), ("b", b), ("w", w)] + ([("c", bias)] if bias is not None else [])
    decl = "".join(f"  {n}: {{value: {lit(v)}, requires_grad: {'true' if r else 'false'}}}\n"
                   for (n, v), r in zip(names, rg))
    hooks = "hooks:\n  - {saved_tensors: {pack: \"x\", unpack: \"x\"}}\n" if saved else ""
    return f"""name: t
dtype: float64
inputs:
{decl}model:
  inputs: [{", ".join(n for n, _ in names)}]
  forward: |
    h = {expr}
    return h
loss: "sum(y * y * y)"
{hooks}"""


def _run_torch(a, b, w, bias, fn, rg=(True, True, True, True)):
    ts = {n: t64(v, r) for (n, v), r in zip((("a", a), ("b", b), ("w", w), ("c", bias)), rg) if v is not None}
    h = fn(ts)
    (h * h * h).sum().backward()
    return h, ts


# (batch shape, in1, in2, out): a batch of rows, one pair of vectors (1-D), a 3-D batch, sizes of one
@pytest.mark.parametrize("batch, in1, in2, out", [((3,), 3, 2, 4), ((), 2, 3, 2), ((2, 2), 2, 2, 3), ((1,), 1, 1, 1)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_bilinear_matches_torch(batch, in1, in2, out, with_bias):
    a, b = dyadic(batch + (in1,), 1), dyadic(batch + (in2,), 2)
    w, bias = distinct((out, in1, in2), 3), (dyadic((out,), 4) if with_bias else None)
    expr = "F.bilinear(a, b, w, c)" if with_bias else "F.bilinear(a, b, w)"
    case = Case(_file(a, b, w, bias, expr))
    h, ts = _run_torch(a, b, w, bias, lambda t: F.bilinear(t["a"], t["b"], t["w"], t.get("c")))
    assert case.chain("h") == torch_chain(h, ts)
    assert_close(case.value("h"), h, "h")
    for name, t in ts.items():
        assert_close(case.grad(name), t.grad, f"grad of {name}")


@pytest.mark.parametrize("expr, fn", [
    ("torch.bilinear(a.t().t(), b, w, c)", lambda t: torch.bilinear(t["a"].t().t(), t["b"], t["w"], t["c"])),
    ("F.bilinear(a.t().contiguous().t(), b, w, c)",
     lambda t: F.bilinear(t["a"].t().contiguous().t(), t["b"], t["w"], t["c"])),
    ("F.bilinear(a.reshape(2, 3, 2).transpose(0, 1), b.reshape(2, 3, 1).transpose(0, 1), w, bias=c)",
     lambda t: F.bilinear(t["a"].reshape(2, 3, 2).transpose(0, 1), t["b"].reshape(2, 3, 1).transpose(0, 1),
                          t["w"], bias=t["c"])),
])
def test_non_contiguous_inputs_reshape_as_torch_does(expr, fn):
    """A transposed input is reshaped by _reshape_alias or clone + _unsafe_view, as at::reshape decides."""
    a, b = dyadic((6, 2), 1), dyadic((6, 1), 2)
    w, bias = distinct((3, 2, 1), 3), dyadic((3,), 4)
    case = Case(_file(a, b, w, bias, expr))
    h, ts = _run_torch(a, b, w, bias, fn)
    assert case.chain("h") == torch_chain(h, ts)
    assert_close(case.value("h"), h, "h")
    for name, t in ts.items():
        assert_close(case.grad(name), t.grad, f"grad of {name}")


@pytest.mark.parametrize("rg", [(True, False, False, False), (False, True, False, False), (False, False, True, True),
                                (True, True, False, True), (False, True, True, False)])
def test_saved_tensors_follow_which_gradients_are_needed(rg):
    """TrilinearBackward0 saves each input only where another input's gradient can be needed."""
    a, b, w, bias = dyadic((2, 3), 1), dyadic((2, 2), 2), distinct((2, 3, 2), 3), dyadic((2,), 4)
    case = Case(_file(a, b, w, bias, "F.bilinear(a, b, w, c)", rg, saved=True))
    packs = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: packs.append(t.detach().clone()) or t, lambda t: t):
        h, ts = _run_torch(a, b, w, bias, lambda t: F.bilinear(t["a"], t["b"], t["w"], t["c"]), rg)
    ours = case.calls("pack")
    assert [tuple(c["args"]["x"]["shape"]) for c in ours] == [tuple(t.shape) for t in packs]
    for c, t in zip(ours, packs):
        assert_close(c["args"]["x"]["value"], t, "pack")
    for name, t in ts.items():
        assert_close(case.grad(name), t.grad, f"grad of {name}")


def test_bilinear_module_matches_torch():
    """nn.Bilinear(3, 2, 2) and one without bias: F.bilinear(input1, input2, self.weight, self.bias)."""
    a, b = dyadic((2, 3), 1), dyadic((2, 2), 2)
    w, bias, w2 = distinct((2, 3, 2), 3), dyadic((2,), 4), distinct((1, 3, 2), 5)
    text = f"""name: t
dtype: float64
inputs:
  a: {{value: {lit(a)}, requires_grad: true}}
  b: {{value: {lit(b)}, requires_grad: false}}
model:
  inputs: [a, b]
  children:
    f: {{type: Bilinear, args: {{in1_features: 3, in2_features: 2, out_features: 2}}, params: {{weight: {lit(w)},
        bias: {lit(bias)}}}}}
    g: {{type: Bilinear, args: {{in1_features: 3, in2_features: 2, out_features: 1, bias: false}},
        params: {{weight: {lit(w2)}}}}}
  forward: |
    h = f(a, b) * g(input1=a, input2=b)
    return h
loss: "sum(y * y * y)"
"""
    case = Case(text)
    f, g = nn.Bilinear(3, 2, 2).double(), nn.Bilinear(3, 2, 1, bias=False).double()
    with torch.no_grad():
        f.weight.copy_(t64(w))
        f.bias.copy_(t64(bias))
        g.weight.copy_(t64(w2))
    at, bt = t64(a, True), t64(b)
    h = f(at, bt) * g(input1=at, input2=bt)
    (h * h * h).sum().backward()
    names = {"a": at, "b": bt, "f.weight": f.weight, "f.bias": f.bias, "g.weight": g.weight}
    assert case.chain("h") == torch_chain(h, names)
    assert_close(case.value("h"), h, "h")
    for name, t in names.items():
        assert_close(case.grad(name), t.grad, f"grad of {name}")


@pytest.mark.parametrize("a, b, w, bias", [
    ([[1.0, 2.0]], [[1.0, 2.0, 3.0]], [[[1.0, 2.0, 3.0]]], None),            # input1 size vs weight
    ([[1.0]], [[1.0, 2.0]], [[[1.0]]], None),                               # input2 size vs weight
    ([[1.0]], [[[1.0]]], [[[1.0]]], None),                                  # ranks differ
    ([[1.0], [2.0]], [[1.0]], [[[1.0]]], None),                             # batch sizes differ
    ([[1.0]], [[1.0]], [[[1.0]]], [1.0, 2.0]),                              # bias size
    ([[1.0]], [[1.0]], [[[1.0]]], 1.0),                                     # 0-d bias
    ([[1.0]], [[1.0]], [[1.0]], None),                                      # 2-d weight
    (1.0, 2.0, [1.0], None),                                                # 0-d inputs, 1-d weight
    (1.0, 2.0, [[[1.0]]], None),                                            # 0-d inputs
    ([[1.0, 2.0]], [[1.0]], [[[[1.0]], [[1.0]]]], None),                    # 4-d weight: the kernel's
    ([[1.0, 2.0], [0.5, 1.0]], [[1.0], [2.0]], [[[1.0], [2.0]]], [[1.0], [2.0]]),   # bias broadcast fails
])
def test_torchs_errors(a, b, w, bias):
    expr = "F.bilinear(a, b, w, c)" if bias is not None else "F.bilinear(a, b, w)"
    assert_error_matches_torch(_file(a, b, w, bias, expr), lambda: F.bilinear(
        t64(a, True), t64(b, True), t64(w, True), None if bias is None else t64(bias, True)))


def test_dtype_mismatch_is_torchs_error():
    text = """name: t
inputs:
  a: {value: [[1, 2]], requires_grad: true}
  b: {value: [[1]], dtype: int64}
  w: {value: [[[1], [2]]]}
model:
  inputs: [a, b, w]
  forward: |
    return F.bilinear(a, b, w)
loss: "sum(y)"
"""
    js = adjoint.loads(text).solve().variants[0].to_json()
    with pytest.raises(RuntimeError) as info:
        F.bilinear(torch.ones(1, 2, requires_grad=True), torch.ones(1, 1, dtype=torch.int64), torch.ones(1, 2, 1))
    assert (js["error"]["type"], js["error"]["message"]) == ("RuntimeError", str(info.value))
