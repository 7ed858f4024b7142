"""The exact backend's remainders: ``fmod`` and ``remainder`` of two broadcast tensors, and the
rounded quotient their backward reads (``self.div(other, rounding_mode="trunc" | "floor")``).

Each is computed on rational elements only: C's ``fmod(a, b) = a - trunc(a / b) * b`` (the sign
of ``a``), PyTorch's ``remainder`` adding ``b`` where that is non-zero and of the other sign than
``b`` (the sign of ``b``). A divisor 0 gives nan, as PyTorch (the runtime then refuses the
non-finite value, or ``--float64`` follows it); so does a nan operand (C's fmod, PyTorch's
remainder and the rounded quotient all give nan then: a parameter an SGD step made nan). A closed
form that SymPy simplifies to a rational is that rational. An irrational, infinite or symbolic
element is refused (:class:`NotRational`): which integer the quotient rounds to would need its sign decided
against every integer nearby.
"""

from __future__ import annotations

from adjoint.values import exact as E
from adjoint.values.exact import Exact
from adjoint.values.numbers.sizes import broadcast_arrays
from adjoint.values.numbers.symbolic import ExactLimit


class NotRational(ExactLimit):
    """A remainder of an element that is not a finite rational (a ProblemError at the op's line)."""


def _rational(v):
    """A closed-form element whose form is a rational number once SymPy has simplified it
    (``t + (p - p.detach())`` with ``p = tanh(x)``: ``2 + (tanh(3/2) - tanh(3/2))``), as that
    rational; any other element as it is."""
    if type(v) is E.fmpq or getattr(v, "form", None) is None:
        return v
    e = v.sympy()
    return E.fmpq(int(e.p), int(e.q)) if getattr(e, "is_Rational", False) else v


def _pairs(a: Exact, b: Exact, what: str):
    x, y = broadcast_arrays(a.a, b.a)
    flat = []
    for p, q in zip(x.reshape(-1).tolist(), y.reshape(-1).tolist()):
        p, q = _rational(p), _rational(q)
        if E.s_is_nan(p) or E.s_is_nan(q):
            flat.append(None)       # nan, whatever the other operand
            continue
        if type(p) is not E.fmpq or type(q) is not E.fmpq:
            raise NotRational(f"{what} of an element that is not a finite rational number ({p}, {q}) is not modelled "
                              "(the rounded quotient would need its sign decided against every integer nearby); give "
                              "rational values")
        flat.append((p, q))
    return flat, x.shape


def _quotient(p, q, mode: str) -> int:
    """trunc or floor of p / q (q != 0)."""
    r = p / q
    n, d = int(r.p), int(r.q)
    fl = n // d
    if mode == "floor" or fl >= 0 or fl * d == n:
        return fl
    return fl + 1            # trunc of a negative non-integer: toward 0


def _nan():
    return E.s_div(E.fmpq(0), E.fmpq(0))


class ExactModulo:
    """fmod, remainder, and the rounded quotient of the exact backend."""

    def rounded_quotient(self, a, b, mode: str):
        """``trunc(a / b)`` or ``floor(a / b)`` elementwise (nan or inf where ``b`` is 0, as a / b)."""
        flat, shape = _pairs(a, b, f"div(..., rounding_mode={mode!r})")
        out = [_nan() if pq is None else E.fmpq(_quotient(*pq, mode)) if pq[1] != 0 else E.s_div(*pq) for pq in flat]
        return Exact.of(out, shape)

    def fmod(self, a, b):
        flat, shape = _pairs(a, b, "fmod")
        out = [pq[0] - _quotient(*pq, "trunc") * pq[1] if pq is not None and pq[1] != 0 else _nan() for pq in flat]
        return Exact.of(out, shape)

    def remainder(self, a, b):
        flat, shape = _pairs(a, b, "remainder")
        out = [pq[0] - _quotient(*pq, "floor") * pq[1] if pq is not None and pq[1] != 0 else _nan() for pq in flat]
        return Exact.of(out, shape)

