"""``adjoint latex``: the hand derivation of a problem as a standalone LaTeX document.

For every variant the document derives, in the order a person would on paper: the model as
equations (one per named tensor, with the autograd nodes it creates), the forward pass
(symbolic, then with numbers), the Lagrangian ``L = loss + sum_k <lambda_k, Phi_k(...) - x_k>``
with its stationarity conditions and the adjoint recursion ``lambda = J^T lambda`` with
values, every hook call in firing order (what it is handed, identified with a multiplier,
and what a returned value changes upstream), and the final gradients written factor by
factor. docs/latex.md describes the layout and the number-formatting rule.

All mathematics is printed by :class:`DerivationPrinter`, a subclass of SymPy's
``LatexPrinter``: exact values (``flint.fmpq`` or SymPy expressions) go through its number
rule or SymPy's own printing, the expression trees built here from the traced graph
(``T*`` classes) through ``_print_T*`` methods. Numbers are never taken from floats: every
value shown is derived from the exact prediction (``VariantPrediction.graph`` /
``.forward``), and the gradients PyTorch actually carries (hooks included) come from the
engine's record (``VariantPrediction.backward``).

Nothing here imports torch.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from fractions import Fraction

import flint
import numpy as np
import sympy
from sympy.printing.latex import LatexPrinter
from sympy.printing.precedence import PRECEDENCE

from .. import exact as E
from .. import expr as X
from ..exact import Exact
from ..forward import literal_value
from ..ops import RULES
from ..prediction import HookRecord, Prediction, VariantPrediction
from ..reverse import function_vjp

fmpq = flint.fmpq

# ----------------------------------------------------------------------------- layout constants

#: significant digits shown for a value that is not printed exactly
SIG_DIGITS = 10
#: a fraction is "short" when numerator and denominator are both below this
SHORT_FRACTION = 1000
#: usable width of a display line, in em of the 11pt body font (text width is ~44em)
LINE_EM = 39.0
#: at most this many rows of a matrix are shown (the middle ones are elided)
MAX_ROWS = 8
#: an exact fraction longer than this (digits) is not repeated next to its decimal
MAX_FRACTION_DIGITS = 36
#: chain-rule expansions with more paths than this are summarised by the recursion
MAX_PATHS = 4
#: a constraint list longer than this is shown in part in the written-out Lagrangian
MAX_CONSTRAINTS = 12


# ============================================================================= numbers

@dataclass(frozen=True)
class Num:
    """A formatted number: ``tex`` without its sign; ``exact`` says nothing was cut off."""

    tex: str
    negative: bool
    exact: bool
    kind: str          # int | dec | frac | approx | special | closed

    def signed(self) -> str:
        return ("-" if self.negative else "") + self.tex


def _terminating(q: int) -> tuple[bool, int]:
    """Does p/q have a finite decimal expansion; with how many decimals (q in lowest terms)."""
    a = b = 0
    while q % 2 == 0:
        q //= 2
        a += 1
    while q % 5 == 0:
        q //= 5
        b += 1
    return q == 1, max(a, b)


def _exp10(p: int, q: int) -> int:
    """floor(log10(p/q)) for p, q > 0, exactly."""
    e = len(str(p)) - len(str(q))

    def at_least(k: int) -> bool:   # p/q >= 10**k
        return p * 10 ** (-k) >= q if k < 0 else p >= q * 10 ** k

    while not at_least(e):
        e -= 1
    while at_least(e + 1):
        e += 1
    return e


def _truncated(p: int, q: int, negative: bool) -> Num:
    """The first SIG_DIGITS significant digits of p/q (truncated, never rounded), then an ellipsis."""
    e = _exp10(p, q)
    shift = SIG_DIGITS - 1 - e
    digits = str(p * 10 ** shift // q if shift >= 0 else p // (q * 10 ** (-shift)))
    if -5 <= e <= 9:
        if e >= 0:
            whole, frac = digits[:e + 1], digits[e + 1:]
        else:
            whole, frac = "0", "0" * (-e - 1) + digits
        frac = frac.rstrip("0") or "0"
        return Num(f"{whole}.{frac}\\ldots", negative, False, "approx")
    mant = digits[0] + "." + (digits[1:].rstrip("0") or "0")
    return Num(f"{mant}\\ldots\\times 10^{{{e}}}", negative, False, "approx")


def format_rational(x) -> Num:
    """The number rule (docs/latex.md).

    1. an integer below 10**12: as is;
    2. a terminating decimal with at most SIG_DIGITS significant digits (and 1e-5 <= |x| < 1e10):
       that decimal, which is exact (0.3, -1.847648, -0.4079606784);
    3. a fraction whose numerator and denominator are below SHORT_FRACTION: the fraction (1/3);
    4. anything else: its first SIG_DIGITS significant digits, truncated, followed by an ellipsis.
    """
    p, q = int(x.p), int(x.q)
    negative = p < 0
    p = abs(p)
    if p == 0:
        return Num("0", False, True, "int")
    if q == 1 and p < 10 ** 12:
        return Num(str(p), negative, True, "int")
    if q != 1:
        term, k = _terminating(q)
        if term:
            n = p * 10 ** k // q
            e = _exp10(p, q)
            if len(str(n)) <= SIG_DIGITS and -5 <= e <= 9:
                s = str(n).rjust(k + 1, "0")
                return Num(f"{s[:-k]}.{s[-k:]}", negative, True, "dec")
        if p < SHORT_FRACTION and q < SHORT_FRACTION:
            return Num(f"\\frac{{{p}}}{{{q}}}", negative, True, "frac")
    return _truncated(p, q, negative)


def exact_fraction(x, slash: bool = False) -> str | None:
    """The reduced fraction of a result, when its printed form is cut off (ends in an ellipsis) or is a
    decimal of more than 4 significant digits (-0.4079606784 = -3983991/9765625); None otherwise."""
    if type(x) is not fmpq or x.q == 1:
        return None
    shown = format_rational(x)
    if shown.kind in ("int", "frac"):
        return None
    if shown.kind == "dec" and len(shown.tex.replace(".", "").lstrip("0")) <= 4:
        return None
    p, q = abs(int(x.p)), int(x.q)
    if len(str(p)) + len(str(q)) > MAX_FRACTION_DIGITS:
        return None
    sign = "-" if x.p < 0 else ""
    return f"{sign}{p}/{q}" if slash else f"{sign}\\frac{{{p}}}{{{q}}}"


# ============================================================================= widths

_CMD_WIDTH = {
    "lambda": 0.6, "ell": 0.45, "cdot": 0.8, "odot": 1.3, "top": 0.8, "ldots": 1.2, "cdots": 1.3,
    "vdots": 0.5, "ddots": 1.3, "quad": 1.0, "qquad": 2.0, ",": 0.17, ";": 0.28, ":": 0.22, "!": -0.17,
    "partial": 0.6, "sum": 1.1, "langle": 0.4, "rangle": 0.4, "lVert": 0.5, "rVert": 0.5, "left": 0.0,
    "right": 0.0, "infty": 1.0, "times": 1.3, "sigma": 0.6, "tanh": 1.9, "exp": 1.5, "log": 1.3,
    "sin": 1.3, "cos": 1.4, "mathcal": 0.0, "tilde": 0.0, "bar": 0.0, "mathbf": 0.0, "mathrm": 0.0,
    "displaystyle": 0.0, "textstyle": 0.0, "nabla": 0.8, "to": 1.3, "le": 1.2, "ge": 1.2, "ne": 1.2,
    "equiv": 1.3, "approx": 1.3, "mapsto": 1.5, "gets": 1.3, "quad ": 1.0, "phantom": 0.0, "mathit": 0.0,
    "operatorname": 0.0, "mathtt": 0.0, "text": 0.0, "big": 0.0, "Big": 0.0, "hat": 0.0, "in": 1.0,
    "Phi": 0.8, "mathbb": 0.0, "underbrace": 0.0, "dots": 1.2, "colon": 0.4, "vert": 0.3, "mid": 0.6,
    "lbrack": 0.3, "rbrack": 0.3, "{": 0.5, "}": 0.5, "_": 0.5, "&": 0.0, "%": 0.0,
}
_TEXT_ARG = ("operatorname", "mathrm", "text", "mathtt", "mathit", "textrm", "texttt")


class _W:
    """A rough width estimate (em) of math LaTeX as this module writes it."""

    def __init__(self, s: str):
        self.s = s
        self.i = 0

    def group(self, scale: float) -> float:
        s = self.s
        if self.i < len(s) and s[self.i] == "{":
            depth, j = 0, self.i
            while j < len(s):
                if s[j] == "{":
                    depth += 1
                elif s[j] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                elif s[j] == "\\":
                    j += 1
                j += 1
            inner = s[self.i + 1:j]
            self.i = j + 1
            return tex_width(inner) * scale
        # a single token
        start = self.i
        self.token_width()
        return tex_width(s[start:self.i]) * scale

    def raw_group(self) -> str:
        s = self.s
        if self.i < len(s) and s[self.i] == "{":
            depth, j = 0, self.i
            while j < len(s):
                if s[j] == "{":
                    depth += 1
                elif s[j] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            inner = s[self.i + 1:j]
            self.i = j + 1
            return inner
        return ""

    def token_width(self) -> float:
        s = self.s
        c = s[self.i]
        if c == "\\":
            m = re.match(r"\\([A-Za-z]+|.)", s[self.i:])
            name = m.group(1)
            self.i += len(m.group(0))
            if name in _TEXT_ARG:
                return len(self.raw_group()) * 0.52
            if name == "frac":
                a = self.group(1.0)
                b = self.group(1.0)
                return max(a, b) + 0.35
            if name == "sqrt":
                return self.group(1.0) + 0.9
            if name == "begin":
                env = self.raw_group()
                end = s.find("\\end{" + env + "}", self.i)
                body = s[self.i:end if end >= 0 else len(s)]
                self.i = (end + len("\\end{" + env + "}")) if end >= 0 else len(s)
                if env.startswith("aligned") or env.startswith("gathered"):
                    return max(tex_width(r) for r in body.split("\\\\"))
                return _matrix_width(body)
            if name in ("mathbf", "tilde", "bar", "hat", "mathcal", "mathbb", "phantom"):
                return self.group(1.0)
            if name in ("hspace", "hspace*"):
                self.raw_group()
                return 1.0
            return _CMD_WIDTH.get(name, 0.7)
        if c in "^_":
            self.i += 1
            return self.group(0.72)
        if c == "{":
            return self.group(1.0)
        self.i += 1
        if c.isdigit():
            return 0.5
        if c.isupper():
            return 0.72
        if c.isalpha():
            return 0.55
        if c == "=":
            return 1.35
        if c in "+-<>":
            return 1.25
        if c in ",;":
            return 0.35
        if c == ".":
            return 0.28
        if c in "()[]|/":
            return 0.4
        if c in " \n\t&~":
            return 0.0
        if c == "'":
            return 0.3
        return 0.6


def tex_width(s: str) -> float:
    """Estimated width (em, 11pt) of a piece of math LaTeX."""
    w = _W(s)
    total = 0.0
    while w.i < len(s):
        total += w.token_width()
    return total


def _matrix_width(body: str) -> float:
    rows = [r for r in body.split("\\\\") if r.strip()]
    cols: list[float] = []
    for r in rows:
        for j, cell in enumerate(r.split("&")):
            cw = tex_width(cell) * 0.92 if "\\frac" in cell else tex_width(cell)
            if j >= len(cols):
                cols.append(cw)
            else:
                cols[j] = max(cols[j], cw)
    return sum(cols) + 0.95 * max(len(cols) - 1, 0) + 1.2


# ============================================================================= expression trees

class TNode:
    """An expression over tensors, built from the traced graph (or a problem expression)."""

    shape: tuple = ()

    def children(self) -> tuple:
        return ()


@dataclass(eq=False)
class TAtom(TNode):          # a leaf or a named intermediate (a state x_k)
    var: int
    shape: tuple


@dataclass(eq=False)
class TConst(TNode):         # a Python number (or a constant tensor value)
    value: object            # Fraction | fmpq | Exact
    shape: tuple = ()


@dataclass(eq=False)
class TBin(TNode):           # elementwise + - * / ** and the VJP-only elementwise product
    op: str                  # add | sub | mul | div | pow | had
    a: TNode
    b: TNode
    shape: tuple

    def children(self):
        return (self.a, self.b)


@dataclass(eq=False)
class TNeg(TNode):
    a: TNode
    shape: tuple

    def children(self):
        return (self.a,)


@dataclass(eq=False)
class TMatMul(TNode):        # matrix product (column convention for 1-D tensors)
    a: TNode
    b: TNode
    shape: tuple

    def children(self):
        return (self.a, self.b)


@dataclass(eq=False)
class TInner(TNode):         # dot product of two vectors: a^T b
    a: TNode
    b: TNode
    shape: tuple = ()

    def children(self):
        return (self.a, self.b)


@dataclass(eq=False)
class TT(TNode):             # transpose (of a 1-D column: the row)
    a: TNode
    shape: tuple

    def children(self):
        return (self.a,)


@dataclass(eq=False)
class TFn(TNode):            # relu tanh sigmoid exp log sin cos sqrt abs sum mean norm sign step
    name: str
    a: TNode
    shape: tuple

    def children(self):
        return (self.a,)


@dataclass(eq=False)
class TCall(TNode):          # a custom autograd.Function applied to its inputs
    name: str
    args: tuple
    shape: tuple

    def children(self):
        return self.args


@dataclass(eq=False)
class TLam(TNode):           # the multiplier lambda_k of state x_k (tilde: the gradient PyTorch carries)
    var: int
    shape: tuple
    tilde: bool = False


@dataclass(eq=False)
class TSumTo(TNode):         # sum over broadcast dimensions back to `shape`
    a: TNode
    shape: tuple

    def children(self):
        return (self.a,)


@dataclass(eq=False)
class TOnes(TNode):          # the all-ones tensor of a shape
    shape: tuple


@dataclass(eq=False)
class TName(TNode):          # a plain name: a hook argument, a Function slot
    name: str
    shape: tuple = ()
    code: bool = True        # typeset as code (hook arguments) or as a math symbol


@dataclass(eq=False)
class TIndex(TNode):
    a: TNode
    index: int
    shape: tuple = ()

    def children(self):
        return (self.a,)


@dataclass(eq=False)
class TTuple(TNode):
    items: tuple
    shape: tuple = ()

    def children(self):
        return self.items


@dataclass(eq=False)
class TNone(TNode):
    shape: tuple = ()


@dataclass(eq=False)
class TSym(TNode):           # a symbol already in LaTeX (x_{3}, \ell, or an expression standing for a tensor)
    tex: str
    shape: tuple = ()
    atomic: bool = True


@dataclass(eq=False)
class TDeriv(TNode):         # the derivative d top / d bottom
    top: TNode
    bottom: TNode
    shape: tuple = ()


@dataclass(eq=False)
class TVal(TNode):           # an exact value, printed by the number rule
    value: Exact
    shape: tuple = ()


@dataclass(eq=False)
class TProduct(TNode):       # a written-out product of factors (a chain rule), joined by a centred dot
    items: tuple
    shape: tuple = ()

    def children(self):
        return self.items


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _is_scalar_shape(shape) -> bool:
    return _numel(shape) == 1


def _const_value(node: TNode):
    if isinstance(node, TConst) and not isinstance(node.value, Exact):
        return Fraction(node.value) if not isinstance(node.value, fmpq) else Fraction(int(node.value.p), int(node.value.q))
    return None


# ----------------------------------------------------------------------------- simplification

def simplify(n: TNode) -> TNode:
    """Display simplifications that keep the value: 1*a, a^1, (a^T)^T, --a, sum_to of the same shape."""
    if isinstance(n, TBin):
        a, b = simplify(n.a), simplify(n.b)
        ca, cb = _const_value(a), _const_value(b)
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
            if ca is not None and isinstance(b, TBin) and b.op in ("mul", "had") and _const_value(b.a) is not None:
                return simplify(TBin("mul", TConst(ca * _const_value(b.a)), b.b, n.shape))
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
        if n.op == "div" and isinstance(a, TBin) and a.op == "mul" and (_const_value(a.a) or 0) < 0:
            return TNeg(TBin("div", TBin("mul", TConst(-_const_value(a.a)), a.b, a.shape), b, n.shape), n.shape)
        if n.op == "add" and isinstance(b, TNeg):
            return TBin("sub", a, b.a, n.shape)
        if n.op == "sub" and isinstance(b, TNeg):
            return TBin("add", a, b.a, n.shape)
        return TBin(n.op, a, b, n.shape)
    if isinstance(n, TNeg):
        a = simplify(n.a)
        if isinstance(a, TNeg):
            return a.a
        ca = _const_value(a)
        if ca is not None:
            return TConst(-ca, n.shape)
        return TNeg(a, n.shape)
    if isinstance(n, TT):
        a = simplify(n.a)
        if isinstance(a, TT):
            return a.a
        if len(a.shape) == 0 or isinstance(a, (TConst, TOnes)) and _is_scalar_shape(a.shape):
            return a
        if isinstance(a, TNeg):
            return TNeg(simplify(TT(a.a, n.shape)), n.shape)
        if isinstance(a, TMatMul) and (isinstance(a.a, TT) or isinstance(a.b, TT)):
            return simplify(TMatMul(TT(a.b, _t_shape(a.b.shape)), TT(a.a, _t_shape(a.a.shape)), n.shape))
        if isinstance(a, TBin) and a.op in ("add", "sub"):
            return simplify(TBin(a.op, TT(a.a, _t_shape(a.a.shape)), TT(a.b, _t_shape(a.b.shape)), n.shape))
        return TT(a, n.shape)
    if isinstance(n, TMatMul):
        return TMatMul(simplify(n.a), simplify(n.b), n.shape)
    if isinstance(n, TInner):
        return TInner(simplify(n.a), simplify(n.b), n.shape)
    if isinstance(n, TSumTo):
        a = simplify(n.a)
        if tuple(a.shape) == tuple(n.shape):
            return a
        if _numel(a.shape) == _numel(n.shape):
            return a
        return TSumTo(a, n.shape)
    if isinstance(n, TFn):
        return TFn(n.name, simplify(n.a), n.shape)
    if isinstance(n, TCall):
        n.args = tuple(simplify(a) for a in n.args)   # in place: Function formulas are keyed by id
        return n
    return n


def _t_shape(shape) -> tuple:
    if len(shape) == 1:
        return (1, shape[0])
    if len(shape) == 2:
        return (shape[1], shape[0])
    return tuple(shape)


def _add(a: TNode | None, b: TNode) -> TNode:
    return b if a is None else TBin("add", a, b, b.shape)


# ----------------------------------------------------------------------------- reverse mode on trees

def vjp_tree(node: TNode, lam: TNode, out: dict, functions: dict) -> None:
    """Symbolic reverse mode: accumulate into ``out[var]`` the tree of J^T lam for every atom.

    ``functions`` maps id(TCall) -> (cotangent tree -> {slot index: declared formula tree})."""
    if isinstance(node, TAtom):
        out[node.var] = _add(out.get(node.var), lam)
        return
    if isinstance(node, (TConst, TOnes, TName, TNone)):
        return
    sh = node.shape

    def sum_to(t: TNode, shape) -> TNode:
        return t if tuple(t.shape) == tuple(shape) else _sum_to(t, shape)

    if isinstance(node, TBin):
        a, b = node.a, node.b
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
            e = _const_value(b)
            if e is not None:
                local = TBin("mul", TConst(e), TBin("pow", a, TConst(e - 1), a.shape), a.shape)
                vjp_tree(a, TBin("had", lam, local, sh), out, functions)
            else:
                if not isinstance(a, TConst):
                    local = TBin("mul", b, TBin("pow", a, TBin("sub", b, TConst(Fraction(1)), b.shape), sh), sh)
                    vjp_tree(a, sum_to(TBin("had", lam, local, sh), a.shape), out, functions)
                local_b = TBin("mul", node, TFn("log", a, a.shape), sh)
                vjp_tree(b, sum_to(TBin("had", lam, local_b, sh), b.shape), out, functions)
        return
    if isinstance(node, TNeg):
        vjp_tree(node.a, TNeg(lam, lam.shape), out, functions)
        return
    if isinstance(node, TMatMul):
        a, b = node.a, node.b
        if len(b.shape) == 1:                         # M v
            vjp_tree(a, TMatMul(lam, TT(b, _t_shape(b.shape)), a.shape), out, functions)
            vjp_tree(b, TMatMul(TT(a, _t_shape(a.shape)), lam, b.shape), out, functions)
        else:
            vjp_tree(a, TMatMul(lam, TT(b, _t_shape(b.shape)), a.shape), out, functions)
            vjp_tree(b, TMatMul(TT(a, _t_shape(a.shape)), lam, b.shape), out, functions)
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
        a = node.a
        name = node.name
        if name == "relu":
            g = TBin("had", lam, TFn("step", a, a.shape), sh)
        elif name == "tanh":
            g = TBin("had", lam, TBin("sub", TConst(Fraction(1)), TBin("pow", node, TConst(Fraction(2)), sh), sh), sh)
        elif name == "sigmoid":
            g = TBin("had", lam, TBin("mul", node, TBin("sub", TConst(Fraction(1)), node, sh), sh), sh)
        elif name == "exp":
            g = TBin("had", lam, node, sh)
        elif name == "log":
            g = TBin("div", lam, a, sh)
        elif name == "sin":
            g = TBin("had", lam, TFn("cos", a, sh), sh)
        elif name == "cos":
            g = TBin("had", lam, TNeg(TFn("sin", a, sh), sh), sh)
        elif name == "sqrt":
            g = TBin("div", lam, TBin("mul", TConst(Fraction(2)), node, sh), sh)
        elif name == "abs":
            g = TBin("had", lam, TFn("sign", a, sh), sh)
        elif name == "sum":
            g = TBin("had", lam, TOnes(a.shape), a.shape)
        elif name == "mean":
            g = TBin("had", TBin("div", lam, TConst(Fraction(_numel(a.shape))), ()), TOnes(a.shape), a.shape)
        elif name == "norm":
            g = TBin("had", lam, TBin("div", a, node, a.shape), a.shape)
        else:                                         # step/sign: derivative 0 almost everywhere
            return
        vjp_tree(a, g, out, functions)
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


def _sum_to(t: TNode, shape) -> TNode:
    """Sum a broadcast gradient back to ``shape``; a bias row (the sum over rows) reads 1^T t."""
    shape = tuple(shape)
    if len(t.shape) == 2 and (shape == (t.shape[1],) or shape == (1, t.shape[1])):
        ones = TOnes((t.shape[0],))
        return TT(TMatMul(TT(ones, (1, t.shape[0])), t, (1, t.shape[1])), (t.shape[1],)) if len(shape) == 1 \
            else TMatMul(TT(ones, (1, t.shape[0])), t, shape)
    return TSumTo(t, shape)


# ============================================================================= SymPy side (scalar problems)

class Relu(sympy.Function):
    """relu as an opaque function (its derivative is written with Indicator)."""

    nargs = 1


class Indicator(sympy.Function):
    """The indicator 1[x > 0] (PyTorch's relu'(x), 0 at x = 0)."""

    nargs = 1


class Sigmoid(sympy.Function):
    nargs = 1


def to_sympy(n: TNode, sym) -> sympy.Expr:
    """A scalar tree as a SymPy expression (every tensor has one element). ``sym(var)`` names atoms."""
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
    if isinstance(n, (TT, TSumTo)):
        return to_sympy(n.a, sym)
    if isinstance(n, TFn):
        a = to_sympy(n.a, sym)
        table = {"relu": Relu, "tanh": sympy.tanh, "sigmoid": Sigmoid, "exp": sympy.exp, "log": sympy.log,
                 "sin": sympy.sin, "cos": sympy.cos, "sqrt": sympy.sqrt, "abs": sympy.Abs, "sum": lambda x: x,
                 "mean": lambda x: x, "norm": sympy.Abs, "sign": sympy.sign, "step": Indicator}
        return table[n.name](a)
    if isinstance(n, TCall):
        return sympy.Function(n.name)(*[to_sympy(a, sym) for a in n.args])
    raise TypeError(f"cannot convert {type(n).__name__}")


# ============================================================================= the printer

_NUM_CACHE: dict = {}
_CLOSED_CACHE: dict = {}
_EDGE = 12          # at most this many leading and trailing columns are ever formatted
def decimal_value(e, dps: int = 50) -> Fraction | None:
    """A constant closed form as a Fraction accurate to ~``dps`` digits; None if it is not a real number."""
    v = E.s_approx(e, dps)
    if v is None:
        return None
    sign, man, exp, _ = v._mpf_
    value = Fraction(int(man)) * (Fraction(2) ** int(exp)) if man else Fraction(0)
    return -value if sign else value


def _small(e, limit: int) -> bool:
    """Has the expression at most ``limit`` nodes (counted without walking all of a large one)?"""
    for n, _ in enumerate(sympy.preorder_traversal(e)):
        if n >= limit:
            return False
    return True


def elem_prec(e) -> int:
    """Precedence of an element value as printed (a closed-form sum needs parentheses in a product)."""
    if type(e) is fmpq:
        return 45 if e < 0 else 100
    if isinstance(e, sympy.Add):
        return 40
    if isinstance(e, sympy.Mul):
        return 45 if e.could_extract_minus_sign() else 50
    if isinstance(e, sympy.Pow):
        return 60
    if isinstance(e, sympy.Rational):
        return 45 if e < 0 else 100
    return 100


class DerivationPrinter(LatexPrinter):
    """SymPy's LaTeX printer, taught our objects: exact tensors, expression trees, multipliers.

    ``names`` maps SymPy symbol names (``v#12`` for var 12, ``l#12`` for its multiplier) to LaTeX;
    ``subst`` (var -> Exact) makes atoms print as their values (the "numbers substituted"
    line of a derivation); ``tilde`` marks multipliers as the gradient PyTorch carries."""

    printmethod = "_adjoint_latex"

    def __init__(self, names: dict[str, str], subst: dict | None = None, lam_values: dict | None = None,
                 budget: float = LINE_EM):
        super().__init__({"mul_symbol": None, "fold_short_frac": False})
        self.names = names
        self.subst = subst
        self.lam_values = lam_values
        self.budget = budget

    def with_subst(self, subst: dict, lam_values: dict | None = None) -> "DerivationPrinter":
        return DerivationPrinter(self.names, subst, lam_values, self.budget)

    # ---- SymPy objects ----------------------------------------------------
    def _print_Symbol(self, expr, style="plain"):
        name = expr.name
        if self.subst is not None:
            if name.startswith("v#") and int(name[2:]) in self.subst:
                return self._subst_scalar(self.subst[int(name[2:])])
            if name.startswith("l#") and self.lam_values and int(name[2:]) in self.lam_values:
                return self._subst_scalar(self.lam_values[int(name[2:])])
        if name in self.names:
            return self.names[name]
        return super()._print_Symbol(expr, style)

    def _subst_scalar(self, value: Exact) -> str:
        tex = self.elem(value.item())
        return f"\\left({tex}\\right)" if tex.startswith("-") or elem_prec(value.item()) < 50 else tex

    def parenthesize(self, item, level, is_neg=False, strict=False):
        if self.subst is not None and isinstance(item, sympy.Symbol) and level >= PRECEDENCE["Pow"]:
            tex = self._print(item)
            if "\\frac" in tex or "\\ldots" in tex:
                return f"\\left({tex}\\right)"
        return super().parenthesize(item, level, is_neg, strict)

    def _print_Relu(self, expr, exp=None):
        tex = f"\\operatorname{{relu}}\\left({self._print(expr.args[0])}\\right)"
        return f"{tex}^{{{exp}}}" if exp else tex

    def _print_Indicator(self, expr, exp=None):
        tex = f"\\mathbf{{1}}\\left[{self._print(expr.args[0])} > 0\\right]"
        return f"\\left({tex}\\right)^{{{exp}}}" if exp else tex

    def _print_Sigmoid(self, expr, exp=None):
        tex = f"\\sigma\\left({self._print(expr.args[0])}\\right)"
        return f"{tex}^{{{exp}}}" if exp else tex

    # ---- numbers and exact tensors -----------------------------------------
    def num(self, e) -> Num:
        if type(e) is fmpq:
            return format_rational(e)
        if e is sympy.S.Infinity:
            return Num("\\infty", False, True, "special")
        if e is sympy.S.NegativeInfinity:
            return Num("\\infty", True, True, "special")
        if e is sympy.S.NaN:
            return Num("\\mathrm{NaN}", False, True, "special")
        if isinstance(e, sympy.Rational):
            return format_rational(E.q(e))
        cached = _NUM_CACHE.get(e)
        if cached is None:
            cached = _NUM_CACHE[e] = self._num_closed(e)
            if len(_NUM_CACHE) > 20000:
                _NUM_CACHE.clear()
                _CLOSED_CACHE.clear()
        return cached

    def closed_form(self, e) -> str | None:
        """SymPy's LaTeX for a closed-form element; None for a large constant (its decimal is shown instead:
        printing a sum of dozens of tanh terms costs seconds and helps nobody)."""
        if e in _CLOSED_CACHE:
            return _CLOSED_CACHE[e]
        tex = None
        if e.free_symbols or _small(e, 40):
            tex = DerivationPrinter({})._print(e)
        _CLOSED_CACHE[e] = tex
        return tex

    def _num_closed(self, e) -> Num:
        closed = self.closed_form(e)
        if closed is not None and (e.free_symbols or tex_width(closed) <= 9):
            neg = closed.startswith("- ")
            return Num(closed[2:] if neg else closed, neg, True, "closed")
        frac = decimal_value(e)
        if frac is None:
            closed = closed if closed is not None else DerivationPrinter({})._print(e)
            return Num(closed, False, True, "closed")
        if frac == 0:
            return Num("0", False, False, "approx")
        return _truncated(abs(frac.numerator), frac.denominator, frac < 0)

    def elem(self, e, slash: bool = False) -> str:
        n = self.num(e)
        if slash and n.kind == "frac":
            p, q = re.match(r"\\frac\{(\d+)\}\{(\d+)\}", n.tex).groups()
            return ("-" if n.negative else "") + f"{p}/{q}"
        return n.signed()

    def exact_note(self, e, slash: bool = False) -> str | None:
        """The exact form of a result element, when the printed form does not show it."""
        if type(e) is fmpq or isinstance(e, sympy.Rational):
            return exact_fraction(E.q(e), slash)
        n = self.num(e)
        if n.kind == "approx" and not isinstance(e, sympy.Rational):
            closed = self.closed_form(e)
            if closed is not None and tex_width(closed) <= self.budget * 0.6:
                return closed
        return None

    def _print_Exact(self, x: Exact) -> str:
        tex = self.tensor(x, self.budget)
        return tex if tex is not None else self.tensor(x, 10 ** 6, max_cols=6)

    def tensor(self, x: Exact, budget: float, max_cols: int | None = None) -> str | None:
        """An exact tensor as a number, a column vector (written as a transposed row) or a
        matrix, eliding middle columns/rows to fit ``budget`` em; None if it cannot fit."""
        if x.size == 1:
            return self.elem(x.item())
        if x.ndim == 1:
            flat = x.flat()
            if len(flat) > 2 * _EDGE:       # only the ends can be shown: do not format the middle
                cells = [self.elem(e, slash=True) for e in flat[:_EDGE]] + ["\\cdots"] + \
                        [self.elem(e, slash=True) for e in flat[-_EDGE:]]
                body = self._row_fit(cells, budget - 1.5, max_cols)
            else:
                body = self._row_fit([self.elem(e, slash=True) for e in flat], budget - 1.5, max_cols)
            return None if body is None else f"\\begin{{bmatrix}}{body}\\end{{bmatrix}}^{{\\top}}"
        if x.ndim == 2:
            m, n = x.shape
            rows = list(range(m))
            if m > MAX_ROWS:
                rows = list(range(MAX_ROWS - 3)) + [None] + [m - 2, m - 1]
            cols = list(range(n)) if n <= 2 * _EDGE else list(range(_EDGE)) + [None] + list(range(n - _EDGE, n))
            grid = [[self.elem(x.a[i, j], slash=True) if j is not None else "\\cdots" for j in cols]
                    if i is not None else None for i in rows]
            n = len(cols)
            keep = self._cols_fit(grid, n, budget, max_cols)
            if keep is None:
                return None
            lines = []
            for r in grid:
                if r is None:
                    lines.append(" & ".join("\\vdots" if j is not None and cols[j] is not None else "\\ddots"
                                            for j in keep))
                else:
                    lines.append(" & ".join(r[j] if j is not None else "\\cdots" for j in keep))
            return "\\begin{bmatrix}" + " \\\\ ".join(lines) + "\\end{bmatrix}"
        # rank >= 3: the slices along the first dimension
        parts = []
        width = 2.0
        for k in range(x.shape[0]):
            sub = Exact(x.a[k], x.rational)
            t = self.tensor(sub, budget / 2)
            if t is None:
                return None
            w = tex_width(t) + 1.0
            if width + w > budget and parts:
                parts.append("\\ldots")
                break
            parts.append(t)
            width += w
        return "\\left[" + ",\\ ".join(parts) + "\\right]"

    def _row_fit(self, cells: list[str], budget: float, max_cols: int | None) -> str | None:
        widths = [tex_width(c) for c in cells]
        keep = _choose_columns(widths, budget, max_cols)
        if keep is None:
            return None
        return " & ".join(cells[j] if j is not None else "\\cdots" for j in keep)

    def _cols_fit(self, grid, n: int, budget: float, max_cols: int | None):
        widths = [max(tex_width(r[j]) for r in grid if r is not None) for j in range(n)]
        return _choose_columns(widths, budget, max_cols)

    # ---- expression trees ---------------------------------------------------
    def prec(self, n: TNode) -> int:
        if isinstance(n, TT) and self.subst is not None and isinstance(n.a, (TAtom, TLam)):
            value = self.subst.get(n.a.var) if isinstance(n.a, TAtom) else (self.lam_values or {}).get(n.a.var)
            if value is not None and value.size == 1:
                return self.prec(n.a)      # the transpose of a number prints as the number
        if isinstance(n, TAtom) and self.subst is not None:
            v = self.subst.get(n.var)
            if v is not None and v.size == 1:
                tex = self.elem(v.item())
                if tex.startswith("-"):
                    return 45
                if elem_prec(v.item()) < 100:
                    return elem_prec(v.item())
                return 95 if ("\\frac" in tex or "\\ldots" in tex) else 100
            return 100
        if isinstance(n, TLam) and self.subst is not None and self.lam_values is not None:
            v = self.lam_values.get(n.var)
            if v is not None and v.size == 1 and self.elem(v.item()).startswith("-"):
                return 45
            return 100
        if isinstance(n, TVal):
            if n.value.size == 1:
                e = n.value.item()
                return 45 if self.elem(e).startswith("-") else min(elem_prec(e), 100)
            return 100
        if isinstance(n, TConst):
            if isinstance(n.value, Exact):
                return 100
            cv = _const_value(n)
            if cv is not None and cv < 0:
                return 45
            return 95 if cv is not None and cv.denominator != 1 and format_rational(fmpq(cv.numerator, cv.denominator)).kind == "frac" else 100
        if isinstance(n, TBin):
            return {"add": 40, "sub": 40, "mul": 50, "had": 50, "div": 100, "pow": 60}[n.op]
        if isinstance(n, TNeg):
            return 45
        if isinstance(n, (TMatMul, TInner)):
            return 50
        return 100

    def p(self, n: TNode, level: int) -> str:
        tex = self._print(n)
        return f"\\left({tex}\\right)" if self.prec(n) < level else tex

    def _is_value(self, n: TNode) -> bool:
        """In substitution mode: does this operand print as a number/matrix?"""
        return self.subst is not None and isinstance(n, (TAtom, TConst, TLam))

    def _print_TAtom(self, n: TAtom) -> str:
        if self.subst is not None and n.var in self.subst:
            return self._print(self.subst[n.var])
        return self.names.get(f"v#{n.var}", f"v_{{{n.var}}}")

    def _print_TLam(self, n: TLam) -> str:
        if self.subst is not None and self.lam_values is not None and n.var in self.lam_values:
            return self._print(self.lam_values[n.var])
        base = self.names.get(f"l#{n.var}", f"\\lambda_{{{n.var}}}")
        if n.tilde:
            return "\\tilde{\\lambda}" + base[len("\\lambda"):] if base.startswith("\\lambda") else f"\\tilde{{{base}}}"
        return base

    def _print_TConst(self, n: TConst) -> str:
        if isinstance(n.value, Exact):
            return self._print(n.value)
        v = Fraction(n.value) if not isinstance(n.value, fmpq) else Fraction(int(n.value.p), int(n.value.q))
        return format_rational(fmpq(v.numerator, v.denominator)).signed()

    def _print_TOnes(self, n: TOnes) -> str:
        return "\\mathbf{1}"

    def _mul_sep(self, a: TNode, b: TNode, elementwise: bool) -> str:
        both_tensors = not _is_scalar_shape(a.shape) and not _is_scalar_shape(b.shape)
        if elementwise and both_tensors:
            return " \\odot "
        if self.subst is not None:
            return " \\cdot " if (self._is_value(a) or self._is_value(b)) and not both_tensors else "\\,"
        if isinstance(a, TConst) and _const_value(a) is not None:
            return "\\,"
        return " \\cdot " if elementwise else "\\,"

    def _print_TBin(self, n: TBin) -> str:
        a, b = n.a, n.b
        if n.op == "add":
            return f"{self.p(a, 40)} + {self.p(b, 46)}"
        if n.op == "sub":
            return f"{self.p(a, 40)} - {self.p(b, 46)}"
        if n.op in ("mul", "had"):
            if self.subst is None and _const_value(b) is not None and _const_value(a) is None:
                a, b = b, a
            la = 51 if isinstance(a, TMatMul) and not _is_scalar_shape(a.shape) else 50
            return f"{self.p(a, la)}{self._mul_sep(a, b, True)}{self.p(b, 51)}"
        if n.op == "div":
            return f"\\frac{{{self._print(a)}}}{{{self._print(b)}}}"
        if n.op == "pow":
            base = self.p(a, 100)
            if isinstance(a, (TT, TBin, TNeg, TFn)) and not base.startswith("\\left("):
                if not (isinstance(a, TFn) and a.name in ("abs", "norm")):
                    base = f"\\left({base}\\right)"
            if self.subst is not None and isinstance(a, TAtom) and ("\\frac" in base or "\\ldots" in base
                                                                     or "bmatrix" in base) and not base.startswith("\\left("):
                base = f"\\left({base}\\right)"
            if isinstance(a, TAtom) and self.subst is None and base.endswith("}") and "^" in base:
                base = f"\\left({base}\\right)"
            return f"{base}^{{{self._print(b)}}}"
        raise ValueError(n.op)

    def _print_TNeg(self, n: TNeg) -> str:
        return f"-{self.p(n.a, 50)}"

    def _print_TMatMul(self, n: TMatMul) -> str:
        la = 51 if isinstance(n.a, TBin) and n.a.op in ("mul", "had") and not _is_scalar_shape(n.a.shape) else 50
        return f"{self.p(n.a, la)}{self._mul_sep(n.a, n.b, False)}{self.p(n.b, 51)}"

    def _print_TInner(self, n: TInner) -> str:
        if self.subst is not None and _is_scalar_shape(n.a.shape):
            return f"{self.p(n.a, 50)} \\cdot {self.p(n.b, 51)}"
        return f"{self._print(TT(n.a, _t_shape(n.a.shape)))}\\,{self.p(n.b, 51)}"

    def _print_TT(self, n: TT) -> str:
        a = n.a
        if self.subst is not None and isinstance(a, (TAtom, TLam)):
            value = self.subst.get(a.var) if isinstance(a, TAtom) else (self.lam_values or {}).get(a.var)
            if value is not None:
                if value.size == 1:
                    return self._print(a)
                if value.ndim == 1:       # the transpose of a column is the row
                    tex = self._print(value)
                    return tex[:-len("^{\\top}")] if tex.endswith("^{\\top}") else tex
                if value.ndim == 2:
                    return self._print(Exact(value.a.T.copy(), value.rational))
        base = self._print(a)
        if self.prec(a) < 100 or isinstance(a, (TT, TBin)) or (isinstance(a, TFn) and a.name not in ("abs", "norm")):
            base = f"\\left({base}\\right)"
        elif base.endswith("}") and "^" in base:
            base = f"\\left({base}\\right)"
        return f"{base}^{{\\top}}"

    _FN = {"tanh": "\\tanh", "exp": "\\exp", "log": "\\log", "sin": "\\sin", "cos": "\\cos",
           "sigmoid": "\\sigma", "relu": "\\operatorname{relu}", "sum": "\\operatorname{sum}",
           "mean": "\\operatorname{mean}", "sign": "\\operatorname{sign}"}

    def _print_TFn(self, n: TFn) -> str:
        inner = self._print(n.a)
        if n.name == "sqrt":
            return f"\\sqrt{{{inner}}}"
        if n.name == "abs":
            return f"\\left|{inner}\\right|"
        if n.name == "norm":
            return f"\\left\\lVert {inner}\\right\\rVert"
        if n.name == "step":
            return f"\\mathbf{{1}}\\left[{inner} > 0\\right]"
        return f"{self._FN[n.name]}\\left({inner}\\right)"

    def _print_TCall(self, n: TCall) -> str:
        args = ",\\ ".join(self._print(a) for a in n.args)
        return f"\\operatorname{{{_tex_escape_name(n.name)}}}\\left({args}\\right)"

    def _print_TSumTo(self, n: TSumTo) -> str:
        if not n.shape or _numel(n.shape) == 1:
            return f"\\operatorname{{sum}}\\left({self._print(n.a)}\\right)"
        dims = "\\times ".join(str(d) for d in n.shape)
        return f"\\operatorname{{sum}}_{{\\to {dims}}}\\left({self._print(n.a)}\\right)"

    def _print_TName(self, n: TName) -> str:
        if n.code:
            return f"\\mathtt{{{_tex_escape_name(n.name)}}}"
        return self.names.get(f"n:{n.name}", symbol_tex(n.name))

    def _print_TIndex(self, n: TIndex) -> str:
        return f"{self.p(n.a, 100)}[{n.index}]"

    def _print_TTuple(self, n: TTuple) -> str:
        items = [self._print(i) for i in n.items]
        if len(items) == 1:
            return f"\\left({items[0]}{{,}}\\right)"
        return "\\left(" + ",\\ ".join(items) + "\\right)"

    def _print_TNone(self, n: TNone) -> str:
        return "\\mathrm{None}"

    def _print_TSym(self, n: TSym) -> str:
        return n.tex if n.atomic else f"\\left({n.tex}\\right)"

    def _print_TDeriv(self, n: TDeriv) -> str:
        return f"\\frac{{\\partial {self._print(n.top)}}}{{\\partial {self._print(n.bottom)}}}"

    def _print_TVal(self, n: TVal) -> str:
        tex = self.tensor(n.value, self.budget)
        return tex if tex is not None else self._print(n.value)

    def _print_TProduct(self, n: TProduct) -> str:
        return " \\cdot ".join(self.p(item, 51) for item in n.items)


def _choose_columns(widths: list[float], budget: float, max_cols: int | None):
    """Which columns to show (None marks the elision) so that the matrix fits ``budget``."""
    n = len(widths)
    gap = 0.95

    def total(cols):
        w = sum(widths[j] if j is not None else 1.3 for j in cols)
        return w + gap * (len(cols) - 1) + 1.2

    full = list(range(n))
    if (max_cols is None or n <= max_cols) and total(full) <= budget:
        return full
    best = None
    for shown in range(n - 1, 0, -1):
        if max_cols is not None and shown + 1 > max_cols + 1:
            continue
        head = (shown + 1) // 2
        tail = shown - head
        cols = list(range(head)) + [None] + list(range(n - tail, n))
        if total(cols) <= budget:
            best = cols
            break
    return best


def _tex_escape_name(s: str) -> str:
    return s.replace("\\", "").replace("_", "\\_").replace("#", "\\#").replace("&", "\\&").replace("%", "\\%")


_GREEK = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu",
          "nu", "xi", "pi", "rho", "sigma", "tau", "upsilon", "phi", "chi", "psi", "omega", "Gamma", "Delta",
          "Theta", "Lambda", "Xi", "Pi", "Sigma", "Upsilon", "Phi", "Psi", "Omega"}


def symbol_tex(name: str) -> str:
    """A tensor or symbol name as a math symbol: x, u_{0}, \\alpha, \\mathit{scale}_{2}."""
    m = re.fullmatch(r"([A-Za-z]+?)_?(\d+)", name)
    base, sub = (m.group(1), m.group(2)) if m else (name, None)
    if "_" in base and not m:
        head, _, tail = base.partition("_")
        return f"{symbol_tex(head)}_{{\\mathrm{{{_tex_escape_name(tail)}}}}}"
    if base in _GREEK:
        b = "\\" + base
    elif len(base) == 1:
        b = base
    else:
        b = f"\\mathit{{{_tex_escape_name(base)}}}"
    return f"{b}_{{{sub}}}" if sub is not None else b


# ============================================================================= analysis of one variant

@dataclass(eq=False)
class Step:
    """One named tensor and the expression that defines it: x_k = Phi_k(atoms)."""

    var: int                     # canonical var it defines
    index: int | None            # k of x_k (None: the loss)
    tree: TNode
    eqns: list[int]              # eqns of the step (unnamed intermediates inlined)
    atoms: list[int]             # atoms read, in order of first appearance
    call: int | None             # module call its last op ran in
    nodes: list[str]             # autograd nodes it creates
    functions: dict = field(default_factory=dict)   # id(TCall) -> lam -> {slot: tree}


class Analysis:
    """Everything the document says about one variant, computed from the exact graph."""

    def __init__(self, pred: Prediction, v: VariantPrediction):
        self.pred = pred
        self.v = v
        g = self.g = v.graph
        self.fwd = v.forward
        self.symbols = pred.problem.symbols if pred.numeric else None
        self.alias: dict[int, int] = {}
        self.made_by: dict[int, object] = {}
        for eqn in g.eqns:
            for k, o in enumerate(eqn.outs):
                self.made_by[o] = eqn
                if eqn.prim == "bhf":
                    self.alias[o] = eqn.ins[k]
        self.names_of: dict[int, list[str]] = {}
        for name, vid in g.names.items():
            self.names_of.setdefault(self.canon(vid), []).append(name)
        self.leaves = [vid for vid in g.decls]
        self.root = self.canon(g.root)
        named = sorted(c for c in self.names_of if not g.vars[c].leaf)
        root_names = set(self.names_of.get(self.root, [])) - {"loss"}
        self.root_is_state = bool(root_names) or self.root in g.decls
        self.states = [c for c in named if c != self.root or self.root_is_state]
        self.atom_set = set(self.leaves) | set(self.states)
        self._symbols()
        self.steps: dict[int, Step] = {}
        for k, s in enumerate(self.states, 1):
            self.steps[s] = self._step(s, k)
        self.loss_step = None if self.root_is_state else self._step(self.root, None)
        if self.loss_step is not None:
            self.steps[self.root] = self.loss_step
        self.consumers: dict[int, list[Step]] = {}
        for st in self.steps.values():
            for a in st.atoms:
                self.consumers.setdefault(a, []).append(st)
        self.scalar = all(_numel(var.shape) == 1 for var in g.vars)
        self.seed = (literal_value(g.grad_output, self.symbols) if g.grad_output is not None
                     else Exact.full(g.vars[g.root].shape, 1))
        self.pure = self.sweep(range(len(g.eqns)), {self.root: self.seed})
        self.bwd = v.backward
        self.actual = {self.canon(vid): val for vid, val in self.bwd.seen.items()}
        self._contrib: dict = {}

    # ---- graph helpers -----------------------------------------------------
    def canon(self, vid: int) -> int:
        while vid in self.alias:
            vid = self.alias[vid]
        return vid

    def is_state(self, c: int) -> bool:
        return c in self.steps and self.steps[c].index is not None

    def _symbols(self) -> None:
        g = self.g
        self.sym: dict[int, str] = {}
        for vid, decl in g.decls.items():
            self.sym[vid] = self._leaf_symbol(decl.name)
        taken = set(self.sym.values())
        base = "z" if any(re.fullmatch(r"x_\{\d+\}", s) for s in taken) else "x"
        for k, s in enumerate(self.states, 1):
            self.sym[s] = f"{base}_{{{k}}}"
        if not self.root_is_state:
            self.sym[self.root] = "\\ell"
        self.names = {f"v#{vid}": tex for vid, tex in self.sym.items()}
        for k, s in enumerate(self.states, 1):
            self.names[f"l#{s}"] = f"\\lambda_{{{k}}}"
        self.names[f"l#{self.root}"] = self.names.get(f"l#{self.root}", "\\lambda_{\\ell}")

    def _leaf_symbol(self, name: str) -> str:
        module = None
        for m in self.pred.problem.model.walk():
            for p in m.params:
                if p.name == name:
                    module = m
        if module is None:
            return symbol_tex(name)
        base = name.rsplit(".", 1)[-1]
        if module.type == "Linear":
            sym = {"weight": "W", "bias": "b"}.get(base, symbol_tex(base))
        else:
            sym = symbol_tex(base)
        if not module.path:
            return sym
        path = f"\\mathrm{{{_tex_escape_name(module.path)}}}"
        return f"{sym}^{{({path})}}" if "_" in sym else f"{sym}_{{{path}}}"

    def describe(self, vid: int | None) -> str:
        """A tensor as math: its symbol, or the expression that makes it."""
        if vid is None:
            return "\\mathrm{None}"
        c = self.canon(vid)
        if c in self.sym:
            return self.sym[c]
        tree = self._tree(c, top=True, eqns=[], functions={})
        return DerivationPrinter(self.names).doprint(simplify(tree))

    # ---- steps -------------------------------------------------------------
    def _step(self, s: int, k: int | None) -> Step:
        eqns: list[int] = []
        functions: dict = {}
        tree = simplify(self._tree(s, True, eqns, functions))
        atoms: list[int] = []

        def walk(n: TNode) -> None:
            if isinstance(n, TAtom) and n.var not in atoms:
                atoms.append(n.var)
            for ch in n.children():
                walk(ch)

        walk(tree)
        for e in self._collect(s):
            if e not in eqns:
                eqns.append(e)
        eqns.sort()
        last = self.made_by.get(s)
        nodes = [self.g.eqns[e].node.name for e in eqns if self.g.eqns[e].node is not None]
        return Step(s, k, tree, eqns, atoms, last.call if last is not None else None, nodes, functions)

    def _collect(self, s: int) -> list[int]:
        out: list[int] = []
        stack = [s]
        seen = set()
        while stack:
            v = self.canon(stack.pop())
            if v in seen:
                continue
            seen.add(v)
            if v != s and v in self.atom_set:
                continue
            eqn = self.made_by.get(v)
            if eqn is None:
                continue
            out.append(eqn.id)
            stack.extend(i for i in eqn.ins if isinstance(i, int))
        return out

    def _linear_call(self, v: int):
        for call in self.g.calls:
            if call.module.type != "Linear" or self.canon(call.out) != v:
                continue
            if any(ev.call == call.id and ev.returned is not None and ev.reg.hook.kind == "forward"
                   for ev in self.g.forward_events):
                return None
            return call
        return None

    def _operand(self, i, eqns, functions) -> TNode:
        if isinstance(i, Exact):
            if i.size == 1 and i.rational:
                x = i.item()
                return TConst(Fraction(int(x.p), int(x.q)), i.shape)
            return TConst(i, i.shape)
        return self._tree(i, False, eqns, functions)

    def _tree(self, v: int, top: bool, eqns: list, functions: dict) -> TNode:
        g = self.g
        v = self.canon(v)
        shape = g.vars[v].shape
        if not top and v in self.atom_set:
            return TAtom(v, shape)
        eqn = self.made_by.get(v)
        if eqn is None:
            return TAtom(v, shape)
        call = self._linear_call(v)
        if call is not None:
            weight = g.names[f"{call.module.path}.weight" if call.module.path else "weight"]
            bias_name = f"{call.module.path}.bias" if call.module.path else "bias"
            x = self._tree(call.args[0], False, eqns, functions)
            W = TAtom(weight, g.vars[weight].shape)
            if len(x.shape) == 1:
                body = TMatMul(W, x, shape)
                if bias_name in g.names:
                    body = TBin("add", body, TAtom(g.names[bias_name], g.vars[g.names[bias_name]].shape), shape)
            else:
                body = TMatMul(x, TT(W, _t_shape(W.shape)), shape)
                if bias_name in g.names:
                    b = g.names[bias_name]
                    body = TBin("add", body, TT(TAtom(b, g.vars[b].shape), (1, g.vars[b].shape[0])), shape)
            return body
        ins = [self._operand(i, eqns, functions) for i in eqn.ins]
        return self.eqn_tree(eqn, ins, shape, TAtom(v, shape) if top else None, functions)

    def eqn_tree(self, eqn, ins: list, shape: tuple, out_atom: TNode | None, functions: dict) -> TNode:
        """One primitive applied to operand trees."""
        p = eqn.prim
        if p in ("add", "sub", "mul", "div"):
            return TBin(p, ins[0], ins[1], shape)
        if p == "rsub":
            return TBin("sub", TConst(_frac(eqn.params)), ins[0], shape)
        if p == "reciprocal":
            return TBin("div", TConst(Fraction(1)), ins[0], shape)
        if p == "neg":
            return TNeg(ins[0], shape)
        if p == "pow_scalar":
            return TBin("pow", ins[0], TConst(_frac(eqn.params)), shape)
        if p == "pow_tensor":
            return TBin("pow", ins[0], ins[1], shape)
        if p == "rpow":
            return TBin("pow", TConst(_frac(eqn.params)), ins[0], shape)
        if p in ("mm", "mv"):
            return TMatMul(ins[0], ins[1], shape)
        if p == "dot":
            return TInner(ins[0], ins[1], shape)
        if p == "addmm":
            bias = ins[0]
            if len(bias.shape) == 1:
                bias = TT(bias, (1, bias.shape[0]))
            return TBin("add", TMatMul(ins[1], ins[2], shape), bias, shape)
        if p == "t":
            return TT(ins[0], shape) if len(ins[0].shape) == 2 else ins[0]
        if p in ("view", "unsafe_view", "unsqueeze", "squeeze"):
            src = ins[0].shape
            if (len(src) == 1 and tuple(shape) == (1, src[0])) or (len(shape) == 1 and tuple(src) == (1, shape[0])):
                return TT(ins[0], shape)
            return _reshaped(ins[0], shape)
        if p in ("relu", "tanh", "sigmoid", "exp", "log", "sin", "cos", "sqrt", "abs", "sum", "mean", "norm"):
            return TFn(p, ins[0], shape)
        if p == "function":
            spec = eqn.params
            node = TCall(spec.decl.name, tuple(ins), shape)
            functions[id(node)] = self._function_formulas(spec, ins, out_atom if out_atom is not None else node)
            return node
        if p == "bhf":
            return ins[0]
        raise TypeError(f"no tree for primitive {p}")

    def _function_formulas(self, spec, ins: list, out_tree: TNode):
        def formulas(lam: TNode) -> dict:
            env = dict(zip(spec.slots, ins))
            env["output"] = out_tree
            for a in spec.module.forward.assigns:
                env[a.name] = expr_tree(a.value, env)
            env["grad_output"] = lam
            out = {}
            for i, (slot, formula) in enumerate(spec.decl.grads):
                if formula is not None:
                    out[i] = expr_tree(formula, env)
            return out
        return formulas

    # ---- numbers -----------------------------------------------------------
    def sweep(self, eqn_ids, seeds: dict) -> dict:
        """J^T seed through the given eqns, hooks ignored: cotangents by canonical var."""
        g, fwd = self.g, self.fwd
        cot = dict(seeds)
        for eid in sorted(eqn_ids, reverse=True):
            eqn = g.eqns[eid]
            if eqn.node is None or eqn.prim == "bhf":
                continue
            gs = [cot.get(self.canon(o)) for o in eqn.outs]
            if all(x is None for x in gs):
                continue
            ins = [fwd.of(i) for i in eqn.ins]
            if eqn.prim == "function":
                res = function_vjp(eqn, ins, gs[0])
            else:
                need = [e is not None for e in eqn.node.edges]
                res = RULES[eqn.prim].vjp(gs[0], ins, fwd.values[eqn.outs[0]], eqn.params, need)
            for edge, r in zip(eqn.node.edges, res):
                if edge is None or r is None:
                    continue
                c = self.canon(edge)
                if r.shape != g.vars[c].shape:
                    r = E.sum_to(r, g.vars[c].shape)
                cot[c] = r if cot.get(c) is None else E.add(cot[c], r)
        return cot

    def contribution(self, step: Step, seed: Exact | None) -> dict:
        """J_step^T seed for each atom of the step."""
        if seed is None:
            return {}
        key = (step.var, id(seed))
        if key not in self._contrib:
            cot = self.sweep(step.eqns, {step.var: seed})
            self._contrib[key] = {a: cot.get(a) for a in step.atoms}
        return self._contrib[key]

    def local_derivative(self, step: Step, atom: int) -> Exact | None:
        """Scalar problems: d x_k / d atom, exactly as PyTorch's backward formulas give it."""
        ones = Exact.full(self.g.vars[step.var].shape, 1)
        key = (step.var, "ones")
        if key not in self._contrib:
            cot = self.sweep(step.eqns, {step.var: ones})
            self._contrib[key] = {a: cot.get(a) for a in step.atoms}
        return self._contrib[key].get(atom)

    def vjp_formulas(self, step: Step, tilde: bool = False) -> dict[int, TNode]:
        lam = self.seed_tree(step, tilde)
        out: dict = {}
        vjp_tree(step.tree, lam, out, step.functions)
        return {a: simplify(t) for a, t in out.items()}

    def seed_tree(self, step: Step, tilde: bool = False) -> TNode:
        shape = self.g.vars[step.var].shape
        if step.var == self.root and not self.root_is_state and not tilde:
            if all(e == 1 for e in self.seed.flat()) and self.seed.size == 1:
                return TConst(Fraction(1), shape)
        return TLam(step.var, shape, tilde)

    # ---- chain-rule paths (scalar problems) -----------------------------------
    def paths(self, vid: int, depth: int = 0) -> list[list[Step]] | None:
        """Every path of steps from ``vid`` up to the loss; None when there are too many."""
        if vid == self.root:
            return [[]]
        if depth > 12:
            return None
        out: list[list[Step]] = []
        for st in self.consumers.get(vid, []):
            rest = self.paths(st.var, depth + 1) if st.var != self.root else [[]]
            if rest is None:
                return None
            for r in rest:
                out.append([st] + r)
                if len(out) > MAX_PATHS:
                    return None
        return out


