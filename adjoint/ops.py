"""Primitive ops: one PyTorch autograd node each, with its exact forward and VJP.

Every primitive is a :class:`Rule`: the torch node name it creates, a named forward
function and a named vector-Jacobian-product function. ``ins`` of an op are exactly the
node's edge slots, in torch's order (a Python-number operand that torch wraps as a tensor
is an input too; its edge is None). Scalars that torch keeps out of the graph (an
exponent, ``other`` of rsub) are ``params``.

VJP functions get ``g`` (the gradient of the single output), the input values, the output
value, the params and ``need`` (which slots torch computes: a slot whose edge is invalid or
not needed is left None, as autograd-generated nodes do). They follow PyTorch's formulas
from ``tools/autograd/derivatives.yaml`` including the conventions at kinks:
relu'(0) = 0, abs'(0) = 0, sqrt'(0) = inf, the zero vector's norm has gradient 0,
pow(x, 0) has gradient 0 everywhere, d/db a**b is 0 where a == 0 and b >= 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import numpy as np
import sympy

from . import exact as E
from .exact import Exact


@dataclass(frozen=True)
class Rule:
    node: str                       # PyTorch grad_fn name
    forward: Callable               # (ins: list[Exact], params) -> Exact
    vjp: Callable                   # (g, ins, out, params, need) -> list[Exact | None]
    kink: Callable | None = None    # (ins, params) -> str | None: a note when a convention applies


def _scalar(x) -> Exact:
    return Exact.scalar(x)


def _if(need: list[bool], i: int, thunk):
    return thunk() if need[i] else None


# ----------------------------------------------------------------------------- arithmetic

def add_forward(ins, p):
    return E.add(ins[0], ins[1])


def add_vjp(g, ins, out, p, need):
    return [_if(need, 0, lambda: E.sum_to(g, ins[0].shape)), _if(need, 1, lambda: E.sum_to(g, ins[1].shape))]


def sub_forward(ins, p):
    return E.sub(ins[0], ins[1])


def sub_vjp(g, ins, out, p, need):
    return [_if(need, 0, lambda: E.sum_to(g, ins[0].shape)),
            _if(need, 1, lambda: E.sum_to(E.neg(g), ins[1].shape))]


def rsub_forward(ins, p):
    return E.sub(_scalar(p), ins[0])


def rsub_vjp(g, ins, out, p, need):
    return [E.neg(g)]


def mul_forward(ins, p):
    return E.mul(ins[0], ins[1])


def mul_vjp(g, ins, out, p, need):
    return [_if(need, 0, lambda: E.sum_to(E.mul(g, ins[1]), ins[0].shape)),
            _if(need, 1, lambda: E.sum_to(E.mul(g, ins[0]), ins[1].shape))]


def div_forward(ins, p):
    return E.div(ins[0], ins[1])


def div_vjp(g, ins, out, p, need):
    a, b = ins
    return [_if(need, 0, lambda: E.sum_to(E.div(g, b), a.shape)),
            _if(need, 1, lambda: E.sum_to(E.div(E.neg(E.mul(g, a)), E.mul(b, b)), b.shape))]


def reciprocal_forward(ins, p):
    return E.div(_scalar(1), ins[0])


def reciprocal_vjp(g, ins, out, p, need):
    return [E.neg(E.mul(g, E.mul(out, out)))]


def neg_forward(ins, p):
    return E.neg(ins[0])


def neg_vjp(g, ins, out, p, need):
    return [E.neg(g)]


def pow_scalar_forward(ins, p):
    return E.binary(E.s_pow, ins[0], _scalar(p))


def pow_scalar_vjp(g, ins, out, p, need):
    if p == 0:
        return [Exact.zeros(ins[0].shape)]
    local = E.mul(_scalar(p), E.binary(E.s_pow, ins[0], _scalar(p - 1)))
    if p == Fraction(1, 2):  # PyTorch runs x ** 0.5 as sqrt: the derivative at -0.0 is -inf
        local = E.negate_where(local, ins[0].negzero)
    return [E.mul(g, local)]


def pow_scalar_kink(ins, p):
    if p < 1 and p != 0 and any(E.s_sign(e) == 0 for e in ins[0].flat()):
        return f"d/dx x**{p} at x = 0 is inf in PyTorch (0**{p - 1})"
    return None


def _pow_exponent_grad(g, base, exponent, out):
    """PyTorch's pow_backward_exponent: 0 where base == 0 and exponent >= 0, else out * log(base)."""
    cond_a, cond_b = np.broadcast_arrays(base.a, exponent.a)
    zero_mask = Exact.of([E.fmpq(1) if (E.s_sign(a) == 0 and E.s_sign(b) in (0, 1)) else E.fmpq(0)
                          for a, b in zip(cond_a.flat, cond_b.flat)], cond_a.shape)
    logs = E.mul(out, base.map(E.s_log))
    return E.mul(g, E.where(zero_mask, Exact.zeros(zero_mask.shape), logs))


