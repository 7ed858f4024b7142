"""More elementwise functions of one tensor: rsqrt, log1p, expm1, atan, erf, sinh, cosh, tan, log2, log10.

Each is one node of PyTorch 2.13 saving what derivatives.yaml's formula reads (``self`` or
``result``), with the backward written in derivatives.yaml's order of operations:

* rsqrt: ``-0.5 * grad * result.pow(3)`` (saves result; ``pow(3)`` is ATen's ``x * x * x``);
  rsqrt(0) = inf, rsqrt(-0.0) = -inf, nan below 0;
* log1p: ``grad / (self + 1)`` (log1p_backward); -inf at -1, nan below;
* expm1: ``grad * (result + 1)`` (saves result);
* atan: ``grad / (self * self + 1)``;
* atan2 (Atan2Backward0, saves other then self; broadcasting): atan2_backward's
  ``recip = (self * self + other * other).reciprocal()``, ``recip.masked_fill_(denom == 0, 0)``,
  then ``grad * other * recip`` and ``grad * -self * recip`` (0 for both at the origin);
* erf: ``2.0 / sqrt(M_PI) * exp(-(self.pow(2))) * grad``;
* sinh: ``grad * self.cosh()``; cosh: ``grad * self.sinh()``;
* tan: ``grad * (1 + result.pow(2))`` (saves result);
* log2, log10: ``grad / (self * 0.6931471805599453)``, ``grad / (self * 2.3025850929940456)``:
  the exact answer divides by log(2) and log(10) themselves (as gelu's uses pi itself), the float64
  one by PyTorch's literals, and verify's bound covers the difference (``B.ln``).
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from adjoint.values.mathtree.sympy_names import SymPyName
from adjoint.values.mathtree import LOG, Fn, TBin, TConst, TFn, applied, elementwise, generic_vjp, no_gradient
from adjoint.values.numbers.symbolic import sympy   # the loader: SymPy itself is imported on first call
from adjoint.engine.ops.record import Check, Math, Op, Save
from adjoint.engine.ops.arith import binary_shape, same_shape


def _q(B, v):
    return B.scalar(Fraction(v))


def rsqrt_forward(B, ins, p):
    x = ins[0]
    return B.negate_at_negzero(B.rsqrt(x), x)   # 1 / sqrt(-0.0) = 1 / -0.0 = -inf


def rsqrt_vjp(B, gs, ins, outs, p, need):
    out = outs[0]
    return [B.mul(B.mul(_q(B, Fraction(-1, 2)), gs[0]), B.mul(B.mul(out, out), out))]


def rsqrt_kink(B, ins, p):
    if B.any_zero(ins[0]):
        return "rsqrt(0) = inf in PyTorch (-inf at -0.0), so its backward -0.5 * grad * result^3 is infinite (nan for a zero grad)"
    return None


def log1p_vjp(B, gs, ins, outs, p, need):
    return [B.div(gs[0], B.add(ins[0], _q(B, 1)))]


def expm1_vjp(B, gs, ins, outs, p, need):
    return [B.mul(gs[0], B.add(outs[0], _q(B, 1)))]


def atan_vjp(B, gs, ins, outs, p, need):
    x = ins[0]
    return [B.div(gs[0], B.add(B.mul(x, x), _q(B, 1)))]


def atan2_forward(B, ins, p):
    return B.atan2(ins[0], ins[1])


def atan2_vjp(B, gs, ins, outs, p, need):
    """atan2_backward (FunctionsManual.cpp): ``denom = self * self + other * other``, its
    reciprocal with 0 where ``denom == 0``; ``grad * other * recip``, ``grad * -self * recip``,
    each summed back to its operand's shape (the engine's sum_to over broadcast dims)."""
    y, x = ins
    g = gs[0]
    denom = B.add(B.mul(y, y), B.mul(x, x))
    zero = B.mask(denom, lambda s: s == 0)
    recip = B.where(zero, B.zeros(B.shape(denom)), B.div(_q(B, 1), B.where(zero, _q(B, 1), denom)))
    return [B.sum_to(B.mul(B.mul(g, x), recip), B.shape(y)) if need[0] else None,
            B.sum_to(B.mul(B.mul(g, B.neg(y)), recip), B.shape(x)) if need[1] else None]


def atan2_kink(B, ins, p):
    if B.any_zero(B.add(B.mul(ins[0], ins[0]), B.mul(ins[1], ins[1]))):
        return "atan2 at (0, 0): PyTorch's atan2_backward masks the reciprocal of self^2 + other^2 to 0 there, so both gradients are 0"
    return None


def erf_vjp(B, gs, ins, outs, p, need):
    x = ins[0]
    c = B.div(_q(B, 2), B.sqrt(B.pi()))              # 2.0 / sqrt(M_PI)
    return [B.mul(B.mul(c, B.exp(B.neg(B.mul(x, x)))), gs[0])]


def sinh_vjp(B, gs, ins, outs, p, need):
    return [B.mul(gs[0], B.cosh(ins[0]))]


def cosh_vjp(B, gs, ins, outs, p, need):
    return [B.mul(gs[0], B.sinh(ins[0]))]


def tan_vjp(B, gs, ins, outs, p, need):
    out = outs[0]
    return [B.mul(gs[0], B.add(_q(B, 1), B.mul(out, out)))]


def _log_base_vjp(base: int):
    def vjp(B, gs, ins, outs, p, need):
        return [B.div(gs[0], B.mul(ins[0], B.ln(base)))]
    return vjp


def _forward(name: str):
    def forward(B, ins, p):
        return getattr(B, name)(ins[0])
    return forward


# ----------------------------------------------------------------------------- how they read (adjoint.mathtree)

def _sympy(make):
    return lambda: make


def _rsqrt_sympy(x):
    return 1 / sympy().sqrt(x)


def _log1p_sympy(x):
    return sympy().log(1 + x)


def _expm1_sympy(x):
    return sympy().exp(x) - 1


def _log_base_sympy(base: int):
    def f(x):
        sp = sympy()
        return sp.log(x) / sp.log(base)
    return f


def _c(v):
    return TConst(Fraction(v))


def _rsqrt_local(lam, n):
    cube = TBin("pow", n, _c(3), n.shape)
    return (TBin("had", TBin("mul", _c(Fraction(-1, 2)), lam, lam.shape), cube, n.shape),)


RSQRT = Fn("rsqrt", "\\frac{1}{\\sqrt{#0}}", _rsqrt_local, SymPyName("rsqrt", _sympy(_rsqrt_sympy)))
LOG1P = Fn("log1p", "\\log\\left(1 + #0\\right)", lambda lam, n: (TBin("div", lam, TBin("add", n.a, _c(1), n.shape), n.shape),),
           SymPyName("log1p", _sympy(_log1p_sympy)))
EXPM1 = elementwise("expm1", "\\left(e^{#0} - 1\\right)", lambda n: TBin("add", n, _c(1), n.shape),
                    SymPyName("expm1", _sympy(_expm1_sympy)), delimited=True)
ATAN = Fn("atan", "\\arctan\\left(#0\\right)",
          lambda lam, n: (TBin("div", lam, TBin("add", TBin("pow", n.a, _c(2), n.shape), _c(1), n.shape), n.shape),),
          SymPyName("atan"))
ATAN2 = Fn("atan2", "\\operatorname{atan2}\\left(#0,\\ #1\\right)", generic_vjp, SymPyName("atan2"))
SINH = elementwise("sinh", "\\sinh\\left(#0\\right)", lambda n: TFn(COSH, (n.a,), n.shape), SymPyName("sinh"))
COSH = elementwise("cosh", "\\cosh\\left(#0\\right)", lambda n: TFn(SINH, (n.a,), n.shape), SymPyName("cosh"))
TAN = elementwise("tan", "\\tan\\left(#0\\right)", lambda n: TBin("add", _c(1), TBin("pow", n, _c(2), n.shape), n.shape),
                  SymPyName("tan"))


def _erf_prime_sympy(x):
    sp = sympy()
    return 2 / sp.sqrt(sp.pi) * sp.exp(-x ** 2)


#: erf'(x) = 2 / sqrt(pi) * exp(-x^2), written out (derivatives.yaml's ``2.0 / sqrt(M_PI) * exp(-(self.pow(2)))``)
ERF_PRIME = Fn("erf'", "\\frac{2}{\\sqrt{\\pi}}\\, e^{-\\left(#0\\right)^{2}}", no_gradient,
               SymPyName("erf_prime", _sympy(_erf_prime_sympy)))


ERF = elementwise("erf", "\\operatorname{erf}\\left(#0\\right)", lambda n: TFn(ERF_PRIME, (n.a,), n.shape), SymPyName("erf"))


def _log_base(base: int) -> Fn:
    def vjp(lam, n):
        ln = TFn(LOG, (_c(base),), ())
        return (TBin("div", lam, TBin("mul", n.a, ln, n.shape), n.shape),)
    return Fn(f"log{base}", f"\\log_{{{base}}}\\left(#0\\right)", vjp, SymPyName(f"log{base}", _sympy(_log_base_sympy(base))))


LOG2 = _log_base(2)
LOG10 = _log_base(10)


def _unary(name, node, vjp, save, formula, fn, forward=None, **kw):
    return Op(name, node, forward or _forward(name), vjp, same_shape, save, formula, math=Math(applied(fn)), **kw)


_SELF = (Save("self", "in", 0),)
_RESULT = (Save("result", "out", 0),)

OPS = (
    _unary("rsqrt", "RsqrtBackward0", rsqrt_vjp, _RESULT, "-0.5 * g * out^3", RSQRT, forward=rsqrt_forward,
           nonfinite="rsqrt of zero or of a negative number", kink=rsqrt_kink,
           kink_doc="rsqrt(0) = inf (-inf at -0.0)", checks=(Check(((2, 2),), positive=True),)),
    _unary("log1p", "Log1PBackward0", log1p_vjp, _SELF, "g / (a + 1)", LOG1P, negzero="keep",
           nonfinite="log1p of -1 or of a number below -1", checks=(Check(((2, 2),), positive=True),)),
    _unary("expm1", "Expm1Backward0", expm1_vjp, _RESULT, "g * (out + 1)", EXPM1, negzero="keep",
           checks=(Check(((2, 2),)),)),
    _unary("atan", "AtanBackward0", atan_vjp, _SELF, "g / (a * a + 1)", ATAN, negzero="keep", grows=False,
           checks=(Check(((2, 2),)),)),
    Op("atan2", "Atan2Backward0", atan2_forward, atan2_vjp, binary_shape,
       (Save("other", "in", 1), Save("self", "in", 0)),
       "g * b / (a^2 + b^2), -g * a / (a^2 + b^2) (summed back over broadcast dims)", negzero="input_sign",
       grows=False, integers="refused", kink=atan2_kink, kink_doc="both 0 at a = b = 0 (the reciprocal masked to 0)",
       math=Math(applied(ATAN2)), checks=(Check(((2, 3), (3,))), Check(((2, 2), (2, 2))))),
    _unary("erf", "ErfBackward0", erf_vjp, _SELF, "2 / sqrt(pi) * exp(-a^2) * g", ERF, negzero="keep", grows=False,
           checks=(Check(((2, 2),)),)),
    _unary("sinh", "SinhBackward0", sinh_vjp, _SELF, "g * cosh(a)", SINH, negzero="keep", checks=(Check(((2, 2),)),)),
    _unary("cosh", "CoshBackward0", cosh_vjp, _SELF, "g * sinh(a)", COSH, checks=(Check(((2, 2),)),)),
    _unary("tan", "TanBackward0", tan_vjp, _RESULT, "g * (1 + out^2)", TAN, negzero="keep",
           checks=(Check(((2, 2),), positive="unit"),)),
    _unary("log2", "Log2Backward0", _log_base_vjp(2), _SELF, "g / (a * log(2))", LOG2,
           nonfinite="log2 of zero or of a negative number", checks=(Check(((2, 2),), positive=True),)),
    _unary("log10", "Log10Backward0", _log_base_vjp(10), _SELF, "g / (a * log(10))", LOG10,
           nonfinite="log10 of zero or of a negative number", checks=(Check(((2, 2),), positive=True),)),
)

# every op of this family runs as one TensorIterator (an elementwise kernel)
OPS = tuple(replace(op, elementwise=True) for op in OPS)
