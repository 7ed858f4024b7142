"""Elementwise functions and sign-based selections of :class:`adjoint.values.exact.Exact` tensors:
the elementary functions (:mod:`adjoint.values.numbers.elementary`), relu, abs, sgn, the
``threshold_backward`` select, and 0/1 masks from element signs.

A decision taken on a certified element's sign (``relu`` at a kink) may refine it
(:meth:`adjoint.values.exact.Exact.signs`); one no precision decides is taken as 0 and reported
through ``undecided``.
"""

from __future__ import annotations

import math

import flint
import numpy as np

from adjoint.values import ieee as I
from adjoint.values.numbers import balls as Bl
from adjoint.values.numbers import rational as R
from adjoint.values.numbers.elementary import ELEMENTARY
from adjoint.values.numbers.symbolic import MAX_ROOT_DEGREE, check_exponent, s_pow, s_sign, s_sym, sympy
from adjoint.values.exact import Exact, _is_special
from adjoint.values.arith import _bshape, _forms, _has_specials, binary, mul, neg, sub, where_mask

arb = flint.arb

fmpq = flint.fmpq
_Q0 = fmpq(0)


def mask(x: Exact, predicate, undecided=None) -> Exact:
    """0/1 rational mask from a predicate on element signs (for relu, abs, norm kinks)."""
    signs = x.signs(undecided).reshape(-1).tolist()
    ones = np.array([1 if predicate(s) else 0 for s in signs], dtype=object).reshape(x.shape)
    return Exact.from_q(R.QArray(ones, 1, True))


def keep_mask(x: Exact, predicate, undecided=None) -> np.ndarray:
    """Bool mask from a predicate on element signs."""
    if x.kind == "rational":
        s = x.qa.signs()
        table = np.array([bool(predicate(-1)), bool(predicate(0)), bool(predicate(1))])
        return np.asarray(table[s.astype(np.int64) + 1], dtype=bool)
    signs = x.signs(undecided).reshape(-1).tolist()
    return np.array([bool(predicate(s)) for s in signs], dtype=bool).reshape(x.shape)


def unary(name: str, x: Exact, closed: bool = False) -> Exact:
    """An elementary function (:data:`adjoint.values.numbers.elementary.ELEMENTARY`: tanh, exp, log,
    sin, cos, sqrt, sigmoid) of every element, PyTorch's domain rules included (log of 0 is
    -inf, of a negative nan; sqrt of a negative nan). ``closed``: a file with free symbols,
    where results stay SymPy closed forms."""
    fn = ELEMENTARY[name]
    if x.kind == "elements" or closed:
        return x.as_sym().map(fn.closed)
    if x.size == 0:
        return x
    exact = _exact_points(fn, x)
    if exact is not None:
        return exact
    if fn.domain != "real":
        # the signs of x - start (log1p's domain starts at -1): nan below, fn.edge at start
        signs = (sub(x, Exact.scalar(fn.start)) if fn.start else x).signs()
        s = signs.reshape(-1).tolist()
        bad = np.array([v == -1 or v == "nan" or (fn.domain == "positive" and v == 0) for v in s],
                       dtype=bool).reshape(x.shape)
        if bad.any():
            out = unary(name, where_mask(bad, Exact.full(x.shape, fn.start + 1), x))
            values = [math.nan if v != 0 else fn.edge for v in np.asarray(signs)[bad].tolist()]
            return I.overwrite(out, bad, values)
        zero = np.array([v == 0 for v in s], dtype=bool).reshape(x.shape)
        if name == "sqrt" and zero.any():
            # an element decided exactly zero (a difference of equal values, zero to 200 digits:
            # docs/values.md) whose ball still straddles 0, where a ball's sqrt is undefined:
            # sqrt(0) is 0 exactly, as PyTorch's float sqrt of the exact 0.0 it computes
            rest = unary(name, where_mask(zero, Exact.full(x.shape, 1), x))
            return where_mask(zero, Exact.full(x.shape, 0), rest)
    forms = _forms(name, (x,), x.shape, fn.at_rational)
    out = Exact.certified(x.shape, Bl.vectorize(fn.ball), (x,), forms)
    return I.with_specials(out, name, (x,))


def _exact_points(fn, x: Exact) -> Exact | None:
    """The result when every element is a rational point with a rational value (tanh(0) = 0,
    sqrt(9/4) = 3/2, ...)."""
    if x.kind != "rational":
        return None
    vals = []
    for v in x.qa.elements().reshape(-1).tolist():
        r = fn.at_rational(v)
        if r is None:
            return None
        vals.append(r)
    return Exact(np.array(vals, dtype=object).reshape(x.shape), True)


def relu(x: Exact, undecided=None) -> Exact:
    if x.kind == "elements":
        sp = sympy()

        def one(e):
            s = s_sign(e)
            if s is None:
                return sp.Max(0, e)
            if s == "nan":
                return e
            return e if s == 1 else _Q0
        return x.map(one)
    keep = keep_mask(x, lambda s: s == 1 or s == "nan", undecided)
    return where_mask(keep, x, Exact.zeros(x.shape))


def absolute(x: Exact, undecided=None) -> Exact:
    if x.kind == "elements":
        sp = sympy()

        def one(e):
            s = s_sign(e)
            if s is None:
                return sp.Abs(e)
            return -s_sym(e) if s == -1 else e
        return x.map(one)
    negative = keep_mask(x, lambda s: s == -1, undecided)
    return where_mask(negative, neg(x), x)


