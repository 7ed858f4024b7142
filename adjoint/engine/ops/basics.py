"""One-bound clamps, sign, the standard deviation, and the ``*_like`` constants.

As PyTorch 2.13 CPU runs them (checked in real torch, float64):

* ``clamp_min(x, v)`` (``ClampMinBackward0``, saves self) and ``clamp_max(x, v)``
  (``ClampMaxBackward0``, saves self) with a number bound: ``where(self >= min, grad, 0)`` and
  ``where(self <= max, grad, 0)`` (derivatives.yaml): the gradient passes at the bound, and a
  nan element gets 0;
* ``sign(x)`` (``SignBackward0``, saves nothing): -1, 0, 1 (0 at -0.0 and at nan); its
  derivative is ``zeros_like(grad)``;
* ``std(x, dims, correction, keepdim)`` (``StdBackward0``, saves self then result):
  ``std_backward``: ``var_backward((grad / (result * 2)).masked_fill_(result == 0, 0), ...)``,
  so the gradient is 0 where the standard deviation is 0;
* ``zeros_like`` / ``ones_like`` / ``full_like``: a new tensor of the input's shape and dtype and
  no grad_fn (the input is no edge): ``full_like`` (params: the fill value).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.values.mathtree import Fn, TFn, applied, dims_text, elementwise_named, generic_vjp, no_gradient, number_text
from adjoint.engine.ops.record import Check, Math, Op, Save
from adjoint.engine.ops.arith import same_shape
from adjoint.engine.ops.activations import _closed_interval, clamp_values
from adjoint.engine.ops.elementwise import SIGN
from adjoint.engine.ops.reductions import dims_shape, var_forward, var_vjp


def _q(B, v):
    return B.scalar(Fraction(v))


# ----------------------------------------------------------------------------- clamp_min, clamp_max

def clamp_min_forward(B, ins, p):
    return clamp_values(B, ins[0], _q(B, p), None)


def clamp_min_vjp(B, gs, ins, outs, p, need):
    # where(self >= min, grad, 0)
    return [_closed_interval(B, ins[0], gs[0], _q(B, p), None)]


def clamp_max_forward(B, ins, p):
    return clamp_values(B, ins[0], None, _q(B, p))


def clamp_max_vjp(B, gs, ins, outs, p, need):
    # where(self <= max, grad, 0)
    return [_closed_interval(B, ins[0], gs[0], None, _q(B, p))]


def _bound_kink(which: str):
    def kink(B, ins, p):
        if B.any_zero(B.sub(ins[0], _q(B, p))):
            return f"{which}'(x) = 1 at x = the bound in PyTorch (the gradient passes at the bound)"
        return None
    return kink


# ----------------------------------------------------------------------------- sign

def sign_forward(B, ins, p):
    """-1, 0, 1; nan and -0.0 give +0 (ATen's sign kernel: (0 < a) - (a < 0))."""
    x = ins[0]
    return B.sub(B.mask(x, lambda s: s == 1), B.mask(x, lambda s: s == -1))


def sign_vjp(B, gs, ins, outs, p, need):
    return [B.zeros(B.shape(gs[0]))]


# ----------------------------------------------------------------------------- std

def std_forward(B, ins, p):
    return B.sqrt(var_forward(B, ins, p))


def std_vjp(B, gs, ins, outs, p, need):
    # std_backward: var_backward((grad / (result * 2)).masked_fill_(result == 0, 0), self, dim, correction, keepdim)
    result, g = outs[0], gs[0]
    zero = B.mask(result, lambda s: s == 0)
    safe = B.add(result, zero)                      # 1 where the std is 0 (masked below)
    grad_var = B.div(g, B.mul(safe, _q(B, 2)))
    grad_var = B.where(zero, B.zeros(B.shape(grad_var)), grad_var)
    return var_vjp(B, [grad_var], ins, outs, p, need)


def std_kink(B, ins, p):
    if B.any_zero(var_forward(B, ins, p)):
        return "std'(x) = 0 where the standard deviation is 0 in PyTorch (std_backward masks it)"
    return None


# ----------------------------------------------------------------------------- zeros_like, ones_like, full_like

def full_like_forward(B, ins, p):
    return B.broadcast_to(_q(B, p), B.shape(ins[0]))


def no_vjp(B, gs, ins, outs, p, need):
    """full_like makes no node (its input is not differentiable), so nothing asks this."""
    return [None for _ in ins]


# ----------------------------------------------------------------------------- how they read (adjoint.mathtree)

CLAMP_MIN, CLAMP_MIN_PRIME = elementwise_named("clamp_min", "\\operatorname{clamp\\_min}")
CLAMP_MAX, CLAMP_MAX_PRIME = elementwise_named("clamp_max", "\\operatorname{clamp\\_max}")
STD = Fn("std", "\\operatorname{std}_{#s}\\left(#0\\right)", generic_vjp)
FULL_LIKE = Fn("full_like", "\\operatorname{full\\_like}_{#s}\\left(#0\\right)", no_gradient)

_CLAMP_MIN = Math(lambda a, p, shape, k: TFn(CLAMP_MIN, (a[0],), tuple(shape), number_text(p), p))
_CLAMP_MAX = Math(lambda a, p, shape, k: TFn(CLAMP_MAX, (a[0],), tuple(shape), number_text(p), p))
_STD = Math(lambda a, p, shape, k: TFn(STD, (a[0],), tuple(shape),
                                       ",\\,".join(x for x in (dims_text(p[0] or (), p[2]),
                                                               f"\\mathrm{{correction}}={p[1]}") if x)))
_FULL_LIKE = Math(lambda a, p, shape, k: TFn(FULL_LIKE, (a[0],), tuple(shape), number_text(p), p))

_SELF = (Save("self", "in", 0),)

OPS = (
    Op("clamp_min", "ClampMinBackward0", clamp_min_forward, clamp_min_vjp, same_shape, _SELF,
       "g where a >= min, else 0", negzero="structural", grows=False, kink=_bound_kink("clamp_min"),
       kink_doc="g at a = min (passes); 0 at nan", math=_CLAMP_MIN, elementwise=True,
       checks=(Check(((4,),), Fraction(-1, 2)), Check(((2, 3),), Fraction(1, 3)))),
    Op("clamp_max", "ClampMaxBackward0", clamp_max_forward, clamp_max_vjp, same_shape, _SELF,
       "g where a <= max, else 0", negzero="structural", grows=False, kink=_bound_kink("clamp_max"),
       kink_doc="g at a = max (passes); 0 at nan", math=_CLAMP_MAX, elementwise=True,
       checks=(Check(((4,),), Fraction(1, 2)), Check(((2, 3),), Fraction(-1, 3)))),
    Op("sign", "SignBackward0", sign_forward, sign_vjp, same_shape, (), "0 (zeros_like(grad))",
       grows=False, kink_doc="0 everywhere (sign(0) = sign(-0.0) = sign(nan) = 0)", math=Math(applied(SIGN)),
       elementwise=True, checks=(Check(((2, 3),)),)),
    Op("std", "StdBackward0", std_forward, std_vjp, dims_shape, (Save("self", "in", 0), Save("result", "out", 0)),
       "g / (2 * out) (0 where out = 0) * 2 / (N - correction) * (a - mean(a, dims))",
       nonfinite="a standard deviation over N <= correction elements", kink=std_kink,
       kink_doc="0 where the standard deviation is 0", math=_STD,
       checks=(Check(((2, 3),), ((1,), 1, False)), Check(((2, 3),), (None, 0, False)), Check(((2, 2),), ((0,), 1, True))), integers="refused"),
    Op("full_like", "(none)", full_like_forward, no_vjp, same_shape, (),
       "not differentiable: a new tensor of the input's shape and dtype, with no grad_fn", grows=False,
       differentiable=(False,), fills=True, kink_doc="-- (no node)", math=_FULL_LIKE),
)
