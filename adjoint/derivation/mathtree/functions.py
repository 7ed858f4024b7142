"""Building blocks for the ``math`` entries of the op registry: the logarithm the algebra's own power
rule needs (:data:`LOG`), :func:`elementwise` for a function of one tensor whose derivative is a
tree, and :func:`generic_vjp` for a function whose vector-Jacobian product the document writes as
``J^T lambda`` (declared, never a fallback)."""

from __future__ import annotations

from fractions import Fraction
from typing import Callable

import sympy

from .nodes import Fn, TBin, TFn, TJac, TNode


def elementwise(name: str, tex: str, local: Callable, sympy_fn=None, delimited: bool = False) -> Fn:
    """f applied elementwise: ``J^T lam = lam (.) local(node)`` (``local(node)`` a tree: f'(a))."""
    def vjp(lam: TNode, node: TFn):
        return (TBin("had", lam, local(node), node.shape),)
    return Fn(name, tex, vjp, sympy_fn, delimited)


def generic_vjp(lam: TNode, node: TFn) -> tuple:
    """``J^T lam`` with respect to every argument, written as such (J of the function named)."""
    return tuple(TJac(node, i, lam, arg.shape) for i, arg in enumerate(node.args))


def no_gradient(lam: TNode, node: TFn) -> tuple:
    """The derivative is 0 almost everywhere (an indicator, a sign): nothing flows back."""
    return tuple(None for _ in node.args)


LOG = Fn("log", "\\log\\left(#0\\right)", lambda lam, n: (TBin("div", lam, n.a, n.shape),), sympy.log)


def number(x) -> Fraction:
    """A Python number of the op's params (int, Fraction, flint fmpq) as a Fraction."""
    if isinstance(x, Fraction):
        return x
    if isinstance(x, int):
        return Fraction(x)
    if type(x).__name__ == "fmpq":
        return Fraction(int(x.p), int(x.q))
    return Fraction(x)


def binary(op: str) -> Callable:
    """The formula of an elementwise binary op of the algebra (add, sub, mul, div, pow)."""
    return lambda a, p, shape, k: TBin(op, a[0], a[1], shape)


def applied(fn: Fn) -> Callable:
    """The formula ``fn(args...)``."""
    return lambda a, p, shape, k: TFn(fn, tuple(a), shape)


def shape_text(shape) -> str:
    """A shape as the notation writes it in a subscript: ``2\\times 3`` (a scalar: ``()``)."""
    return "\\times ".join(str(d) for d in shape) if shape else "()"
