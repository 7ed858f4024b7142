"""Elementwise functions: relu, tanh, sigmoid, exp, log, sin, cos, sqrt, abs.

Conventions at kinks, as PyTorch computes them: relu'(0) = 0 (``threshold_backward`` keeps
the gradient only where the output is > 0, and it is a select, not a product: where the
output is 0 the result is 0 even if the gradient is inf or nan), abs'(0) = 0 (``sgn(0)``),
sqrt'(0) = inf (``grad / (2 * result)``; -inf at -0.0).
"""

from __future__ import annotations

from . import Check, Op, Save
from .arith import same_shape


def relu_forward(B, ins, p):
    return B.relu(ins[0])


def relu_vjp(B, gs, ins, outs, p, need):
    return [B.select_positive(ins[0], gs[0])]


def relu_kink(B, ins, p):
    if B.any_zero(ins[0]):
        return "relu'(0) = 0 in PyTorch (threshold_backward keeps grad only where the output is > 0)"
    return None


def tanh_forward(B, ins, p):
    return B.tanh(ins[0])


def tanh_vjp(B, gs, ins, outs, p, need):
    out = outs[0]
    return [B.mul(gs[0], B.sub(B.scalar(1), B.mul(out, out)))]


def sigmoid_forward(B, ins, p):
    return B.sigmoid(ins[0])


def sigmoid_vjp(B, gs, ins, outs, p, need):
    out = outs[0]
    return [B.mul(gs[0], B.mul(B.sub(B.scalar(1), out), out))]


def exp_forward(B, ins, p):
    return B.exp(ins[0])


def exp_vjp(B, gs, ins, outs, p, need):
    return [B.mul(gs[0], outs[0])]


def log_forward(B, ins, p):
    return B.log(ins[0])


def log_vjp(B, gs, ins, outs, p, need):
    return [B.div(gs[0], ins[0])]


def sin_forward(B, ins, p):
    return B.sin(ins[0])


def sin_vjp(B, gs, ins, outs, p, need):
    return [B.mul(gs[0], B.cos(ins[0]))]


def cos_forward(B, ins, p):
    return B.cos(ins[0])


def cos_vjp(B, gs, ins, outs, p, need):
    return [B.mul(gs[0], B.neg(B.sin(ins[0])))]


def sqrt_forward(B, ins, p):
    return B.sqrt(ins[0])


def sqrt_vjp(B, gs, ins, outs, p, need):
    # g / (2 * out): at out = -0.0 (see adjoint.signed_zero) the infinity changes sign
    out = outs[0]
    return [B.negate_at_negzero(B.div(gs[0], B.mul(B.scalar(2), out)), out)]


def sqrt_kink(B, ins, p):
    if B.any_zero(ins[0]):
        return "sqrt'(0) = inf in PyTorch (grad / (2 * sqrt(0))); a zero incoming gradient gives nan"
    return None


def abs_forward(B, ins, p):
    return B.abs(ins[0])


def abs_vjp(B, gs, ins, outs, p, need):
    return [B.mul(gs[0], B.sgn(ins[0]))]


def abs_kink(B, ins, p):
    if B.any_zero(ins[0]):
        return "abs'(0) = 0 in PyTorch (sgn(0) = 0)"
    return None


def _unary(name, node, forward, vjp, save, formula, **kw):
    return Op(name, node, forward, vjp, same_shape, save, formula, **kw)


_SELF = (Save("self", "in", 0),)
_RESULT = (Save("result", "out", 0),)

OPS = (
    _unary("relu", "ReluBackward0", relu_forward, relu_vjp, _RESULT, "g where out > 0, else 0", negzero="keep",
           grows=False, kink=relu_kink, kink_doc="relu'(0) = 0", checks=(Check(((2, 2),)),)),
    _unary("tanh", "TanhBackward0", tanh_forward, tanh_vjp, _RESULT, "g * (1 - out^2)", negzero="keep", grows=False, checks=(Check(((2, 2),)),)),
    _unary("sigmoid", "SigmoidBackward0", sigmoid_forward, sigmoid_vjp, _RESULT, "g * (1 - out) * out", grows=False, checks=(Check(((2, 2),)),)),
    _unary("exp", "ExpBackward0", exp_forward, exp_vjp, _RESULT, "g * out", checks=(Check(((2, 2),)),)),
    _unary("log", "LogBackward0", log_forward, log_vjp, _SELF, "g / a", nonfinite="log of zero or of a negative number", checks=(Check(((2, 2),), positive=True),)),
    _unary("sin", "SinBackward0", sin_forward, sin_vjp, _SELF, "g * cos(a)", negzero="keep", grows=False, checks=(Check(((2, 2),)),)),
    _unary("cos", "CosBackward0", cos_forward, cos_vjp, _SELF, "-g * sin(a)", grows=False, checks=(Check(((2, 2),)),)),
    _unary("sqrt", "SqrtBackward0", sqrt_forward, sqrt_vjp, _RESULT, "g / (2 * out)", negzero="keep",
           nonfinite="sqrt of a negative number", kink=sqrt_kink, kink_doc="sqrt'(0) = inf", checks=(Check(((2, 2),), positive=True),)),
    _unary("abs", "AbsBackward0", abs_forward, abs_vjp, _SELF, "g * sgn(a)", grows=False, kink=abs_kink,
           kink_doc="abs'(0) = 0", checks=(Check(((2, 2),)),)),
)