def pow_tensor_forward(ins, p):
    return E.binary(E.s_pow, ins[0], ins[1])


def pow_tensor_vjp(g, ins, out, p, need):
    a, b = ins

    def grad_a():
        local = E.mul(b, E.binary(E.s_pow, a, E.sub(b, _scalar(1))))
        zero_exp = E.mask(b, lambda s: s == 0)
        local = E.where(zero_exp, Exact.zeros(zero_exp.shape), local)
        return E.sum_to(E.mul(g, local), a.shape)

    return [_if(need, 0, grad_a), _if(need, 1, lambda: E.sum_to(_pow_exponent_grad(g, a, b, out), b.shape))]


def rpow_forward(ins, p):
    return E.binary(E.s_pow, _scalar(p), ins[0])


def rpow_vjp(g, ins, out, p, need):
    return [_pow_exponent_grad(g, _scalar(p), ins[0], out)]


# ----------------------------------------------------------------------------- linear algebra

def mm_forward(ins, p):
    return E.matmul2d(ins[0], ins[1])


def mm_vjp(g, ins, out, p, need):
    a, b = ins
    return [_if(need, 0, lambda: E.matmul2d(g, b.transpose())), _if(need, 1, lambda: E.matmul2d(a.transpose(), g))]


def mv_forward(ins, p):
    m, v = ins
    return E.matmul2d(m, v.reshape((v.size, 1))).reshape((m.shape[0],))


def mv_vjp(g, ins, out, p, need):
    m, v = ins
    return [_if(need, 0, lambda: E.outer(g, v)),
            _if(need, 1, lambda: E.matmul2d(m.transpose(), g.reshape((g.size, 1))).reshape(v.shape))]


def dot_forward(ins, p):
    a, b = ins
    return E.matmul2d(a.reshape((1, a.size)), b.reshape((b.size, 1))).reshape(())


def dot_vjp(g, ins, out, p, need):
    a, b = ins
    return [_if(need, 0, lambda: E.mul(g, b)), _if(need, 1, lambda: E.mul(g, a))]


def addmm_forward(ins, p):
    bias, m1, m2 = ins
    return E.add(bias, E.matmul2d(m1, m2))


def addmm_vjp(g, ins, out, p, need):
    bias, m1, m2 = ins
    return [_if(need, 0, lambda: E.sum_to(g, bias.shape)),
            _if(need, 1, lambda: E.matmul2d(g, m2.transpose())),
            _if(need, 2, lambda: E.matmul2d(m1.transpose(), g))]


def t_forward(ins, p):
    return ins[0].transpose()


def t_vjp(g, ins, out, p, need):
    return [g.transpose()]


def reshape_forward(ins, p):
    """view / _unsafe_view / unsqueeze / squeeze: p is the output shape."""
    return ins[0].reshape(p)


def reshape_vjp(g, ins, out, p, need):
    return [g.reshape(ins[0].shape)]


# ----------------------------------------------------------------------------- elementwise

def _sym_map(fn):
    def apply(e):
        return fn(E.s_sym(e))
    return apply


