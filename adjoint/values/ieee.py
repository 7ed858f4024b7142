"""IEEE specials in certified tensors: ``inf``, ``-inf`` and ``nan`` where PyTorch makes them.

A certified element may be an IEEE special (its closed form a :class:`~adjoint.values.numbers.forms.Special`;
its ball ``nan``). Wherever an operand is one, the result follows float arithmetic on
the specials and on the signs of the finite operands (``inf * -2 = -inf``, ``0 * inf = nan``,
``1 / inf = 0``): the only element-by-element Python in the certified arithmetic.
"""

from __future__ import annotations

import math

import flint
import numpy as np

from adjoint.values.numbers import forms as F
from adjoint.values.numbers.elementary import ELEMENTARY
from adjoint.values.numbers.symbolic import sympy
from adjoint.values.exact import Exact, _is_special

fmpq = flint.fmpq
arb = flint.arb


def with_specials(out: Exact, op: str, xs: tuple) -> Exact:
    """Where an operand is an IEEE special, the result follows float arithmetic."""
    if out.kind != "real" or not any(x.kind == "real" and x.forms is not None and np.any(_is_special(x.forms))
                                     for x in xs):
        return out
    shape = out.shape
    views = []
    for x in xs:
        forms = x.form_array()
        signs = x.signs()
        f = np.broadcast_to(forms, shape) if forms is not None else np.full(shape, None, dtype=object)
        views.append((f.reshape(-1), np.broadcast_to(signs, shape).reshape(-1)))
    if out.forms is None:
        out.forms = np.empty(shape, dtype=object)
    flat_f = out.forms.reshape(-1)
    flat_b = out.balls.reshape(-1)
    special = ELEMENTARY[op].at_special if op in ELEMENTARY else None
    exact_at = {}    # element -> the special's float, where the value is exact but no float (atan(inf) = pi / 2)
    for i in range(flat_f.size):
        if not any(type(f[i]) is F.Special for f, _ in views):
            continue
        vals = [f[i].value if type(f[i]) is F.Special else float_of_sign(s[i]) for f, s in views]
        exact = special(vals[0]) if special is not None else None
        if exact is not None:
            exact_at[i] = vals[0]
        flat_f[i], flat_b[i] = exact if exact is not None else settle_float(ieee(op, vals))
    if exact_at:
        # the recipe recomputes those balls at any precision from the value itself (its operand's ball is nan)
        base = out.recipe

        def recipe(*ins):
            b = base(*ins).copy()
            flat = b.reshape(-1)
            for i, v in exact_at.items():
                flat[i] = special(v)[1]
            return b
        out.recipe = recipe
    return out


def float_of_sign(s) -> float:
    return float("nan") if s == "nan" else float(s if s is not None else 1)


def ieee(op: str, vals: list) -> float:
    a = vals[0]
    b = vals[1] if len(vals) > 1 else None
    try:
        if op == "add":
            return a + b
        if op == "sub":
            return a - b
        if op == "mul":
            return a * b
        if op == "div":
            return a / b if b != 0 else (math.copysign(math.inf, math.copysign(1.0, b) * a) if a != 0 and a == a
                                         else math.nan)   # 1 / -0.0 is -inf
        if op == "neg":
            return -a
        if op == "relu":
            return a if a > 0 or a != a else 0.0
        return ELEMENTARY[op].at_float(a)
    except (ValueError, OverflowError):
        return math.nan


def settle_float(v: float):
    """A float result of special arithmetic: a Special, or the exact value it is (0, +-1)."""
    sp = F.special_of_float(v)
    if sp is not None:
        return sp, arb("nan")
    value = fmpq(int(v)) if v == int(v) else None
    if value is None:
        raise ArithmeticError(f"special arithmetic gave the non-exact {v}")
    return value, arb(value)


def overwrite(out: Exact, mask: np.ndarray, values: list[float]) -> Exact:
    """``out`` with the elements under ``mask`` replaced by float results (specials or exact)."""
    if not mask.any():
        return out
    if out.kind == "rational":
        out = certified_copy(out)
    elif out.kind == "real":
        out = certified_copy(out)
    else:
        a = out.elems.copy()
        a[mask] = [sym_special(v) for v in values]
        return Exact.from_elements(a)
    if out.forms is None:
        out.forms = np.empty(out.shape, dtype=object)
    settled = [settle_float(v) for v in values]
    out.forms[mask] = [f for f, _ in settled] if settled else []
    balls = out.balls.copy()
    balls[mask] = [b for _, b in settled]
    out.balls = balls
    base = out.recipe
    fixed_forms = out.forms.copy()

    def recipe(*ins):
        b = base(*ins).copy()
        b[mask] = [arb("nan") if type(f) is F.Special else arb(f) for f in fixed_forms[mask].tolist()]
        return b
    out.recipe = recipe
    return out


def certified_copy(x: Exact) -> Exact:
    """A certified tensor with x's values (x rational or certified), owning its arrays."""
    if x.kind == "rational":
        forms = x.a.copy()
        return Exact.certified(x.shape, lambda b: b.copy(), (x,), forms, settle=False)
    out = Exact.certified(x.shape, lambda b: b.copy(), (x,), x.forms.copy() if x.forms is not None else None,
                          x.prec, settle=False)
    out.negzero = x.negzero
    return out


def sym_special(v: float):
    S = sympy().S
    if v != v:
        return S.NaN
    if v == math.inf:
        return S.Infinity
    if v == -math.inf:
        return S.NegativeInfinity
    return fmpq(int(v))


def specials_placed(out: Exact, positions: np.ndarray, x: Exact) -> Exact:
    """``out`` (zeros with ``x`` added at the flat ``positions``, shaped like ``x``: index_put_
    with accumulate) where an element of ``x`` is an IEEE special: each target element reached
    by one is 0.0 plus what lands there in float arithmetic (``inf`` stays ``inf``, ``inf`` and
    ``-inf`` at one place make ``nan``), not ``0 * inf``."""
    if x.kind != "real" or x.forms is None or not np.any(_is_special(x.forms)):
        return out
    forms = x.forms.reshape(-1).tolist()
    signs = x.signs().reshape(-1).tolist()
    landing: dict[int, list] = {}
    for f, s, at in zip(forms, signs, positions.reshape(-1).tolist()):
        landing.setdefault(at, []).append(f.value if type(f) is F.Special else float_of_sign(s))
    hit = [at for at, vals in landing.items() if any(math.isnan(v) or math.isinf(v) for v in vals)]
    mask = np.zeros(out.shape, dtype=bool)
    mask.reshape(-1)[hit] = True
    return overwrite(out, mask, [_accumulated(landing[at]) for at in np.flatnonzero(mask).tolist()])


def _accumulated(values: list) -> float:
    s = 0.0
    for v in values:
        s += v
    return s


def specials_by_elements(out: Exact, x: Exact, reduce_fn) -> Exact:
    """A reduction over a tensor holding IEEE specials: float arithmetic decides."""
    if x.kind != "real" or x.forms is None or not np.any(_is_special(x.forms)):
        return out
    signs = x.signs()
    vals = [f.value if type(f) is F.Special else float_of_sign(s)
            for f, s in zip(x.forms.reshape(-1).tolist(), signs.reshape(-1).tolist())]
    v = reduce_fn(vals)
    if v == v and abs(v) != math.inf:
        return out
    return overwrite(certified_copy(out) if out.kind != "real" else out, np.ones(out.shape, dtype=bool), [v])