def _frac(x) -> Fraction:
    if isinstance(x, Fraction):
        return x
    if isinstance(x, int):
        return Fraction(x)
    if type(x) is fmpq:
        return Fraction(int(x.p), int(x.q))
    return Fraction(x)


def _reshaped(n: TNode, shape) -> TNode:
    """A reshape that is invisible in the notation: the same tree, with the new shape."""
    c = copy.copy(n)
    c.shape = tuple(shape)
    return c


# ----------------------------------------------------------------------------- problem expressions as trees

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
    if isinstance(e, X.Index):
        a = expr_tree(e.value, env)
        if isinstance(a, TTuple) and e.index < len(a.items):
            return a.items[e.index]
        return TIndex(a, e.index)
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
    if isinstance(e, X.Index):
        return f"{source(e.value, 40)}[{e.index}]"
    if isinstance(e, X.Tup):
        inner = ", ".join(source(a) for a in e.items)
        return f"({inner},)" if len(e.items) == 1 else f"({inner})"
    if isinstance(e, X.Num) and e.value < 0 and parent > 10:
        return f"({e.text})"
    return X.to_source(e)


def _broadcast(a, b) -> tuple:
    n = max(len(a), len(b))
    pa = (1,) * (n - len(a)) + tuple(a)
    pb = (1,) * (n - len(b)) + tuple(b)
    return tuple(max(x, y) for x, y in zip(pa, pb))


