"""Complex tensors (docs/semantics.md, "Complex numbers"): graphs, values and gradients against
real torch, PyTorch's conjugate Wirtinger convention checked on values derived by hand, the
errors PyTorch raises, and the refusals of what is not modelled."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch

import adjoint
from adjoint.format.errors import ProblemError
from adjoint.values.numbers.gaussian import Gaussian, complex_text
from nodechain import chain, leaf_names

C128 = torch.complex128

# every complex op of the slice (complex Python numbers too), each intermediate named so its graph can be compared
FORWARD = """\
    a = z * w + x
    b = a.conj() * 2 - z / w
    c = (b.exp() * x).real + b.imag * 3
    d = z.conj().real + z.conj().imag
    e = torch.view_as_real(a ** 2)
    f = torch.view_as_complex(e * 3)
    g = (z @ w).abs() + f.abs().sum() + (w - 1).abs().pow(2).mean() + torch.real(-z).sum()
    h = mm(w.reshape(2, 1), z.reshape(1, 2)).sum() * 0.5 + 1 / z.sum()
    s = 1j - (z * 1j + (1 + 2j) * z - 0.5j) / (2 - 1j) + x * 2j + (2j / z) * (x - 1j) + torch.mul(z, -3j)
    u = torch.cat((z, x, z * 1j))
    v = torch.stack((z, x), dim=1)
    k = c.sum() + d.sum() + e.sum() + g + h.abs() + s.abs().sum() + u.abs().sum() + (v ** 2).real.sum()
    return k
"""

PROBLEM = f"""\
name: complex_graphs
dtype: float64
inputs:
  z: {{value: [1, 3], imag: [2, -1], dtype: complex128, requires_grad: true}}
  w: {{value: ["1/2", 2], imag: [-1, "1/4"], dtype: complex128, requires_grad: true}}
  x: {{value: [2, -1], requires_grad: true}}
model:
  inputs: [z, w, x]
  forward: |
{FORWARD}variants:
  v:
    hooks:
      - {{tensor: z, kind: hook}}
      - {{tensor: a, kind: hook}}
      - {{tensor: x, kind: hook}}
"""


def _torch_run():
    z = torch.tensor([1 + 2j, 3 - 1j], dtype=C128, requires_grad=True)
    w = torch.tensor([0.5 - 1j, 2 + 0.25j], dtype=C128, requires_grad=True)
    x = torch.tensor([2.0, -1.0], dtype=torch.float64, requires_grad=True)
    seen = {}
    t = {"z": z, "w": w, "x": x}
    z.register_hook(lambda g: seen.setdefault("z", g.clone()))
    x.register_hook(lambda g: seen.setdefault("x", g.clone()))
    t["a"] = a = z * w + x
    a.register_hook(lambda g: seen.setdefault("a", g.clone()))
    t["b"] = b = a.conj() * 2 - z / w
    t["c"] = c = (b.exp() * x).real + b.imag * 3
    t["d"] = d = z.conj().real + z.conj().imag
    t["e"] = e = torch.view_as_real(a ** 2)
    t["f"] = f = torch.view_as_complex(e * 3)
    t["g"] = g = (z @ w).abs() + f.abs().sum() + (w - 1).abs().pow(2).mean() + torch.real(-z).sum()
    t["h"] = h = torch.mm(w.reshape(2, 1), z.reshape(1, 2)).sum() * 0.5 + 1 / z.sum()
    t["s"] = s = 1j - (z * 1j + (1 + 2j) * z - 0.5j) / (2 - 1j) + x * 2j + (2j / z) * (x - 1j) + torch.mul(z, -3j)
    t["u"] = u = torch.cat((z, x, z * 1j))
    t["v"] = v = torch.stack((z, x), dim=1)
    t["k"] = k = c.sum() + d.sum() + e.sum() + g + h.abs() + s.abs().sum() + u.abs().sum() + (v ** 2).real.sum()
    k.backward()
    return t, seen


def _pairs(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    return torch.view_as_real(t.resolve_conj()) if t.is_complex() else t


@pytest.fixture(scope="module")
def both():
    pred = adjoint.loads(PROBLEM).solve()
    return pred.variants[0], _torch_run()


def test_graphs_values_and_gradients_match_torch(both):
    v, (theirs, seen) = both
    ours = v.run.forward.names
    js = v.to_json()
    for name in "abcdefghsuvk":
        assert chain(ours[name], leaf_names(ours)) == chain(theirs[name], leaf_names(theirs)), name
        value = js["values"][name]
        assert value.get("dtype") == (str(theirs[name].dtype).removeprefix("torch.")
                                      if theirs[name].dtype != torch.float64 else None), name
        assert torch.allclose(torch.tensor(value["value"], dtype=torch.float64), _pairs(theirs[name]),
                              rtol=1e-12, atol=1e-12), name
    for name in "zwx":
        assert torch.allclose(torch.tensor(js["grads"][name]["value"], dtype=torch.float64),
                              _pairs(theirs[name].grad), rtol=1e-12, atol=1e-12), name
    calls = {c["target"]: c["args"]["grad"] for c in js["hook_calls"]}
    for name in "zax":
        assert torch.allclose(torch.tensor(calls[name]["value"], dtype=torch.float64), _pairs(seen[name]),
                              rtol=1e-12, atol=1e-12), name
        assert calls[name].get("dtype") == ("complex128" if seen[name].is_complex() else None)


def test_wirtinger_convention_exactly():
    # L = |z w|^2: PyTorch's z.grad = dL/dx + i dL/dy = 2 (z w) conj(w), by hand:
    # z = 1+2i, w = 3-i: z w = 5+5i; z.grad = 2(5+5i)(3+i) = 20+40i, w.grad = 2(5+5i)(1-2i) = 30-10i
    text = """\
