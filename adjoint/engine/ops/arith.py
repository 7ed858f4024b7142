"""Arithmetic: add, sub, rsub, mul, div, reciprocal, neg and the three pows.

Derivatives as ``tools/autograd/derivatives.yaml`` gives them, conventions included:
``pow(x, 0)`` has gradient 0 everywhere; d/db ``a ** b`` is 0 where ``a == 0`` and ``b >= 0``
(``pow_backward_exponent``); ``x ** 0.5`` runs as sqrt, so its derivative at -0.0 is -inf.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from adjoint.values.mathtree import TBin, TConst, TNeg, binary, number
from adjoint.engine.ops.record import Check, Math, Op, Save, if_needed
from adjoint.engine.torch_errors import TorchError


def broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...], loc) -> tuple[int, ...]:
    """The broadcast shape of ``a`` and ``b``; where they do not broadcast, PyTorch's error
    (``at::infer_size``, which walks the dims from the last: the last mismatch is the one named)."""
    n = max(len(a), len(b))
    pa = (1,) * (n - len(a)) + tuple(a)
    pb = (1,) * (n - len(b)) + tuple(b)
    for i in reversed(range(n)):
        x, y = pa[i], pb[i]
        if x != y and x != 1 and y != 1:
            raise TorchError("RuntimeError", f"The size of tensor a ({x}) must match the size of tensor b ({y}) at "
                                             f"non-singleton dimension {i}")
    return tuple(y if x == 1 else x for x, y in zip(pa, pb))   # a size 1 takes the other's (0 too)


def binary_shape(shapes, p, loc):
    return broadcast_shapes(shapes[0], shapes[1], loc)


def same_shape(shapes, p, loc):
    return tuple(shapes[0])


# ----------------------------------------------------------------------------- add, sub, rsub

def add_forward(B, ins, p):
    return B.add(ins[0], ins[1])


def add_vjp(B, gs, ins, outs, p, need):
    g = gs[0]
    return [if_needed(need, 0, lambda: B.sum_to(g, B.shape(ins[0]))), if_needed(need, 1, lambda: B.sum_to(g, B.shape(ins[1])))]


def sub_forward(B, ins, p):
    return B.sub(ins[0], ins[1])


def sub_vjp(B, gs, ins, outs, p, need):
    g = gs[0]
    return [if_needed(need, 0, lambda: B.sum_to(g, B.shape(ins[0]))),
            if_needed(need, 1, lambda: B.sum_to(B.neg(g), B.shape(ins[1])))]


def rsub_forward(B, ins, p):
    return B.sub(B.scalar(p), ins[0])


def rsub_vjp(B, gs, ins, outs, p, need):
    return [B.neg(gs[0])]


# ----------------------------------------------------------------------------- mul, div

def mul_forward(B, ins, p):
    return B.mul(ins[0], ins[1])


def mul_vjp(B, gs, ins, outs, p, need):
    g = gs[0]
    return [if_needed(need, 0, lambda: B.sum_to(B.mul(g, ins[1]), B.shape(ins[0]))),
            if_needed(need, 1, lambda: B.sum_to(B.mul(g, ins[0]), B.shape(ins[1])))]


def div_forward(B, ins, p):
    return B.div(ins[0], ins[1])


def div_vjp(B, gs, ins, outs, p, need):
    """derivatives.yaml: ``grad / other`` and ``-grad * ((self / other) / other)`` (in that order: b * b
    would overflow in float64 where PyTorch's quotients do not)."""
    g = gs[0]
    a, b = ins
    return [if_needed(need, 0, lambda: B.sum_to(B.div(g, b), B.shape(a))),
            if_needed(need, 1, lambda: B.sum_to(B.neg(B.mul(g, B.div(B.div(a, b), b))), B.shape(b)))]


def reciprocal_forward(B, ins, p):
    return B.div(B.scalar(1), ins[0])


def reciprocal_vjp(B, gs, ins, outs, p, need):
    out = outs[0]
    return [B.neg(B.mul(gs[0], B.mul(out, out)))]


def neg_forward(B, ins, p):
    return B.neg(ins[0])


def neg_vjp(B, gs, ins, outs, p, need):
    return [B.neg(gs[0])]


# ----------------------------------------------------------------------------- pow

def pow_scalar_forward(B, ins, p):
    out = B.pow_number(ins[0], B.scalar(p))
    q = Fraction(p)
    if q == Fraction(-1, 2) or (q.denominator == 1 and q.numerator % 2 and q < 0):
        # 0 ** p is inf, with -0.0's sign where PyTorch runs pow as rsqrt (p = -0.5: x ** 0.5's backward under
        # create_graph) or C's pow keeps it (odd negative integers): -inf at -0.0 (torch 2.13)
        out = B.negate_at_negzero(out, ins[0])
    return out


def pow_scalar_vjp(B, gs, ins, outs, p, need):
    x = ins[0]
    if p == 0:
        return [B.zeros(B.shape(x))]
    local = B.mul(B.scalar(p), B.pow_number(x, B.scalar(p - 1)))   # self.pow(exponent - 1): a Scalar power
    if p == Fraction(1, 2):  # PyTorch runs x ** 0.5 as sqrt: the derivative at -0.0 is -inf
        local = B.negate_at_negzero(local, x)
    return [B.mul(gs[0], local)]


def pow_scalar_kink(B, ins, p):
    if p < 1 and p != 0 and B.any_zero(ins[0]):
        return f"d/dx x**{p} at x = 0 is inf in PyTorch (0**{p - 1})"
    return None


def pow_exponent_grad(B, g, base, exponent, out):
    """PyTorch's pow_backward_exponent: 0 where base == 0 and exponent >= 0, else out * log(base)."""
    zero = B.mul(B.mask(base, lambda s: s == 0), B.mask(exponent, lambda s: s in (0, 1)))
    logs = B.mul(out, B.log(base))
    return B.mul(g, B.where(zero, B.zeros(B.shape(zero)), logs))


def pow_tensor_forward(B, ins, p):
    return B.pow(ins[0], ins[1])


def pow_tensor_vjp(B, gs, ins, outs, p, need):
    g = gs[0]
    a, b = ins

    def grad_a():
        # pow_backward_self: where(exponent == 0, 0, grad * (exponent * self.pow(exponent - 1))), the
        # choice after the product: +0.0 (not -0.0, nor nan) where the exponent is 0, whatever grad is
        local = B.mul(g, B.mul(b, B.pow(a, B.sub(b, B.scalar(1)))))
        zero_exp = B.mask(b, lambda s: s == 0)
        return B.sum_to(B.where(zero_exp, B.zeros(B.shape(zero_exp)), local), B.shape(a))

    return [if_needed(need, 0, grad_a),
            if_needed(need, 1, lambda: B.sum_to(pow_exponent_grad(B, g, a, b, outs[0]), B.shape(b)))]


def rpow_forward(B, ins, p):
    return B.pow(B.scalar(p), ins[0])


def rpow_vjp(B, gs, ins, outs, p, need):
    return [pow_exponent_grad(B, gs[0], B.scalar(p), ins[0], outs[0])]


# ----------------------------------------------------------------------------- dtype errors (PyTorch 2.13's own words)

NEG_BOOL = ("Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, use "
            "the `~` or `logical_not()` operator instead.")
SUB_TWO_BOOL = ("Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` "
                "operator instead.")
SUB_BOOL = ("Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, "
            "use the `~` or `logical_not()` operator instead.")


def neg_error(dtypes, p):
    """neg_check (UnaryOps.cpp): no negation of a bool tensor."""
    return NEG_BOOL if dtypes[0] == "bool" else None


def sub_error(dtypes, p):
    """sub_check (BinaryOps.cpp), in sub's meta function: two bool operands, then any bool operand
    (rsub too: it is sub with the operands swapped; a Python number is never bool here)."""
    bools = sum(d == "bool" for d in dtypes)
    if bools == len(dtypes) == 2:
        return SUB_TWO_BOOL
    return SUB_BOOL if bools else None


def pow_tensor_backward_error(dtypes, p, need):
    """pow_backward_self computes ``exponent - 1``, which sub_check refuses for a bool exponent;
    the exponent's own gradient (a bool base) is fine."""
    return SUB_BOOL if need[0] and dtypes[1] == "bool" else None


# ----------------------------------------------------------------------------- how they read (adjoint.mathtree)

_ADD, _SUB, _MUL, _DIV, _POW = (Math(binary(op)) for op in ("add", "sub", "mul", "div", "pow"))
_RSUB = Math(lambda a, p, shape, k: TBin("sub", TConst(number(p)), a[0], shape))          # n - a
_RECIPROCAL = Math(lambda a, p, shape, k: TBin("div", TConst(Fraction(1)), a[0], shape))  # 1 / a
_NEG = Math(lambda a, p, shape, k: TNeg(a[0], shape))
_POW_SCALAR = Math(lambda a, p, shape, k: TBin("pow", a[0], TConst(number(p)), shape))    # a ** n
_RPOW = Math(lambda a, p, shape, k: TBin("pow", TConst(number(p)), a[0], shape))          # n ** a

OPS = (
    Op("add", "AddBackward0", add_forward, add_vjp, binary_shape, (), "g, g (summed back over broadcast dims)",
       negzero="sum", math=_ADD, checks=(Check(((2, 3), (3,))), Check(((2,), (2,))), Check(((), (2,))))),
    Op("sub", "SubBackward0", sub_forward, sub_vjp, binary_shape, (), "g, -g", negzero="difference", math=_SUB,
       forward_error=sub_error, checks=(Check(((2, 3), (3,))), Check(((2,), (2,))), Check(((), (2,))))),
    Op("rsub", "RsubBackward1", rsub_forward, rsub_vjp, same_shape, (), "-g", math=_RSUB, forward_error=sub_error, checks=(Check(((2,),), Fraction(3, 2)),)),
    Op("mul", "MulBackward0", mul_forward, mul_vjp, binary_shape,
       (Save("other", "in", 1, if_need=0), Save("self", "in", 0, if_need=1)), "g*b, g*a", negzero="product", underflows=True, math=_MUL, checks=(Check(((2, 3), (3,))), Check(((2,), (2,))), Check(((), (2,))))),
    Op("div", "DivBackward0", div_forward, div_vjp, binary_shape,
       (Save("other", "in", 1), Save("self", "in", 0, if_need=1)), "g/b, -g*a/b^2", negzero="product", underflows=True,
       nonfinite="division by zero", math=_DIV, checks=(Check(((2, 3), (3,)), positive=True),)),
    Op("reciprocal", "ReciprocalBackward0", reciprocal_forward, reciprocal_vjp, same_shape,
       (Save("result", "out", 0),), "-g*out^2", negzero="input_sign", underflows=True, nonfinite="division by zero (1/x)", math=_RECIPROCAL, checks=(Check(((2, 2),)),)),
    Op("neg", "NegBackward0", neg_forward, neg_vjp, same_shape, (), "-g", negzero="negate", grows=False, math=_NEG,
       forward_error=neg_error, checks=(Check(((2,),)),)),
    Op("pow_scalar", "PowBackward0", pow_scalar_forward, pow_scalar_vjp, same_shape, (Save("self", "in", 0),),
       "g * n * a^(n-1); 0 when n = 0", negzero="keep_odd_pow", underflows=True,
       nonfinite="a power of zero with a negative exponent, or of a negative number with a fractional one",
       kink=pow_scalar_kink, kink_doc="n < 1 at a = 0: inf (e.g. a ** 0.5)", math=_POW_SCALAR, checks=(Check(((2,),), Fraction(3)), Check(((2,),), Fraction(1, 2), positive=True), Check(((2,),), Fraction(0)))),
    Op("pow_tensor", "PowBackward1", pow_tensor_forward, pow_tensor_vjp, binary_shape,
       (Save("exponent", "in", 1), Save("self", "in", 0), Save("result", "out", 0)),
       "g*b*a^(b-1) (0 where b = 0); g*out*log(a)", underflows=True, nonfinite="a power that is not a real number",
       kink_doc="d/db is 0 where a = 0 and b >= 0", math=_POW, backward_error=pow_tensor_backward_error, checks=(Check(((2,), (2,)), positive=True),)),
    Op("rpow", "PowBackward2", rpow_forward, rpow_vjp, same_shape, (Save("exponent", "in", 0), Save("result", "out", 0)),
       "g*out*log(n)", underflows=True, nonfinite="a power that is not a real number", kink_doc="0 where n = 0 and a >= 0", math=_RPOW, checks=(Check(((2,),), Fraction(3, 2)),),
       contiguous_result=True),
)


# every op of this family runs as one TensorIterator (an elementwise kernel)
OPS = tuple(replace(op, elementwise=True) for op in OPS)
