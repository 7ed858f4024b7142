"""Building blocks for the ``math`` entries of the op registry: the logarithm the algebra's own power
rule needs (:data:`LOG`), :func:`elementwise` for a function of one tensor whose derivative is a
tree, and :func:`generic_vjp` for a function whose vector-Jacobian product the document writes as
``J^T lambda`` (declared, never a fallback)."""

from __future__ import annotations

from fractions import Fraction
from typing import Callable

from adjoint.values.numbers.symbolic import sympy as load_sympy
from adjoint.values.mathtree.sympy_names import SymPyName

from adjoint.values.mathtree.nodes import Fn, TBin, TFn, TJac, TNode


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


LOG = Fn("log", "\\log\\left(#0\\right)", lambda lam, n: (TBin("div", lam, n.a, n.shape),), SymPyName("log"))


def number(x) -> Fraction:
    """A Python number of the op's params (int, Fraction, flint fmpq) as a Fraction."""
    if isinstance(x, Fraction):
        return x
    if isinstance(x, int):
        return Fraction(x)
    if type(x).__name__ == "fmpq":
        return Fraction(int(x.p), int(x.q))
    if type(x).__name__ == "Gaussian":   # a complex number (1j - z): kept as it is
        return x
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


def number_text(x) -> str:
    """A number of an op's params as a subscript writes it: 0.1, 1/3, -2, inf."""
    if isinstance(x, str):
        return "\\infty" if x == "inf" else ("-\\infty" if x == "-inf" else x)
    q = number(x)
    if q.denominator == 1:
        return str(q.numerator)
    d = q.denominator
    while d % 2 == 0:
        d //= 2
    while d % 5 == 0:
        d //= 5
    if d == 1 and len(str(q.numerator)) + len(str(q.denominator)) < 14:
        text = f"{float(q):.12g}"
        if Fraction(text) == q:
            return text
    return f"{q.numerator}/{q.denominator}"


def dims_text(dims, keepdim: bool = False) -> str:
    """``dim=(0, 1)`` as a subscript (every dim when ``dims`` is empty), with keepdim when set."""
    dims = tuple(dims)
    text = "\\mathrm{dim}=" + (str(dims[0]) if len(dims) == 1 else "(" + ",".join(str(d) for d in dims) + ")") \
        if dims else ""
    if keepdim:
        text += (",\\," if text else "") + "\\mathrm{keepdim}"
    return text


def derivative(fn_name: str, tex_name: str) -> Fn:
    """f' of a named elementwise function, as the opaque function the document writes its VJP with
    (``lam (.) f'(x)``): a derivative is not differentiated again."""
    return Fn(fn_name + "'", f"{tex_name}'_{{#s}}\\left(#0\\right)", no_gradient,
              lambda *a: load_sympy().Function(fn_name + "_prime")(*a))


def elementwise_named(name: str, tex_name: str) -> tuple:
    """(f, f') of an elementwise function written by name (``\\operatorname{gelu}``): f's VJP is
    ``lam (.) f'(x)`` with f' carrying f's subscript (its parameters)."""
    prime = derivative(name, tex_name)

    def vjp(lam, node):
        return (TBin("had", lam, TFn(prime, (node.a,), node.a.shape, node.sub, node.params), node.shape),)
    return Fn(name, f"{tex_name}_{{#s}}\\left(#0\\right)", vjp, lambda *a: load_sympy().Function(name)(*a)), prime


def layer(outputs: tuple, sub: Callable = lambda p: "") -> Callable:
    """The formula of a layer kernel written as one function per output (``outputs``: the
    differentiable output's :class:`Fn` first, then the statistics or indices it also returns),
    applied to the inputs that are given (an absent optional input is left out), with the
    subscript ``sub(params)``."""
    def formula(a, p, shape, k):
        return TFn(outputs[k], tuple(x for x in a if x is not None), tuple(shape), sub(p), p)
    return formula