name: wirtinger
dtype: float64
inputs:
  z: {value: [1], imag: [2], dtype: complex128, requires_grad: true}
  w: {value: [3], imag: [-1], dtype: complex128, requires_grad: true}
model:
  inputs: [z, w]
  forward: "(z * w).abs().pow(2).sum()"
"""
    js = adjoint.loads(text).solve().variants[0].to_json()
    assert js["grads"]["z"] == {"shape": [1], "value": [[20.0, 40.0]], "exact": ["20 + 40*i"], "dtype": "complex128"}
    assert js["grads"]["w"]["exact"] == ["30 - 10*i"]
    assert js["values"]["y"]["exact"] == "50"   # |5+5i|^2


def test_complex_layer_hooks_by_hand():
    # problems/complex_layer.yaml: y = W z + b, L = sum |y|^2; grad_output = 2y, W.grad = 2y conj(z)^T
    js = adjoint.load("problems/complex_layer.yaml").solve().variants[0].to_json()
    W = [[Gaussian(Fraction(1, 2), Fraction(1)), Gaussian(Fraction(-1), Fraction(1, 2))],
         [Gaussian(Fraction(2)), Gaussian(Fraction(1, 4), Fraction(-2))]]
    b = [Gaussian(Fraction(1, 10), Fraction(3, 10)), Gaussian(Fraction(-1, 5))]
    z = [Gaussian(Fraction(1), Fraction(2)), Gaussian(Fraction(3), Fraction(-1))]
    y = [W[i][0] * z[0] + W[i][1] * z[1] + b[i] for i in range(2)]
    full = next(c for c in js["hook_calls"] if c["kind"] == "full_backward")
    assert full["args"]["grad_output"][0]["exact"] == [[str(2 * y[0]), str(2 * y[1])]]
    gz = [W[0][j].conj() * 2 * y[0] + W[1][j].conj() * 2 * y[1] for j in range(2)]
    assert full["args"]["grad_input"][0]["exact"] == [[str(g) for g in gz]]
    assert js["grads"]["lin.weight"]["exact"] == [[str(2 * y[i] * z[j].conj()) for j in range(2)] for i in range(2)]


def test_complex_root_raises_as_torch():
    z = torch.tensor([1 + 2j], dtype=C128, requires_grad=True)
    with pytest.raises(RuntimeError) as theirs:
        (z * 2).sum().backward()
    text = """\
