"""Elementwise functions: relu, tanh, sigmoid, exp, log, sin, cos, sqrt, abs.

Conventions at kinks, as PyTorch computes them: relu'(0) = 0 (``threshold_backward`` is
ATen's ``out <= 0 ? 0 : grad``, a select, not a product: where the output is 0 the result is
0 even if the gradient is inf or nan, and where it is nan the gradient passes), abs'(0) = 0 (``sgn(0)``),
sqrt'(0) = inf (``grad / (2 * result)``; -inf at -0.0).
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from adjoint.values.mathtree.sympy_names import SymPyName
from adjoint.values.mathtree import LOG, Fn, Indicator, Relu, Sigmoid, TBin, TConst, TFn, TNeg, applied, elementwise, no_gradient
from adjoint.engine.ops.record import Check, Math, Op, Save
from adjoint.engine.ops.arith import same_shape


def relu_forward(B, ins, p):
    return B.relu(ins[0])


def relu_vjp(B, gs, ins, outs, p, need):
    # threshold_backward(grad, result, 0): the saved result decides (what saved_tensors_hooks
    # unpack, even a tensor written in place after the forward; the hooks skip the version check)
    return [B.select_positive(outs[0], gs[0])]


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
    # g / (2 * out): at out = -0.0 (see adjoint.values.signed_zero) the infinity changes sign
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


# ----------------------------------------------------------------------------- how they read (adjoint.mathtree)

def _one_minus(t):
    return TBin("sub", TConst(Fraction(1)), t, t.shape)


#: relu'(x) = 1[x > 0] and abs'(x) = sign(x): functions the derivatives are written with (derivative 0 a.e.)
STEP = Fn("step", "\\mathbf{1}\\left[#0 > 0\\right]", no_gradient, Indicator)
SIGN = Fn("sign", "\\operatorname{sign}\\left(#0\\right)", no_gradient, SymPyName("sign"))

RELU = elementwise("relu", "\\operatorname{relu}\\left(#0\\right)", lambda n: TFn(STEP, (n.a,), n.a.shape), Relu)
TANH = elementwise("tanh", "\\tanh\\left(#0\\right)",
                   lambda n: _one_minus(TBin("pow", n, TConst(Fraction(2)), n.shape)), SymPyName("tanh"))
SIGMOID = elementwise("sigmoid", "\\sigma\\left(#0\\right)", lambda n: TBin("mul", n, _one_minus(n), n.shape),
                      Sigmoid)
EXP = elementwise("exp", "\\exp\\left(#0\\right)", lambda n: n, SymPyName("exp"))
SIN = elementwise("sin", "\\sin\\left(#0\\right)", lambda n: TFn(COS, (n.a,), n.shape), SymPyName("sin"))
COS = elementwise("cos", "\\cos\\left(#0\\right)", lambda n: TNeg(TFn(SIN, (n.a,), n.shape), n.shape), SymPyName("cos"))
SQRT = Fn("sqrt", "\\sqrt{#0}", lambda lam, n: (TBin("div", lam, TBin("mul", TConst(Fraction(2)), n, n.shape),
                                                                     n.shape),), SymPyName("sqrt"))
ABS = elementwise("abs", "\\left|#0\\right|", lambda n: TFn(SIGN, (n.a,), n.a.shape), SymPyName("Abs"), delimited=True)


def _unary(name, node, forward, vjp, save, formula, fn, **kw):
    return Op(name, node, forward, vjp, same_shape, save, formula, math=Math(applied(fn)), **kw)


def relu_error(dtypes, p):
    return "Boolean inputs not supported for relu" if dtypes[0] == "bool" else None


def abs_error(dtypes, p):
    return ("NotImplementedError", "\"abs_cpu\" not implemented for 'Bool'") if dtypes[0] == "bool" else None


_SELF = (Save("self", "in", 0),)
_RESULT = (Save("result", "out", 0),)

OPS = (
    _unary("relu", "ReluBackward0", relu_forward, relu_vjp, _RESULT, "0 where out <= 0, else g (nan out: g)", RELU, negzero="keep",
           grows=False, forward_error=relu_error, kink=relu_kink, kink_doc="relu'(0) = 0", checks=(Check(((2, 2),)),)),
    _unary("tanh", "TanhBackward0", tanh_forward, tanh_vjp, _RESULT, "g * (1 - out^2)", TANH, negzero="keep", grows=False, checks=(Check(((2, 2),)),)),
    _unary("sigmoid", "SigmoidBackward0", sigmoid_forward, sigmoid_vjp, _RESULT, "g * (1 - out) * out", SIGMOID, grows=False, underflows=True, exp_overflow_zero=True, checks=(Check(((2, 2),)),)),
    _unary("exp", "ExpBackward0", exp_forward, exp_vjp, _RESULT, "g * out", EXP, underflows=True, checks=(Check(((2, 2),)),)),
    _unary("log", "LogBackward0", log_forward, log_vjp, _SELF, "g / a", LOG, nonfinite="log of zero or of a negative number", checks=(Check(((2, 2),), positive=True),)),
    _unary("sin", "SinBackward0", sin_forward, sin_vjp, _SELF, "g * cos(a)", SIN, negzero="keep", grows=False, checks=(Check(((2, 2),)),)),
    _unary("cos", "CosBackward0", cos_forward, cos_vjp, _SELF, "-g * sin(a)", COS, grows=False, checks=(Check(((2, 2),)),)),
    _unary("sqrt", "SqrtBackward0", sqrt_forward, sqrt_vjp, _RESULT, "g / (2 * out)", SQRT, negzero="keep",
           nonfinite="sqrt of a negative number", kink=sqrt_kink, kink_doc="sqrt'(0) = inf", checks=(Check(((2, 2),), positive=True),)),
    _unary("abs", "AbsBackward0", abs_forward, abs_vjp, _SELF, "g * sgn(a)", ABS, grows=False, forward_error=abs_error, kink=abs_kink,
           kink_doc="abs'(0) = 0", checks=(Check(((2, 2),)),)),
)


# every op of this family runs as one TensorIterator (an elementwise kernel)
OPS = tuple(replace(op, elementwise=True) for op in OPS)