def sgn(x: Exact, undecided=None) -> Exact:
    if x.is_symbolic():
        sp = sympy()
        return x.map(lambda e: sp.sign(s_sym(e)))
    signs = x.signs(undecided).reshape(-1).tolist()
    vals = [fmpq({1: 1, -1: -1}.get(s, 0)) for s in signs]
    return Exact(np.array(vals, dtype=object).reshape(x.shape), True)


def select_positive(x: Exact, g: Exact, undecided=None) -> Exact:
    """``threshold_backward(g, x, 0)``: ATen's ``x <= 0 ? 0 : g`` (a select, not a product), so
    g where x > 0 and also where x is nan (``nan <= 0`` is false), else 0."""
    if x.is_symbolic():
        sp = sympy()
        return mul(g, x.map(lambda e: sp.Heaviside(s_sym(e), 0)))
    keep = keep_mask(x, lambda s: s == 1 or s == "nan", undecided)
    return where_mask(keep, g.broadcast_to(x.shape) if g.shape != x.shape else g, Exact.zeros(x.shape))


# ------------------------------------------------------------------ powers
def power(x: Exact, e: Exact, closed: bool = False) -> Exact:
    """x ** e with PyTorch's real semantics: pow(x, 0) = 1; 0 ** negative = inf; a negative base
    with a non-integer exponent is nan. ``closed``: a file with free symbols (SymPy results)."""
    if (not closed and x.kind == "rational" and e.kind == "rational" and e.size != 1
            and any(int(k.q) > MAX_ROOT_DEGREE for k in e.qa.elements().reshape(-1).tolist())):
        return _power_per_exponent(x, e)
    if x.kind == "elements" or e.kind == "elements" or e.size != 1 or e.kind != "rational":
        return binary(s_pow, x, e)
    k = e.qa.item()
    shape = _bshape(x, e)
    if x.shape != shape:
        x = x.broadcast_to(shape)
    if k == 0:
        return Exact.full(x.shape, 1)
    if x.kind == "rational" and k.q == 1:
        if _has_large(x):
            check_exponent(k)
        n = int(k.p)
        if n >= 0:
            return Exact.from_q(R.power(x.qa, n))
        if not x.zero_mask().any():
            q = R.power(x.qa, n)
            if q is not None:
                return Exact.from_q(q)
    if closed:
        return binary(s_pow, x.as_sym(), e)
    if k == fmpq(1, 2):
        return unary("sqrt", x)
    return _certified_power(x, k)


def _power_per_exponent(x: Exact, e: Exact) -> Exact:
    """x ** e for rational tensors where some exponent has a denominator past MAX_ROOT_DEGREE:
    SymPy would hunt for an exact root of that degree (minutes), so each distinct exponent goes
    the scalar way (a certified ball power) and the pieces are put together."""
    shape = _bshape(x, e)
    x, e = x.broadcast_to(shape), e.broadcast_to(shape)
    ks = e.qa.elements()
    out = None
    for k in dict.fromkeys(ks.reshape(-1).tolist()):
        part = power(x, Exact.scalar(k))
        out = part if out is None else where_mask(np.asarray(ks == k, dtype=bool), part, out)
    return out


def _certified_power(x: Exact, k: fmpq) -> Exact:
    """x ** k for a rational k (x rational or certified): 0 ** k is 0 (k > 0) or inf (k < 0); a
    negative base with a non-integer k is nan; otherwise a ball power."""
    integer = k.q == 1
    if _has_specials(x):
        special = np.asarray(_is_special(x.forms), dtype=bool)
        out = _certified_power(where_mask(special, Exact.full(x.shape, 1), x), k)
        return I.overwrite(out, special, [_pow_float(f.value, k) for f in x.forms[special].tolist()])
    signs = x.signs()
    s = signs.reshape(-1).tolist()
    bad = np.array([v == "nan" or v == 0 and k < 0 or v == -1 and not integer for v in s],
                   dtype=bool).reshape(x.shape)
    if bad.any():
        safe = where_mask(bad, Exact.full(x.shape, 1), x)
        out = _certified_power(safe, k)
        values = [math.inf if v == 0 else math.nan for v in np.asarray(signs)[bad].tolist()]
        return I.overwrite(out, bad, values)
    n = int(k.p) if integer else None

    def recipe(b):
        if n is not None:
            return np.asarray(_POW_INT(b, n), dtype=object)
        return np.asarray(_POW_Q(b, arb(k)), dtype=object)
    zero_ok = np.array([v == 0 for v in s], dtype=bool).reshape(x.shape)
    forms = _forms("pow", (x, Exact.scalar(k)), x.shape, (lambda p, r: p ** int(r.p)) if integer else None)
    out = Exact.certified(x.shape, recipe, (x,), forms)
    if zero_ok.any():
        # 0 ** k is 0 for k > 0: an element decided zero whose ball still straddles 0 (c - c of a
        # certified c) has no ball power that decides it, integer k included
        out = I.overwrite(out, zero_ok, [0.0] * int(zero_ok.sum()))
    return out


def _pow_float(v: float, k: fmpq) -> float:
    try:
        return math.pow(v, float(k))
    except (ValueError, OverflowError):
        return math.nan


_POW_INT = np.frompyfunc(lambda b, n: b ** n, 2, 1)
_POW_Q = np.frompyfunc(lambda b, r: b ** r if not b.is_zero() else b, 2, 1)


def _has_large(x: Exact) -> bool:
    num, den = x.qa.num, x.qa.den
    return bool(((num != 0) & (num != den) & (num != -den)).any())
