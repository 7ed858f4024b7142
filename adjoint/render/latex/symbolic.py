"""Scalar trees as SymPy expressions (:func:`to_sympy`): when every tensor has one element, the local
derivatives d x_j / d x_k are written and factored by SymPy. relu, its derivative (the indicator
1[x > 0]) and the sigmoid are opaque SymPy functions that ``DerivationPrinter`` typesets."""

from __future__ import annotations

from fractions import Fraction

import sympy

from ... import exact as E
from ...exact import Exact
from .trees import TT, TAtom, TBin, TCall, TConst, TFn, TInner, TLam, TMatMul, TNeg, TNode, TOnes, TSumTo


class Relu(sympy.Function):
    """relu as an opaque function (its derivative is written with Indicator)."""

    nargs = 1


class Indicator(sympy.Function):
    """The indicator 1[x > 0] (PyTorch's relu'(x), 0 at x = 0)."""

    nargs = 1


class Sigmoid(sympy.Function):
    nargs = 1


def to_sympy(n: TNode, sym) -> sympy.Expr:
    """A scalar tree as a SymPy expression (every tensor has one element). ``sym(var)`` names atoms."""
    if isinstance(n, TAtom):
        return sym(n.var)
    if isinstance(n, TLam):
        return sympy.Symbol(f"l#{n.var}", real=True)
    if isinstance(n, TConst):
        v = n.value
        if isinstance(v, Exact):
            return E.s_sym(v.item())
        return sympy.Rational(v.numerator, v.denominator) if isinstance(v, Fraction) else E.s_sym(v)
    if isinstance(n, TOnes):
        return sympy.Integer(1)
    if isinstance(n, TBin):
        a, b = to_sympy(n.a, sym), to_sympy(n.b, sym)
        return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "had": lambda: a * b,
                "div": lambda: a / b, "pow": lambda: a ** b}[n.op]()
    if isinstance(n, TNeg):
        return -to_sympy(n.a, sym)
    if isinstance(n, (TMatMul, TInner)):
        return to_sympy(n.a, sym) * to_sympy(n.b, sym)
    if isinstance(n, (TT, TSumTo)):
        return to_sympy(n.a, sym)
    if isinstance(n, TFn):
        a = to_sympy(n.a, sym)
        table = {"relu": Relu, "tanh": sympy.tanh, "sigmoid": Sigmoid, "exp": sympy.exp, "log": sympy.log,
                 "sin": sympy.sin, "cos": sympy.cos, "sqrt": sympy.sqrt, "abs": sympy.Abs, "sum": lambda x: x,
                 "mean": lambda x: x, "norm": sympy.Abs, "sign": sympy.sign, "step": Indicator}
        return table[n.name](a)
    if isinstance(n, TCall):
        return sympy.Function(n.name)(*[to_sympy(a, sym) for a in n.args])
    raise TypeError(f"cannot convert {type(n).__name__}")