name: root
dtype: float64
inputs:
  z: {value: [1], imag: [2], dtype: complex128, requires_grad: true}
model:
  inputs: [z]
  forward: "(z * 2).sum()"
"""
    err = adjoint.loads(text).solve().variants[0].to_json()["error"]
    assert (err["type"], err["message"], err["during"]) == ("RuntimeError", str(theirs.value), "backward")


@pytest.mark.parametrize("forward,message", [
    ("torch.atan(z).abs().sum()", "atan (AtanBackward0) of a complex tensor is not modelled"),
    ("torch.sin(z - z.real).abs().sum()", "sin (SinBackward0) of a complex tensor with a real part exactly 0"),
    ("torch.angle(x).sum()", "angle of a real tensor is not modelled"),
    ("(z ** 0.5).abs().sum()", "a complex tensor to the power 1/2 is not modelled"),
    ("(z.reshape(1, 2).expand(2, 2) @ x).abs().sum()", "MvBackward0 of complex128 and float64 operands"),
])
def test_not_modelled_is_refused_at_the_line(forward, message):
    text = f"""\
name: refused
dtype: float64
inputs:
  z: {{value: [1, 3], imag: [2, -1], dtype: complex128, requires_grad: true}}
  x: {{value: [2, -1], requires_grad: true}}
model:
  inputs: [z, x]
  forward: "{forward}"
"""
    with pytest.raises(ProblemError) as err:
        adjoint.loads(text).solve()
    assert message in str(err.value) and err.value.loc.line == 8


def test_view_errors_are_torch_errors():
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    z = torch.tensor([1 + 2j], dtype=C128, requires_grad=True)
    cases = [("torch.view_as_complex(x)", lambda: torch.view_as_complex(x)),
             ("torch.view_as_real(z.conj())", lambda: torch.view_as_real(z.conj())),
             ("x.imag", lambda: x.imag)]
    for forward, run in cases:
        with pytest.raises(RuntimeError) as theirs:
            run()
        text = f"""\
name: e
dtype: float64
inputs:
  z: {{value: [1], imag: [2], dtype: complex128, requires_grad: true}}
  x: {{value: [1, 2, 3], requires_grad: true}}
model:
  inputs: [z, x]
  forward: "{forward}"
"""
        err = adjoint.loads(text).solve().variants[0].to_json()["error"]
        assert (err["type"], err["message"]) == ("RuntimeError", str(theirs.value)), forward



@pytest.mark.parametrize("view", ["c[1:]", "c[0]", "c.reshape(4, 1)", "c.t()", "c.unsqueeze(0).expand(2, 2, 2)",
                                  "c.detach()", "c.conj()[1:]", "c.clone()", "c * 1", "c.t().reshape(4)"])
def test_a_view_of_a_conjugated_tensor_keeps_the_conjugate_bit(view):
    """PyTorch: a view (and detach()) of ``z.conj()`` shares its conjugate bit, so view_as_real of it
    raises; any other op (clone, arithmetic, a reshape that copies) gives a resolved tensor."""
    z = torch.tensor([[1 + 2j, 3 - 1j], [0.5j, 2]], dtype=C128, requires_grad=True)
    c = z.conj()
    try:
        theirs = ("RuntimeError", str(pytest.raises(RuntimeError, torch.view_as_real, eval(view, {"c": c})).value))
    except pytest.fail.Exception:
        theirs = None
    text = f"""\
name: conj_view
dtype: float64
inputs:
  z: {{value: [[1, 3], [0, 2]], imag: [[2, -1], [0.5, 0]], dtype: complex128, requires_grad: true}}
model:
  inputs: [z]
  forward: |
    c = z.conj()
    return torch.view_as_real({view}).sum()
