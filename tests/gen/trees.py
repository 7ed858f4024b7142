"""Expression trees (tuples) and their text; the constants of the expression language."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction as Fr

# ('n', name) | ('c', Fraction) | ('f', fn, arg) | ('neg', a) | ('b', op, a, b)
# | ('call', child, (args...)) | ('idx', tree, i) | ('tup', (items...)) | ('none',)
# v2 (the contract's method syntax, keyword arguments, indexing):
# | ('op', form, name, recv, items, post, shape, sem)   form "method" (recv.name(items)) or "fn"
#       (name(items)); items: trees, ('lit', text), ('kw', key, item), ('lst', items);
#       post: text appended (a tuple result indexed: "[1]"); shape: the result's;
#       sem: "node" (one autograd node over the tensor items) or "detach" (no grad)
#       form "cmp": a comparison operator (recv name items[0]: ``a > 0``), sem "detach" (a bool
#       tensor, no node), as comparisons' method and function forms are
# | ('sub', tree, text, shape, label)   tree[text], label: select / slice / None / ... (coverage)
# | ('attr', tree, name, shape)         tree.T, tree.mT

UNARY_ELEMENTWISE = ("relu", "tanh", "sigmoid", "exp", "log", "sin", "cos", "sqrt", "abs", "square", "sign", "reciprocal",
                     "rsqrt", "log1p", "expm1", "atan", "erf", "sinh", "cosh", "tan", "log2", "log10")
#: defined (finite) only for arguments > 0 (log1p: > -1), so the generator gives them a positive argument
#: (reciprocal: always a positive one, tests/gen/exprs.py)
POSITIVE_UNARY = ("log", "sqrt", "rsqrt", "log1p", "log2", "log10")
RATIONAL_UNARY = ("relu", "abs", "square", "sign", "reciprocal")   # exact results stay rationals (reciprocal: of a
                                                                   # positive argument)
#: Transcendental ops per problem (tanh, exp, sqrt, fractional powers, Tanh modules, ...).
#: Exact values of nested transcendental expressions swell (thousands of SymPy ops per
#: element after a few layers), and solve time with them; past the budget the generator
#: sticks to ops whose exact values stay rational.
TRANSCENDENTAL_BUDGET = 4
REDUCTIONS = ("sum", "mean", "norm")

VALUES = [Fr(1, 2), Fr(-1, 2), Fr(1), Fr(-1), Fr(3, 4), Fr(-3, 4), Fr(2), Fr(-2), Fr(1, 4), Fr(-1, 4),
          Fr(3, 2), Fr(-3, 2), Fr(0), Fr(5, 4), Fr(-5, 4), Fr(1, 8)]
ODD_VALUES = [Fr(1, 3), Fr(-2, 3), Fr(3, 10), Fr(-7, 10), Fr(1, 5)]


class NoExpr(Exception):
    """No expression of the requested shape can be made here: a dead end, drawn again."""


def draw_form(ctx, forms: list, method_prefix: str, label: str, shape: tuple, depth: int):
    """One expression of ``shape`` from a weighted table of forms (``[(weight, name)]``): up to four
    draws, each calling ``ctx.<method_prefix><name>``; a form that cannot make the shape raises
    NoExpr and another is drawn; the one made is counted under ``f"{label} {name}"``."""
    for _ in range(4):
        form = ctx.s.weighted(forms)
        try:
            tree = getattr(ctx, method_prefix + form)(tuple(shape), depth - 1)
        except NoExpr:
            continue
        ctx.g.v2_used[f"{label} {form}"] += 1
        return tree
    raise NoExpr()


def num_text(v: Fr) -> str:
    """A number as expression text (and YAML number when dyadic with a short decimal)."""
    if v.denominator == 1:
        return str(v.numerator)
    d = v.denominator
    if d & (d - 1) == 0 and d <= 64:
        s = f"{float(v):.10f}".rstrip("0")
        if Fr(s) == v:
            return s
    return f"{v.numerator}/{v.denominator}"


def _atomic(t) -> bool:
    if t[0] == "op" and t[1] == "cmp":
        return False
    if t[0] in ("n", "f", "call", "idx", "tup", "none", "op", "sub", "attr", "lst"):
        return True
    if t[0] == "c":
        return t[1] >= 0 and "/" not in num_text(t[1])
    return False


def src(t) -> str:
    k = t[0]
    if k == "n":
        return t[1]
    if k == "c":
        return num_text(t[1])
    if k == "f":
        return f"{t[1]}({src(t[2])})"
    if k == "neg":
        return f"-{_par(t[1])}"
    if k == "b":
        return f"{_par(t[2])} {t[1]} {_par(t[3])}"
    if k == "call":
        return f"{t[1]}({', '.join(_item(a) for a in t[2])})"
    if k == "idx":
        return f"{src(t[1])}[{t[2]}]"
    if k == "tup":
        inner = ", ".join(src(a) for a in t[1])
        return f"({inner},)" if len(t[1]) == 1 else f"({inner})"
    if k == "none":
        return "None"
    if k == "op" and t[1] == "cmp":
        return f"{_par(t[3])} {t[2]} {_par(t[4][0])}"
    if k == "op":
        args = ", ".join(_item(a) for a in t[4])
        head = f"{_par(t[3])}.{t[2]}" if t[1] == "method" else t[2]
        return f"{head}({args}){t[5]}"
    if k == "sub":
        return f"{_par(t[1])}[{t[2]}]"
    if k == "attr":
        return f"{_par(t[1])}.{t[2]}"
    raise TypeError(t)


def _item(a) -> str:
    """One argument of a v2 call: a tree, a literal, a keyword argument, a list."""
    if a[0] == "lit":
        return a[1]
    if a[0] == "kw":
        return f"{a[1]}={_item(a[2])}"
    if a[0] == "lst":
        return "[" + ", ".join(_item(x) for x in a[1]) + "]"
    return src(a)


def tensor_items(t) -> list:
    """The tensor-valued trees among a v2 node's receiver and arguments."""
    out = []
    if t[0] == "op":
        todo = ([t[3]] if t[3] is not None else []) + list(t[4])
    else:
        todo = [t[1]]
    while todo:
        a = todo.pop(0)
        if a[0] == "lit":
            continue
        if a[0] == "kw":
            todo.insert(0, a[2])
        elif a[0] == "lst":
            todo[0:0] = list(a[1])
        else:
            out.append(a)
    return out


