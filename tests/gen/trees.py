"""Expression trees (tuples) and their text; the constants of the expression language."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction as Fr

# ('n', name) | ('c', Fraction) | ('f', fn, arg) | ('neg', a) | ('b', op, a, b)
# | ('call', child, (args...)) | ('idx', tree, i) | ('tup', (items...)) | ('none',)

UNARY_ELEMENTWISE = ("relu", "tanh", "sigmoid", "exp", "log", "sin", "cos", "sqrt", "abs")
RATIONAL_UNARY = ("relu", "abs")   # exact results stay rationals
#: Transcendental ops per problem (tanh, exp, sqrt, fractional powers, Tanh modules, ...).
#: Exact values of nested transcendental expressions swell (thousands of SymPy ops per
#: element after a few layers), and solve time with them; past the budget the generator
#: sticks to ops whose exact values stay rational.
TRANSCENDENTAL_BUDGET = 4
REDUCTIONS = ("sum", "mean", "norm")

VALUES = [Fr(1, 2), Fr(-1, 2), Fr(1), Fr(-1), Fr(3, 4), Fr(-3, 4), Fr(2), Fr(-2), Fr(1, 4), Fr(-1, 4),
          Fr(3, 2), Fr(-3, 2), Fr(0), Fr(5, 4), Fr(-5, 4), Fr(1, 8)]
ODD_VALUES = [Fr(1, 3), Fr(-2, 3), Fr(3, 10), Fr(-7, 10), Fr(1, 5)]


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
    if t[0] in ("n", "f", "call", "idx", "tup", "none"):
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
        return f"{t[1]}({', '.join(src(a) for a in t[2])})"
    if k == "idx":
        return f"{src(t[1])}[{t[2]}]"
    if k == "tup":
        inner = ", ".join(src(a) for a in t[1])
        return f"({inner},)" if len(t[1]) == 1 else f"({inner})"
    if k == "none":
        return "None"
    raise TypeError(t)


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