"""
    js = adjoint.loads(text).solve().variants[0].to_json()
    ours = (js["error"]["type"], js["error"]["message"]) if "error" in js else None
    assert ours == theirs, view

def test_gaussian_rationals():
    a, b = Gaussian(Fraction(1), Fraction(2)), Gaussian(Fraction(3), Fraction(-1))
    assert complex(a * b) == (1 + 2j) * (3 - 1j)
    assert a / b == Gaussian(Fraction(1, 10), Fraction(7, 10))      # (1+2i)(3+i)/10
    assert a ** -1 == Gaussian(Fraction(1, 5), Fraction(-2, 5))
    assert str(a ** 3) == "-11 - 2*i"
    assert complex_text("~0.5", "1 - tanh(2)**2") == "~0.5 + (1 - tanh(2)**2)*i"
    assert complex_text("0", "~-1.2e-7") == "0 - ~1.2e-7*i"


def test_latex_typesets_complex_values_and_the_convention():
    from adjoint.render.latex import render_document

    pred = adjoint.load("problems/complex_layer.yaml").solve()
    tex = render_document(pred)
    assert "conjugate Wirtinger" in tex
    assert "1 + 2\\mathrm{i} & 3 - \\mathrm{i}" in tex                     # z as given
    # z.grad = conj(W)^T (2y), by hand in test_complex_layer_hooks_by_hand: 79/10 + 18/5 i, 175/8 - 37/8 i
    assert "\\mathtt{z.grad} & = \\begin{bmatrix}7.9 + 3.6\\mathrm{i} & 21.875 - 4.625\\mathrm{i}\\end{bmatrix}" in tex
    assert "without hooks" not in tex   # no hook changes a gradient here: the hook-free values are PyTorch's


@pytest.mark.parametrize("i", [0, 5])
def test_generated_complex_problem_matches_torch(i):
    # tests/gen/complexgen.py (benchmarks/sweep.py --kind complex): a few fixed problems, checked
    # like tests/test_differential.py checks the others (every variant solved, run in torch, compared)
    import random

    from gen import check
    from gen.complexgen import generate_complex

    text, _ = generate_complex(random.Random(f"1-{i}"))
    outcome = check(text, timeout=60.0)
    assert all(st in ("ok", "both_raise") for _, st, _ in outcome.variants), outcome.report()


def test_report_writes_complex_values():
    from click.testing import CliRunner

    from adjoint.cli import main

    out = CliRunner().invoke(main, ["solve", "problems/complex_layer.yaml"]).output
    # z.grad = 79/10 + 18/5 i, 175/8 - 37/8 i (test_complex_layer_hooks_by_hand)
    assert "z.grad           [[7.9+3.6i, 21.875-4.625i]]" in out
    out = CliRunner().invoke(main, ["solve", "--exact", "tests/data/regressions/complex_hook_kinds.yaml"]).output
    assert "79/10 + 18/5*i" in out and "Traceback" not in out


def test_complex_values_as_data():
    import numpy as np

    g = adjoint.load("problems/complex_layer.yaml").solve().variants[0].grads["z"]
    assert np.asarray(g).tolist() == [[7.9 + 3.6j, 21.875 - 4.625j]]      # 79/10 + 18/5 i, 175/8 - 37/8 i
    assert complex(g[0, 1]) == 21.875 - 4.625j and len(g) == 1


SPECIAL = "tests/data/regressions/complex_special_points.yaml"


def _special_torch():
    z = torch.tensor([0j, 1j, -1 + 0j, 1000 + 0j, 2 + 3j], dtype=C128, requires_grad=True)
    x = torch.tensor([1.0, 0.0, 2.0, 3.0, -1.0], dtype=torch.float64, requires_grad=True)
    seen = {}
    z.register_hook(lambda g: seen.setdefault("z", g.clone()))
    x.register_hook(lambda g: seen.setdefault("x", g.clone()))
    e = z.exp()
    e.register_hook(lambda g: seen.setdefault("e", g.clone()))
    t = dict(e=e, a=z.abs(), r=z.reciprocal(), q=1 / z, d=(z + 1) / (z * 0), m=e * x)
    y = (e.real.sum() + t["a"].sum() + t["r"].imag.sum() + t["q"].real.sum() + t["d"].imag.sum()
         + t["m"].real.sum() + (z - e).real.sum())
    y.backward()
    return t, {"z": z.grad, "x": x.grad}, seen


@pytest.mark.parametrize("mode", ["exact", "float64"])
def test_special_points_are_pytorch_kernels(mode):
    """inf and nan parts as PyTorch's complex kernels make them: exp(1000 + 0i) is inf + 0i (cexp),
    the complex 1 of at::add's alpha times an inf gives a nan, a real operand of an inf is promoted
    to x + 0i, division by a complex zero is a / |c|, b / |d|; abs is hypot in float64."""
    import pathlib
    text = (pathlib.Path(__file__).parent.parent / SPECIAL).read_text()
    js = adjoint.loads(text).solve(mode=mode).variants[0].to_json()
    values, grads, seen = _special_torch()

    def same(ours, theirs):
        theirs = _pairs(theirs)
        ours = torch.tensor([[float(u) for u in p] if isinstance(p, list) else float(p) for p in ours["value"]],
                            dtype=torch.float64)
        return torch.allclose(ours, theirs, rtol=1e-12, atol=0, equal_nan=True)

    for name, t in values.items():
        assert same(js["values"][name], t), name
    for name, g in grads.items():
        assert same(js["grads"][name], g), name
    calls = {c["target"]: c["args"]["grad"] for c in js["hook_calls"]}
    for name, g in seen.items():
        assert same(calls[name], g), name


def test_float64_mode_abs_and_division_at_large_and_small_magnitudes():
    """--float64 runs PyTorch's complex kernels on doubles: abs is hypot and division is scaled,
    so |z|^2 overflowing (1e160) or underflowing (1e-200) changes nothing, as in PyTorch."""
    text = """\
