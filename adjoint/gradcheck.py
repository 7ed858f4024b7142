"""Check every derivative rule against SymPy's own differentiation, exactly.

For a rule, the forward function is run on a tensor of SymPy symbols, the Jacobian of the
result is taken by ``sympy.diff``, and ``J^T g`` at an exact point is compared with the
rule's hand-written VJP at that point. Kinks are avoided (the conventions there are
PyTorch's choices, pinned against real torch elsewhere)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import sympy

from .exact import Exact, s_sym
from .ops import RULES

#: A point away from kinks: every value non-zero, distinct, small.
_MIXED = [Fraction(1, 2), Fraction(-3, 4), Fraction(2, 3), Fraction(5, 4), Fraction(-1, 3), Fraction(7, 5)]
_POSITIVE = [abs(v) for v in _MIXED]


@dataclass(frozen=True)
class Case:
    prim: str
    shapes: tuple[tuple[int, ...], ...]
    params: object = None
    positive: bool = False


def _case_list() -> list[Case]:
    cases = [Case(p, s) for p in ("add", "sub", "mul") for s in (((2, 3), (3,)), ((2,), (2,)), ((), (2,)))]
    cases += [Case("div", ((2, 3), (3,)), positive=True), Case("pow_tensor", ((2,), (2,)), positive=True),
              Case("rsub", ((2,),), Fraction(3, 2)), Case("rpow", ((2,),), Fraction(3, 2)),
              Case("pow_scalar", ((2,),), Fraction(3)), Case("pow_scalar", ((2,),), Fraction(1, 2), positive=True),
              Case("pow_scalar", ((2,),), Fraction(0)), Case("reciprocal", ((2, 2),)), Case("neg", ((2,),)),
              Case("mm", ((2, 3), (3, 2))), Case("mv", ((2, 3), (3,))), Case("dot", ((3,), (3,))),
              Case("addmm", ((2,), (3, 2), (2, 2))), Case("t", ((2, 3),)), Case("view", ((2, 3),), (3, 2)),
              Case("unsafe_view", ((2, 3),), (6,)), Case("unsqueeze", ((3,),), (1, 3)),
              Case("squeeze", ((1, 3),), (3,)), Case("sum", ((2, 2),)), Case("mean", ((2, 2),)),
              Case("norm", ((3,),))]
    cases += [Case(p, ((2, 2),)) for p in ("relu", "tanh", "sigmoid", "exp", "sin", "cos", "abs")]
    cases += [Case(p, ((2, 2),), positive=True) for p in ("log", "sqrt")]
    return cases


CASES = _case_list()


def _symbols(shape, tag: str) -> Exact:
    n = 1
    for d in shape:
        n *= d
    return Exact.of([sympy.Symbol(f"{tag}{i}", real=True) for i in range(n)], shape)


def _point(shape, offset: int, positive: bool) -> Exact:
    pool = _POSITIVE if positive else _MIXED
    n = 1
    for d in shape:
        n *= d
    return Exact.of([pool[(offset + i) % len(pool)] for i in range(n)], shape)


def check(case: Case, rule=None) -> list[str]:
    """Problems found for one rule and shape (empty: the VJP equals J^T g exactly)."""
    rule = rule or RULES[case.prim]
    syms = [_symbols(s, f"a{i}_") for i, s in enumerate(case.shapes)]
    points = [_point(s, 2 * i, case.positive) for i, s in enumerate(case.shapes)]
    subs = {}
    for sym, pt in zip(syms, points):
        for s, v in zip(sym.flat(), pt.flat()):
            subs[s] = s_sym(v)
    out_sym = rule.forward(syms, case.params)
    out_pt = rule.forward(points, case.params)
    g = _point(out_pt.shape, 1, False)
    vjp = rule.vjp(g, points, out_pt, case.params, [True] * len(points))
    problems = []
    outs = [s_sym(o) for o in out_sym.flat()]
    gs = [s_sym(x) for x in g.flat()]
    for i, (sym, got) in enumerate(zip(syms, vjp)):
        want = [sum(gj * sympy.diff(oj, s) for gj, oj in zip(gs, outs)).subs(subs)
                for s in sym.flat()]
        expected = Exact.of(want, sym.shape)
        if got is None or got.shape != expected.shape or not got.equals(expected):
            problems.append(f"{case.prim}{list(case.shapes)} input {i}: vjp {got} != J^T g {expected}")
    return problems


def check_all() -> list[str]:
    problems: list[str] = []
    for case in CASES:
        problems.extend(check(case))
    return problems
