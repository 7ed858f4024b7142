"""Check every derivative rule of the registry against SymPy's own differentiation, exactly.

For an op and one of its :class:`~adjoint.engine.ops.Check` cases, the forward rule is run on a
tensor of SymPy symbols, the Jacobian of the result is taken by ``sympy.diff``, and ``J^T g``
at an exact point is compared with the op's VJP at that point. Kinks are avoided (the
conventions there are PyTorch's choices, pinned against real torch elsewhere). And each VJP
reads only what its node saves (:func:`reads_only_saved`)."""

from __future__ import annotations

from fractions import Fraction

import sympy

from adjoint.values.backends.exact import ExactBackend
from adjoint.values.exact import Exact, s_sym
from adjoint.values.arith import equal
from adjoint.engine.ops import REGISTRY, Check, Op

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


def _point(shape, offset: int, positive: bool) -> Exact:
    pool = _UNIT if positive == "unit" else _POSITIVE if positive else _MIXED
    n = 1
    for d in shape:
        n *= d
    return Exact.of([pool[(offset + i) % len(pool)] for i in range(n)], shape)


def case_inputs(case: Check) -> tuple[list, list[bool]]:
    """The exact inputs a case is checked at (``None`` for an absent optional input, the
    ``given`` / ``fixed`` values as given) and which of them are varied (the others are held)."""
    case = _with_fixed(case)
    given = dict(case.given)
    ins, varied = [], []
    for i, shape in enumerate(case.shapes):
        if shape is None:
            ins.append(None)
        elif i in given:
            ins.append(Exact.of(list(given[i]), shape))
        else:
            ins.append(_point(shape, 2 * i, case.positive))
        varied.append(shape is not None and i not in given)
    return ins, varied


def check(op: Op, case: Check) -> list[str]:
    """Problems found for one op and case (empty: the VJP equals J^T g exactly).

    Only the differentiable inputs are checked (integer indices and running statistics are
    held at their values), against the differentiable outputs (``op.diff_outputs``)."""
    B = ExactBackend("float64")
    case = _with_fixed(case)
    given = dict(case.given)
    diff = op.differentiable or (True,) * len(case.shapes)
    syms, points = [], []
    for i, shape in enumerate(case.shapes):
        if shape is None:
            syms.append(None)
            points.append(None)
        elif i in given:
            fixed = Exact.of(list(given[i]), shape)
            syms.append(fixed)
            points.append(fixed)
        else:
            syms.append(_symbols(shape, f"a{i}_"))
            points.append(_point(shape, 2 * i, case.positive))
    out_pt = _as_list(op.forward(B, points, case.params))
    n_out = len(out_pt) if op.diff_outputs is None else op.diff_outputs
    g = [_point(o.shape, 1 + k, False) for k, o in enumerate(out_pt[:n_out])]
    vjp = op.vjp(B, g + [None] * (len(out_pt) - n_out), points, out_pt, case.params, [True] * len(points))
    checked = [i for i, shape in enumerate(case.shapes) if shape is not None and i not in given and diff[i]]
    if case.differences:
        want_all = _by_differences(B, op, case, points, g, n_out, checked)
    else:
        want_all = _by_sympy(B, op, case, syms, points, g, n_out, checked)
    problems = []
    for i in checked:
        got, expected = vjp[i], want_all[i]
        if case.slope is not None and expected is not None:   # the kernel's rounded constant
            expected = B.mul(expected, B.scalar(case.slope))
        if got is None or got.shape != expected.shape or not equal(got, expected):
            problems.append(f"{op.name}{list(case.shapes)} input {i}: vjp {got} != J^T g {expected}")
    return problems


