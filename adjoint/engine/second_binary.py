"""Backward formulas recorded as ops (see adjoint.engine.second_formulas) for the binary pointwise
functions ``atan2`` (Atan2Backward0), ``hypot`` (HypotBackward0), ``xlogy`` (XlogyBackward0),
``tensor ** tensor`` (PowBackward1), ``number ** tensor`` (PowBackward2) and ``fmod`` / ``remainder`` by a
number (FmodBackward0 / RemainderBackward0: the gradient itself) or by a tensor (FmodBackward1 / RemainderBackward1:
``self.div(other, rounding_mode=...)``, DivBackward2, whose own gradients are zeros without graph).

The order of the recorded nodes is torch 2.13's (``_sequence_nr()`` of first-order gradients,
tests/test_second_ops.py): the generated apply computes the slots in the alphabetical order of
derivatives.yaml's argument names (hypot's and xlogy's ``other`` before ``self``, pow's ``exponent``
before ``self``), except where one function computes both (atan2_backward: self, then other); C++
evaluates the right operand of a binary operator first. A mask a formula computes (``self == 0``,
``denom == 0``) is a bool tensor without a node; ``at::scalar_tensor(0., grad.options())`` is a 0-d
tensor without grad (no edge).
"""

from __future__ import annotations

import math
from fractions import Fraction

from adjoint.engine.ops.arith import broadcast_shapes
from adjoint.engine.second_formulas import NotModelled


def _mask(rt, x, predicate):
    """A bool tensor (no node): 1 where ``predicate`` holds of an element's sign (-1, 0, 1, 'nan')."""
    return rt.B.mask(x.value, predicate)


def _both(rt, a, b):
    """``a & b`` of two 0/1 masks, broadcast to their common shape."""
    shape = broadcast_shapes(rt.B.shape(a), rt.B.shape(b), None)
    return rt.B.broadcast_to(rt.B.mul(a, b), shape)


def _scalar_zero(rt, g):
    """at::scalar_tensor(0., grad.options()): a 0-d tensor without grad."""
    return rt.tensor(rt.B.zeros(()), dtype=g.dtype)


def _atan2(rt, node, grads, saved, need):
    # atan2_backward(grad, self, other, grad_input_mask): recip = (self * self + other * other).reciprocal()
    # (the right operand first: MulBackward0, MulBackward0, AddBackward0, ReciprocalBackward0), masked out of
    # place where the sum is 0 (MaskedFillBackward0; the reciprocal's saved result stays version 0); then
    # self: grad * other * recip (MulBackward0, MulBackward0); other: grad * -self * recip (NegBackward0,
    # MulBackward0, MulBackward0)
    g, x, y, loc = grads[0], saved["self"], saved["other"], node.loc
    denom = _sum_of_squares(rt, x, y, loc)
    zero = rt.tensor(_mask(rt, denom, lambda s: s == 0), dtype="bool")
    recip = rt.apply("masked_fill", [rt.apply("reciprocal", [denom], None, loc), zero], 0, loc)
    a = b = None
    if need[0]:
        a = rt.apply("mul", [rt.apply("mul", [g, y], None, loc), recip], None, loc)
    if len(need) > 1 and need[1]:
        b = rt.apply("mul", [rt.apply("mul", [g, rt.apply("neg", [x], None, loc)], None, loc), recip], None, loc)
    return [a, b]


def _sum_of_squares(rt, x, y, loc):
    """``self * self + other * other``: the right product first."""
    right = rt.apply("mul", [y, y], None, loc)
    left = rt.apply("mul", [x, x], None, loc)
    return rt.apply("add", [left, right], None, loc)


def _hypot(rt, node, grads, saved, need):
    # HypotBackward0: other (grad * other / result: MulBackward0, DivBackward0) before self (grad * self / result)
    g, loc = grads[0], node.loc
    result = saved["result"]
    b = rt.apply("div", [rt.apply("mul", [g, saved["other"]], None, loc), result], None, loc) if need[1] else None
    a = rt.apply("div", [rt.apply("mul", [g, saved["self"]], None, loc), result], None, loc) if need[0] else None
    return [a, b]


def _xlogy(rt, node, grads, saved, need):
    # XlogyBackward0: other (grad * self / other: MulBackward0, DivBackward0) before self
    # (at::xlogy(grad, other).masked_fill((self == 0.) & (other <= 0.), 0.): XlogyBackward0, MaskedFillBackward0)
    g, x, y, loc = grads[0], saved["self"], saved["other"], node.loc
    b = rt.apply("div", [rt.apply("mul", [g, x], None, loc), y], None, loc) if need[1] else None
    a = None
    if need[0]:
        mask = _both(rt, _mask(rt, x, lambda s: s == 0), _mask(rt, y, lambda s: s in (-1, 0)))
        a = rt.apply("masked_fill", [rt.apply("xlogy", [g, y], None, loc), rt.tensor(mask, dtype="bool")], 0, loc)
    return [a, b]


