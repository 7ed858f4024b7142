"""Closed forms of certified numbers, IEEE specials, and the bridge to SymPy.

A certified element (:mod:`adjoint.values.numbers.balls`) may carry a closed form: the exact
expression it was computed by, kept while it stays small, so that a user reads
``tanh(3/10)`` rather than 20 digits, and so that identities SymPy sees structurally
(``tanh(a) - tanh(a)`` is 0) decide zero tests the balls cannot. A form is one of

* an ``fmpq``: the element is exactly that rational;
* a :class:`Special`: ``inf``, ``-inf`` or ``nan``, which PyTorch makes at kinks (sqrt'(0),
  0/0) and IEEE arithmetic then propagates;
* a :class:`Form`: an operation (``tanh``, ``add``, ...) on smaller forms, with its tree
  size (shared subexpressions counted at each use, as the printed text repeats them); a
  form whose size would pass :data:`FORM_LIMIT` is not made: the element then has its
  ball only;
* a SymPy constant expression (a backend method written with SymPy element functions).

Forms are plain Python tuples until shown: :func:`to_sympy` replays them through the same
SymPy element functions the closed-form mode uses (:mod:`adjoint.values.numbers.symbolic`), so a
small closed form reads exactly as SymPy writes it. SymPy is imported only then.
:func:`arb_of_sympy` evaluates a SymPy constant rigorously in ball arithmetic (never by
SymPy's floating ``evalf``).
"""

from __future__ import annotations

import functools

import flint

from adjoint.values.numbers import symbolic as S

fmpq = flint.fmpq
arb = flint.arb

#: Largest closed form (tree size: atoms plus operations, each use of a shared part counted)
#: kept next to a certified value; beyond it the value is shown as certified digits.
FORM_LIMIT = 40


class Special:
    """An IEEE special value PyTorch produces: ``inf``, ``-inf`` or ``nan``."""

    __slots__ = ("text", "value")

    def __init__(self, text: str, value: float):
        self.text = text
        self.value = value

    def __repr__(self) -> str:
        return self.text

    def sympy(self):
        sp = S.sympy()
        return {"inf": sp.oo, "-inf": -sp.oo, "nan": sp.nan}[self.text]


INF = Special("inf", float("inf"))
NINF = Special("-inf", float("-inf"))
NAN = Special("nan", float("nan"))


def special_of_float(v: float) -> Special | None:
    if v != v:
        return NAN
    if v == float("inf"):
        return INF
    if v == float("-inf"):
        return NINF
    return None


class Form:
    """``op(*args)``: a closed form made of smaller forms (fmpq, Special, Form or SymPy)."""

    __slots__ = ("op", "args", "size", "_sym")

    def __init__(self, op: str, args: tuple, size: int):
        self.op = op
        self.args = args
        self.size = size
        self._sym = None

    def __repr__(self) -> str:
        return f"Form({self.op}, {self.args!r})"


def _formless(f) -> bool:
    """No closed form: None, or a certified element standing for its ball only (a form array
    may carry one, for :func:`adjoint.values.certified.balls_of_forms`; it has no SymPy ``args``)."""
    return f is None or (type(f) not in (Form, fmpq, Special) and not hasattr(f, "args"))


def size_of(f) -> int:
    """Tree size of a form; no form counts as beyond any limit."""
    if _formless(f):
        return FORM_LIMIT + 1
    if type(f) is Form:
        return f.size
    if type(f) is fmpq or type(f) is Special:
        return 1
    return _sympy_size(f)


def _sympy_size(e) -> int:
    n = 0
    stack = [e]
    while stack:
        x = stack.pop()
        n += 1
        if n > FORM_LIMIT:
            return n
        stack.extend(x.args)
    return n


