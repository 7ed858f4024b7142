"""Operators and the v1 functions: what PyTorch runs for each (ATen's dispatch).

``2 - x`` is ``rsub``, ``2 / x`` is ``reciprocal`` then ``mul``, ``v @ M`` with a 1-D ``v``
is ``unsqueeze``/``mm``/``squeeze_``, ``F.linear`` on a 1-D input is ``view``/``t``/``addmm``/
``view``: each lowering decides, from the operands' shapes and kinds, which primitives
(:mod:`adjoint.ops`) PyTorch applies, in which order, and hands them to the runtime. Shape
errors are worded as PyTorch words them.
"""

from __future__ import annotations

from fractions import Fraction

from ..errors import Loc, ProblemError
from ..exact import MAX_EXACT_EXPONENT
from ..graph import Tensor
from . import Function, Param


def _dims(shape) -> str:
    return "x".join(str(n) for n in shape) if shape else "scalar"


def is_number(v) -> bool:
    return isinstance(v, Fraction)


# ----------------------------------------------------------------------------- operators

def binary(rt, op: str, a, b, loc: Loc):
    """``a op b`` for tensors and Python numbers, as Tensor's dunder methods dispatch it."""
    na, nb = is_number(a), is_number(b)
    if na and nb:
        return fold(op, a, b, loc)
    ap = rt.apply
    if op == "+":
        if na:
            return ap("add", [b, a], None, loc)  # 2 + x runs x.__radd__(2)
        return ap("add", [a, b], None, loc)
    if op == "-":
        if na:
            return ap("rsub", [b], a, loc)
        return ap("sub", [a, b], None, loc)
    if op == "*":
        if na:
            return ap("mul", [b, a], None, loc)
        return ap("mul", [a, b], None, loc)
    if op == "/":
        if na:  # Tensor.__rtruediv__: self.reciprocal() * other
            return ap("mul", [ap("reciprocal", [b], None, loc), a], None, loc)
        return ap("div", [a, b], None, loc)
    if op == "**":
        if nb:
            return ap("pow_scalar", [a], b, loc)
        if na:
            return ap("rpow", [b], a, loc)
        return ap("pow_tensor", [a, b], None, loc)
    if op == "@":
        if na or nb:
            raise ProblemError(loc, "matmul needs two tensors; PyTorch raises TypeError for a number operand")
        return matmul(rt, a, b, loc)
    raise AssertionError(op)


def fold(op: str, a: Fraction, b: Fraction, loc: Loc) -> Fraction:
    """Python arithmetic on two number literals (no tensor, no node)."""
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        if b == 0:
            raise ProblemError(loc, "division by zero between two numbers: Python raises ZeroDivisionError")
        return a / b
    if op == "**":
        if b.denominator == 1 and abs(b) > MAX_EXACT_EXPONENT and abs(a) not in (0, 1):
            raise ProblemError(loc, f"the exponent {b} is too large to compute exactly (at most "
                                    f"{MAX_EXACT_EXPONENT} in size); use a smaller power")
        if b.denominator == 1 and not (a == 0 and b < 0):
            return a ** int(b)
        raise ProblemError(loc, f"the number {a} ** {b} is not an exact rational; write the value as a tensor "
                                "or a symbol")
    raise ProblemError(loc, "matmul needs two tensors; PyTorch raises TypeError for numbers")


def neg(rt, v, loc: Loc):
    return -v if is_number(v) else rt.apply("neg", [v], None, loc)


# ----------------------------------------------------------------------------- matmul and linear

def matmul(rt, a: Tensor, b: Tensor, loc: Loc):
    """at::matmul's dispatch for the ranks it handles without batching."""
    sa, sb = a.shape, b.shape
    da, db = len(sa), len(sb)
    ap = rt.apply
    if da == 0 or db == 0:
        raise ProblemError(loc, f"both arguments to matmul need to be at least 1D, but they are {da}D and {db}D "
                                "(PyTorch raises this too)")
    if da == 1 and db == 1:
        return ap("dot", [a, b], None, loc)
    if da == 2 and db == 1:
        return ap("mv", [a, b], None, loc)
    if da == 1 and db == 2:
        if sa[0] != sb[0]:
            raise ProblemError(loc, f"matmul shapes {list(sa)} and {list(sb)}: PyTorch raises 'mat1 and mat2 "
                                    f"shapes cannot be multiplied (1x{sa[0]} and {_dims(sb)})'")
        u = ap("unsqueeze", [a], 0, loc)
        m = ap("mm", [u, b], None, loc)
        return ap("squeeze_", [m], 0, loc)
    if da == 2 and db == 2:
        return ap("mm", [a, b], None, loc)
    if da >= 3 and db in (1, 2):
        rows = 1
        for n in sa[:-1]:
            rows *= n
        if sa[-1] != sb[0]:
            raise ProblemError(loc, f"matmul shapes {list(sa)} and {list(sb)}: PyTorch raises 'mat1 and mat2 "
                                    f"shapes cannot be multiplied ({rows}x{sa[-1]} and {_dims(sb)})'")
        folded = ap("view", [a], (rows, sa[-1]), loc)
        if db == 2:
            return ap("unsafe_view", [ap("mm", [folded, b], None, loc)], tuple(sa[:-1]) + (sb[1],), loc)
        return ap("unsafe_view", [ap("mv", [folded, b], None, loc)], tuple(sa[:-1]), loc)
    raise ProblemError(loc, f"matmul of a {da}-D and a {db}-D tensor uses PyTorch's batched path "
                            "(expand/bmm), which adjoint does not model yet; use ranks <= 2 on the right")


