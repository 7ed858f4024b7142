"""What PyTorch runs for each operator and function of the expression language (ATen's dispatch).

``2 - x`` is ``rsub``, ``2 / x`` is ``reciprocal`` then ``mul``, ``v @ M`` with a 1-D ``v``
is ``unsqueeze``/``mm``/``squeeze_``, ``F.linear`` on a 1-D input is ``view``/``t``/``addmm``/
``view``: each function here decides, from the operands' shapes and kinds, which primitives
(:mod:`adjoint.ops`) PyTorch applies, in which order, and hands them to the runtime. Shape
errors are worded as PyTorch words them.

:data:`FUNCTIONS` maps each name an expression may call to its lowering.
"""

from __future__ import annotations

from fractions import Fraction

from .errors import Loc, ProblemError
from .exact import MAX_EXACT_EXPONENT
from .graph import Tensor


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
        u = ap("unsqueeze", [a], (1, sa[0]), loc)
        m = ap("mm", [u, b], None, loc)
        return ap("squeeze", [m], (sb[1],), loc)
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

#: Functions of one tensor that are exactly one primitive (the v1 whitelist; ``t`` is an extension).
UNARY = {"relu": "relu", "tanh": "tanh", "sigmoid": "sigmoid", "exp": "exp", "log": "log", "sin": "sin",
         "cos": "cos", "sqrt": "sqrt", "abs": "abs", "sum": "sum", "mean": "mean", "norm": "norm", "t": "t"}


def unary(rt, name: str, args: list, kwargs: dict, loc: Loc, arg_locs: list):
    if len(args) != 1:
        raise ProblemError(loc, f"{name}() takes exactly one tensor argument here, got {len(args)}")
    x = args[0]
    if not isinstance(x, Tensor):
        got = "None" if x is None else ("a tuple" if isinstance(x, tuple) else "a number")
        raise ProblemError(arg_locs[0], f"{name}() needs a tensor, got {got}: PyTorch raises TypeError "
                                        f"({name}(): argument 'input' must be Tensor)")
    prim = UNARY[name]
    if prim == "t" and len(x.shape) > 2:
        raise ProblemError(loc, f"t() expects a tensor with <= 2 dimensions, but the argument is {len(x.shape)}-D")
    return rt.apply(prim, [x], None, loc)


def call_function(rt, name: str, args: list, kwargs: dict, loc: Loc, arg_locs: list):
    """Call the expression-language function ``name``; KeyError when there is none."""
    if name in UNARY:
        return unary(rt, name, args, kwargs, loc, arg_locs)
    raise KeyError(name)


FUNCTION_NAMES = tuple(UNARY)
