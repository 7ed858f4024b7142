"""A SymPy atom standing for a certified element (adjoint.values.numbers.forms.certified_atom)
is ordered by its value in SymPy's canonical order, not by a memory address: the exact string
of a closed form printed the same terms in one order or the other from run to run
(``-log(~0.00064)/2 - log(~0.99936)/2`` against the reverse, seen in a corpus run)."""

from __future__ import annotations

import flint

from adjoint.values.numbers.forms import certified_atom
from adjoint.values.numbers.symbolic import sympy


class _Element:
    """What the atom reads of a certified element: its tensor, index, value and text."""

    def __init__(self, tensor, value: float):
        self.tensor, self.index, self.value = tensor, (), value

    def float(self) -> float:
        return self.value

    def text(self) -> str:
        return f"~{self.value}"

    def ball_with_bits(self, bits: int):
        return flint.arb(self.value)


def test_terms_are_ordered_by_value_whatever_the_addresses():
    sp = sympy()
    a, b = object(), object()
    low, high = (a, b) if id(a) > id(b) else (b, a)   # the smaller value on the larger address
    small, big = certified_atom(_Element(low, 0.25)), certified_atom(_Element(high, 0.75))
    for expr in (sp.log(small) + sp.log(big), sp.log(big) + sp.log(small)):
        assert sp.sstr(expr, order="none") == "log(~0.25) + log(~0.75)"   # as s_str prints it