def make(op: str, *args, limit: int = FORM_LIMIT):
    """A Form of ``op`` on ``args``, or None when an argument has none or it would be too big.
    One that is too big as a tree is built in SymPy first: SymPy's automatic simplification
    often gives a small result (``x * sqrt(s) / sqrt(s)`` is ``x``), and a rational one makes
    the element exact again."""
    if op == "pow" and type(args[1]) is fmpq and int(args[1].q) > S.MAX_ROOT_DEGREE:
        return None   # SymPy would look for an exact root of that degree in every product it is in
    size = 1
    for a in args:
        if _formless(a):
            return None
        size += size_of(a)
    if size <= limit:
        return Form(op, args, size)
    value = S.s_norm(to_sympy(Form(op, args, size)))
    if type(value) is fmpq or _sympy_size(value) <= limit:
        return value
    return None


# ----------------------------------------------------------------------------- to SymPy

def _apply(op: str, args: list):
    sp = S.sympy()
    if op == "sum":
        return sp.Add(*args)
    if op == "add":
        return args[0] + args[1]
    if op == "sub":
        return args[0] - args[1]
    if op == "mul":
        return S.s_mul(args[0], args[1])
    if op == "div":
        return S.s_div(args[0], args[1])
    if op == "neg":
        return -S.s_sym(args[0])
    if op == "pow":
        return S.s_pow(args[0], args[1])
    if op == "abs":
        return sp.Abs(args[0])
    from adjoint.values.numbers.elementary import ELEMENTARY
    if op in ELEMENTARY:
        return ELEMENTARY[op].closed(args[0])
    raise ValueError(f"no SymPy rule for the closed-form operation {op!r}")


def to_sympy(f):
    """The SymPy expression of a form (fmpq stays fmpq; memoised on each Form node).
    Iterative: forms from long chains nest deeper than Python's recursion limit."""
    if type(f) is fmpq:
        return f
    if type(f) is Special:
        return f.sympy()
    if type(f) is not Form:
        return f
    if f._sym is not None:
        return f._sym
    stack = [(f, False)]
    while stack:
        node, ready = stack.pop()
        if node._sym is not None:
            continue
        if ready:
            node._sym = S.s_norm(_apply(node.op, [S.s_sym(_leaf(a)) for a in node.args]))
            continue
        stack.append((node, True))
        for a in node.args:
            if type(a) is Form and a._sym is None:
                stack.append((a, False))
    return f._sym


#: functions whose SymPy form of a nonzero rational ``r`` is ``f(r)`` for ``r > 0`` and
#: ``-f(-r)`` for ``r < 0`` (odd, and SymPy evaluates them at no other rational): their text is
#: written without SymPy by :func:`plain_text`
PLAIN_ODD = frozenset({"tanh"})


def plain_text(f) -> str | None:
    """The text SymPy's ``sstr`` writes for ``f`` when ``f`` is an odd function of one nonzero
    rational (``tanh(3/8)``, ``-tanh(3/8)``), made without importing SymPy (a Tanh network's
    first layer: hundreds of them in an answer); None for any other form."""
    if type(f) is not Form or f.op not in PLAIN_ODD or f._sym is not None:
        return None
    (r,) = f.args
    if type(r) is not fmpq or r == 0:
        return None
    if r > 0:
        return f"{f.op}({r})"
    return f"-{f.op}({-r})"


def _leaf(a):
    if type(a) is Form:
        return a._sym
    if type(a) is Special:
        return a.sympy()
    return a


# ----------------------------------------------------------------------------- SymPy -> balls

#: SymPy function name -> arb method, for evaluating SymPy constants rigorously.
ARB_FUNCTIONS = {"exp": "exp", "log": "log", "sin": "sin", "cos": "cos", "tan": "tan", "tanh": "tanh",
                 "sinh": "sinh", "cosh": "cosh", "atan": "atan", "asin": "asin", "acos": "acos", "erf": "erf",
                 "erfc": "erfc", "gamma": "gamma", "loggamma": "lgamma", "Abs": "__abs__", "sign": "sgn",
                 "asinh": "asinh", "acosh": "acosh", "atanh": "atanh"}


