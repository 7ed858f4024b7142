"""Problem expressions -- a hook's ``returns:``, a custom Function's declared backward, a custom module's
forward -- as expression trees (:func:`expr_tree`, names bound from an environment) and as source text
with only the parentheses Python needs (:func:`source`)."""

from __future__ import annotations

from ... import syntax as X
from .trees import TT, TBin, TCall, TConst, TFn, TIndex, TInner, TMatMul, TName, TNeg, TNode, TNone, TTuple, _t_shape


def expr_tree(e: X.Expr, env: dict) -> TNode:
    """A problem expression (hook returns, Function formulas, forwards) as a tree; names from env."""
    if isinstance(e, X.Num):
        return TConst(e.value)
    if isinstance(e, X.NoneLit):
        return TNone()
    if isinstance(e, X.Name):
        if e.id in env:
            return env[e.id]
        return TName(e.id)
    if isinstance(e, X.Neg):
        a = expr_tree(e.operand, env)
        return TNeg(a, a.shape)
    if isinstance(e, X.Tup):
        return TTuple(tuple(expr_tree(i, env) for i in e.items))
    if isinstance(e, X.Subscript) and _int_index(e) is not None:
        a = expr_tree(e.value, env)
        index = _int_index(e)
        if isinstance(a, TTuple) and -len(a.items) <= index < len(a.items):
            return a.items[index]
        return TIndex(a, index)
    if isinstance(e, X.Call):
        args = [expr_tree(a, env) for a in e.args]
        a = args[0] if args else TNone()
        if e.func in ("sum", "mean", "norm"):
            return TFn(e.func, a, ())
        if e.func == "t":
            return TT(a, _t_shape(a.shape)) if len(a.shape) == 2 else a
        if e.func in ("relu", "tanh", "sigmoid", "exp", "log", "sin", "cos", "sqrt", "abs"):
            return TFn(e.func, a, a.shape)
        return TCall(e.func, tuple(args), a.shape)
    if isinstance(e, X.Bin):
        a, b = expr_tree(e.left, env), expr_tree(e.right, env)
        if e.op == "@":
            sa, sb = a.shape, b.shape
            if len(sa) == 1 and len(sb) == 1:
                return TInner(a, b)
            if len(sa) == 1 and len(sb) == 2:
                return TMatMul(TT(b, _t_shape(sb)), a, (sb[1],))
            if len(sb) == 1:
                return TMatMul(a, b, tuple(sa[:-1]))
            return TMatMul(a, b, tuple(sa[:-1]) + (sb[-1],))
        op = {"+": "add", "-": "sub", "*": "mul", "/": "div", "**": "pow"}[e.op]
        return TBin(op, a, b, _broadcast(a.shape, b.shape))
    raise TypeError(e)


_SRC_PREC = {"+": 10, "-": 10, "*": 20, "/": 20, "@": 20, "**": 30}


def source(e: X.Expr, parent: int = 0, right: bool = False) -> str:
    """Problem-expression source text with only the parentheses Python needs."""
    if isinstance(e, X.Bin):
        p = _SRC_PREC[e.op]
        left = source(e.left, p + (1 if e.op == "**" else 0))
        rhs = source(e.right, p + (0 if e.op == "**" else 1))
        text = f"{left} {e.op} {rhs}"
        return f"({text})" if p < parent else text
    if isinstance(e, X.Neg):
        text = "-" + source(e.operand, 25)
        return f"({text})" if 25 < parent else text
    if isinstance(e, X.Call):
        return f"{e.func}({', '.join(source(a) for a in e.args)})"
    if isinstance(e, X.Subscript) and _int_index(e) is not None:
        return f"{source(e.value, 40)}[{_int_index(e)}]"
    if isinstance(e, X.Tup):
        inner = ", ".join(source(a) for a in e.items)
        return f"({inner},)" if len(e.items) == 1 else f"({inner})"
    if isinstance(e, X.Num) and e.value < 0 and parent > 10:
        return f"({e.text})"
    return X.to_source(e)


def _int_index(e: X.Subscript) -> int | None:
    """``grad_input[0]``: the one subscript v1 expressions have (a tuple index)."""
    if len(e.items) == 1 and isinstance(e.items[0], X.Num) and e.items[0].is_int:
        return int(e.items[0].value)
    return None


def _broadcast(a, b) -> tuple:
    n = max(len(a), len(b))
    pa = (1,) * (n - len(a)) + tuple(a)
    pb = (1,) * (n - len(b)) + tuple(b)
    return tuple(max(x, y) for x, y in zip(pa, pb))
