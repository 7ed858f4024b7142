"""Values in the derivation: when it may say one value *is* another (``= lambda_1``,
``lambda~_1 = 2 lambda_1``: :func:`same` and :func:`ratio`), the decimals of a closed form
(:func:`decimal_value`), and the element helpers of :mod:`adjoint.values.exact` a renderer needs
(:func:`q`, :func:`s_sym`). Rationals compare exactly; closed forms structurally, else
numerically at 30 digits (at two rational points when symbols are free): SymPy's simplify would
be exact but can take minutes on nested tanh/exp expressions. Nothing is computed in floating point."""

from __future__ import annotations

from fractions import Fraction

import flint
import numpy as np

from adjoint.values import exact as E
from adjoint.values.exact import Exact, q, s_sym
from adjoint.values.arith import rational_ratio
from adjoint.values.complexes import Cx
from adjoint.engine.graph import Typed

__all__ = ["Exact", "decimal_value", "q", "ratio", "s_sym", "same"]

fmpq = flint.fmpq

_PROBE = (fmpq(7, 11), fmpq(-13, 17))


def decimal_value(e, dps: int = 50) -> Fraction | None:
    """A constant closed form as a Fraction accurate to ~``dps`` digits; None if it is not a real number."""
    v = E.s_approx(e, dps)
    if v is None:
        return None
    sign, man, exp, _ = v._mpf_
    value = Fraction(int(man)) * (Fraction(2) ** int(exp)) if man else Fraction(0)
    return -value if sign else value


def same(p: Exact | None, q: Exact | None) -> bool:
    """Equal values, for labelling ("this is lambda_3")."""
    if p is None or q is None:
        return p is q
    p, q = getattr(p, "value", p) if isinstance(p, Typed) else p, getattr(q, "value", q) if isinstance(q, Typed) else q
    if isinstance(p, Cx) or isinstance(q, Cx):   # complex values: both parts the same
        return isinstance(p, Cx) and isinstance(q, Cx) and same(p.re, q.re) and same(p.im, q.im)
    if p.shape != q.shape:
        return False
    if p.rational and q.rational:
        return bool(np.all(p.a == q.a))
    for x, y in zip(p.flat(), q.flat()):
        if type(x) is fmpq and type(y) is fmpq:
            if x != y:
                return False
            continue
        sx, sy = E.s_sym(x), E.s_sym(y)
        if sx == sy:
            continue
        if E.s_is_nan(sx) or E.s_is_nan(sy):
            return False
        free = sorted((sx - sy).free_symbols, key=str)
        points = [{}] if not free else [{s: E.s_sym(_PROBE[i % 2] * (k + 1)) for i, s in enumerate(free)}
                                         for k in range(2)]
        for pt in points:
            a = decimal_value(sx.xreplace(pt) if pt else sx, 30)
            b = decimal_value(sy.xreplace(pt) if pt else sy, 30)
            if a is None or b is None or abs(a - b) > Fraction(1, 10 ** 20) * (abs(a) + 1):
                return False
    return True


def ratio(p: Exact, q: Exact):
    """c with q == c * p elementwise (p nonzero somewhere), else None (both rational)."""
    if not isinstance(p, Exact) or not isinstance(q, Exact):   # a complex or typed value: no ratio is said
        return None
    return rational_ratio(p, q)