# ============================================================================= layout helpers

def esc(text: str) -> str:
    """Plain text for LaTeX."""
    out = []
    for ch in str(text):
        out.append({"\\": "\\textbackslash{}", "&": "\\&", "%": "\\%", "$": "\\$", "#": "\\#", "_": "\\_",
                    "{": "\\{", "}": "\\}", "~": "\\textasciitilde{}", "^": "\\textasciicircum{}",
                    "<": "\\textless{}", ">": "\\textgreater{}", "|": "\\textbar{}"}.get(ch, ch))
    return "".join(out)


def code(text: str) -> str:
    """Inline code in running text; long dotted names may break after a dot."""
    return "\\texttt{" + esc(text).replace(".", ".\\allowbreak{}") + "}"


def mcode(text: str) -> str:
    """A code name inside mathematics."""
    return "\\mathtt{" + _tex_escape_name(text) + "}"


class Terms(list):
    """The summands of one side of an equation, broken across lines when the side is long."""


class Block:
    """The rows of one align* environment, packed to the line width.

    A row is ``lhs = seg = seg ...``; a segment that does not fit moves to a continuation line
    aligned at the relation; a :class:`Terms` segment may itself break between summands."""

    def __init__(self):
        self.rows: list[tuple[str, list]] = []

    def eq(self, lhs: str, *segs, rel: str = "=") -> "Block":
        items = [s for s in segs if s is not None and s != []]
        self.rows.append((lhs, [(rel if i == 0 else "=", s) for i, s in enumerate(items)]))
        return self

    def lines(self, lhs: str, pieces: list[str], rel: str = "=") -> "Block":
        """A right-hand side already split into lines (the first gets the relation)."""
        self.rows.append((lhs, [("\x00", [rel + " " + pieces[0]] + ["\\quad " + p for p in pieces[1:]])]))
        return self

    def render(self) -> str:
        if not self.rows:
            return ""
        lw = max(tex_width(lhs) for lhs, _ in self.rows)
        out: list[str] = []
        for lhs, items in self.rows:
            cur = f"{lhs} &"
            width = lw
            empty = True

            def put(piece: str, cont: str) -> None:
                nonlocal cur, width, empty
                w = tex_width(piece) + 0.3
                if not empty and width + w > LINE_EM:
                    out.append(cur.rstrip())
                    cur, width = cont, lw + (1.0 if "quad" in cont else 0.0)
                cur += " " + piece
                width += w
                empty = False

            for rel, content in items:
                if rel == "\x00":
                    for k, line in enumerate(content):
                        if k:
                            out.append(cur.rstrip())
                            cur = "&"
                        cur += " " + line
                    empty = False
                elif isinstance(content, Terms):
                    for k, term in enumerate(content):
                        if k == 0:
                            put(f"{rel} {term}", "&")
                        elif term.startswith("\x01"):
                            put(term[1:], "&\\quad")
                        elif term.startswith("-"):
                            put(f"- {term[1:].lstrip()}", "&\\quad")
                        else:
                            put(f"+ {term}", "&\\quad")
                else:
                    put(f"{rel} {content}", "&")
            out.append(cur.rstrip())
        return "\\begin{align*}\n" + " \\\\\n".join(out) + "\n\\end{align*}\n"


