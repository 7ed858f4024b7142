"""Check every derivative rule of the registry against SymPy's own differentiation, exactly.

For an op and one of its :class:`~adjoint.ops.Check` cases, the forward rule is run on a
tensor of SymPy symbols, the Jacobian of the result is taken by ``sympy.diff``, and ``J^T g``
at an exact point is compared with the op's VJP at that point. Kinks are avoided (the
conventions there are PyTorch's choices, pinned against real torch elsewhere)."""

from __future__ import annotations

from fractions import Fraction

import sympy

from .backends.exact import ExactBackend
from .exact import Exact, s_sym
from .ops import REGISTRY, Check, Op

#: A point away from kinks: every value non-zero, distinct, small.
_MIXED = [Fraction(1, 2), Fraction(-3, 4), Fraction(2, 3), Fraction(5, 4), Fraction(-1, 3), Fraction(7, 5)]
_POSITIVE = [abs(v) for v in _MIXED]
_UNIT = [Fraction(1, 4), Fraction(2, 3), Fraction(1, 3), Fraction(3, 5), Fraction(1, 5), Fraction(3, 4)]


def cases() -> list[tuple[Op, Check]]:
    """Every (op, check) pair of the registry."""
    return [(op, c) for op in REGISTRY.values() for c in op.checks]


def _symbols(shape, tag: str) -> Exact:
    n = 1
    for d in shape:
        n *= d
    return Exact.of([sympy.Symbol(f"{tag}{i}", real=True) for i in range(n)], shape)


def _point(shape, offset: int, positive) -> Exact:
    pool = _UNIT if positive == "unit" else _POSITIVE if positive else _MIXED
    n = 1
    for d in shape:
        n *= d
    return Exact.of([pool[(offset + i) % len(pool)] for i in range(n)], shape)


def check(op: Op, case: Check) -> list[str]:
    """Problems found for one op and case (empty: the VJP equals J^T g exactly)."""
    B = ExactBackend("float64")
    syms = [_symbols(s, f"a{i}_") for i, s in enumerate(case.shapes)]
    points = [_point(s, 2 * i, case.positive) for i, s in enumerate(case.shapes)]
    subs = {}
    for sym, pt in zip(syms, points):
        for s, v in zip(sym.flat(), pt.flat()):
            subs[s] = s_sym(v)
    fixed = [_fixed(v) for v in case.fixed]  # non-differentiable inputs: the same values in both runs
    out_sym = _as_list(op.forward(B, syms + fixed, case.params))
    out_pt = _as_list(op.forward(B, points + fixed, case.params))
    g = [_point(o.shape, 1 + k, False) for k, o in enumerate(out_pt)]
    vjp = op.vjp(B, g, points + fixed, out_pt, case.params, [True] * len(points) + [False] * len(fixed))
    problems = []
    outs = [s_sym(o) for out in out_sym for o in out.flat()]
    gs = [s_sym(x) for gk in g for x in gk.flat()]
    for i, (sym, got) in enumerate(zip(syms, vjp)):
        want = [sum(gj * sympy.diff(oj, s) for gj, oj in zip(gs, outs)).subs(subs)
                for s in sym.flat()]
        expected = Exact.of(want, sym.shape)
        if got is None or got.shape != expected.shape or not got.equals(expected):
            problems.append(f"{op.name}{list(case.shapes)} input {i}: vjp {got} != J^T g {expected}")
    return problems


def _fixed(value) -> Exact:
    """A fixed input from nested tuples of ints / Fractions (a bare number: a 0-d tensor)."""
    import numpy as np
    a = np.array(value, dtype=object)
    return Exact.of(list(a.flat), a.shape)


def _as_list(out) -> list:
    return list(out) if isinstance(out, tuple) else [out]


def check_all() -> list[str]:
    problems: list[str] = []
    for op, case in cases():
        problems.extend(check(op, case))
    return problems