def relu_forward(ins, p):
    def one(e):
        s = E.s_sign(e)
        if s is None:
            return sympy.Max(0, e)
        if s == "nan":
            return e
        return e if s == 1 else E.fmpq(0)
    return ins[0].map(one)


def relu_vjp(g, ins, out, p, need):
    # threshold_backward(grad, result, 0): grad where result > 0, else 0 (so relu'(0) = 0)
    # a select, not a product: where x <= 0 the result is 0 even if g is inf or nan
    x = ins[0]
    if x.is_symbolic():
        return [E.mul(g, x.map(lambda e: sympy.Heaviside(E.s_sym(e), 0)))]
    keep = E.mask(x, lambda s: s == 1)
    return [E.where(keep, g.broadcast_to(x.shape), Exact.zeros(x.shape))]


def relu_kink(ins, p):
    if any(E.s_sign(e) == 0 for e in ins[0].flat()):
        return "relu'(0) = 0 in PyTorch (threshold_backward keeps grad only where the output is > 0)"
    return None


def tanh_forward(ins, p):
    return ins[0].map(_sym_map(sympy.tanh))


def tanh_vjp(g, ins, out, p, need):
    return [E.mul(g, E.sub(_scalar(1), E.mul(out, out)))]


def _sigmoid(e):
    return 1 / (1 + sympy.exp(-e))


def sigmoid_forward(ins, p):
    return ins[0].map(_sym_map(_sigmoid))


def sigmoid_vjp(g, ins, out, p, need):
    return [E.mul(g, E.mul(E.sub(_scalar(1), out), out))]


def exp_forward(ins, p):
    return ins[0].map(_sym_map(sympy.exp))


def exp_vjp(g, ins, out, p, need):
    return [E.mul(g, out)]


def log_forward(ins, p):
    return ins[0].map(E.s_log)


def log_vjp(g, ins, out, p, need):
    return [E.div(g, ins[0])]


def sin_forward(ins, p):
    return ins[0].map(_sym_map(sympy.sin))


def sin_vjp(g, ins, out, p, need):
    return [E.mul(g, ins[0].map(_sym_map(sympy.cos)))]


def cos_forward(ins, p):
    return ins[0].map(_sym_map(sympy.cos))


def cos_vjp(g, ins, out, p, need):
    return [E.mul(g, E.neg(ins[0].map(_sym_map(sympy.sin))))]


def sqrt_forward(ins, p):
    return ins[0].map(E.s_sqrt)


def sqrt_vjp(g, ins, out, p, need):
    # g / (2 * out): at out = -0.0 (see adjoint.signed_zero) the infinity changes sign
    return [E.negate_where(E.div(g, E.mul(_scalar(2), out)), out.negzero)]


def sqrt_kink(ins, p):
    if any(E.s_sign(e) == 0 for e in ins[0].flat()):
        return "sqrt'(0) = inf in PyTorch (grad / (2 * sqrt(0))); a zero incoming gradient gives nan"
    return None


def abs_forward(ins, p):
    def one(e):
        s = E.s_sign(e)
        if s is None:
            return sympy.Abs(e)
        return E.neg(Exact.scalar(e)).item() if s == -1 else e
    return ins[0].map(one)


def abs_vjp(g, ins, out, p, need):
    x = ins[0]
    if x.is_symbolic():
        return [E.mul(g, x.map(lambda e: sympy.sign(E.s_sym(e))))]
    sgn = Exact.of([E.fmpq({1: 1, -1: -1}.get(E.s_sign(e), 0)) for e in x.flat()], x.shape)
    return [E.mul(g, sgn)]


def abs_kink(ins, p):
    if any(E.s_sign(e) == 0 for e in ins[0].flat()):
        return "abs'(0) = 0 in PyTorch (sgn(0) = 0)"
    return None


# ----------------------------------------------------------------------------- reductions

def sum_forward(ins, p):
    return E.total(ins[0])


def sum_vjp(g, ins, out, p, need):
    return [g.broadcast_to(ins[0].shape)]


def mean_forward(ins, p):
    return E.div(E.total(ins[0]), _scalar(ins[0].size))


def mean_vjp(g, ins, out, p, need):
    return [E.div(g, _scalar(ins[0].size)).broadcast_to(ins[0].shape)]


