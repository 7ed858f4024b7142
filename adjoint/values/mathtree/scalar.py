"""Scalar trees as SymPy expressions (:func:`to_sympy`): when every tensor has one element, the local
derivatives d x_j / d x_k are written and factored by SymPy. relu, its derivative (the indicator
1[x > 0]) and the sigmoid are opaque SymPy functions (:class:`Relu`, :class:`Indicator`,
:class:`Sigmoid`) that the renderer's printer typesets by name; a named function brings its
SymPy form with it (:attr:`~.nodes.Fn.sympy`), or stays an opaque function of its name."""

from __future__ import annotations

from fractions import Fraction

from adjoint.values import exact as E
from adjoint.values.numbers.symbolic import sympy as load_sympy
from adjoint.values.exact import Exact
from adjoint.values.mathtree.nodes import (TT, TAtom, TBin, TCall, TConst, TFn, TInner, TJac, TLam, TMatMul, TNeg, TNode, TOnes, TPlace, TPut,
                    TSub, TSumTo)


from adjoint.values.mathtree.sympy_names import Indicator, Relu, Sigmoid  # noqa: F401  (re-exported)


def to_sympy(n: TNode, sym):
    """A scalar tree as a SymPy expression (every tensor has one element). ``sym(var)`` names atoms."""
    sympy = load_sympy()
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
    if isinstance(n, (TT, TSumTo, TSub, TPlace)):     # one element: views and placements are that element
        return to_sympy(n.a, sym)
    if isinstance(n, TPut):
        return to_sympy(n.value, sym)
    if isinstance(n, TFn):
        args = [to_sympy(a, sym) for a in n.args]
        if n.fn.sympy is not None:
            return n.fn.sympy(*args)
        return sympy.Function(n.fn.name)(*args)
    if isinstance(n, TJac):
        args = [to_sympy(a, sym) for a in n.of.args]
        f, at = sympy.Function(n.of.fn.name), args[n.index]
        others = set().union(*(a.free_symbols for i, a in enumerate(args) if i != n.index))
        if at.is_Symbol and at not in others:
            return to_sympy(n.lam, sym) * sympy.Derivative(f(*args), at)
        # the partial derivative in one argument slot, taken at an expression (3 v) or at a symbol
        # another argument also holds: d/du f(..., u, ...) at u = the argument
        u = sympy.Dummy("u", real=True)
        return to_sympy(n.lam, sym) * sympy.Subs(sympy.Derivative(f(*(args[:n.index] + [u] + args[n.index + 1:])), u),
                                                 u, at)
    if isinstance(n, TCall):
        return sympy.Function(n.name)(*[to_sympy(a, sym) for a in n.args])
    raise TypeError(f"cannot convert {type(n).__name__}")
