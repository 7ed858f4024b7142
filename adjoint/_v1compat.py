"""TEMPORARY: convert the v1 parser's records to adjoint.syntax records (until the v2 parser lands)."""

from __future__ import annotations

from dataclasses import replace

from . import expr as X
from . import syntax as S


def expr(e):
    if e is None:
        return None
    if isinstance(e, X.Num):
        return S.Num(e.loc, e.value, e.text)
    if isinstance(e, X.Name):
        return S.Name(e.loc, e.id)
    if isinstance(e, X.NoneLit):
        return S.NoneLit(e.loc)
    if isinstance(e, X.Bin):
        return S.Bin(e.loc, e.op, expr(e.left), expr(e.right))
    if isinstance(e, X.Neg):
        return S.Neg(e.loc, expr(e.operand))
    if isinstance(e, X.Call):
        return S.Call(e.loc, e.func, tuple(expr(a) for a in e.args))
    if isinstance(e, X.Index):
        return S.Subscript(e.loc, expr(e.value), (S.Num(e.loc, __import__("fractions").Fraction(e.index), str(e.index)),))
    if isinstance(e, X.Tup):
        return S.Tup(e.loc, tuple(expr(a) for a in e.items))
    raise TypeError(e)


def program(p):
    if p is None:
        return None
    body = tuple(S.Assign(a.loc, S.Name(a.loc, a.name), expr(a.value)) for a in p.assigns)
    return body + (S.Return(p.result.loc, expr(p.result)),)


def module(m):
    fn = m.function
    if fn is not None:
        fn = replace(fn, grads=tuple((s, expr(f)) for s, f in fn.grads))
    return replace(m, forward=program(m.forward), function=fn, children=tuple(module(c) for c in m.children))


def hook(h):
    does = tuple(S.Assign(a.loc, S.Name(a.loc, a.name), expr(a.value)) for a in h.does)
    return replace(h, returns=expr(h.returns), does=does)


def problem(p):
    variants = tuple(replace(v, hooks=tuple(hook(h) for h in v.hooks)) for v in p.variants)
    return replace(p, model=module(p.model), loss=expr(p.loss), variants=variants)
