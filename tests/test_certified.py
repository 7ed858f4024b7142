"""Certified numbers: transcendental values carried as balls, shown as closed forms while small
and as certified digits beyond (docs/values.md).

Every expected number here comes from mpmath at a few hundred digits (an independent
implementation: adjoint computes with python-flint's ball arithmetic), or from real torch.
"""

from decimal import Decimal
from fractions import Fraction

import mpmath
import pytest

import adjoint
from adjoint.values.numbers import balls
from adjoint.values.numbers import forms

mpmath.mp.dps = 300


def solve(text: str):
    return adjoint.loads(text).solve().variants[0]


def _decimal(text: str) -> Fraction:
    assert text.startswith("~"), text
    return Fraction(Decimal(text[1:]))


def _ulp(text: str) -> Fraction:
    """One unit in the last digit of a decimal (``~-1.25e-3`` -> 1e-5)."""
    mantissa, _, exp = text[1:].lstrip("-").partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return Fraction(10) ** (int(exp or 0) - decimals)


def _certified(text: str, true) -> None:
    """The shown digits are certified: within one unit of the last digit of the true value,
    and there are at least balls.DIGITS of them."""
    d = _decimal(text)
    digits = len(text[1:].lstrip("-").split("e")[0].replace(".", "").lstrip("0"))
    assert digits >= balls.DIGITS, text
    exact = Fraction(mpmath.nstr(true, 250, strip_zeros=False)) if not isinstance(true, Fraction) else true
    assert abs(exact - d) <= _ulp(text), (text, mpmath.nstr(true, 30))


def test_small_closed_forms_are_shown_and_values_are_correctly_rounded():
    v = solve("name: t\ninputs:\n  x: {value: [0.375, -2], requires_grad: true}\nmodel:\n  inputs: [x]\n"
              "  forward: \"tanh(x)\"\nloss: \"sum(y)\"\n")
    assert v.values["model"].strings() == ["tanh(3/8)", "-tanh(2)"]
    assert v.values["model"].floats() == [float(mpmath.tanh(mpmath.mpf(3) / 8)), float(mpmath.tanh(-2))]
    # d/dx sum(tanh(x)) = 1 - tanh(x)^2, as PyTorch's TanhBackward0 writes it (1 - out^2)
    assert v.grads["x"].strings() == ["1 - tanh(3/8)**2", "1 - tanh(2)**2"]


def test_large_closed_forms_become_certified_digits():
    width = 6
    xs = [Fraction(k, 8) for k in range(1, width + 1)]
    rows = [[Fraction((-1) ** (i + j) * ((i * 3 + j) % 4 + 1), 8) for j in range(width)] for i in range(width)]
    text = ("name: t\ninputs:\n  u: {value: [" + ", ".join(f'"{x}"' for x in xs) + "], requires_grad: true}\n"
            "model:\n  inputs: [u]\n  params:\n    A: [" + ", ".join("[" + ", ".join(f'"{a}"' for a in r) + "]"
                                                        for r in rows) + "]\n"
            "  forward: |\n    h = tanh(A @ tanh(A @ u))\n    return tanh(A @ h)\nloss: \"sum(y * y)\"\n")
    v = solve(text)
    u = [mpmath.mpf(x.numerator) / x.denominator for x in xs]
    g = [mpmath.tanh(sum(mpmath.mpf(a.numerator) / a.denominator * ui for a, ui in zip(r, u))) for r in rows]
    h = [mpmath.tanh(sum(mpmath.mpf(a.numerator) / a.denominator * gi for a, gi in zip(r, g))) for r in rows]
    y = [mpmath.tanh(sum(mpmath.mpf(a.numerator) / a.denominator * hi for a, hi in zip(r, h))) for r in rows]
    shown = v.values["model"].strings()
    assert all(s.startswith("~") for s in shown), shown      # three nested tanh layers: beyond FORM_LIMIT
    for text_, true in zip(shown, y):
        _certified(text_, true)
    assert v.values["model"].floats() == [float(t) for t in y]
    _certified(v.loss.strings(), sum(t * t for t in y))