def sym_pieces(P: "DerivationPrinter", e, budget: float) -> list[str]:
    """A (possibly long) SymPy expression split at top-level + and - into lines of ``budget`` em."""
    tex = P.doprint(e)
    if tex_width(tex) <= budget or not isinstance(e, sympy.Add):
        return [tex]
    pieces: list[str] = []
    cur = ""
    for i, term in enumerate(e.as_ordered_terms()):
        if i == 0:
            t = P.doprint(term)
        elif term.could_extract_minus_sign():
            t = "- " + P.doprint(-term)
        else:
            t = "+ " + P.doprint(term)
        if cur and tex_width(cur + t) > budget:
            pieces.append(cur.strip())
            cur = ""
        cur += " " + t
    if cur.strip():
        pieces.append(cur.strip())
    return pieces


# ============================================================================= the document

PREAMBLE = r"""\documentclass[11pt,a4paper]{article}
\usepackage[margin=2cm]{geometry}
\usepackage{amsmath,amssymb}
\setcounter{MaxMatrixCols}{40}
\allowdisplaybreaks
\setlength{\parindent}{0pt}
\setlength{\parskip}{0.7ex plus 0.3ex}
\raggedright
"""


def render_document(prediction: Prediction) -> str:
    """The whole derivation of every variant in ``prediction`` as one standalone LaTeX document."""
    problem = prediction.problem
    out = [PREAMBLE]
    out.append(f"\\title{{The derivation of \\texttt{{{esc(problem.name)}}}}}\n")
    out.append("\\author{written by \\texttt{adjoint latex}}\n\\date{}\n\\begin{document}\n\\maketitle\n")
    if problem.description:
        out.append(esc(" ".join(problem.description.split())) + "\n\n")
    if prediction.numeric and problem.symbols:
        out.append("Symbols are replaced by the values of the problem's \\texttt{symbols:} ("
                   + ", ".join(f"${symbol_tex(k)} = {format_rational(E.q(v)).signed()}$"
                               for k, v in problem.symbols.items()) + ").\n\n")
    out.append(_reading_guide(prediction))
    shared: dict[str, str] = {}
    for i, v in enumerate(prediction.variants):
        if i:
            out.append("\\clearpage\n")          # each variant starts on its own page
        a = Analysis(prediction, v)
        named = len(problem.variants) > 1 or v.name != "default"
        out.append(_Variant(prediction, v, a).render(shared, named))
    out.append("\\end{document}\n")
    return "".join(out)