def linear(rt, x: Tensor, weight: Tensor, bias: Tensor | None, loc: Loc):
    """F.linear as torch 2.13 runs it (see docs/ops.md for the node chains)."""
    sx, sw = x.shape, weight.shape
    ap = rt.apply
    if not sx:
        raise ProblemError(loc, "Linear needs an input of at least 1 dimension, got a 0-d tensor")
    if sx[-1] != sw[1]:
        rows = 1
        for n in sx[:-1]:
            rows *= n
        raise ProblemError(loc, f"Linear input has shape {list(sx)} but weight has shape {list(sw)}: PyTorch raises "
                                f"'mat1 and mat2 shapes cannot be multiplied ({rows}x{sx[-1]} and "
                                f"{sw[1]}x{sw[0]})'")
    if bias is not None:
        if len(sx) == 2:
            return ap("addmm", [bias, x, ap("t", [weight], None, loc)], None, loc)
        rows = 1
        for n in sx[:-1]:
            rows *= n
        flat = ap("view", [x], (rows, sx[-1]), loc)
        out = ap("addmm", [bias, flat, ap("t", [weight], None, loc)], None, loc)
        return ap("view", [out], tuple(sx[:-1]) + (sw[0],), loc)
    return matmul(rt, x, ap("t", [weight], None, loc), loc)


# ----------------------------------------------------------------------------- functions

def _unary(prim: str):
    def lower(rt, a: dict, loc: Loc):
        x = a["input"]
        if prim == "t" and len(x.shape) > 2:
            raise ProblemError(loc, f"t() expects a tensor with <= 2 dimensions, but the argument is "
                                    f"{len(x.shape)}-D")
        return rt.apply(prim, [x], None, loc)
    lower.__name__ = f"lower_{prim}"
    return lower


def _arith(op: str):
    def lower(rt, a: dict, loc: Loc):
        alpha = a.get("alpha", Fraction(1))
        if alpha != 1:
            raise ProblemError(loc, f"{'add' if op == '+' else 'sub'}(..., alpha={alpha}) is not modelled yet; "
                                    f"write the product: x {op} {alpha} * y")
        return binary(rt, op, a["input"], a["other"], loc)
    lower.__name__ = f"lower_{ {'+': 'add', '-': 'sub', '*': 'mul', '/': 'div'}[op]}"
    return lower


def lower_neg(rt, a: dict, loc: Loc):
    return neg(rt, a["input"], loc)


def lower_matmul(rt, a: dict, loc: Loc):
    return matmul(rt, a["input"], a["other"], loc)


def lower_linear(rt, a: dict, loc: Loc):
    return linear(rt, a["input"], a["weight"], a["bias"], loc)


_X = (Param("input", "tensor"),)

FUNCTIONS = tuple(Function(name, _X, _unary(name), doc=f"one op: {name}")
                  for name in ("relu", "tanh", "sigmoid", "exp", "log", "sin", "cos", "sqrt", "abs", "t")) + (
    Function("sum", _X, _unary("sum"), doc="SumBackward0 (every element)"),
    Function("mean", _X, _unary("mean"), doc="MeanBackward0 (every element)"),
    Function("norm", _X, _unary("norm"), where="function", doc="torch.linalg.vector_norm: LinalgVectorNormBackward0"),
    Function("add", (_X[0], Param("other", "scalar"), Param("alpha", "number", Fraction(1), keyword_only=True)),
             _arith("+"), doc="as the + operator"),
    Function("sub", (_X[0], Param("other", "scalar"), Param("alpha", "number", Fraction(1), keyword_only=True)),
             _arith("-"), doc="as the - operator"),
    Function("mul", (_X[0], Param("other", "scalar")), _arith("*"), doc="as the * operator"),
    Function("div", (_X[0], Param("other", "scalar")), _arith("/"), doc="as the / operator"),
    Function("neg", _X, lower_neg, doc="NegBackward0"),
    Function("matmul", (Param("input", "tensor"), Param("other", "tensor")), lower_matmul,
             doc="as the @ operator"),
    Function("linear", (Param("input", "tensor"), Param("weight", "tensor"), Param("bias", "tensor", None)),
             lower_linear, where="function", doc="F.linear: addmm (2-D), view/addmm/view, or matmul without bias"),
)