name: magnitudes
dtype: float64
inputs:
  z: {value: [1e200, 3e-200, 3e160], imag: [1e200, 4e-200, 4e160], dtype: complex128, requires_grad: true}
model:
  inputs: [z]
  forward: |
    a = z.abs()
    d = z / (z * 2)
    return a.sum() + d.real.sum()
"""
    js = adjoint.loads(text).solve(mode="float64").variants[0].to_json()
    z = torch.tensor([1e200 + 1e200j, 3e-200 + 4e-200j, 3e160 + 4e160j], dtype=C128, requires_grad=True)
    a, d = z.abs(), z / (z * 2)
    (a.sum() + d.real.sum()).backward()
    for ours, theirs in ((js["values"]["a"], a), (js["values"]["d"], d), (js["grads"]["z"], z.grad)):
        # atol: PyTorch's build fuses b - a * rat into one fma (an imaginary part of 1e-17 for 0)
        assert torch.allclose(torch.tensor(ours["value"], dtype=torch.float64), _pairs(theirs), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("forward", ["x.reshape(1, 2) @ W", "mm(W, x.reshape(2, 1))", "x @ z", "z @ x",
                                     "F.linear(x.reshape(1, 2), W)", "F.linear(x.reshape(1, 2), W, x)",
                                     "F.linear(x.reshape(1, 2), W, z)"])
def test_a_product_of_a_real_and_a_complex_operand_is_pytorchs_error(forward):
    """mm, addmm (linear with a bias: the bias against the weight first) and dot refuse operands of
    two dtypes in the kernel, each in words of its own: predicted, not refused."""
    x = torch.tensor([2.0, -1.0], dtype=torch.float64, requires_grad=True)
    z = torch.tensor([1 + 2j, 3 - 1j], dtype=C128, requires_grad=True)
    W = torch.tensor([[1 + 1j, 2], [3, 4j]], dtype=C128, requires_grad=True)
    env = {"x": x, "z": z, "W": W, "mm": torch.mm, "F": torch.nn.functional}
    with pytest.raises(RuntimeError) as theirs:
        eval(forward, env)
    text = f"""\
