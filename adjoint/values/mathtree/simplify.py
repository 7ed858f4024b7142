"""Display simplifications that keep the value (:func:`simplify`: ``1 a``, ``a^1``, ``(a^T)^T``,
``--a``, a sum back to the shape it already has) and the reshape that is invisible in the
notation (:func:`reshaped`)."""

from __future__ import annotations

import copy
from fractions import Fraction

from adjoint.values.mathtree.nodes import (TT, TBin, TCall, TConst, TFn, TInner, TMatMul, TNeg, TNode, TOnes, TPlace, TPut, TSub,
                    TSumTo, const_value, is_scalar_shape, numel, t_shape)


def simplify(n: TNode) -> TNode:
    """Display simplifications that keep the value: 1*a, a^1, (a^T)^T, --a, sum_to of the same shape."""
    if isinstance(n, TBin):
        return _simplify_bin(n)
    if isinstance(n, TNeg):
        a = simplify(n.a)
        if isinstance(a, TNeg):
            return a.a
        ca = const_value(a)
        if ca is not None:
            return TConst(-ca, n.shape)
        return TNeg(a, n.shape)
    if isinstance(n, TT):
        a = simplify(n.a)
        if isinstance(a, TT):
            return a.a
        if len(a.shape) == 0 or isinstance(a, (TConst, TOnes)) and is_scalar_shape(a.shape):
            return a
        if isinstance(a, TNeg):
            return TNeg(simplify(TT(a.a, n.shape)), n.shape)
        if isinstance(a, TMatMul) and (isinstance(a.a, TT) or isinstance(a.b, TT)):
            return simplify(TMatMul(TT(a.b, t_shape(a.b.shape)), TT(a.a, t_shape(a.a.shape)), n.shape))
        if isinstance(a, TBin) and a.op in ("add", "sub"):
            return simplify(TBin(a.op, TT(a.a, t_shape(a.a.shape)), TT(a.b, t_shape(a.b.shape)), n.shape))
        return TT(a, n.shape)
    if isinstance(n, TMatMul):
        return TMatMul(simplify(n.a), simplify(n.b), n.shape)
    if isinstance(n, TInner):
        return TInner(simplify(n.a), simplify(n.b), n.shape)
    if isinstance(n, TSumTo):
        a = simplify(n.a)
        if tuple(a.shape) == tuple(n.shape):
            return a
        if numel(a.shape) == numel(n.shape):
            return a
        return TSumTo(a, n.shape)
    if isinstance(n, TFn):
        return TFn(n.fn, tuple(simplify(a) for a in n.args), n.shape, n.sub, n.params)
    if isinstance(n, TCall):
        n.args = tuple(simplify(a) for a in n.args)   # in place: Function formulas are keyed by id
        return n
    if isinstance(n, TSub):
        return TSub(simplify(n.a), n.key, n.shape)
    if isinstance(n, TPlace):
        return TPlace(simplify(n.a), n.key, n.shape)
    if isinstance(n, TPut):
        return TPut(simplify(n.base), simplify(n.region), simplify(n.value), n.view, n.shape)
    return n


def _simplify_bin(n: TBin) -> TNode:
    a, b = simplify(n.a), simplify(n.b)
    ca, cb = const_value(a), const_value(b)
    if n.op in ("mul", "had"):
        if cb is not None and ca is None:
            a, b, ca, cb = b, a, cb, ca          # constant first
        if ca == 1:
            return b if b.shape == n.shape else TBin("mul", a, b, n.shape)
        if ca == -1:
            return simplify(TNeg(b, n.shape))
        if ca is not None and cb is not None:
            return TConst(ca * cb, n.shape)
        if ca is not None and ca < 0:
            return TNeg(simplify(TBin("mul", TConst(-ca), b, n.shape)), n.shape)
        if ca is not None and isinstance(b, TBin) and b.op in ("mul", "had") and const_value(b.a) is not None:
            return simplify(TBin("mul", TConst(ca * const_value(b.a)), b.b, n.shape))
        if isinstance(a, TNeg):
            return simplify(TNeg(TBin(n.op, a.a, b, n.shape), n.shape))
        if isinstance(b, TNeg):
            return simplify(TNeg(TBin(n.op, a, b.a, n.shape), n.shape))
        return TBin("mul" if ca is not None else n.op, a, b, n.shape)
    if n.op == "pow":
        if cb == 1:
            return a
        if cb == 0:
            return TConst(Fraction(1), n.shape)
    if n.op == "div" and cb == 1:
        return a
    if n.op == "div" and isinstance(a, TNeg):
        return TNeg(TBin("div", a.a, b, n.shape), n.shape)
    if n.op == "div" and isinstance(a, TBin) and a.op == "mul" and (const_value(a.a) or 0) < 0:
        return TNeg(TBin("div", TBin("mul", TConst(-const_value(a.a)), a.b, a.shape), b, n.shape), n.shape)
    if n.op == "add" and isinstance(b, TNeg):
        return TBin("sub", a, b.a, n.shape)
    if n.op == "sub" and isinstance(b, TNeg):
        return TBin("add", a, b.a, n.shape)
    return TBin(n.op, a, b, n.shape)


def reshaped(n: TNode, shape) -> TNode:
    """A reshape that is invisible in the notation: the same tree, with the new shape."""
    c = copy.copy(n)
    c.shape = tuple(shape)
    return c
