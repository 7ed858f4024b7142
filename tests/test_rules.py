"""Every derivative rule against SymPy's differentiation (adjoint.gradcheck), and the
checker itself against a deliberately wrong rule."""

from dataclasses import replace

import pytest

from adjoint import exact as E
from adjoint.gradcheck import CASES, Case, check
from adjoint.ops import RULES


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.prim}-{c.shapes}-{c.params}")
def test_rule_matches_sympy_jacobian(case):
    assert check(case) == []


def test_every_rule_is_checked():
    assert {c.prim for c in CASES} == set(RULES)


def test_checker_catches_a_wrong_rule():
    def wrong_tanh_vjp(g, ins, out, p, need):  # sign error: 1 + out^2
        return [E.mul(g, E.add(E.Exact.scalar(1), E.mul(out, out)))]

    bad = replace(RULES["tanh"], vjp=wrong_tanh_vjp)
    assert check(Case("tanh", ((2, 2),)), rule=bad)


def test_checker_catches_a_missing_broadcast_reduction():
    def unreduced(g, ins, out, p, need):
        return [g, g]

    bad = replace(RULES["add"], vjp=unreduced)
    assert check(Case("add", ((2, 3), (3,))), rule=bad)