name: mixed
dtype: float64
inputs:
  z: {{value: [1, 3], imag: [2, -1], dtype: complex128, requires_grad: true}}
  x: {{value: [2, -1], requires_grad: true}}
  W: {{value: [[1, 2], [3, 0]], imag: [[1, 0], [0, 4]], dtype: complex128, requires_grad: true}}
model:
  inputs: [z, x, W]
  forward: "({forward}).abs().sum()"
"""
    err = adjoint.loads(text).solve().variants[0].to_json()["error"]
    assert (err["type"], err["message"], err["during"]) == ("RuntimeError", str(theirs.value), "forward")


# ----------------------------------------------------------------------------- elementary functions
FUNCTIONS = "tests/data/regressions/complex_functions.yaml"


def _functions_torch(dtype=C128):
    real = torch.float64 if dtype == C128 else torch.float32
    z = torch.tensor([1 + 2j, -0.5 + 0.25j, 3 - 1j], dtype=dtype, requires_grad=True)
    x = torch.tensor([2.0, 1 / 3, -1.0], dtype=real, requires_grad=True)
    seen = {}
    z.register_hook(lambda g: seen.setdefault("z", g.clone()))
    x.register_hook(lambda g: seen.setdefault("x", g.clone()))
    t = {"z": z, "x": x, "w": z * x}
    t["a"] = torch.sin(t["w"])
    t["b"], t["c"], t["d"], t["e"] = z.cos(), torch.tanh(z), torch.sigmoid(z), z.sqrt()
    t["f"], t["g"], t["h"], t["k"] = torch.sinh(z), z.cosh(), torch.log(t["w"]), torch.angle(z)
    t["m"], t["n"] = torch.sin(z.exp()), z.tan()
    t["q"] = torch.complex(x, x.reshape(3, 1) * 2)
    t["r"] = torch.sgn(z) * x.sign()
    for name in "akh":
        t[name].register_hook(lambda g, name=name: seen.setdefault(name, g.clone()))
    t["s"] = t["a"] * t["b"] + t["c"] / t["d"] - t["e"] * t["f"] + t["g"] + t["h"] + t["m"] * t["n"] + t["q"] + t["r"]
    (t["s"].abs().sum() + (t["k"] * x).sum() + t["h"].imag.sum()).backward()
    return t, {"z": z.grad, "x": x.grad}, seen


@pytest.mark.parametrize("mode", ["exact", "float64"])
def test_elementary_functions_match_torch(mode):
    import pathlib
    text = (pathlib.Path(__file__).parent.parent / FUNCTIONS).read_text()
    v = adjoint.loads(text).solve(mode=mode).variants[0]
    js = v.to_json()
    values, grads, seen = _functions_torch()
    nodes = {"a": "SinBackward0", "b": "CosBackward0", "c": "TanhBackward0", "d": "SigmoidBackward0",
             "e": "SqrtBackward0", "f": "SinhBackward0", "g": "CoshBackward0", "h": "LogBackward0",
             "k": "AngleBackward0", "m": "SinBackward0", "n": "TanBackward0",
             "q": "ComplexBackward0"}
    ours = v.run.forward.names
    for name, t in values.items():
        assert chain(ours[name], leaf_names(ours)) == chain(t, leaf_names(values)), name
        if name in nodes:
            assert t.grad_fn.name() == nodes[name]
        assert js["values"][name].get("dtype") == ("complex128" if t.is_complex() else None), name
        assert torch.allclose(torch.tensor(js["values"][name]["value"], dtype=torch.float64), _pairs(t),
                              rtol=1e-13, atol=0), name
    for name, g in grads.items():
        assert torch.allclose(torch.tensor(js["grads"][name]["value"], dtype=torch.float64), _pairs(g),
                              rtol=1e-13, atol=0), name
    calls = {c["target"]: c["args"]["grad"] for c in js["hook_calls"]}
    assert set(calls) == set(seen)
    for name, g in seen.items():   # angle's and x's gradients are real, the others complex
        assert calls[name].get("dtype") == ("complex128" if g.is_complex() else None), name
        assert torch.allclose(torch.tensor(calls[name]["value"], dtype=torch.float64), _pairs(g),
                              rtol=1e-13, atol=0), name


def test_elementary_function_gradients_by_hand():
    # L = Re(log z) + Im(sqrt(w)^2) + angle(u), z = 3 + 4i, w = 1 + 2i, u = 1 + i, by hand:
    # Re(log z) = log|z|: z.grad = conj(1 / z) = z / |z|^2 = (3 + 4i) / 25;
    # sqrt(w)^2 = w: Im(w) has w.grad = i (dL/da + i dL/db = 0 + 1i);
    # angle(u) = atan2(b, a): u.grad = (-b + a i) / |u|^2 = (-1 + i) / 2
    text = """\
