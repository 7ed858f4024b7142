"""A value below the dtype's smallest denormal number is 0 in PyTorch (IEEE underflow), and what
follows is arithmetic on that 0: ``exp(-200)`` in float32 is 0, ``log`` of it -inf, ``sqrt``'s
gradient there inf (times exp's saved 0: nan), a hook's ``grad * 1e-25 * 1e-25 * 1e25 * 1e25``
0. adjoint kept the exact tiny value (1.4e-87) and answered ``log(exp(x)) = x`` with gradient 1,
a finite gradient through the sqrt, and ``grad`` from the hook. Now a value surely below half the
smallest denormal (by a factor of 2, as for overflow) is PyTorch's 0, -0.0 for a negative one,
wherever an op computes it (the forward, a hook's body, a rational gradient of the backward),
and the forward refuses what PyTorch makes non-finite from it, saying why. Expected values from
torch, run here."""

from __future__ import annotations

import math

import pytest

import adjoint
from adjoint.format.errors import ProblemError
from conftest import require_torch

torch = require_torch()


def _solve(tmp_path, text: str) -> dict:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return adjoint.load(str(path)).solve().variants[0].to_json()


def _same(predicted: list, observed: list) -> bool:
    """Equal as floats, nan to nan, with the sign of a zero."""
    return all((math.isnan(p) and math.isnan(o)) or (p == o and math.copysign(1, p) == math.copysign(1, o))
               for p, o in zip(predicted, observed))


def _floats(value: dict) -> list:
    return [float(v) for v in value["value"]]


def test_log_of_an_underflowed_exp_is_refused_saying_why(tmp_path):
    x = torch.tensor([-200.0, 2.0], requires_grad=True)
    assert torch.log(torch.exp(x)).tolist()[0] == -math.inf
    path = tmp_path / "p.yaml"
    path.write_text("""
name: p
inputs:
  x: {value: [-200, 2], requires_grad: true}
model:
  forward: "log(exp(x))"
loss: "sum(y)"
""")
    with pytest.raises(ProblemError, match=r"log of zero .* operand 1 = 0 \(ExpBackward0: element \[0\] is about "
                                           r"1\.38e-87, below float32's smallest denormal number: PyTorch's value "
                                           r"is 0\)\) gives -inf in PyTorch"):
        adjoint.load(str(path)).solve()


@pytest.mark.parametrize("dtype, low", [("float32", -200), ("float64", -800)])
def test_sqrt_of_an_underflowed_exp_has_pytorchs_nan_gradient(tmp_path, dtype, low):
    doc = _solve(tmp_path, f"""
name: p
dtype: {dtype}
inputs:
  x: {{value: [{low}, 2], requires_grad: true}}
model:
  forward: "torch.sqrt(torch.exp(x)) * 3"
loss: "sum(y)"
""")
    x = torch.tensor([float(low), 2.0], dtype=getattr(torch, dtype), requires_grad=True)
    y = torch.sqrt(torch.exp(x)) * 3
    y.sum().backward()
    assert doc["values"]["y"]["exact"][0] == "0"
    assert _same(_floats(doc["values"]["y"])[:1], y.tolist()[:1])
    assert math.isnan(x.grad.tolist()[0])
    assert doc["grads"]["x"]["exact"][0] == "nan"


def test_a_hook_bodys_underflowed_product_is_zero_with_its_sign(tmp_path):
    doc = _solve(tmp_path, """
name: p
inputs:
  w: {value: [1, -0.5, 2], requires_grad: true}
model:
  forward: |
    p = w * 3
    return p
loss: "sum(y * y)"
hooks:
  - {tensor: p, returns: "(grad * 1e-25 * 1e-25) * 1e25 * 1e25"}
""")
    w = torch.tensor([1.0, -0.5, 2.0], requires_grad=True)
    p = w * 3
    returned = []
    p.register_hook(lambda g: (returned.append(g * 1e-25 * 1e-25 * 1e25 * 1e25), returned[-1])[1])
    (p * p).sum().backward()
    assert returned[0].tolist() == [0.0, -0.0, 0.0]
    assert _same(_floats(doc["hook_calls"][0]["returned"]), returned[0].tolist())
    assert _floats(doc["grads"]["w"]) == w.grad.tolist()   # (a backward zero's sign is not tracked: semantics.md)


