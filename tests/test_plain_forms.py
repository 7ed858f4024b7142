"""forms.plain_text: an odd function of a rational (``tanh(3/8)``) written without SymPy, as
SymPy's sstr writes it, so a Tanh network's JSON needs no SymPy import."""

import random
import subprocess
import sys

import flint
import sympy

from adjoint.render.jsontext import dumps
from adjoint.values.numbers import forms as F

fmpq = flint.fmpq


def test_plain_text_is_sympys_text():
    rng = random.Random(0)
    values = [fmpq(p, q) for p in (-7, -1, 1, 2, 9, 10 ** 40 + 1) for q in (1, 2, 3, 64, 10 ** 30 + 7)]
    values += [fmpq(rng.randint(-10 ** 6, 10 ** 6) or 1, rng.randint(1, 10 ** 6)) for _ in range(300)]
    for op in sorted(F.PLAIN_ODD):
        for r in values:
            expected = sympy.sstr(getattr(sympy, op)(sympy.Rational(int(r.p), int(r.q))), order="none")
            assert F.plain_text(F.Form(op, (r,), 2)) == expected, (op, r)
    assert F.plain_text(F.Form("tanh", (fmpq(0),), 2)) is None
    assert F.plain_text(F.Form("exp", (fmpq(1, 2),), 2)) is None


def _tanh_problem(width: int = 16) -> str:
    """Linear, Tanh, Linear at ``width``: the second layer's sums of ``width`` tanh forms are
    past the closed-form limit (certified digits), the first layer's outputs are ``tanh(r)``."""
    rng = random.Random(1)

    def mat(rows, cols):
        return "[" + ", ".join("[" + ", ".join(str(rng.randint(-8, 8) / 8) for _ in range(cols)) + "]"
                               for _ in range(rows)) + "]"

    return (f"name: tanh_forms\ndtype: float64\ninputs:\n  x: {{value: {mat(2, width)}, requires_grad: true}}\n"
            f"model:\n  type: Sequential\n  children:\n"
            f"    fc0: {{type: Linear, params: {{weight: {mat(width, width)}, bias: {mat(1, width)[1:-1]}}}}}\n"
            f"    act0: {{type: Tanh}}\n"
            f"    fc1: {{type: Linear, params: {{weight: {mat(2, width)}, bias: {mat(1, 2)[1:-1]}}}}}\n"
            'loss: "sum(y * y)"\nhooks:\n  - {module: fc1, kind: full_backward}\n  - {tensor: act0, kind: hook}\n')



def test_tanh_answer_same_text_without_sympy(tmp_path, monkeypatch):
    path = tmp_path / "tanh.yaml"
    path.write_text(_tanh_problem())
    code = ("import sys, adjoint\n"
            "from adjoint.render.jsontext import dumps\n"
            f"text = dumps(adjoint.load({str(path)!r}).solve().to_json())\n"
            "assert 'sympy' not in sys.modules, 'SymPy imported'\n"
            "sys.stdout.write(text)\n")
    fast = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "-tanh(" in fast and '"tanh(' in fast
    import adjoint

    monkeypatch.setattr(F, "PLAIN_ODD", frozenset())   # every closed form through SymPy
    assert dumps(adjoint.load(str(path)).solve().to_json()) == fast
