"""Reverse mode on expression trees: :func:`vjp_tree` writes J^T lambda of a tree, as a tree, for every
atom the tree reads -- the formulas shown in the adjoint recursion, the hook calls and the final
gradients (``lambda_2 W``, ``lambda_1 (.) 1[x_1 > 0]``, ``1^T lambda``).

The algebra's own nodes (sums, products, quotients, powers, matrix products, transposes, sums
over broadcast dimensions, index views) have their rules here; a named function
(:class:`~.nodes.TFn`) brings its rule with it (:attr:`~.nodes.Fn.vjp`, declared in the op
registry); a custom Function enters through its declared backward formulas, as in PyTorch."""

from __future__ import annotations

from fractions import Fraction

from adjoint.values.mathtree.functions import LOG
from adjoint.values.mathtree.nodes import (TT, TAtom, TBin, TCall, TConst, TFn, TInner, TMatMul, TName, TNeg, TNode, TNone, TOnes, TPlace,
                    TPut, TSub, TSumTo, const_value, t_shape)


def _add(a: TNode | None, b: TNode) -> TNode:
    return b if a is None else TBin("add", a, b, b.shape)


def sum_to(t: TNode, shape) -> TNode:
    """``t`` summed back to ``shape`` (nothing when it has it already)."""
    return t if tuple(t.shape) == tuple(shape) else _sum_to(t, shape)


def vjp_tree(node: TNode, lam: TNode, out: dict, functions: dict) -> None:
    """Symbolic reverse mode: accumulate into ``out[var]`` the tree of J^T lam for every atom.

    ``functions`` maps id(TCall) -> (cotangent tree -> {slot index: declared formula tree})."""
    if isinstance(node, TAtom):
        out[node.var] = _add(out.get(node.var), lam)
        return
    if isinstance(node, (TConst, TOnes, TName, TNone)):
        return
    if isinstance(node, TBin):
        _bin(node, lam, out, functions)
        return
    if isinstance(node, TNeg):
        vjp_tree(node.a, TNeg(lam, lam.shape), out, functions)
        return
    if isinstance(node, TMatMul):
        a, b = node.a, node.b
        vjp_tree(a, TMatMul(lam, TT(b, t_shape(b.shape)), a.shape), out, functions)
        vjp_tree(b, TMatMul(TT(a, t_shape(a.shape)), lam, b.shape), out, functions)
        return
    if isinstance(node, TInner):
        vjp_tree(node.a, TBin("had", lam, node.b, node.a.shape), out, functions)
        vjp_tree(node.b, TBin("had", lam, node.a, node.b.shape), out, functions)
        return
    if isinstance(node, TT):
        vjp_tree(node.a, TT(lam, node.a.shape), out, functions)
        return
    if isinstance(node, TSumTo):
        vjp_tree(node.a, TBin("had", lam, TOnes(node.a.shape), node.a.shape), out, functions)
        return
    if isinstance(node, TFn):
        for arg, g in zip(node.args, node.fn.vjp(lam, node)):
            if g is not None:
                vjp_tree(arg, g, out, functions)
        return
    if isinstance(node, TSub):
        vjp_tree(node.a, TPlace(lam, node.key, node.a.shape), out, functions)
        return
    if isinstance(node, TPlace):
        vjp_tree(node.a, TSub(lam, node.key, node.a.shape), out, functions)
        return
    if isinstance(node, TPut):
        written = node.view(lam)
        vjp_tree(node.base, TPut(lam, written, TConst(Fraction(0), written.shape), node.view, node.base.shape), out,
                 functions)
        vjp_tree(node.value, sum_to(written, node.value.shape), out, functions)
        return
    if isinstance(node, TCall):
        make = functions.get(id(node))
        formulas = make(lam) if make is not None else {}
        for i, arg in enumerate(node.args):
            f = formulas.get(i)
            if f is not None:
                vjp_tree(arg, _sum_to(f, arg.shape) if tuple(f.shape) != tuple(arg.shape) else f, out, functions)
        return
    raise TypeError(f"no reverse rule for {type(node).__name__}")


def _bin(node: TBin, lam: TNode, out: dict, functions: dict) -> None:
    a, b, sh = node.a, node.b, node.shape
    if node.op == "add":
        vjp_tree(a, sum_to(lam, a.shape), out, functions)
        vjp_tree(b, sum_to(lam, b.shape), out, functions)
    elif node.op == "sub":
        vjp_tree(a, sum_to(lam, a.shape), out, functions)
        vjp_tree(b, sum_to(TNeg(lam, lam.shape), b.shape), out, functions)
    elif node.op in ("mul", "had"):
        vjp_tree(a, sum_to(TBin("had", lam, b, sh), a.shape), out, functions)
        vjp_tree(b, sum_to(TBin("had", lam, a, sh), b.shape), out, functions)
    elif node.op == "div":
        vjp_tree(a, sum_to(TBin("div", lam, b, sh), a.shape), out, functions)
        grad_b = TNeg(TBin("div", TBin("had", lam, a, sh), TBin("pow", b, TConst(Fraction(2)), b.shape), sh), sh)
        vjp_tree(b, sum_to(grad_b, b.shape), out, functions)
    elif node.op == "pow":
        e = const_value(b)
        if e is not None:
            local = TBin("mul", TConst(e), TBin("pow", a, TConst(e - 1), a.shape), a.shape)
            vjp_tree(a, TBin("had", lam, local, sh), out, functions)
        else:
            if not isinstance(a, TConst):
                local = TBin("mul", b, TBin("pow", a, TBin("sub", b, TConst(Fraction(1)), b.shape), sh), sh)
                vjp_tree(a, sum_to(TBin("had", lam, local, sh), a.shape), out, functions)
            local_b = TBin("mul", node, TFn(LOG, (a,), a.shape), sh)
            vjp_tree(b, sum_to(TBin("had", lam, local_b, sh), b.shape), out, functions)


def _sum_to(t: TNode, shape) -> TNode:
    """Sum a broadcast gradient back to ``shape``; a bias row (the sum over rows) reads 1^T t."""
    shape = tuple(shape)
    if len(t.shape) == 2 and (shape == (t.shape[1],) or shape == (1, t.shape[1])):
        ones = TOnes((t.shape[0],))
        return TT(TMatMul(TT(ones, (1, t.shape[0])), t, (1, t.shape[1])), (t.shape[1],)) if len(shape) == 1 \
            else TMatMul(TT(ones, (1, t.shape[0])), t, shape)
    return TSumTo(t, shape)