def _reading_guide(prediction: Prediction) -> str:
    n = len(prediction.variants)
    which = ("one variant" if n == 1 else f"{n} variants, each with its own hooks; the model, forward pass and "
             "multipliers are derived once and referred to when a later variant shares them")
    return (
        "\\section*{How to read this document}\n"
        f"This file has {which}. For each: the model as equations (one line per named tensor, with the "
        "PyTorch operations it runs), the forward pass with numbers, the Lagrangian and the adjoint "
        "recursion that gives every gradient, every hook call in the order PyTorch fires them, and the final "
        "gradients written factor by factor.\n\n"
        "\\textbf{Notation.} $x_k$ is the $k$-th named intermediate tensor, $\\ell$ the loss, $\\lambda_k$ the "
        "multiplier of $x_k$ (it equals $\\partial\\ell/\\partial x_k$), and $\\tilde\\lambda_k$ the gradient "
        "PyTorch actually carries into $x_k$ when hooks change it. A vector (1-D tensor) is a column, written "
        "as a transposed row $[\\,a\\ \\ b\\,]^{\\top}$; a tensor with one element is written as a number. "
        "Sums, products, quotients, powers and functions of tensors act elementwise (broadcasting as in "
        "PyTorch); $\\odot$ is the elementwise product, juxtaposition the matrix product, $\\mathbf{1}$ a "
        "tensor of ones, $\\mathbf{1}[a>0]$ the elementwise indicator and $\\operatorname{sum}_{\\to n}$ a sum "
        "over broadcast dimensions back to shape $n$. $J^{\\top}\\lambda$ is a vector--Jacobian product: "
        "$(J^{\\top}\\lambda)_i = \\sum_j \\lambda_j\\,\\partial \\Phi_j/\\partial x_i$.\n\n"
        "\\textbf{Numbers} are exact unless they end in $\\ldots$: an integer, a terminating decimal of at most "
        f"{SIG_DIGITS} significant digits ($0.3$, $-1.847648$) or a fraction with numerator and denominator "
        f"below {SHORT_FRACTION} ($\\frac{{1}}{{3}}$) is printed as such; any other value shows its first "
        f"{SIG_DIGITS} significant digits, cut off (not rounded), followed by $\\ldots$. Hook arguments, "
        "returned values and final gradients also give their exact fraction. Closed forms (symbols, $\\tanh$, "
        "$\\sqrt{2}$) are kept when they are short; large tensors show their first and last rows and "
        "columns.\n\n")