def test_an_underflowed_gradient_is_zero(tmp_path):
    """The backward of two products by 1e-25 hands the leaf 1e-50: 0 in float32."""
    doc = _solve(tmp_path, """
name: p
inputs:
  v: {value: [1, -0.5], requires_grad: true}
model:
  forward: |
    a = v * 1e-25
    b = a * -1e-25
    return b
loss: "sum(y)"
hooks:
  - {tensor: v, returns: "grad * 1e20 * 1e20"}
""")
    v = torch.tensor([1.0, -0.5], requires_grad=True)
    handed = []
    v.register_hook(lambda g: (handed.append(g.clone()), g * 1e20 * 1e20)[1])
    (v * 1e-25 * -1e-25).sum().backward()
    assert handed[0].tolist() == [-0.0, -0.0]
    assert _same(_floats(doc["hook_calls"][0]["args"]["grad"]), handed[0].tolist())
    assert _same(_floats(doc["grads"]["v"]), v.grad.tolist())


@pytest.mark.parametrize("dtype, low", [("float32", -90), ("float64", -712)])
def test_sigmoid_and_silu_are_zero_where_the_kernels_exp_overflows(tmp_path, dtype, low):
    """sigmoid's CPU kernel is 1 / (1 + exp(-a)) and silu's a / (1 + exp(-a)): below -log of the
    largest float exp(-a) is inf and the result exactly 0 (-0.0 for silu), although the exact
    value (8.2e-40 at -90 in float32) is a denormal the dtype holds. sqrt of it then has an
    infinite derivative (nan for x); log of it is -inf (refused, saying why)."""
    doc = _solve(tmp_path, f"""
name: p
dtype: {dtype}
inputs:
  x: {{value: [{low}, 2, -88.5], requires_grad: true}}
model:
  forward: |
    s = torch.sigmoid(x)
    u = F.silu(x)
    return torch.sqrt(s) + u
loss: "sum(y)"
""")
    x = torch.tensor([float(low), 2.0, -88.5], dtype=getattr(torch, dtype), requires_grad=True)
    s, u = torch.sigmoid(x), torch.nn.functional.silu(x)
    (torch.sqrt(s) + u).sum().backward()
    assert _same(_floats(doc["values"]["s"])[:1], s.tolist()[:1]) and s.tolist()[0] == 0.0
    assert _same(_floats(doc["values"]["u"])[:1], u.tolist()[:1]) and str(u.tolist()[0]) == "-0.0"
    assert math.isnan(x.grad.tolist()[0]) and doc["grads"]["x"]["exact"][0] == "nan"
    assert doc["grads"]["x"]["value"][1:] == pytest.approx(x.grad.tolist()[1:], rel=1e-6)
    path = tmp_path / "q.yaml"
    path.write_text(f"name: q\ndtype: {dtype}\ninputs:\n  x: {{value: [{low}], requires_grad: true}}\n"
                    "model:\n  forward: \"log(torch.sigmoid(x))\"\n")
    assert torch.log(torch.sigmoid(x[:1])).tolist() == [-math.inf]
    with pytest.raises(ProblemError, match=r"SigmoidBackward0: element \[0\] is about .*, where the kernel's "
                                           r"exp\(-a\) overflows in " + dtype):
        adjoint.load(str(path)).solve()


def _close(predicted: list, observed: list) -> bool:
    """As :func:`_same`, finite nonzero values within float32's rounding."""
    return all(_same([p], [o]) or (math.isfinite(p) and p != 0 and math.isclose(p, o, rel_tol=1e-6))
               for p, o in zip(predicted, observed))


def _flat(v) -> list:
    return [float(e) for e in (v if isinstance(v, list) else [v])] if not isinstance(v, list) or \
        not v or not isinstance(v[0], list) else [f for row in v for f in _flat(row)]