def _pow_exponent(rt, node, g, base, exponent, result):
    """pow_backward_exponent(grad, self, exponent, result): cond = (self == 0) & (exponent >= 0) (no node);
    grad * where(cond, scalar_tensor(0), result * self.log()): LogBackward0, MulBackward0, WhereBackward0,
    MulBackward0."""
    loc = node.loc
    cond = _both(rt, _mask(rt, base, lambda s: s == 0), _mask(rt, exponent, lambda s: s in (0, 1)))
    logs = rt.apply("mul", [result, rt.apply("log", [base], None, loc)], None, loc)
    chosen = rt.apply("where", [_scalar_zero(rt, g), logs, rt.tensor(cond, dtype="bool")], None, loc)
    return rt.apply("mul", [g, chosen], None, loc)


def _pow_tensor(rt, node, grads, saved, need):
    # PowBackward1: exponent (pow_backward_exponent) before self (pow_backward_self: where(exponent == 0.0,
    # scalar_tensor(0.), grad * (exponent * self.pow(exponent - 1))): SubBackward1, PowBackward1, MulBackward0,
    # MulBackward0, WhereBackward0)
    g, loc = grads[0], node.loc
    x, e = saved.get("self"), saved["exponent"]
    if e.dtype not in ("float64", "float32"):
        raise NotModelled("PowBackward1 of an exponent that is not a float tensor")
    b = _pow_exponent(rt, node, g, x, e, saved["result"]) if need[1] else None
    a = None
    if need[0]:
        local = rt.apply("mul", [e, rt.apply("pow_tensor", [x, rt.apply("sub_scalar", [e], Fraction(1), loc)], None,
                                                loc)], None, loc)
        product = rt.apply("mul", [g, local], None, loc)
        cond = rt.tensor(_mask(rt, e, lambda s: s == 0), dtype="bool")
        a = rt.apply("where", [_scalar_zero(rt, g), product, cond], None, loc)
    return [a, b]


def _rpow(rt, node, grads, saved, need):
    # PowBackward2 (number ** tensor): pow_backward_exponent(grad, base, exponent, result) with a nonzero base:
    # grad * (result * log(base)) -- Scalar::log() is a double (MulBackward1 holds it), then MulBackward0
    base = Fraction(node.params)
    if base <= 0:
        raise NotModelled("PowBackward2 of a base that is not positive")
    log = Fraction(0) if base == 1 else Fraction(math.log(float(base)))
    scaled = rt.apply("mul_scalar", [saved["result"]], log, node.loc)
    return [rt.apply("mul", [grads[0], scaled], None, node.loc)]


def _rounded(mode: str):
    """FmodBackward1 ("trunc") / RemainderBackward1 ("floor"), a tensor divisor: other (-grad *
    self.div(other, rounding_mode=MODE): the right operand first, DivBackward2, then NegBackward0,
    MulBackward0) before self (grad itself)."""
    def formula(rt, node, grads, saved, need):
        g, loc = grads[0], node.loc
        b = None
        if len(need) > 1 and need[1]:
            q = rt.apply("div_mode", [saved["self"], saved["other"]], mode, loc)
            b = rt.apply("mul", [rt.apply("neg", [g], None, loc), q], None, loc)
        return [g if need[0] else None, b]
    return formula


def _div_mode(rt, node, grads, saved, need):
    # DivBackward2 (a rounding mode): div_tensor_self_backward / div_tensor_other_backward are zeros_like(grad),
    # gradients of zeros without graph
    g = grads[0]
    zeros = rt.tensor(rt.B.zeros(tuple(g.shape)), dtype=g.dtype)
    return [zeros if need[0] else None, zeros if len(need) > 1 and need[1] else None]


def _passthrough(rt, node, grads, saved, need):
    # FmodBackward0 / RemainderBackward0 (a number divisor): self: grad (no op)
    return [grads[0]]


BINARY = {"fmod_scalar": _passthrough, "remainder_scalar": _passthrough, "fmod_tensor": _rounded("trunc"),
          "remainder_tensor": _rounded("floor"), "div_mode": _div_mode, "atan2": _atan2, "hypot": _hypot, "xlogy": _xlogy, "pow_tensor": _pow_tensor, "rpow": _rpow}