class _Variant:
    def __init__(self, pred: Prediction, v: VariantPrediction, a: Analysis):
        self.pred = pred
        self.v = v
        self.a = a
        self.g = a.g
        self.P = DerivationPrinter(a.names)
        self.values = {vid: a.fwd.values[vid] for vid in a.sym}
        self.S = self.P.with_subst(self.values)

    # ---- entry ---------------------------------------------------------------
    def render(self, shared: dict, many: bool) -> str:
        v = self.v
        title = f"Variant \\texttt{{{esc(v.name)}}}" if many else "The derivation"
        out = [f"\\section{{{title}}}\n"]
        desc = getattr(v.graph.variant, "description", None)
        if desc:
            out.append(esc(" ".join(str(desc).split())) + "\n\n")
        out.append(self.hooks_registered())
        common = self.model() + self.forward() + self.lagrangian()
        if common in shared:
            out.append("\\subsection{Model, forward pass and multipliers}\nThe model, its forward pass and the "
                       f"adjoint recursion without hooks are exactly those of variant \\texttt{{{esc(shared[common])}}}"
                       " above; the symbols and values below refer to them.\n\n")
        else:
            shared[common] = v.name
            out.append(common)
        out.append(self._once(shared, "boundaries", self.boundaries(), "Module boundaries"))
        out.append(self.hook_calls())
        out.append(self.effects())
        out.append(self._once(shared, "gradients", self.gradients(), "Final gradients"))
        out.append(self.notes())
        return "".join(out)

    def _once(self, shared: dict, key: str, text: str, title: str) -> str:
        """A section identical to an earlier variant's is replaced by a reference to it."""
        if not text:
            return text
        if (key, text) in shared:
            return (f"\\subsection{{{title}}}\nExactly as in variant \\texttt{{{esc(shared[(key, text)])}}} "
                    "above.\n\n")
        shared[(key, text)] = self.v.name
        return text

    # ---- small helpers -------------------------------------------------------
    def sym(self, vid) -> str:
        return self.a.describe(vid)

    def wrt(self, vid) -> str:
        """The symbol of a tensor, parenthesised when it is an expression (as in d l / d (x^T))."""
        c = self.a.canon(vid)
        tex = self.sym(c)
        return tex if c in self.a.sym else f"\\left({tex}\\right)"

    def value(self, x: Exact | None, avail: float = LINE_EM - 8) -> str | None:
        """A value that fits ``avail`` em, or None."""
        if x is None:
            return "\\mathrm{None}"
        return self.P.tensor(x, avail)

    def value_rows(self, block: Block, lhs: str, x: Exact | None, segs: list, exact: bool = False,
                   tail: str = "") -> None:
        """lhs = segs... = value (as a matrix when it fits, else element by element)."""
        avail = LINE_EM - max(tex_width(lhs), 4) - 3 - tex_width(tail)
        t = self.value(x, avail)
        while segs and t is not None and _seg_text(segs[-1]) in (t, self.paren(t)):
            segs = segs[:-1]                      # "= 5 = 5": the last step already is the value
        if t is not None:
            extra = self.exact_of(x, avail) if exact else None
            block.eq(lhs, *segs, t + ("" if extra else tail), *([extra + tail] if extra else []))
            return
        if segs:
            block.eq(lhs, *segs)
        flat = x.flat()
        idx = list(np.ndindex(*x.shape))
        shown: list = list(range(len(flat)))
        if len(shown) > 10:
            shown = shown[:6] + [None] + shown[-2:]
        for i in shown:
            if i is None:
                block.eq("\\vdots", "", rel="")
                continue
            sub = ",".join(str(k) for k in idx[i])
            e = flat[i]
            name = f"\\quad [{sub}]" if segs else f"{lhs}[{sub}]"
            tex = self.P.elem(e)
            if tex_width(tex) > avail and type(e) is not fmpq:
                block.lines(name, sym_pieces(self.P, E.s_sym(e), avail - 2))
            else:
                block.eq(name, tex)
        if tail:
            block.eq("", tail, rel="")

    def exact_of(self, x: Exact | None, avail: float = LINE_EM / 2) -> str | None:
        """The exact fractions of a result, when the printed value does not show them."""
        if x is None or x.size > 64:
            return None
        notes = [self.P.exact_note(e, slash=x.size > 1) for e in x.flat()]
        if all(n is None for n in notes):
            return None
        if x.size == 1:
            return notes[0]
        cells = [n if n is not None else self.P.elem(e, slash=True) for n, e in zip(notes, x.flat())]
        arr = np.empty(len(cells), dtype=object)
        arr[:] = cells
        tex = _cells_matrix(arr.reshape(x.shape))
        return tex if tex is not None and tex_width(tex) < avail else None

    def dfrac(self, top: str, bottom: str) -> str:
        return self.P.doprint(TDeriv(TSym(top), TSym(bottom)))

    def deriv(self, top: int, bottom: int) -> TDeriv:
        """d x_top / d x_bottom (or d l / d ...) as a printable node."""
        a = self.a
        c = a.canon(bottom)
        return TDeriv(TSym(a.sym[top]), TSym(self.sym(c), atomic=c in a.sym))

    def names_text(self, vid: int) -> str:
        names = self.a.names_of.get(vid, [])
        return ", ".join(code(n) for n in names) if names else "(unnamed)"

    def paren(self, tex: str) -> str:
        return f"\\left({tex}\\right)" if tex.startswith("-") else tex

    def num_or_name(self, x: Exact, fallback: str) -> str:
        t = self.value(x, 12)
        return self.P.p(TVal(x), 51) if t is not None else fallback

    # ---- hooks registered --------------------------------------------------------
    _KIND = {"full_backward": "full backward hook (\\texttt{register\\_full\\_backward\\_hook})",
             "full_backward_pre": "backward pre-hook (\\texttt{register\\_full\\_backward\\_pre\\_hook})",
             "backward": "legacy backward hook (\\texttt{register\\_backward\\_hook})",
             "forward": "forward hook", "forward_pre": "forward pre-hook",
             "hook": "tensor hook (\\texttt{Tensor.register\\_hook})",
             "retain_grad": "\\texttt{retain\\_grad()}", "pre": "node pre-hook", "post": "node post-hook"}

    def hooks_registered(self) -> str:
        hooks = self.g.variant.hooks
        if not hooks:
            return "No hooks are registered in this variant: PyTorch's backward pass is the adjoint recursion.\n\n"
        lines = ["Hooks registered, in this order:\n\\begin{enumerate}\n"]
        for h in hooks:
            what = {"module": "module", "tensor": "tensor", "node": "the autograd node that made tensor"}[h.on]
            text = f"\\item {esc(h.label)}: {self._KIND[h.kind]} on {what} {code(h.target)}"
            if h.returns is not None:
                text += f", returning ${self.P.doprint(expr_tree(h.returns, {}))}$"
            elif h.kind != "retain_grad":
                text += ", returning nothing (it only observes)"
            if h.does:
                text += "; it runs " + ", ".join(code(f"{x.name} = {source(x.value)}") for x in h.does)
            if h.remove:
                text += f"; its handle is removed {esc(h.remove.replace('_', ' '))}"
            if h.when == "after_forward":
                text += "; registered after the forward pass"
            lines.append(text + ".\n")
        lines.append("\\end{enumerate}\n")
        return "".join(lines)

    # ---- the model -------------------------------------------------------------------
    def model(self) -> str:
        a, g = self.a, self.g
        out = ["\\subsection{The model}\n",
               "Tensors given to the computation (leaves), and the named tensors it computes:\n\n"]
        rows = []
        for vid in a.leaves:
            decl = g.decls[vid]
            rg = "requires grad" if decl.requires_grad else "constant"
            rows.append((a.sym[vid], self.names_text(vid), f"{self._leaf_role(decl.name)}, {rg}", g.vars[vid].shape))
        for s in a.states:
            rows.append((a.sym[s], self.names_text(s), self._state_role(s), g.vars[s].shape))
        if not a.root_is_state:
            rows.append(("\\ell", code("loss"), "the loss", g.vars[a.root].shape))
        out.append("\\begin{center}\\begin{tabular}{@{}l p{5.0cm} p{6.6cm} l@{}}\n")
        out.append("symbol & PyTorch name & what & shape\\\\ \\hline\n")
        for symb, names, what, shape in rows:
            sh = "$" + "\\times ".join(map(str, shape)) + "$" if shape else "scalar"
            out.append(f"${symb}$ & {names} & {what} & {sh}\\\\\n")
        out.append("\\end{tabular}\\end{center}\n")
        out.append("Module calls in the order they run, each followed by the equations of the tensors computed "
                   "directly in it and the autograd nodes (PyTorch operations) behind each equation:\n\n")
        events = []
        for call in g.calls:
            events.append(((call.body_start - 0.5, self._depth(call)), "call", call))
        for st in a.steps.values():
            if st.index is not None:
                last = a.made_by.get(st.var)
                events.append(((last.id if last is not None else -1, 99), "step", st))
        events.sort(key=lambda e: e[0])
        for _, kind, obj in events:
            out.append(self._call_text(obj) if kind == "call" else
                       self._step_text(obj, self._depth(g.calls[obj.call]) + 1 if obj.call is not None else 0))
        if a.loss_step is not None:
            out.append(self._step_text(a.loss_step, 0, "Loss"))
        elif g.grad_output is not None:
            seed = self.value(a.seed) or "v"
            out.append(f"There is no loss: \\texttt{{backward}} starts from ${a.sym[a.root]}$ with the given "
                       f"gradient $v = {seed}$, so the scalar being differentiated is "
                       f"$\\ell = \\langle v, {a.sym[a.root]}\\rangle$.\n\n")
        else:
            out.append(f"There is no loss: \\texttt{{backward}} starts from the one-element output, so "
                       f"$\\ell = {a.sym[a.root]}$.\n\n")
        return "".join(out)

    def _depth(self, call) -> int:
        depth = 0
        while call.parent is not None:
            depth += 1
            call = self.g.calls[call.parent]
        return depth

    def _leaf_role(self, name: str) -> str:
        if any(d.name == name for d in self.g.variant.inputs):
            return "input"
        if any(d.name == name for d in self.pred.problem.targets):
            return "target"
        return "parameter"

    def _state_role(self, s: int) -> str:
        call = None
        for c in self.g.calls:
            if self.a.canon(c.out) == s:
                call = c
        if call is not None:
            kind = f" ({esc(call.module.type)})" if call.module.type else ""
            return f"output of module {code(call.callid)}{kind}"
        return "intermediate"

    def _call_text(self, call) -> str:
        depth = self._depth(call)
        indent = f"\\hspace*{{{1.5 * depth:.1f}em}}"
        mod = call.module
        kind = mod.type or ("custom autograd Function " + code(mod.function.name) if mod.function else "custom module")
        ins = ", ".join(f"${self.sym(x)}$" for x in call.args)
        head = f"{indent}\\textbf{{{esc(call.callid)}}} ({kind}"
        if call.k > 1:
            head += f", call {call.k}"
        head += f"): {ins} $\\mapsto$ ${self.sym(call.out)}$"
        if mod.forward is not None and mod.type is None:
            src = "; ".join([f"{x.name} = {source(x.value)}" for x in mod.forward.assigns] +
                            [f"return {source(mod.forward.result)}"])
            head += f"; forward: {code(src)}"
        if mod.function is not None:
            grads = "; ".join(f"{slot}: {source(f) if f is not None else 'None'}"
                              for slot, f in mod.function.grads)
            head += f"; its backward is declared as {code(grads)}"
        return head + ".\n\n"

    def _step_text(self, st: Step, depth: int, label: str | None = None) -> str:
        indent = f"\\hspace*{{{1.5 * depth:.1f}em}}"
        eq = f"{self.a.sym[st.var]} = {self.P.doprint(st.tree)}"
        nodes = ", ".join(code(n) for n in st.nodes) if st.nodes else "no autograd node"
        pre = f"{label}: " if label else ""
        if tex_width(eq) > LINE_EM - 1.5 * depth - 12:
            b = Block()
            terms = self._terms(st.tree)
            b.eq(self.a.sym[st.var], terms if self.fits(terms) else self._phi(st))
            return f"{indent}{pre}\n{b.render()}{indent}\\quad autograd nodes: {nodes}.\n\n"
        return f"{indent}{pre}${eq}$ \\quad ({nodes})\n\n"

    def _terms(self, tree: TNode, budget: float = LINE_EM - 10) -> Terms:
        """A tree as its top-level summands, so that a long right-hand side can break between them; a
        summand wider than ``budget`` em is further split between the factors of a product."""
        terms = Terms()
        P = self.P

        def factors(n: TNode, kind: type) -> list[tuple[str, TNode]]:
            """Flatten a product into its factors, only through products of the same kind (elementwise
            or matrix), so that no grouping is lost."""
            if kind is TBin and isinstance(n, TBin) and n.op in ("mul", "had"):
                sep = P._mul_sep(n.a, n.b, True).strip() or "\\,"
                right = factors(n.b, kind)
                return factors(n.a, kind) + [(sep, right[0][1])] + right[1:]
            if kind is TMatMul and isinstance(n, TMatMul):
                right = factors(n.b, kind)
                return factors(n.a, kind) + [("\\,", right[0][1])] + right[1:]
            return [("", n)]

        def walk(n: TNode, sign: str) -> None:
            if isinstance(n, TBin) and n.op in ("add", "sub"):
                walk(n.a, sign)
                walk(n.b, sign if n.op == "add" else ("-" if sign == "+" else "+"))
                return
            tex = P.doprint(n) if P.prec(n) > 40 else f"\\left({P.doprint(n)}\\right)"
            if sign == "-":
                tex = "-" + (tex if P.prec(n) >= 50 else f"\\left({tex}\\right)")
            if tex_width(tex) <= budget or P.prec(n) != 50:
                terms.append(tex)
                return
            parts = factors(n, TMatMul if isinstance(n, TMatMul) else TBin)
            first = True
            for op, f in parts:
                ftex = P.p(f, 51)
                if first:
                    terms.append(("-" if sign == "-" else "") + ftex)
                    first = False
                else:
                    terms.append("\x01" + (op + " " if op else "") + ftex)

        walk(tree, "+")
        return terms

    def _phi(self, st: Step) -> str:
        """x_k = Phi_k(atoms), for an equation too long to typeset."""
        args = ",\\ ".join(self.sym(x) for x in st.atoms)
        k = st.index if st.index is not None else "\\ell"
        return f"\\Phi_{{{k}}}\\left({args}\\right)\\quad\\text{{(too long to typeset here)}}"

    def fits(self, terms, budget: float = LINE_EM - 8) -> bool:
        return all(tex_width(t.lstrip("\x01")) <= budget for t in terms)

    def contrib_terms(self, j: Step, f: TNode | None, target: int, tilde: bool = False) -> Terms:
        """The vector-Jacobian product of step j for ``target``, as summands; J^T lambda when unprintable."""
        terms = self._terms(f) if f is not None else Terms()
        if f is not None and self.fits(terms):
            return terms
        if j.index is None:
            return Terms([self.dfrac("\\ell", self.wrt(target))])
        lam = ("\\tilde\\lambda" if tilde else "\\lambda") + f"_{{{j.index}}}"
        return Terms([f"J_{{{j.index},{self.sym(target)}}}^{{\\top}}{lam}"])

    # ---- forward ------------------------------------------------------------------
    def forward(self) -> str:
        a = self.a
        out = ["\\subsection{Forward pass}\n", "Given:\n"]
        b = Block()
        for vid in a.leaves:
            self.value_rows(b, a.sym[vid], a.fwd.values[vid], [])
        out.append(b.render())
        out.append("Each equation, then with the numbers substituted, then its value:\n")
        b = Block()
        for st in a.steps.values():
            if st.index is not None:
                self._forward_row(b, st)
        if a.loss_step is not None:
            self._forward_row(b, a.loss_step)
        out.append(b.render())
        return "".join(out)

    def _forward_row(self, b: Block, st: Step) -> None:
        lhs = self.a.sym[st.var]
        value = self.a.fwd.values[st.var]
        avail = LINE_EM - tex_width(lhs) - 3
        terms = self._terms(st.tree)
        segs: list = [terms if self.fits(terms) else self._phi(st)]
        subst = self.S.doprint(st.tree)
        vtex = self.value(value, avail)
        if tex_width(subst) <= avail and subst != vtex and not isinstance(st.tree, TAtom):
            segs.append(subst)
        self.value_rows(b, lhs, value, segs)

    # ---- Lagrangian and recursion ------------------------------------------------------
    def lagrangian(self) -> str:
        a = self.a
        n = len(a.states)
        out = ["\\subsection{Lagrangian and adjoint recursion}\n"]
        loss_args = a.loss_step.atoms if a.loss_step else [a.root]
        loss_arg = ", ".join(self.sym(x) for x in loss_args)
        out.append("Treat every named tensor as an unknown $x_k$, tied to its equation $x_k = \\Phi_k(\\dots)$ by "
                   "a multiplier $\\lambda_k$ (a tensor of the shape of $x_k$):\n")
        lag = Block()
        pieces = [f"\\ell({loss_arg}) + \\sum_{{k=1}}^{{{n}}} \\left\\langle \\lambda_k,\\ \\Phi_k(\\dots) - "
                  "x_k\\right\\rangle" if n else f"\\ell({loss_arg})"]
        if a.loss_step is not None:
            first = self.P.doprint(a.loss_step.tree)
        elif self.g.grad_output is not None:
            first = f"\\left\\langle v,\\ {a.sym[a.root]}\\right\\rangle"
        else:
            first = a.sym[a.root]
        pieces.append("= " + (first if tex_width(first) < LINE_EM - 10 else "\\ell(\\dots)"))
        for i, s in enumerate(a.states):
            if i >= MAX_CONSTRAINTS:
                pieces.append(f"+ \\dots \\quad\\text{{({n - i} more terms of the same form)}}")
                break
            st = a.steps[s]
            item = (f"+ \\left\\langle \\lambda_{{{st.index}}},\\ {self.P.doprint(st.tree)} - "
                    f"{a.sym[s]}\\right\\rangle")
            if tex_width(item) > LINE_EM - 6:
                item = f"+ \\left\\langle \\lambda_{{{st.index}}},\\ \\Phi_{{{st.index}}} - {a.sym[s]}\\right\\rangle"
            pieces.append(item)
        lag.lines("\\mathcal{L}", pieces)
        out.append(lag.render())
        out.append(
            "Setting its derivatives to zero gives three things. "
            "$\\partial\\mathcal{L}/\\partial\\lambda_k = 0$ is $x_k = \\Phi_k(\\dots)$: the forward pass. "
            "$\\partial\\mathcal{L}/\\partial x_k = 0$ is the adjoint (backward) recursion\n"
            "\\[ \\lambda_k = \\frac{\\partial \\ell}{\\partial x_k} + \\sum_{j:\\ \\Phi_j \\text{ reads } x_k} "
            "J_{jk}^{\\top}\\lambda_j, \\qquad J_{jk} = \\frac{\\partial \\Phi_j}{\\partial x_k}, \\]\n"
            "which for a chain $x_{k+1} = \\Phi_{k+1}(x_k)$ is $\\lambda_k = J_{k+1}^{\\top}\\lambda_{k+1}$. "
            "And then $\\partial\\mathcal{L}/\\partial\\theta = \\sum_j J_{j\\theta}^{\\top}\\lambda_j$ is the "
            "gradient $\\partial \\ell/\\partial\\theta$ of every leaf $\\theta$ (parameter or input); in the same "
            "way $\\lambda_k = \\partial\\ell/\\partial x_k$. "
            "A module call is a group of these equations: PyTorch hands its hooks the multiplier of its output as "
            "\\texttt{grad\\_output} and $J^{\\top}\\,\\mathtt{grad\\_output}$ through the module, the multipliers "
            "of its inputs, as \\texttt{grad\\_input}.\n\n")
        if a.scalar:
            out.append(self.local_derivatives())
        out.append(self.recursion())
        wrong = sorted({f.name for f in self.v.functions if not f.matches})
        used = sorted({f.name for f in self.v.functions})
        if used:
            text = (f"Equations computed by a custom autograd Function ({', '.join(code(n) for n in used)}) enter the "
                    "recursion through their declared backward formulas, because that is what PyTorch runs.")
            if wrong:
                text += (f" The declared backward of {', '.join(code(n) for n in wrong)} differs from the true "
                         "derivative (see the notes), so the multipliers upstream of it are what PyTorch computes, "
                         "not the true $\\partial\\ell/\\partial x_k$.")
            out.append(text + "\n\n")
        return "".join(out)

    def local_terms(self, st: Step):
        """Scalar problems: (atom, SymPy derivative, exact value) for every atom needing a gradient."""
        trees: dict = {}
        vjp_tree(st.tree, TConst(Fraction(1), self.g.vars[st.var].shape), trees, st.functions)
        out = []
        for at in st.atoms:
            if at not in trees or not self.g.vars[at].requires_grad:
                continue
            d = sympy.factor_terms(to_sympy(simplify(trees[at]), lambda vid: sympy.Symbol(f"v#{vid}", real=True)))
            out.append((at, d, self.a.local_derivative(st, at)))
        return out

    def dname(self, st: Step, at: int) -> str:
        return self.P.doprint(self.deriv(st.var, at))

    def local_derivatives(self) -> str:
        out = ["Every tensor here has one element, so each $J$ is a number, a local derivative. From the "
               "equations above (PyTorch's backward formulas give the same values):\n"]
        b = Block()
        for st in self.a.steps.values():
            for at, d, val in self.local_terms(st):
                segs = [self.P.doprint(d)]
                s = self.S.doprint(d)
                vt = self.value(val) or ""
                if s != segs[0] and s != vt:
                    segs.append(s)
                if vt != segs[-1]:
                    segs.append(vt)
                b.eq(self.dname(st, at), *segs)
        out.append(b.render())
        return "".join(out)

    def recursion(self) -> str:
        b = Block()
        for s in reversed(self.a.states):
            self._lambda_row(b, s)
        if not b.rows:
            return ""
        return "The recursion, from the loss back to the first tensor (hooks play no part in it):\n" + b.render()

    def _lambda_row(self, b: Block, s: int) -> None:
        a = self.a
        st = a.steps[s]
        lhs = f"\\lambda_{{{st.index}}}"
        if not self.g.vars[s].requires_grad:
            return
        value = a.pure.get(s)
        if s == a.root:
            self.value_rows(b, lhs, a.seed, [self.dfrac("\\ell", a.sym[s]), "v" if self.g.grad_output is not None
                                             else None])
            return
        if value is None:
            b.eq(lhs, "0\\quad\\text{(no path to the loss)}")
            return
        names, nums = Terms(), Terms()
        for j in a.consumers.get(s, []):
            if a.contribution(j, a.pure.get(j.var)).get(s) is None:
                continue
            if a.scalar:
                d = a.local_derivative(j, s)
                if j.index is None:
                    names.append(self.dfrac("\\ell", a.sym[s]))
                    nums.append(self.num_or_name(d, names[-1]))
                else:
                    names.append(f"\\lambda_{{{j.index}}}\\,{self.dfrac(a.sym[j.var], a.sym[s])}")
                    lam_name = f"\\lambda_{{{j.index}}}"
                    nums.append(f"{self.num_or_name(a.pure[j.var], lam_name)} \\cdot "
                                f"{self.num_or_name(d, names[-1])}")
            else:
                names.extend(self.contrib_terms(j, a.vjp_formulas(j).get(s), s))
        segs: list = [names] if names else []
        vt = self.value(value)
        if a.scalar and nums and not (len(nums) == 1 and nums[0] in (vt, self.paren(vt or ""))):
            segs.append(nums)
        self.value_rows(b, lhs, value, segs)

    # ---- chain rule, factor by factor (scalar problems) -------------------------------------
    def chain(self, vid: int):
        """(names, numbers, total) summed over every path from ``vid`` to the loss, or None."""
        a = self.a
        if not a.scalar:
            return None
        paths = a.paths(a.canon(vid))
        if not paths:
            return None
        names, nums, total = Terms(), Terms(), None
        for path in paths:
            fac_names: list[TNode] = []
            fac_nums: list = []
            prev = a.canon(vid)
            for st in path:
                fac_names.append(self.deriv(st.var, prev))
                fac_nums.append(a.local_derivative(st, prev))
                prev = st.var
            if a.root_is_state and self.g.grad_output is not None:
                fac_names.append(TSym("v"))
                fac_nums.append(a.seed)
            if not fac_nums or any(f is None for f in fac_nums):
                continue
            fac_names.reverse()
            fac_nums.reverse()
            prod = fac_nums[0]
            for f in fac_nums[1:]:
                prod = E.mul(prod, f)
            total = prod if total is None else E.add(total, prod)
            names.append(self.P.doprint(TProduct(tuple(fac_names))))
            nums.append(self.P.doprint(TProduct(tuple(TVal(f) for f in fac_nums))))
        if not names:
            return None
        return names, nums, total

    # ---- module boundaries --------------------------------------------------------------
    def boundaries(self) -> str:
        a, g = self.a, self.g
        out = ["\\subsection{Module boundaries}\n",
               "Each module call is one block of the Lagrangian. The multiplier of its output is what its hooks "
               "are handed as \\texttt{grad\\_output} (as it reaches the module, after hooks on the output tensor); "
               "$J^{\\top}\\,\\mathtt{grad\\_output}$ through the module's own equations is \\texttt{grad\\_input} "
               "(before any hook of the module acts).\n\n"]
        calls = {c.callid: c for c in g.calls}
        hooked = {c.callid for c in g.calls if c.full_hooks or c.pre_hooks or c.legacy_hooks}
        shown = [bd for bd in self.v.boundaries if bd.callid in hooked] or list(self.v.boundaries)
        if len(shown) < len(self.v.boundaries):
            out.append("The module calls with backward hooks in this variant (the others follow the same rule; "
                       "\\texttt{adjoint solve} lists them all):\n\n")
        for bd in shown:
            call = calls.get(bd.callid)
            if call is None:
                continue
            out.append(f"\\textbf{{{esc(bd.callid)}}} ({esc(bd.type)}): "
                       f"{', '.join('$' + self.sym(x) + '$' for x in call.args)} $\\mapsto$ ${self.sym(call.out)}$\n")
            b = Block()
            go = bd.grad_output[0]
            if go is None:
                b.eq(mcode("grad_output"), "\\mathrm{None}\\quad\\text{(no gradient reaches the output)}")
            else:
                self.value_rows(b, mcode("grad_output"), go, [self.ident(a.canon(call.out), go)])
            for i, (x, gi) in enumerate(zip(call.args, bd.grad_input)):
                lhs = f"{mcode('grad_input')}[{i}]"
                if gi is None:
                    b.eq(lhs, f"\\mathrm{{None}}\\quad\\text{{(}}{self.sym(x)}\\text{{ does not require grad)}}")
                    continue
                segs = [f"J_{{\\mathrm{{{_tex_escape_name(bd.callid)}}}}}^{{\\top}}\\,{mcode('grad_output')}"]
                ident = self.ident(a.canon(x), gi, strict=True)
                if ident is not None:
                    segs.append(ident)
                self.value_rows(b, lhs, gi, segs)
            out.append(b.render())
        return "".join(out)

    def ident(self, c: int, value: Exact, strict: bool = False) -> str | None:
        """Name a gradient value w.r.t. tensor c: lambda_k, its hooked version, or d l / d (...)."""
        a = self.a
        pure, actual = a.pure.get(c), a.actual.get(c)
        if a.is_state(c):
            k = a.steps[c].index
            if same(value, pure):
                return f"\\lambda_{{{k}}}"
            if same(value, actual):
                return f"\\tilde\\lambda_{{{k}}}"
            return None if strict else f"\\text{{the gradient reaching }}{self.sym(c)}"
        if same(value, pure):
            return self.dfrac("\\ell", self.wrt(c))
        return None if strict else f"\\text{{the gradient w.r.t. }}{self.wrt(c)}"

    # ---- hook calls ---------------------------------------------------------------------
    def hook_calls(self) -> str:
        calls = self.v.hook_calls
        out = ["\\subsection{Hook calls, in firing order}\n"]
        if not calls:
            out.append("No hook fires.\n\n")
            return "".join(out)
        for i, h in enumerate(calls, 1):
            out.append(self._hook_call(i, h))
        return "".join(out)

    def _find_call(self, h: HookRecord):
        for c in self.g.calls:
            if c.path == h.target and (h.k is None or c.k == h.k):
                return c
        return None

    def _arg_vars(self, h: HookRecord) -> dict:
        g, a = self.g, self.a
        if h.on == "module":
            call = self._find_call(h)
            if call is None:
                return {}
            if h.kind == "full_backward":
                return {"grad_output": [call.out], "grad_input": list(call.args)}
            if h.kind == "full_backward_pre":
                return {"grad_output": [call.out]}
            if h.kind == "backward" and call.legacy_node is not None:
                eqn = g.eqns[call.legacy_node]
                return {"grad_output": list(eqn.outs), "grad_input": list(eqn.node.edges)}
            return {}
        vid = g.names.get(h.target)
        if vid is None:
            return {}
        if h.on == "tensor":
            return {"grad": [vid]}
        eqn = a.made_by.get(vid)
        if eqn is None or eqn.node is None:
            return {}
        if h.kind == "pre":
            return {"grad_outputs": list(eqn.outs)}
        return {"grad_inputs": list(eqn.node.edges), "grad_outputs": list(eqn.outs)}

    _INTRO = {
        "full_backward": "A full backward hook runs once the module's gradient with respect to its inputs is known. "
                         "It is handed \\texttt{grad\\_output}, the gradient of $\\ell$ with respect to the module's "
                         "output, and \\texttt{grad\\_input}, the gradient with respect to the module's positional "
                         "inputs ($J^{\\top}\\,\\mathtt{grad\\_output}$ through the whole module). A returned tuple "
                         "replaces \\texttt{grad\\_input} for everything upstream.",
        "full_backward_pre": "A backward pre-hook runs when the gradient with respect to the module's output arrives, "
                             "before the module's own backward. A returned tuple replaces \\texttt{grad\\_output} for "
                             "everything inside and upstream of the module.",
        "backward": "The legacy \\texttt{register\\_backward\\_hook} is attached to the autograd node that produced the "
                    "module's output, i.e.\\ only to the module's last operation. It is handed that node's "
                    "\\texttt{grad\\_output} and, as \\texttt{grad\\_input}, the node's gradients with respect to its "
                    "own inputs --- not the module's inputs, unless the module is a single operation.",
        "hook": "A tensor hook runs when the gradient with respect to its tensor has been summed over all uses. It is "
                "handed that gradient as \\texttt{grad}; a returned tensor replaces it for later hooks, "
                "\\texttt{retain\\_grad} and everything upstream.",
        "pre": "A node pre-hook runs before its autograd node, with the gradients arriving at the node's outputs "
               "(\\texttt{grad\\_outputs}); a returned tuple replaces them.",
        "post": "A node post-hook runs after its autograd node, with the gradients the node computed for its inputs "
                "(\\texttt{grad\\_inputs}) and those it received (\\texttt{grad\\_outputs}); a returned tuple "
                "replaces \\texttt{grad\\_inputs}.",
        "forward": "A forward hook runs right after the module's forward, with its inputs and output; a returned "
                   "tensor replaces the output (its operations join the graph).",
        "forward_pre": "A forward pre-hook runs right before the module's forward, with its inputs; a returned value "
                       "replaces the inputs.",
    }

    _REPLACES = {"full_backward": "grad_input", "backward": "grad_input", "post": "grad_inputs",
                 "pre": "grad_outputs", "full_backward_pre": "grad_output", "hook": "grad"}

    def _hook_node(self, h: HookRecord):
        """The autograd node (eqn) whose gradients a legacy or node hook sees."""
        if h.on == "module" and h.kind == "backward":
            call = self._find_call(h)
            return self.g.eqns[call.legacy_node] if call is not None and call.legacy_node is not None else None
        if h.on == "node":
            vid = self.g.names.get(h.target)
            return self.a.made_by.get(vid) if vid is not None else None
        return None

    def slot_formulas(self, eqn, lam: TNode) -> tuple[dict, DerivationPrinter]:
        """J_slot^T lam for each input slot of one autograd node, and a printer that names the slots."""
        a = self.a
        ins, names = [], dict(self.P.names)
        for k, i in enumerate(eqn.ins):
            if isinstance(i, int):
                fid = -(k + 1)
                ins.append(TAtom(fid, a.g.vars[i].shape))
                c = a.canon(i)
                names[f"v#{fid}"] = self.sym(c) if c in a.sym else f"\\left({self.sym(c)}\\right)"
            else:
                ins.append(a._operand(i, [], {}))
        functions: dict = {}
        out_shape = a.g.vars[eqn.outs[0]].shape
        tree = a.eqn_tree(eqn, ins, out_shape, TAtom(a.canon(eqn.outs[0]), out_shape), functions)
        trees: dict = {}
        vjp_tree(tree, lam, trees, functions)
        return {-fid - 1: simplify(t) for fid, t in trees.items() if fid < 0}, DerivationPrinter(names)

    def _hook_call(self, i: int, h: HookRecord) -> str:
        a = self.a
        where = f" at node {code(h.node)}" if h.node else ""
        call = f" (call {h.k} of {h.calls_of_module})" if h.k is not None and h.calls_of_module > 1 else ""
        target = code(h.target) + call
        mcall = self._find_call(h) if h.on == "module" else None
        if mcall is not None:
            target += (f" (${', '.join(self.sym(x) for x in mcall.args)} \\mapsto {self.sym(mcall.out)}$)")
        elif h.on in ("tensor", "node") and self.g.names.get(h.target) is not None:
            target += f" (${self.sym(self.g.names[h.target])}$)"
        kind = self._KIND.get(h.kind, esc(h.kind))
        on = {"module": "module", "tensor": "tensor", "node": "the autograd node that produced tensor"}[h.on]
        out = [f"\\subsubsection*{{{i}.\\ {esc(h.label)}}}\n"
               f"The {kind} on {on} {target}{where}, during the {h.phase} pass. {self._INTRO.get(h.kind, '')}\n"]
        arg_vars = self._arg_vars(h)
        slots, slot_printer = {}, None
        node = self._hook_node(h)
        slot_arg = {"backward": "grad_input", "post": "grad_inputs"}.get(h.kind)
        if node is not None and slot_arg is not None and node.node is not None:
            out_arg = "grad_output" if h.kind == "backward" else "grad_outputs"
            out_shape = self.g.vars[node.outs[0]].shape
            slots, slot_printer = self.slot_formulas(node, TIndex(TName(out_arg), 0, out_shape))
        b = Block()
        chains = []
        for name, value in h.args.items():
            items = value if isinstance(value, tuple) else (value,)
            vids = arg_vars.get(name, [])
            for j, item in enumerate(items):
                lhs = mcode(name) + (f"[{j}]" if isinstance(value, tuple) else "")
                vid = vids[j] if j < len(vids) else None
                if item is None:
                    why = "\\quad\\text{(no gradient flows to this input)}" if vids else ""
                    b.eq(lhs, "\\mathrm{None}" + why)
                    continue
                segs: list = []
                if vid is not None and h.phase == "backward":
                    c = a.canon(vid)
                    if name == slot_arg and j in slots:
                        ftex = slot_printer.doprint(slots[j])
                        segs.append(ftex if tex_width(ftex) < LINE_EM - 12 else
                                    f"J_{{[{j}]}}^{{\\top}}\\,{mcode('grad_output')}")
                    elif h.kind == "full_backward" and name == "grad_input":
                        segs.append(f"J^{{\\top}}{mcode('grad_output')}")
                    ident = self.ident(c, item, strict=True)
                    if ident is not None:
                        if not ident.startswith("\\tilde"):
                            segs.append(self.dfrac("\\ell", self.wrt(c)))
                        if not segs or ident != segs[-1]:
                            segs.append(ident)
                        ch = self.chain(c) if not ident.startswith("\\tilde") else None
                        if ch is not None and same(ch[2], item) and len(ch[0]) == 1 and "\\cdot" in ch[0][0]:
                            chains.append((lhs, ch))
                    elif not segs:
                        names, nums, total = self.arriving(c)
                        if total is not None and same(total, item) and names:
                            segs.extend([names] + ([nums] if nums else []))
                        else:
                            segs.append(f"\\text{{gradient reaching }}{self.wrt(c)}")
                self.value_rows(b, lhs, item, segs, exact=True)
        out.append(b.render())
        if chains:
            out.append("Written out with the chain rule, factor by factor:\n")
            cb = Block()
            for lhs, (names, nums, total) in chains:
                self.value_rows(cb, lhs, total, [names, nums])
            out.append(cb.render())
        if h.kind == "backward" and h.phase == "backward":
            out.append(self._legacy_contrast(h))
        if h.returned is None:
            if h.kind != "retain_grad":
                hook = self._declared(h)
                if hook is not None and hook.does:
                    out.append("It returns \\texttt{None}: whatever it rebinds inside, PyTorch ignores; nothing "
                               "changes.\n\n")
                else:
                    out.append("It returns \\texttt{None}: it only observes, and nothing changes.\n\n")
        else:
            out.append(self._returned(h))
        for w in h.why:
            out.append(f"Why: {esc(w)}.\n\n")
        return "".join(out)

    def _legacy_contrast(self, h: HookRecord) -> str:
        call = self._find_call(h)
        if call is None:
            return ""
        bd = next((b for b in self.v.boundaries if b.callid == call.callid), None)
        if bd is None or not bd.grad_input:
            return ""
        got = h.args.get("grad_input")
        gi = bd.grad_input
        if isinstance(got, tuple) and len(got) == len(gi) and all(same(x, y) for x, y in zip(got, gi)):
            return ("Here that node's input is the module's input, so this is also what a full backward hook on "
                    "the module would be handed.\n\n")
        b = Block()
        for i, (x, v) in enumerate(zip(call.args, gi)):
            if v is None:
                continue
            ident = self.ident(self.a.canon(x), v, strict=True)
            self.value_rows(b, f"{mcode('grad_input')}[{i}]", v,
                            [self.dfrac("\\ell", self.wrt(x))] + ([ident] if ident and "frac" not in ident else []))
        if not b.rows:
            return ""
        return ("A full backward hook on the same module would instead be handed the gradient with respect to the "
                "module's own input:\n" + b.render())

    def _declared(self, h: HookRecord):
        hooks = self.g.variant.hooks
        if 0 <= h.index < len(hooks) and hooks[h.index].label == h.label:
            return hooks[h.index]
        return next((x for x in hooks if x.label == h.label), None)

    def _returned(self, h: HookRecord) -> str:
        rep = self._REPLACES.get(h.kind)
        hook = self._declared(h)
        tree = expr_tree(hook.returns, {}) if hook is not None and hook.returns is not None else None
        b = Block()
        if isinstance(h.returned, tuple):
            parts = tree.items if isinstance(tree, TTuple) and len(tree.items) == len(h.returned) else [None] * len(
                h.returned)
            for j, (r, t) in enumerate(zip(h.returned, parts)):
                lhs = f"\\text{{returned}}[{j}]"
                if r is None:
                    b.eq(lhs, "\\mathrm{None}")
                    continue
                self.value_rows(b, lhs, r, [self.P.doprint(t)] if t is not None and not isinstance(t, TNone) else [],
                                exact=True)
        else:
            segs = [self.P.doprint(tree)] if tree is not None else []
            self.value_rows(b, "\\text{returned}", h.returned, segs, exact=True)
        if h.phase == "forward":
            text = "It returns a value, which replaces the module's " + \
                   ("inputs" if h.kind == "forward_pre" else "output") + " in the forward pass:\n"
        else:
            text = (f"It returns a value, and PyTorch continues with it in place of \\texttt{{{esc(rep or 'it')}}}: "
                    "every gradient computed from it afterwards changes (see \\emph{What the hooks changed}):\n")
        return text + b.render()

    # ---- what the hooks changed ---------------------------------------------------------
    def effects(self) -> str:
        a = self.a
        changed = []
        for s in a.states:
            p, q = a.pure.get(s), a.actual.get(s)
            if p is None or q is None or same(p, q):
                continue
            k = a.steps[s].index
            changed.append((f"\\lambda_{{{k}}}", f"\\tilde\\lambda_{{{k}}}", p, q))
        for name, value in self.v.grads.items():
            vid = self.g.names.get(name)
            if vid is None:
                continue
            c = a.canon(vid)
            p = a.pure.get(c)
            if a.is_state(c) or p is None or value is None or same(p, value):
                continue
            changed.append((self.dfrac("\\ell", self.wrt(c)), mcode(name + ".grad"), p, value))
        if not changed:
            if any(h.returned is not None and h.phase == "backward" for h in self.v.hook_calls):
                return ("\\subsection{What the hooks changed}\nNothing: no gradient differs from the hook-free "
                        "derivation.\n\n")
            return ""
        out = ["\\subsection{What the hooks changed}\n",
               "The gradients that differ from the hook-free derivation: first without hooks, then what PyTorch "
               "carries (for a tensor) or stores in \\texttt{.grad} (for a leaf).\n"]
        unchanged = [name for name, value in self.v.grads.items() if value is not None
                     and self.g.names.get(name) is not None
                     and same(value, a.pure.get(a.canon(self.g.names[name])))]
        b = Block()
        for pure_name, actual_name, p, q in changed:
            self.value_rows(b, pure_name, p, [], tail="\\quad\\text{without hooks}")
            ratio = _ratio(p, q)
            simple = ratio is not None and ratio not in (0, 1) and (ratio.q == 1 or abs(ratio.p) == 1)
            segs = [f"{self.P.elem(ratio)}\\,{pure_name}"] if simple else []
            self.value_rows(b, actual_name, q, segs, tail="\\quad\\text{with the hooks}")
        out.append(b.render())
        if unchanged:
            out.append("Unchanged: " + ", ".join(code(n + ".grad") for n in unchanged)
                       + " (no changed gradient flows into them).\n\n")
        return "".join(out)

    # ---- final gradients -----------------------------------------------------------------
    def gradients(self) -> str:
        v = self.v
        out = ["\\subsection{Final gradients}\n"]
        if v.method == "grad":
            out.append("The backward pass is \\texttt{torch.autograd.grad}: it returns the gradients below and "
                       "leaves every \\texttt{.grad} untouched.\n\n")
            for name, value in (v.returned or {}).items():
                out.append(self._gradient(name, value, returned=True))
        for name, value in v.grads.items():
            out.append(self._gradient(name, value, returned=False))
        if v.loss is not None:
            b = Block()
            self.value_rows(b, "\\ell", v.loss, [], exact=True)
            out.append("For reference, the loss:\n" + b.render())
        return "".join(out)

    def _gradient(self, name: str, value: Exact | None, returned: bool) -> str:
        a, g = self.a, self.g
        vid = g.names.get(name)
        label = f"\\texttt{{torch.autograd.grad}} for {code(name)}" if returned else code(name + ".grad")
        out = [f"\\subsubsection*{{{label}}}\n"]
        if vid is None:
            return out[0]
        c = a.canon(vid)
        b = Block()
        pure = a.pure.get(c)
        lhs = self.dfrac("\\ell", self.wrt(c))
        if a.is_state(c):
            self.value_rows(b, lhs, pure if pure is not None else Exact.zeros(g.vars[c].shape),
                            [f"\\lambda_{{{a.steps[c].index}}}"])
        elif pure is not None:
            ch = self.chain(c)
            if ch is not None and same(ch[2], pure):
                self.value_rows(b, lhs, pure, [ch[0], ch[1]])
            else:
                terms = Terms()
                for j in a.consumers.get(c, []):
                    f = a.vjp_formulas(j).get(c)
                    if f is not None and a.contribution(j, a.pure.get(j.var)).get(c) is not None:
                        terms.extend(self.contrib_terms(j, f, c))
                self.value_rows(b, lhs, pure, [terms] if terms else [])
        else:
            b.eq(lhs, "0\\quad\\text{(no path to the loss)}")
        out.append(("Without hooks, the chain rule gives\n" if a.scalar else "Without hooks:\n") + b.render())
        what = "PyTorch returns" if returned else "PyTorch stores"
        if value is None:
            out.append(f"{what} \\texttt{{None}}: {self._none_reason(c)}\n\n")
            return "".join(out)
        rb = Block()
        stored = f"\\text{{returned}}_{{{mcode(name)}}}" if returned else mcode(name + ".grad")
        self.value_rows(rb, stored, value, [], exact=True)
        if pure is not None and same(value, pure):
            out.append(f"{what} exactly this:\n" + rb.render())
            return "".join(out)
        out.append(f"{what} a different value, because hooks changed the gradients on the way:\n" + rb.render())
        out.append(self._hooked_chain(c, value, stored))
        return "".join(out)

    def arriving(self, c: int):
        """The gradient flowing into tensor ``c`` from the equations that read it, with the gradients PyTorch
        actually carried into them (lambda~): (formula terms, number terms, total), before any hook on c."""
        a = self.a
        total = None
        names, nums = Terms(), Terms()
        for j in a.consumers.get(c, []):
            seed = a.actual.get(j.var, a.seed if j.var == a.root else None)
            contrib = a.contribution(j, seed).get(c) if seed is not None else None
            if contrib is None:
                continue
            total = contrib if total is None else E.add(total, contrib)
            hooked = not same(seed, a.pure.get(j.var))
            if a.scalar:
                d = a.local_derivative(j, c)
                if j.index is None and not hooked and all(e == 1 for e in seed.flat()):
                    names.append(self.dfrac("\\ell", self.wrt(c)))
                    nums.append(self.num_or_name(d, names[-1]))
                else:
                    k = j.index if j.index is not None else "\\ell"
                    lam = f"\\tilde\\lambda_{{{k}}}" if hooked else f"\\lambda_{{{k}}}"
                    names.append(f"{lam}\\,{self.dfrac(a.sym[j.var], self.wrt(c))}")
                    nums.append(f"{self.num_or_name(seed, lam)} \\cdot {self.num_or_name(d, names[-1])}")
            else:
                f = a.vjp_formulas(j, tilde=hooked).get(c)
                if f is not None:
                    names.extend(self.contrib_terms(j, f, c, tilde=hooked))
        return names, nums, total

    def _hooked_chain(self, c: int, value: Exact, stored: str) -> str:
        """value = sum_j J_j^T lambda~_j when hooks only acted between equations; say so, with numbers."""
        a = self.a
        if a.is_state(c):
            return "It is the gradient PyTorch carried into this tensor, after the hooks above acted on it.\n\n"
        names, nums, total = self.arriving(c)
        if total is not None and same(total, value) and names:
            b = Block()
            self.value_rows(b, stored, value, [names] + ([nums] if nums else []))
            hooked = [f"$\\tilde\\lambda_{{{j.index}}}$" for j in a.consumers.get(c, [])
                      if j.index is not None and a.actual.get(j.var) is not None
                      and not same(a.actual[j.var], a.pure.get(j.var))]
            text = "The same local derivatives, applied to the gradients PyTorch actually carried"
            if hooked:
                text += " (" + ", ".join(hooked) + ", changed by the hooks)"
            return text + ":\n" + b.render()
        hooks = [f"{i}" for i, h in enumerate(self.v.hook_calls, 1) if h.on == "tensor" and h.returned is not None
                 and self.g.names.get(h.target) is not None and a.canon(self.g.names[h.target]) == c]
        if hooks and total is not None:
            b = Block()
            self.value_rows(b, "\\text{arriving}", total, [names] + ([nums] if nums else []))
            return ("The gradient arriving at this tensor is\n" + b.render() + "and the tensor hook(s) "
                    + ", ".join(hooks) + " above replaced it by the stored value.\n\n")
        return ("The difference comes from hooks acting on this tensor's own gradient or inside the equations "
                "that use it (see the hook calls above).\n\n")

    def _none_reason(self, c: int) -> str:
        v, g = self.v, self.g
        if v.method == "grad":
            return "\\texttt{torch.autograd.grad} does not accumulate into \\texttt{.grad}."
        if g.variant.backward.inputs:
            return ("\\texttt{backward(inputs=...)} accumulates only into "
                    + ", ".join(code(n) for n, _ in g.variant.backward.inputs) + ".")
        return "no gradient reaches it (it does not influence the loss, or a hook returned \\texttt{None} for it)."

    # ---- notes -------------------------------------------------------------------------
    def notes(self) -> str:
        v = self.v
        items = [esc(n) for n in v.notes]
        for f in v.functions:
            verdict = ("equals the true derivative" if f.matches
                       else f"differs from the true derivative ({esc(f.true)}); PyTorch uses the declared formula")
            items.append(f"Custom Function {code(f.name)} ({code(f.callid)}): the declared backward for "
                         f"{code(f.slot)}, {code(f.declared)}, {verdict}.")
        if not items:
            return ""
        return ("\\subsection{Notes}\n\\begin{itemize}\n" + "".join(f"\\item {t}\n" for t in items)
                + "\\end{itemize}\n")