def reads_only_saved(op: Op, case: Check) -> list[str]:
    """Problems found for one op and case: a forward value its node does not save (an input
    or output not in ``op.saves``) that the VJP reads. PyTorch's node computes only from what
    it saved, and a saved tensor is what ``saved_tensors_hooks`` unpack -- under those hooks
    even a tensor written in place after the forward, unchecked (ReluBackward0 selects on its
    saved result, not on its input). Each unsaved value is shifted and negated in turn; the
    VJP must not change. Its shape stays (a rule may read shapes: PyTorch saves sizes)."""
    B = ExactBackend("float64")
    case = _with_fixed(case)
    ins, _ = case_inputs(case)
    outs = _as_list(op.forward(B, ins, case.params))
    n_out = len(outs) if op.diff_outputs is None else op.diff_outputs
    g = [_point(o.shape, 1 + k, False) for k, o in enumerate(outs[:n_out])] + [None] * (len(outs) - n_out)
    need = [True] * len(ins)
    base = op.vjp(B, g, ins, outs, case.params, need)
    given = dict(case.given)
    problems = []
    for what, values in (("in", ins), ("out", outs)):
        saved = {s.index for s in op.saves if s.what == what}
        if what == "in" and any(s.what == "in" and s.index >= len(ins) for s in op.saves):
            continue  # the case leaves out a saved input (the rule then derives it from the others)
        for i, v in enumerate(values):
            if i in saved or v is None or v.size == 0 or (what == "in" and i in given):
                continue
            shifted = B.add(v, Exact.of([Fraction(5, 7)] * v.size, v.shape))
            for moved in (shifted, B.neg(shifted)):
                args = {"in": list(ins), "out": list(outs)}
                args[what][i] = moved
                got = op.vjp(B, g, args["in"], args["out"], case.params, need)
                if any((a is None) != (b is None) or (a is not None and not equal(a, b)) for a, b in zip(base, got)):
                    problems.append(f"{op.name} ({op.node}): the VJP reads {what}put {i}, which the node does not save")
                    break
    return problems


def _with_fixed(case: Check) -> Check:
    """``fixed`` values (non-differentiable inputs after the ``shapes`` ones, nested tuples) as
    ``given`` slots."""
    if not case.fixed:
        return case
    import numpy as np
    from dataclasses import replace
    shapes, given = list(case.shapes), list(case.given)
    for value in case.fixed:
        a = np.array(value, dtype=object)
        given.append((len(shapes), tuple(a.reshape(-1))))
        shapes.append(a.shape)
    return replace(case, shapes=tuple(shapes), given=tuple(given), fixed=())


def _by_sympy(B, op: Op, case: Check, syms, points, g, n_out, checked) -> dict:
    subs = {}
    for sym, pt in zip(syms, points):
        if sym is not None and sym is not pt:
            for s, v in zip(sym.flat(), pt.flat()):
                subs[s] = s_sym(v)
    out_sym = _as_list(op.forward(B, syms, case.params))[:n_out]
    outs = [s_sym(o) for out in out_sym for o in out.flat()]
    gs = [s_sym(x) for gk in g for x in gk.flat()]
    want = {}
    for i in checked:
        flat = [sum(gj * sympy.diff(oj, s) for gj, oj in zip(gs, outs)).subs(subs) for s in syms[i].flat()]
        want[i] = Exact.of(flat, syms[i].shape)
    return want


#: The step of the exact differences: small enough to stay between the point's distinct values.
_STEP = Fraction(1, 64)


def _by_differences(B, op: Op, case: Check, points, g, n_out, checked) -> dict:
    """J^T g for an op linear in each input near the point: column j of the Jacobian is
    (f(x + h e_j) - f(x)) / h, exact."""
    base = _as_list(op.forward(B, points, case.params))[:n_out]
    want = {}
    for i in checked:
        flat = []
        x = points[i]
        for j in range(x.size):
            step = [Fraction(0)] * x.size
            step[j] = _STEP
            moved = list(points)
            moved[i] = B.add(x, Exact.of(step, x.shape))
            outs = _as_list(op.forward(B, moved, case.params))[:n_out]
            total = Fraction(0)
            for gk, o1, o0 in zip(g, outs, base):
                col = B.div(B.sub(o1, o0), B.scalar(_STEP))
                for a, b in zip(gk.flat(), col.flat()):
                    total += Fraction(int(a.p), int(a.q)) * Fraction(int(b.p), int(b.q))
            flat.append(total)
        want[i] = Exact.of(flat, x.shape)
    return want


def _as_list(out) -> list:
    return list(out) if isinstance(out, tuple) else [out]


def check_all() -> list[str]:
    problems: list[str] = []
    for op, case in cases():
        problems.extend(check(op, case))
    return problems
