"""An exact answer may hold integers longer than the 4,300 digits Python writes as text by
default (``sys.set_int_max_str_digits``, a guard against untrusted input): the closed form of
``(10001/10000) ** 2000.5`` has 8,000-digit numerators. SymPy writes an Integer through
``str(int)``, so the report, the JSON and the LaTeX derivation stopped with Python's ValueError
(sweep 89206, problem 600). The file tests/data/regressions/long_integers.yaml is compared with
torch by test_differential.py; here the exact text is held to SymPy's own derivative."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import sympy

import adjoint
from adjoint.render.latex import render_document

FILE = os.path.join(os.path.dirname(__file__), "data", "regressions", "long_integers.yaml")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "adjoint", *args], capture_output=True, text=True)


def test_exact_gradient_is_written_in_full():
    out = _run("solve", FILE, "--json")
    assert out.returncode == 0, out.stderr
    grad = json.loads(out.stdout)["variants"]["default"]["grads"]["x"]
    t = sympy.Symbol("t")
    expected = sympy.diff(t ** sympy.Rational(4001, 2), t).subs(t, sympy.Rational(10001, 10000))
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)          # reading the text back needs the same
    try:
        assert sympy.simplify(sympy.sympify(grad["exact"][0]) - expected) == 0
    finally:
        sys.set_int_max_str_digits(limit)
    assert len(grad["exact"][0]) > 8000


def test_report_and_derivation_are_written():
    out = _run("solve", FILE)
    assert out.returncode == 0, out.stderr
    assert "2443.27" in out.stdout
    limit = sys.get_int_max_str_digits()
    tex = render_document(adjoint.load(FILE).solve())
    assert tex.rstrip().endswith("\\end{document}")
    assert sys.get_int_max_str_digits() == limit    # lifted while printing only