def test_a_sign_needing_more_precision_is_decided_by_refinement():
    """tanh(1/2) - c with c equal to tanh(1/2) to 45 digits: the first balls (128 bits, about 38
    digits) contain 0; refinement decides the sign, and relu follows it."""
    t = mpmath.tanh(mpmath.mpf(1) / 2)
    below = Fraction(int(mpmath.floor(t * 10 ** 45)), 10 ** 45)
    for c, positive in ((below, True), (below + Fraction(1, 10 ** 45), False)):
        v = solve(f"name: t\ninputs:\n  x: {{value: [0.5], requires_grad: true}}\n  c: [\"{c}\"]\nmodel:\n"
                  "  inputs: [x, c]\n  forward: \"relu(tanh(x) - c)\"\nloss: \"sum(y)\"\n")
        (y,) = v.values["model"].strings()
        (g,) = v.grads["x"].strings()
        if positive:
            assert y == "-" + str(c) + " + tanh(1/2)" or y.startswith("~") or "tanh(1/2)" in y, y
            assert v.values["model"].floats() == [float(t - mpmath.mpf(c.numerator) / c.denominator)]
            assert g == "1 - tanh(1/2)**2"
        else:
            assert y == "0" and g == "0"
        assert v.values["model"].floats()[0] >= 0


def test_an_undecidable_sign_is_taken_as_zero_and_said():
    """s1 - s2 where both are the same sum of 24 tanh values: no precision separates the
    ball from 0 and the closed form is too big to keep; relu takes it as 0 (what float64
    PyTorch computes: s1 - s2 is exactly 0.0 there) and the answer says so."""
    xs = ", ".join(f'"1/{k}"' for k in range(2, 26))
    v = solve(f"name: t\ninputs:\n  x: {{value: [{xs}], requires_grad: true}}\nmodel:\n  inputs: [x]\n"
              "  forward: |\n    a = sum(tanh(x))\n    b = sum(tanh(x))\n    return relu(a - b)\nloss: \"y\"\n")
    assert v.values["model"].strings() == "0"
    assert set(v.grads["x"].strings()) == {"0"}
    assert any("could not be decided" in note and str(balls.MAX_PREC) in note for note in v.notes), v.notes


def test_deep_chain_keeps_every_shown_digit_certified():
    """u_{k+1} = u_k + tanh(A_k u_k) over 60 layers: ball arithmetic loses accuracy with depth
    (each layer widens the balls), and refinement must still certify every digit shown."""
    depth, width = 60, 2
    mats = [[[Fraction(((k + 3 * i + j) % 5) - 2, 8) for j in range(width)] for i in range(width)]
            for k in range(depth)]
    u0 = [Fraction(3, 4), Fraction(-5, 8)]
    lines = ["name: chain", "dtype: float64", "inputs:", f"  u: {{value: [{', '.join(map(str, map(float, u0)))}], "
             "requires_grad: true}", "model:", "  type: Sequential", "  children:"]
    for k, a in enumerate(mats):
        lit = "[" + ", ".join("[" + ", ".join(str(float(x)) for x in r) + "]" for r in a) + "]"
        lines.append(f'    l{k}: {{inputs: [u], forward: "u + tanh(A @ u)", params: {{A: {lit}}}}}')
    lines.append('loss: "sum(y * y)"')
    v = solve("\n".join(lines) + "\n")
    u = [mpmath.mpf(x.numerator) / x.denominator for x in u0]
    for a in mats:
        u = [ui + mpmath.tanh(sum(mpmath.mpf(x.numerator) / x.denominator * uj for x, uj in zip(r, u)))
             for ui, r in zip(u, a)]
    for text_, true in zip(v.values["model"].strings(), u):
        _certified(text_, true)
    assert v.values["model"].floats() == [float(t) for t in u]


def test_closed_form_limit_is_a_tree_size():
    assert forms.size_of(forms.make("tanh", forms.fmpq(1, 2))) == 2
    big = forms.make("sum", *[forms.make("tanh", forms.fmpq(1, k)) for k in range(2, 30)])
    assert big is None  # 57 nodes: beyond FORM_LIMIT, and SymPy cannot make it smaller


@pytest.mark.parametrize("expr,expected", [("exp(x - x)", ["1"]), ("sqrt(x * x)", ["3/2"]), ("log(x / x)", ["0"])])
def test_rational_results_stay_exact(expr, expected):
    v = solve(f"name: t\ninputs:\n  x: {{value: [1.5], requires_grad: true}}\nmodel:\n  inputs: [x]\n  forward: \"{expr}\"\nloss: \"sum(y)\"\n")
    assert v.values["model"].strings() == expected
    assert v.values["model"].rational