def test_matrix_products_of_tiny_factors_are_zero_and_dividing_by_them_has_pytorchs_sign(tmp_path):
    """mm, Linear's addmm, bmm, matrix @ vector and vector @ vector of float32 factors whose
    products fall below the smallest denormal are 0 in PyTorch, +0.0 as the kernel sums from
    +0.0 (an mm with an inner size of 1: its one product's sign), in the backward too (W.grad =
    x^T @ g). adjoint kept -1.2e-59 there, so a hook's 1 / a was -inf where PyTorch's is inf. And
    1 / -0.0 is -inf (adjoint divided every exact zero as +0.0)."""
    xv = [[1e-30, 2e-30, 3e-30], [1e-30, 1e-30, 1e-30]]
    Wv = [[-1e-30, -2e-30], [-1e-30, -1e-30], [-3e-30, -1e-30]]
    cv, rv, vv = [[1e-30], [2e-30]], [[-1e-30, -3e-30]], [1e-30, 1e-30, 2e-30]
    fw, fb = [[-1e-30, -2e-30, -1e-30], [1e-30, 1e-30, -3e-30]], [1e-37, 0.0]
    x, W, c, r, v = (torch.tensor(t, requires_grad=True) for t in (xv, Wv, cv, rv, vv))
    fc = torch.nn.Linear(3, 2)
    with torch.no_grad():
        fc.weight.copy_(torch.tensor(fw))
        fc.bias.copy_(torch.tensor(fb))
    a, o = x @ W, c @ r
    b = torch.bmm(c.unsqueeze(0), r.unsqueeze(0))
    m, d, f = x @ (v * -1), v @ (v * -1), fc(x)
    p = (v * -1e-30) * 1e-30   # -0.0
    seen = {}
    for name, t in dict(a=a, o=o, b=b, m=m, d=d, f=f, p=p).items():
        t.register_hook(lambda g, t=t, name=name: seen.setdefault(name, 1 / t))
    (a.sum() + o.sum() + b.sum() + m.sum() + d + f.sum() + p.sum()).backward()
    doc = _solve(tmp_path, f"""
name: p
inputs:
  x: {{value: {xv}, requires_grad: true}}
  W: {{value: {Wv}, requires_grad: true}}
  c: {{value: {cv}, requires_grad: true}}
  r: {{value: {rv}, requires_grad: true}}
  v: {{value: {vv}, requires_grad: true}}
model:
  children:
    fc: {{type: Linear, args: {{in_features: 3, out_features: 2}}, params: {{weight: {fw}, bias: {fb}}}}}
  inputs: [x, W, c, r, v]
  forward: |
    a = x @ W
    o = c @ r
    b = torch.bmm(c.unsqueeze(0), r.unsqueeze(0))
    m = x @ (v * -1)
    d = v @ (v * -1)
    f = fc(x)
    p = (v * -1e-30) * 1e-30
    return a.sum() + o.sum() + b.sum() + m.sum() + d + f.sum() + p.sum()
loss: "y"
hooks:
""" + "".join(f'  - {{tensor: {n}, returns: "1 / {n}"}}\n' for n in "aobmdfp"))
    returned = {c["target"]: c["returned"] for c in doc["hook_calls"]}
    for name, t in seen.items():
        assert _close(_flat(returned[name]["value"]), t.flatten().tolist()), name
    for name, t in dict(x=x, W=W, c=c, r=r, v=v).items():
        assert _close(_flat(doc["grads"][name]["value"]), t.grad.flatten().tolist()), name

    # the backward: W.grad = x^T @ g with every product tiny is +0.0
    x, W = torch.tensor(xv, requires_grad=True), torch.ones(3, 2, requires_grad=True)
    h = x @ W
    h.register_hook(lambda g: g * -1e-30)
    got = {}
    W.register_hook(lambda g: got.setdefault("W", g.clone()))
    h.sum().backward()
    doc = _solve(tmp_path, f"""
name: p
inputs:
  x: {{value: {xv}, requires_grad: true}}
  W: {{value: [[1, 1], [1, 1], [1, 1]], requires_grad: true}}
model:
  inputs: [x, W]
  forward: "x @ W"
loss: "sum(y)"
hooks:
  - {{tensor: model, returns: "grad * -1e-30"}}
  - {{tensor: W}}
""")
    handed = [c for c in doc["hook_calls"] if c["target"] == "W"][0]["args"]["grad"]
    assert _same(_flat(handed["value"]), got["W"].flatten().tolist())