def norm_forward(ins, p):
    x = ins[0]
    return E.total(E.mul(x, x)).map(E.s_sqrt)


def norm_vjp(g, ins, out, p, need):
    # linalg_vector_norm_backward, ord 2: self * (grad / norm).masked_fill_(norm == 0, 0)
    if E.s_sign(out.item()) == 0:
        return [Exact.zeros(ins[0].shape)]
    return [E.mul(ins[0], E.div(g, out))]


def norm_kink(ins, p):
    if all(E.s_sign(e) == 0 for e in ins[0].flat()):
        return "the 2-norm at the zero vector has gradient 0 in PyTorch (masked_fill where norm == 0)"
    return None


RULES: dict[str, Rule] = {
    "add": Rule("AddBackward0", add_forward, add_vjp),
    "sub": Rule("SubBackward0", sub_forward, sub_vjp),
    "rsub": Rule("RsubBackward1", rsub_forward, rsub_vjp),
    "mul": Rule("MulBackward0", mul_forward, mul_vjp),
    "div": Rule("DivBackward0", div_forward, div_vjp),
    "reciprocal": Rule("ReciprocalBackward0", reciprocal_forward, reciprocal_vjp),
    "neg": Rule("NegBackward0", neg_forward, neg_vjp),
    "pow_scalar": Rule("PowBackward0", pow_scalar_forward, pow_scalar_vjp, pow_scalar_kink),
    "pow_tensor": Rule("PowBackward1", pow_tensor_forward, pow_tensor_vjp),
    "rpow": Rule("PowBackward2", rpow_forward, rpow_vjp),
    "mm": Rule("MmBackward0", mm_forward, mm_vjp),
    "mv": Rule("MvBackward0", mv_forward, mv_vjp),
    "dot": Rule("DotBackward0", dot_forward, dot_vjp),
    "addmm": Rule("AddmmBackward0", addmm_forward, addmm_vjp),
    "t": Rule("TBackward0", t_forward, t_vjp),
    "view": Rule("ViewBackward0", reshape_forward, reshape_vjp),
    "unsafe_view": Rule("UnsafeViewBackward0", reshape_forward, reshape_vjp),
    "unsqueeze": Rule("UnsqueezeBackward0", reshape_forward, reshape_vjp),
    "squeeze": Rule("SqueezeBackward4", reshape_forward, reshape_vjp),
    "relu": Rule("ReluBackward0", relu_forward, relu_vjp, relu_kink),
    "tanh": Rule("TanhBackward0", tanh_forward, tanh_vjp),
    "sigmoid": Rule("SigmoidBackward0", sigmoid_forward, sigmoid_vjp),
    "exp": Rule("ExpBackward0", exp_forward, exp_vjp),
    "log": Rule("LogBackward0", log_forward, log_vjp),
    "sin": Rule("SinBackward0", sin_forward, sin_vjp),
    "cos": Rule("CosBackward0", cos_forward, cos_vjp),
    "sqrt": Rule("SqrtBackward0", sqrt_forward, sqrt_vjp, sqrt_kink),
    "abs": Rule("AbsBackward0", abs_forward, abs_vjp, abs_kink),
    "sum": Rule("SumBackward0", sum_forward, sum_vjp),
    "mean": Rule("MeanBackward0", mean_forward, mean_vjp),
    "norm": Rule("LinalgVectorNormBackward0", norm_forward, norm_vjp, norm_kink),
}

#: Expression functions -> primitive (the ones that are a single op).
UNARY_FUNCTIONS = {"relu": "relu", "tanh": "tanh", "sigmoid": "sigmoid", "exp": "exp", "log": "log",
                   "sin": "sin", "cos": "cos", "sqrt": "sqrt", "abs": "abs", "sum": "sum", "mean": "mean",
                   "norm": "norm", "t": "t"}

#: Built-in elementwise module types -> primitive (Identity creates no node at all).
MODULE_PRIMS = {"ReLU": "relu", "Tanh": "tanh", "Sigmoid": "sigmoid"}