name: by_hand
dtype: float64
inputs:
  z: {value: [3], imag: [4], dtype: complex128, requires_grad: true}
  w: {value: [1], imag: [2], dtype: complex128, requires_grad: true}
  u: {value: [1], imag: [1], dtype: complex128, requires_grad: true}
model:
  inputs: [z, w, u]
  forward: "torch.log(z).real.sum() + (w.sqrt() ** 2).imag.sum() + u.angle().sum()"
"""
    js = adjoint.loads(text).solve().variants[0].to_json()
    assert js["grads"]["z"]["exact"] == ["3/25 + 4/25*i"]
    assert js["grads"]["u"]["exact"] == ["-1/2 + 1/2*i"]
    assert js["grads"]["w"]["value"] == [[pytest.approx(0, abs=1e-15), pytest.approx(1, rel=1e-15)]]
    assert js["values"]["y"]["value"] == pytest.approx(math.log(5) + 2 + math.pi / 4, rel=1e-15)


def test_complex64_functions_and_atan_still_refused():
    text = """\
name: c64
dtype: float32
inputs:
  z: {value: [1, "-1/2"], imag: [2, "1/4"], dtype: complex64, requires_grad: true}
model:
  inputs: [z]
  forward: |
    a = torch.tanh(z) * z.sigmoid() + torch.log(z) - z.tan()
    return a.abs().sum()
"""
    js = adjoint.loads(text).solve().variants[0].to_json()
    z = torch.tensor([1 + 2j, -0.5 + 0.25j], dtype=torch.complex64, requires_grad=True)
    a = torch.tanh(z) * z.sigmoid() + torch.log(z) - z.tan()
    a.abs().sum().backward()
    assert js["values"]["a"]["dtype"] == "complex64" and js["grads"]["z"]["dtype"] == "complex64"
    assert torch.allclose(torch.tensor(js["values"]["a"]["value"]), _pairs(a), rtol=1e-6, atol=0)
    assert torch.allclose(torch.tensor(js["grads"]["z"]["value"]), _pairs(z.grad), rtol=1e-5, atol=0)
    with pytest.raises(ProblemError, match="atan \\(AtanBackward0\\) of a complex tensor is not modelled"):
        adjoint.loads(text.replace("torch.log(z)", "torch.atan(z)")).solve()


@pytest.mark.parametrize("value,imag,forward", [
    ("[-4, 1]", "[0, 1]", "torch.log(z)"),        # the branch cut: +0.0 gives +pi i, -0.0 -pi i
    ("[-4, 1]", "[0, 1]", "torch.sqrt(z)"),
    ("[-4, 1]", "[0, 1]", "torch.angle(z)"),
    ("[0, 1]", "[2, 1]", "torch.sin(z)"),           # sin(2i) = 0 + i sinh 2: a signed zero part
    ("[1, 1]", "[400, 1]", "torch.cos(z)"),        # cosh 400: beyond the kernel's intermediate range
])
def test_exact_mode_refuses_zero_and_huge_parts_float64_matches_torch(value, imag, forward):
    text = f"""\
name: cut
dtype: float64
inputs:
  z: {{value: {value}, imag: {imag}, dtype: complex128, requires_grad: true}}
model:
  inputs: [z]
  forward: |
    a = {forward}
    return (a * (3 + 1j)).real.sum()
