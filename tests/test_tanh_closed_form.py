"""tanh's closed form takes a short cut past SymPy's undecidable zero test (a symbolic chain's
``w * h + b``); the expression it builds must be the one ``sympy.tanh`` builds, for arguments
where the short cut applies and for every argument where one of ``tanh.eval``'s rules does."""

import pytest
import sympy

from adjoint.values.numbers.elementary import ELEMENTARY

w, b, c = sympy.symbols("w b c", real=True)
z = sympy.Symbol("z")                       # no assumptions
zero = sympy.Symbol("o", zero=True)
h = sympy.tanh(w * sympy.Rational(1, 2) + b)

ARGUMENTS = [
    w * h + c,                               # a layer of the chain: the short cut
    w * h + c + sympy.Rational(3, 4),
    -w * h - c,                              # a minus sign to pull out: -tanh(w*h + c)
    w * h - c,
    c - w * h,
    w * h + b,                               # b also inside h: not a lone term
    w + zero,                                # a symbol known to be zero: no short cut
    w + z,                                   # z is not known to be real
    w + sympy.I * sympy.pi,                  # eval's pi*I rule: coth / tanh of the rest
    w + sympy.I * sympy.pi / 2,
    w + sympy.pi,
    w + sympy.Float(0.5),                    # a float in the argument: evaluated numerically
    w + sympy.E,
    sympy.I * w,                             # an imaginary argument: I*tan(w)
    w * c,                                   # not a sum
    w,
    sympy.Rational(-1, 3),
    sympy.Integer(0),
    sympy.asinh(w),
    w - w,
]


@pytest.mark.parametrize("arg", ARGUMENTS, ids=[str(a) for a in ARGUMENTS])
def test_same_expression_as_sympy(arg):
    ours = ELEMENTARY["tanh"].closed(arg)
    theirs = sympy.tanh(arg)
    assert ours == theirs
    assert sympy.srepr(ours) == sympy.srepr(theirs)


def test_short_cut_is_taken_for_a_layer():
    """The chain's layer builds tanh without asking SymPy whether the sum is zero (the question
    leaves its answer, even None, in the expression's assumptions); SymPy's own tanh asks."""
    fresh = w * sympy.tanh(w / 3 + b) + c
    assert "zero" not in fresh._assumptions
    ELEMENTARY["tanh"].closed(fresh)
    assert "zero" not in fresh._assumptions
    sympy.tanh(fresh)
    assert "zero" in fresh._assumptions
