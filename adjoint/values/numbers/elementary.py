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
    domain: str = "real"              # real | nonnegative (nan below 0) | positive (-inf at 0, nan below)


def _sympy_function(name: str):
    def closed(e):
        return getattr(symbolic.sympy(), name)(symbolic.s_sym(e))
    return closed


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


def _at(point: fmpq, value: fmpq):
    return lambda v: value if v == point else None


ELEMENTARY: dict[str, Elementary] = {e.name: e for e in (
    Elementary("tanh", lambda b: b.tanh(), _sympy_function("tanh"), _at(_Q0, _Q0), math.tanh),
    Elementary("exp", lambda b: b.exp(), _sympy_function("exp"), _at(_Q0, _Q1), math.exp),
    Elementary("sin", lambda b: b.sin(), _sympy_function("sin"), _at(_Q0, _Q0), math.sin),
    Elementary("cos", lambda b: b.cos(), _sympy_function("cos"), _at(_Q0, _Q1), math.cos),
    Elementary("sigmoid", _sigmoid_ball, _sigmoid_closed, _at(_Q0, fmpq(1, 2)), _sigmoid_float),
    Elementary("log", lambda b: b.log(), symbolic.s_log, _at(_Q1, _Q0), math.log, "positive"),
    Elementary("sqrt", lambda b: b.sqrt(), symbolic.s_sqrt, _sqrt_rational, math.sqrt, "nonnegative"),
    Elementary("erf", lambda b: b.erf(), _sympy_function("erf"), _at(_Q0, _Q0), math.erf),
)}