class NoBallRule(ValueError):
    """A SymPy constant built from a function this module cannot evaluate in ball arithmetic."""


def arb_of_sympy(e, memo: dict | None = None):
    """A SymPy constant (no free symbols) as an arb ball at the context's precision.
    Raises NoBallRule for a function without a ball rule (add it to ARB_FUNCTIONS)."""
    sp = S.sympy()
    memo = {} if memo is None else memo
    stack = [(e, False)]
    while stack:
        x, ready = stack.pop()
        if x in memo:
            continue
        if not ready:
            stack.append((x, True))
            stack.extend((a, False) for a in x.args if a not in memo)
            continue
        memo[x] = _arb_node(sp, x, [memo[a] for a in x.args])
    return memo[e]


def _arb_node(sp, x, args: list):
    if x.is_Rational:
        return arb(fmpq(int(x.p), int(x.q)))
    if x is sp.pi:
        return arb.pi()
    if x is sp.E:
        return arb.const_e()
    if isinstance(x, sp.Float):
        return arb(flint.arf(x.num)) if hasattr(x, "num") else arb(str(x))
    if x.is_Add:
        out = arb(0)
        for a in args:
            out += a
        return out
    if x.is_Mul:
        out = arb(1)
        for a in args:
            out *= a
        return out
    if x.is_Pow:
        base, ex = args
        if x.exp.is_Rational and x.exp.q == 1:
            return base ** int(x.exp.p)
        if x.exp == sp.Rational(1, 2):
            return base.sqrt()
        return base ** ex
    name = type(x).__name__
    if isinstance(x, sp.Function) and name in ARB_FUNCTIONS and len(args) == 1:
        return getattr(args[0], ARB_FUNCTIONS[name])()
    cert = getattr(x, "certified_ball", None)
    if cert is not None:
        return cert()
    raise NoBallRule(f"no ball-arithmetic rule for {name} (in {x}); add it to adjoint.values.numbers.forms.ARB_FUNCTIONS")


# ----------------------------------------------------------------------------- certified atoms

def certified_atom(element):
    """A SymPy atom standing for a certified element that has no closed form: it prints as
    its certified digits and evaluates (:func:`arb_of_sympy`, ``evalf``) from its ball, so a
    SymPy expression built on it stays rigorous. Made when SymPy meets such an element (a
    backend method written with SymPy element functions, the LaTeX printer)."""
    return _atom_class()(element)


@functools.cache
def _atom_class():
    """The atom class, made once SymPy is loaded (it subclasses SymPy's AtomicExpr)."""
    sp = S.sympy()

    class CertifiedReal(sp.AtomicExpr):
        is_number = True
        is_real = True
        is_commutative = True

        def __new__(cls, element):
            obj = sp.AtomicExpr.__new__(cls)
            obj.element = element
            obj.order = element.float()   # SymPy orders an Add's terms by this first: the value, not an address
            return obj

        def _hashable_content(self):
            # equal atoms are one element of one tensor; SymPy's canonical order (Basic.compare) reads this
            # tuple left to right, so the value leads: the printed order of terms is the same in every run
            return (self.order, id(self.element.tensor), self.element.index)

        def certified_ball(self):
            from adjoint.values.numbers import balls
            return balls.balls_at(self.element.tensor, flint.ctx.prec)[self.element.index]

        def _eval_evalf(self, prec):
            b = self.element.ball_with_bits(prec + 8) if hasattr(self.element, "ball_with_bits") else None
            b = self.element.tensor.ball_with_bits(self.element.index, prec + 8) if b is None else b
            man, exp = b.mid().man_exp() if not b.mid().is_zero() else (0, 0)
            return sp.Float(sp.Rational(int(man)) * sp.Rational(2) ** int(exp), precision=prec)

        def _sympystr(self, printer):
            return self.element.text()

        def _latex(self, printer):
            return self.element.text().lstrip("~")

    return CertifiedReal