def _seg_text(seg) -> str | None:
    if isinstance(seg, Terms):
        return seg[0] if len(seg) == 1 else None
    return seg


def _difference(p: Exact, q: Exact):
    """d with q == p + d elementwise, else None."""
    if p.shape != q.shape or not (p.rational and q.rational):
        return None
    ds = {y - x for x, y in zip(p.flat(), q.flat())}
    return ds.pop() if len(ds) == 1 and 0 not in ds else None


def _cells_matrix(cells: np.ndarray) -> str | None:
    if cells.ndim == 1:
        return "\\begin{bmatrix}" + " & ".join(cells) + "\\end{bmatrix}^{\\top}"
    if cells.ndim == 2 and cells.shape[0] <= MAX_ROWS:
        return "\\begin{bmatrix}" + " \\\\ ".join(" & ".join(r) for r in cells) + "\\end{bmatrix}"
    return None


_PROBE = (fmpq(7, 11), fmpq(-13, 17))


def same(p: Exact | None, q: Exact | None) -> bool:
    """Equal values, for labelling ("this is lambda_3"). Rationals compare exactly; closed forms
    structurally, else numerically at 30 digits (at two rational points when symbols are free):
    SymPy's simplify would be exact but can take minutes on nested tanh/exp expressions."""
    if p is None or q is None:
        return p is q
    if p.shape != q.shape:
        return False
    if p.rational and q.rational:
        return bool(np.all(p.a == q.a))
    for x, y in zip(p.flat(), q.flat()):
        if type(x) is fmpq and type(y) is fmpq:
            if x != y:
                return False
            continue
        sx, sy = E.s_sym(x), E.s_sym(y)
        if sx == sy:
            continue
        if sx is sympy.S.NaN or sy is sympy.S.NaN:
            return False
        free = sorted((sx - sy).free_symbols, key=str)
        points = [{}] if not free else [{s: E.s_sym(_PROBE[i % 2] * (k + 1)) for i, s in enumerate(free)}
                                         for k in range(2)]
        for pt in points:
            a = decimal_value(sx.xreplace(pt) if pt else sx, 30)
            b = decimal_value(sy.xreplace(pt) if pt else sy, 30)
            if a is None or b is None or abs(a - b) > Fraction(1, 10 ** 20) * (abs(a) + 1):
                return False
    return True


def _ratio(p: Exact, q: Exact):
    """c with q == c * p elementwise (p nonzero somewhere), else None."""
    if p.shape != q.shape or not (p.rational and q.rational):
        return None
    c = None
    for x, y in zip(p.flat(), q.flat()):
        if x == 0:
            if y != 0:
                return None
            continue
        r = y / x
        if c is None:
            c = r
        elif r != c:
            return None
    return c
