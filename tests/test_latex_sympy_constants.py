"""The derivation's printer prints SymPy's constants as SymPy's own LaTeX printer does (pi was
written \\text{\\Pi}, which pdflatex refused: a hook returning atan(grad / 0) = pi/2)."""

from __future__ import annotations

import pytest
import sympy

from adjoint.render.latex.printer import DerivationPrinter

w = sympy.Symbol("w")


@pytest.mark.parametrize("e", [sympy.pi, sympy.pi / 2, -sympy.pi / 4, w * sympy.pi, sympy.EulerGamma,
                               sympy.GoldenRatio, sympy.Catalan, sympy.E, sympy.pi ** 2])
def test_constants_as_sympy_prints_them(e):
    ours = DerivationPrinter({}, None)._print(e)
    assert ours == sympy.latex(e, mul_symbol=None, fold_short_frac=False)
    assert "\\text" not in ours
