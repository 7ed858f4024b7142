"""The elementary functions of one variable, as every kind of value computes them.

One :class:`Elementary` record per function says how it is computed on a certified ball
(python-flint), how its closed form is written (SymPy, for display and for files with free
symbols), where it is exactly rational at a rational point (``tanh(0) = 0``,
``sqrt(9/4) = 3/2``: the result then stays a rational), what it gives at IEEE specials
(``tanh(inf) = 1``) and its domain (PyTorch: ``log(0) = -inf``, ``log`` or ``sqrt`` of a
negative number is ``nan``). A new elementwise function (``erf``, ``log1p``, ...) is one more
record in :data:`ELEMENTARY` and a backend method calling ``tensor_functions.unary(name, x, closed)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import flint

from adjoint.values.numbers import symbolic

fmpq = flint.fmpq
_Q0 = fmpq(0)
_Q1 = fmpq(1)


@dataclass(frozen=True)
class Elementary:
    """One elementary function (exp, log, tanh, ...) as each value backend evaluates it: a certified ball, a closed form, exactly at a rational where it can, in float64, and its domain."""

    name: str
    ball: Callable                    # arb -> arb, at the context's precision
    closed: Callable                  # SymPy element (or fmpq) -> SymPy closed form, PyTorch's conventions
    at_rational: Callable             # fmpq -> fmpq when the value there is rational, else None
    at_float: Callable                # float -> float, for IEEE specials (inf, nan)
    domain: str = "real"              # real | nonnegative (nan below 0) | positive (``edge`` at ``start``, nan below)
    start: int = 0                    # where the domain starts (log1p: -1)
    edge: float = -math.inf           # the value at ``start`` for a positive domain (rsqrt: +inf at +0.0)
    at_special: Callable | None = None  # float -> (closed form, arb) | None: an exact non-float value at an
                                        # IEEE special (atan(inf) = pi / 2), which no float can stand for


def _sympy_function(name: str):
    def closed(e):
        return getattr(symbolic.sympy(), name)(symbolic.s_sym(e))
    return closed


def _tanh_closed(e):
    """tanh's closed form, the same expression ``sympy.tanh`` returns, built faster where it can be.

    SymPy's ``tanh.eval`` ends by asking whether its argument is zero. For a layer's ``w * h + b``
    of free symbols that cannot be decided, and the question walks the assumptions of the whole
    argument (most of a deep symbolic chain's solve). When the argument is a sum holding a free
    real symbol as a term of its own, found nowhere else in it (the bias), the sum is not zero;
    with only rationals and symbols in it, none of ``eval``'s other rules applies (no number, no
    ``I`` or ``pi``, no infinity or float) once no minus sign can be pulled out, so ``eval`` would
    return nothing and the unevaluated ``tanh`` is built directly."""
    sp = symbolic.sympy()
    a = symbolic.s_sym(e)
    if a.is_Add and _has_lone_symbol(a) and not a.could_extract_minus_sign():
        return sp.tanh(a, evaluate=False)
    return sp.tanh(a)


def _has_lone_symbol(a) -> bool:
    """Is one of the sum ``a``'s terms a real symbol with no other assumption that no other term
    contains, and is every atom of ``a`` a rational or a symbol? One walk over the other terms'
    DAG, each shared part once."""
    lone = {t for t in a.args if t.is_Symbol and t.is_real and t.is_zero is None}
    if not lone:
        return False
    seen = set()
    stack = [t for t in a.args if t not in lone]
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if x.args:
            stack.extend(x.args)
        elif x.is_Symbol:
            lone.discard(x)
        elif not x.is_Rational:
            return False
    return bool(lone)


def _sigmoid_closed(e):
    sp = symbolic.sympy()
    return 1 / (1 + sp.exp(-symbolic.s_sym(e)))


def _sigmoid_ball(b):
    return 1 / (1 + (-b).exp())


def _sigmoid_float(v: float) -> float:
    """At an IEEE special: 1 at inf, 0 at -inf, nan at nan (which fails every comparison, so it
    is tested first: ``v > -700`` is false for it)."""
    if math.isnan(v):
        return v
    return 1 / (1 + math.exp(-v)) if v > -700 else 0.0


def _sqrt_rational(v: fmpq):
    p, q = flint.fmpz(v.p), flint.fmpz(v.q)
    if v >= 0 and p.is_square() and q.is_square():
        return fmpq(p.isqrt(), q.isqrt())
    return None


def _rsqrt_rational(v: fmpq):
    r = _sqrt_rational(v) if v > 0 else None
    return None if r is None else 1 / r


def _log_rational(base: int):
    """log_base at an integer power of ``base`` (log2(8) = 3, log10(1/100) = -2: PyTorch's float is exact there too)."""
    def at(v: fmpq):
        if v <= 0:
            return None
        p, q = int(v.p), int(v.q)
        num, sign = (p, 1) if q == 1 else (q, -1)
        if min(p, q) != 1:
            return None
        k = 0
        while num % base == 0:
            num //= base
            k += 1
        return fmpq(sign * k) if num == 1 else None
    return at


def _rsqrt_closed(e):
    sign = symbolic.s_sign(e)
    S = symbolic.sympy().S
    if sign == 0:
        return S.Infinity
    if sign == -1 or sign == "nan":
        return S.NaN
    return symbolic.s_norm(1 / symbolic.sympy().sqrt(symbolic.s_sym(e)))


def _log1p_closed(e):
    return symbolic.s_log(symbolic.s_norm(symbolic.s_sym(e) + 1))


def _log_base_closed(base: int):
    def closed(e):
        return symbolic.s_norm(symbolic.s_log(e) / symbolic.sympy().log(base))
    return closed


def _expm1_closed(e):
    return symbolic.s_norm(symbolic.sympy().exp(symbolic.s_sym(e)) - 1)


def _atan_special(v: float):
    """atan(+-inf) = +-pi / 2 (PyTorch's float is the double nearest it)."""
    if not math.isinf(v):
        return None
    s = 1 if v > 0 else -1
    return s * symbolic.sympy().pi / 2, s * flint.arb.pi() / 2


def _at(point: fmpq, value: fmpq):
    return lambda v: value if v == point else None


ELEMENTARY: dict[str, Elementary] = {e.name: e for e in (
    Elementary("tanh", lambda b: b.tanh(), _tanh_closed, _at(_Q0, _Q0), math.tanh),
    Elementary("exp", lambda b: b.exp(), _sympy_function("exp"), _at(_Q0, _Q1), math.exp),
    Elementary("sin", lambda b: b.sin(), _sympy_function("sin"), _at(_Q0, _Q0), math.sin),
    Elementary("cos", lambda b: b.cos(), _sympy_function("cos"), _at(_Q0, _Q1), math.cos),
    Elementary("sigmoid", _sigmoid_ball, _sigmoid_closed, _at(_Q0, fmpq(1, 2)), _sigmoid_float),
    Elementary("log", lambda b: b.log(), symbolic.s_log, _at(_Q1, _Q0), math.log, "positive"),
    Elementary("sqrt", lambda b: b.sqrt(), symbolic.s_sqrt, _sqrt_rational, math.sqrt, "nonnegative"),
    Elementary("erf", lambda b: b.erf(), _sympy_function("erf"), _at(_Q0, _Q0), math.erf),
    Elementary("rsqrt", lambda b: b.rsqrt(), _rsqrt_closed, _rsqrt_rational, lambda v: 1 / math.sqrt(v), "positive",
               edge=math.inf),
    Elementary("log1p", lambda b: b.log1p(), _log1p_closed, _at(_Q0, _Q0), math.log1p, "positive", start=-1),
    Elementary("expm1", lambda b: b.expm1(), _expm1_closed, _at(_Q0, _Q0), math.expm1),
    Elementary("atan", lambda b: b.atan(), _sympy_function("atan"), _at(_Q0, _Q0), math.atan, at_special=_atan_special),
    Elementary("sinh", lambda b: b.sinh(), _sympy_function("sinh"), _at(_Q0, _Q0), math.sinh),
    Elementary("cosh", lambda b: b.cosh(), _sympy_function("cosh"), _at(_Q0, _Q1), lambda v: math.cosh(v) if v == v else v),
    Elementary("tan", lambda b: b.tan(), _sympy_function("tan"), _at(_Q0, _Q0), math.tan),
    Elementary("log2", lambda b: b.log() / flint.arb(2).log(), _log_base_closed(2), _log_rational(2), math.log2, "positive"),
    Elementary("log10", lambda b: b.log() / flint.arb(10).log(), _log_base_closed(10), _log_rational(10), math.log10,
               "positive"),
)}
