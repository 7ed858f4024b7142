"""Problem expressions -- a hook's ``returns:``, a custom Function's declared backward, a custom module's
forward -- as expression trees (:func:`expr_tree`, names bound from an environment; a function of the
op registry reads as its ``math`` entry says) and as source text with only the parentheses Python
needs (:func:`source`)."""

from __future__ import annotations

from fractions import Fraction

from adjoint.format import syntax as X
from adjoint.values.mathtree import TT, TBin, TCall, TConst, TIndex, TInner, TMatMul, TName, TNeg, TNode, TNone, TTuple
from adjoint.values.mathtree import t_shape as _t_shape
from adjoint.engine.ops import REGISTRY

#: functions of one tensor that reduce it to a number, and those applied elementwise
_REDUCTIONS = ("sum", "mean", "norm")
_ELEMENTWISE = ("relu", "tanh", "sigmoid", "exp", "log", "sin", "cos", "sqrt", "abs", "rsqrt", "log1p", "expm1", "atan", "erf",
                "sinh", "cosh", "tan", "log2", "log10")


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
    if isinstance(e, X.Subscript):
        a = expr_tree(e.value, env)
        item = e.items[0]
        if isinstance(item, X.Str):
            return TIndex(a, item.value)
        if not isinstance(item, X.Num) or len(e.items) != 1:
            return TName(X.to_source(e))
        index = int(item.value)
        if isinstance(a, TTuple) and index < len(a.items):
            return a.items[index]
        return TIndex(a, index)
    if isinstance(e, X.Call):
        args = [expr_tree(a, env) for a in e.args]
        a = args[0] if args else TNone()
        if e.func in _REDUCTIONS:
            return REGISTRY[e.func].math.formula([a], None, (), 0)
        if e.func == "t":
            return TT(a, _t_shape(a.shape)) if len(a.shape) == 2 else a
        if e.func in _ELEMENTWISE:
            return REGISTRY[e.func].math.formula([a], None, a.shape, 0)
        return TCall(e.func, tuple(args), a.shape)
    if isinstance(e, X.Bin) and e.op == "//":   # Python numbers (a size): it reads as its source
        return TName(X.to_source(e))
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
    if isinstance(e, X.Method) and not e.args and not e.kwargs:
        if e.name in ("clone", "detach", "contiguous"):   # the same values
            return expr_tree(e.obj, env)
        if e.name in _ELEMENTWISE:                         # x.exp() is exp(x)
            a = expr_tree(e.obj, env)
            return REGISTRY[e.name].math.formula([a], None, a.shape, 0)
    return TName(X.to_source(e))            # anything else (a dict, a method call) reads as its source


_SRC_PREC = {"+": 10, "-": 10, "*": 20, "/": 20, "//": 20, "@": 20, "**": 30}


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
        args = [source(a) for a in e.args] + [f"{k}={source(v)}" for k, v in e.kwargs]
        return f"{e.func}({', '.join(args)})"
    if isinstance(e, X.Subscript):
        return f"{source(e.value, 40)}[{', '.join(source(i) for i in e.items)}]"
    if isinstance(e, X.Tup):
        inner = ", ".join(source(a) for a in e.items)
        return f"({inner},)" if len(e.items) == 1 else f"({inner})"
    if isinstance(e, X.Num) and parent > 10 and (e.value < 0 if isinstance(e.value, Fraction) else e.text.startswith("-")):
        return f"({e.text})"
    return X.to_source(e)


def _broadcast(a, b) -> tuple:
    n = max(len(a), len(b))
    pa = (1,) * (n - len(a)) + tuple(a)
    pb = (1,) * (n - len(b)) + tuple(b)
    return tuple(max(x, y) for x, y in zip(pa, pb))


def program_source(program) -> str:
    """A forward program as one line of source text (statements joined by ``; ``)."""
    out = []
    for x in program:
        if isinstance(x, X.Assign) and isinstance(x.target, X.Name):
            out.append(f"{x.target.id} = {source(x.value)}")
        elif isinstance(x, X.Return) and not isinstance(x.value, X.Tup):
            out.append(f"return {source(x.value)}")
        elif isinstance(x, X.With):
            out.append(f"with {x.manager}: {program_source(x.body)}")
        else:
            out.append(X.stmt_source(x))
    return "; ".join(out)


def statement_source(x) -> str:
    """One statement of a hook's ``does`` (an assignment as ``target = value``)."""
    if isinstance(x, X.Assign):
        return f"{X.to_source(x.target)} = {source(x.value)}"
    return X.stmt_source(x)