"""
    with pytest.raises(ProblemError, match="is not modelled in the exact mode") as err:
        adjoint.loads(text).solve()
    assert err.value.loc.line == 8
    js = adjoint.loads(text).solve(mode="float64").variants[0].to_json()
    import json
    re, im = json.loads(value), json.loads(imag)
    z = torch.tensor([complex(a, b) for a, b in zip(re, im)], dtype=C128, requires_grad=True)
    a = eval(forward, {"torch": torch, "z": z})
    (a * (3 + 1j)).real.sum().backward()
    assert torch.allclose(torch.tensor(js["values"]["a"]["value"], dtype=torch.float64), _pairs(a),
                          rtol=1e-13, atol=0, equal_nan=True)
    assert torch.allclose(torch.tensor(js["grads"]["z"]["value"], dtype=torch.float64), _pairs(z.grad),
                          rtol=1e-13, atol=0, equal_nan=True)


@pytest.mark.parametrize("forward", ["torch.complex(i, i)", "torch.complex(x, i)", "torch.complex(i, x)"])
def test_torch_complex_dtype_errors_are_torchs(forward):
    i = torch.tensor([1, 2])
    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError) as theirs:
        eval(forward, {"torch": torch, "i": i, "x": x})
    text = f"""\
name: e
dtype: float64
inputs:
  z: {{value: [1], imag: [2], dtype: complex128, requires_grad: true}}
  x: {{value: [1, 2], requires_grad: true}}
  i: {{value: [1, 2], dtype: int64}}
model:
  inputs: [z, x, i]
  forward: "{forward}.abs().sum()"
"""
    err = adjoint.loads(text).solve().variants[0].to_json()["error"]
    assert (err["type"], err["message"]) == ("RuntimeError", str(theirs.value)), forward


@pytest.mark.parametrize("expr", ["c.resolve_conj()", "torch.resolve_conj(c.t())", "c[1:].resolve_conj()",
                                  "z.resolve_conj()", "c.resolve_conj().resolve_conj()", "c.real.resolve_conj()"])
def test_resolve_conj_is_a_clone_of_a_conjugated_tensor_as_in_torch(expr):
    """``resolve_conj`` (what PyTorch's view_as_real error asks for): CloneBackward0 of a tensor with
    the conjugate bit, the bit cleared and the layout kept (preserve_format); any other tensor is
    returned as is. Refused before stop 56; graph, strides, values and gradients from torch here."""
    z = torch.tensor([[1 + 2j, 3 - 1j], [0.5j, 2]], dtype=C128, requires_grad=True)
    names = {"z": z, "c": z.conj()}
    r = eval(expr, {"torch": torch}, names)   # the test's own torch expression, not a problem file
    names["r"] = r
    v = torch.view_as_real(r) if r.is_complex() else r
    (v * v).sum().backward()
    as_real = "torch.view_as_real(r)" if r.is_complex() else "r"
    text = f"""\
name: resolve_conj
dtype: float64
inputs:
  z: {{value: [[1, 3], [0, 2]], imag: [[2, -1], [0.5, 0]], dtype: complex128, requires_grad: true}}
model:
  inputs: [z]
  forward: |
    c = z.conj()
    r = {expr}
    v = {as_real}
    return (v * v).sum()
"""
    pred = adjoint.loads(text).solve().variants[0]
    ours = pred.run.forward.names
    assert chain(ours["r"], leaf_names(ours)) == chain(r, leaf_names(names)), expr
    assert tuple(ours["r"].strides) == r.stride(), expr
    assert (ours["r"] is ours["z"]) == (r is z) and (ours["r"] is ours["c"]) == (r is names["c"]), expr
    js = pred.to_json()
    assert torch.allclose(torch.tensor(js["values"]["r"]["value"], dtype=torch.float64), _pairs(r), atol=1e-12)
    assert torch.allclose(torch.tensor(js["grads"]["z"]["value"], dtype=torch.float64), _pairs(z.grad), atol=1e-12)
