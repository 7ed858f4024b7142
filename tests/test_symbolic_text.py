"""Two short cuts on the way from a closed form to the answer's text, each held to SymPy's own
result: ``has_symbols`` (does an element depend on a free symbol: SymPy's ``free_symbols``
says) and the shared printer (its text is ``sstr(x, order="none")``, also where a shared
subexpression's precedence was worked out for an earlier expression)."""

import pytest
import sympy
from flint import fmpq

from adjoint.values.numbers.symbolic import has_symbols, memo_printer

w, b = sympy.symbols("w b", real=True)
h = sympy.tanh(w * sympy.Rational(1, 2) + b)
deep = sympy.Integer(1)
for k in range(6):
    deep = sympy.tanh(deep * sympy.Rational(k + 1, 3) + sympy.Rational(1, k + 2))
EXPRESSIONS = [
    w, -w, w * h + b, 1 - h ** 2, (1 - h ** 2) * w * sympy.tanh(3 * h - b),
    sympy.Integer(0), sympy.Rational(-3, 4), sympy.pi, sympy.sqrt(2) * sympy.E, sympy.tanh(sympy.Rational(1, 2)),
    deep, deep * (1 - deep ** 2), deep + w * deep, sympy.exp(deep) * (deep - 1) / (deep + 1),
    -(w * h + b) ** 2 / 3, (-1) * (1 - h ** 2), sympy.Pow(w - b, -2), sympy.I * w - 1, sympy.oo, sympy.nan,
]


@pytest.mark.parametrize("e", EXPRESSIONS, ids=[str(e)[:40] for e in EXPRESSIONS])
def test_has_symbols_is_free_symbols(e):
    assert has_symbols(e) == bool(e.free_symbols)


def test_has_symbols_of_a_rational():
    assert has_symbols(fmpq(3, 4)) is False


def test_shared_printer_writes_sstr():
    printer = memo_printer()   # one printer for all: the later ones reuse what the earlier learnt
    for e in EXPRESSIONS + [e * 2 for e in EXPRESSIONS] + [-e for e in EXPRESSIONS]:
        assert printer.doprint(e) == sympy.sstr(e, order="none")