def _par(t) -> str:
    return src(t) if _atomic(t) else f"({src(t)})"


def op_names(t, out: Counter) -> None:
    """Count the expression ops of a tree (for coverage reports)."""
    k = t[0]
    if k == "f":
        out[t[1]] += 1
        op_names(t[2], out)
    elif k == "neg":
        out["unary -"] += 1
        op_names(t[1], out)
    elif k == "b":
        a_num, b_num = t[2][0] == "c", t[3][0] == "c"
        tag = t[1] + (" n" if b_num else "") if not a_num else "n " + t[1]
        out[tag] += 1
        op_names(t[2], out)
        op_names(t[3], out)
    elif k == "call":
        out["child call"] += 1
        for a in t[2]:
            op_names(a, out)
    elif k == "idx":
        op_names(t[1], out)
    elif k == "tup":
        for a in t[1]:
            op_names(a, out)
    elif k == "op":
        out[f"cmp {t[2]}" if t[1] == "cmp" else f".{t[2]}()" if t[1] == "method" else f"{t[2]}()"] += 1
        if any(a[0] == "kw" for a in t[4]):
            out["keyword arguments"] += 1
        for a in tensor_items(t):
            op_names(a, out)
    elif k == "sub":
        out[f"index {t[4]}"] += 1
        op_names(t[1], out)
    elif k == "attr":
        out[f".{t[2]}"] += 1
        op_names(t[1], out)
