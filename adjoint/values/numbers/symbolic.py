"""SymPy elements: free symbols and closed forms, with PyTorch's IEEE conventions.

The element functions (``s_*``) work on single elements, each an ``fmpq`` or a SymPy
expression, and implement the IEEE-754 conventions PyTorch relies on: x/0 is +-inf (nan for
0/0), inf*0 is nan, sqrt of a negative is nan. They serve the closed-form mode (a file with
free symbols) and the display of small closed forms (:mod:`adjoint.values.numbers.forms`).

SymPy is imported on first use (:func:`sympy`), never at import time: ``adjoint solve`` of a
file of rationals does not load it.
"""

from __future__ import annotations

import collections
import contextlib
import importlib
import sys

import flint

fmpq = flint.fmpq
_Q0 = fmpq(0)
_Q1 = fmpq(1)


def sympy():
    """The sympy module (imported on first use)."""
    mod = sys.modules.get("sympy")
    return mod if mod is not None else importlib.import_module("sympy")


def loaded() -> bool:
    """Has SymPy been imported (so that an element may be a SymPy object)?"""
    return "sympy" in sys.modules


class ExactLimit(ArithmeticError):
    """An exact result would be astronomically large (e.g. 0.3 ** 10**8 has 10**8 digits)."""


MAX_EXACT_EXPONENT = 4096

#: Most products of closed-form elements one matrix product may make (m * k * n): each is a
#: SymPy multiplication, at tens of microseconds, before any simplification.
MAX_CLOSED_PRODUCTS = 200_000


def check_exponent(e) -> None:
    if type(e) is fmpq and e.q == 1 and abs(int(e.p)) > MAX_EXACT_EXPONENT:
        raise ExactLimit(f"the exponent {e.p} is too large to compute exactly (at most {MAX_EXACT_EXPONENT} in size); "
                         "use a smaller power")


# ----------------------------------------------------------------------------- conversions

def s_sym(x):
    """Element as a SymPy object (an fmpq becomes a Rational; a certified element its closed
    form, or an atom standing for its ball)."""
    if type(x) is fmpq:
        return sympy().Rational(int(x.p), int(x.q))
    to_sym = getattr(x, "sympy", None)
    if to_sym is not None and not _is_sympy(x):
        return to_sym()
    return x


#: Largest closed form of one element, counted as its printed tree (a shared part counts once
#: per use, as the text repeats it): free symbols through many layers grow it 2-4x per layer.
MAX_CLOSED_FORM = 200_000


def tree_size(e, memo: dict) -> int:
    """Nodes of a SymPy element's expression as a tree (what its text grows with), computed over
    its DAG with ``memo`` (expression -> size), so each shared part is measured once."""
    if type(e) is fmpq or not getattr(e, "args", None):
        return 1
    stack = [e]
    while stack:
        x = stack[-1]
        if x in memo:
            stack.pop()
            continue
        pending = [a for a in x.args if a.args and a not in memo]
        if pending:
            stack.extend(pending)
            continue
        memo[x] = 1 + sum(memo[a] if a.args else 1 for a in x.args)
        stack.pop()
    return memo[e]


def has_symbols(x) -> bool:
    """Does a SymPy element contain a free symbol? A walk over the expression's DAG, each shared
    part once (SymPy's ``free_symbols`` walks it as a tree: exponential in a deep chain's depth)."""
    if type(x) is fmpq or not loaded():
        return False
    sp = sympy()
    if not isinstance(x, sp.Basic):
        return False
    if x.is_Symbol:
        return True
    # breadth first: a closed form's symbols sit near its top (a layer's w * h + b), so a
    # depth-first walk went down the nested part first, through most of the expression
    seen = set()
    queue = collections.deque([x])
    while queue:
        for a in queue.popleft().args:
            if a.is_Symbol:
                return True
            if a.args and id(a) not in seen:
                seen.add(id(a))
                queue.append(a)
    return False


def _is_sympy(x) -> bool:
    return loaded() and isinstance(x, sympy().Basic)


def s_norm(x):
    """Element back to fmpq when it is a plain rational."""
    if type(x) is fmpq:
        return x
    if loaded() and isinstance(x, sympy().Rational):
        return fmpq(int(x.p), int(x.q))
    return x


def _nonfinite():
    S = sympy().S
    return (S.Infinity, S.NegativeInfinity, S.ComplexInfinity, S.NaN)


def s_mul(x, y):
    """x * y for two elements. Zero times a finite closed form is zero, decided structurally:
    SymPy's Mul would ask the other factor ``is_finite``, which on a large closed form can run
    its adaptive evalf for minutes (a hook's ``grad * 0``; sweep seed 4, problem 1141)."""
    if _is_exact_zero(x) and not _has_nonfinite(y) or _is_exact_zero(y) and not _has_nonfinite(x):
        return sympy().S.Zero
    return s_sym(x) * s_sym(y)


def _is_exact_zero(x) -> bool:
    return x == 0 if type(x) is fmpq else x is sympy().S.Zero


def _has_nonfinite(x) -> bool:
    return type(x) is not fmpq and s_sym(x).has(*_nonfinite())


def s_is_nan(x) -> bool:
    return loaded() and x is sympy().S.NaN


def s_is_nonfinite(x) -> bool:
    if type(x) is fmpq or not loaded():
        return False
    S = sympy().S
    return x is S.NaN or x is S.Infinity or x is S.NegativeInfinity


def _mp_funcs():
    import mpmath
    sp = sympy()
    return {sp.exp: mpmath.exp, sp.log: mpmath.log, sp.sin: mpmath.sin, sp.cos: mpmath.cos,
            sp.tan: mpmath.tan, sp.tanh: mpmath.tanh, sp.Abs: abs, sp.sign: mpmath.sign}


def s_approx(x, dps: int = 50):
    """A constant element as an mpmath number accurate to about ``dps`` digits, or None when it
    has free symbols or is not a finite real.

    A memoised walk at fixed precision: SymPy's adaptive ``evalf`` can take minutes on the
    deeply nested tanh/sigmoid/sqrt expressions a forward pass produces."""
    import mpmath
    if type(x) is fmpq:
        with mpmath.workdps(dps):
            return mpmath.mpf(int(x.p)) / int(x.q)
    approx = getattr(x, "approx", None)
    if approx is not None and not _is_sympy(x):
        return approx(dps)
    if has_symbols(x):
        return None
    sp = sympy()
    funcs = _mp_funcs()
    memo: dict = {}

    def ev(e):
        if e in memo:
            return memo[e]
        if e.is_Rational:
            r = mpmath.mpf(int(e.p)) / int(e.q)
        elif e is sp.pi:
            r = +mpmath.pi
        elif e is sp.E:
            r = +mpmath.e
        elif e.is_Add:
            r = mpmath.fsum(ev(a) for a in e.args)
        elif e.is_Mul:
            r = mpmath.fprod(ev(a) for a in e.args)
        elif e.is_Pow:
            b, k = ev(e.base), ev(e.exp)
            if b < 0 and not e.exp.is_integer:
                raise ValueError("not real")
            r = mpmath.power(b, k)
        elif isinstance(e, sp.Function) and e.func in funcs and len(e.args) == 1:
            r = funcs[e.func](ev(e.args[0]))
        else:
            r = mpmath.mpf(sp.N(e, dps))
        if not isinstance(r, mpmath.mpf) or not mpmath.isfinite(r):
            raise ValueError("not finite")
        memo[e] = r
        return r

    try:
        with mpmath.workdps(dps + 10):
            return +ev(x)
    except (ValueError, TypeError, ZeroDivisionError, OverflowError):
        return None


def s_sign(x):
    """-1, 0 or 1 when decidable; 'nan' for NaN; None when it depends on free symbols."""
    if type(x) is fmpq:
        return (x > 0) - (x < 0)
    sign = getattr(x, "sign", None)
    if sign is not None and not _is_sympy(x):
        return sign()
    import mpmath
    S = sympy().S
    if x is S.NaN:
        return "nan"
    if x is S.Infinity:
        return 1
    if x is S.NegativeInfinity:
        return -1
    symbolic = has_symbols(x)
    if not symbolic:
        # A constant: decided numerically, never by SymPy's assumption system (minutes on the
        # large closed forms a forward pass builds). One that is zero to 200 digits is taken
        # as exactly zero: exact zero-testing of such expressions is undecidable in general.
        for dps, tiny in ((50, 30), (250, 200)):
            v = s_approx(x, dps)
            if v is None:
                break
            if abs(v) > mpmath.mpf(10) ** -tiny:
                return 1 if v > 0 else -1
        else:
            return 0
    if x.is_zero:
        return 0
    if x.is_positive:
        return 1
    if x.is_negative:
        return -1
    if symbolic:
        return None
    v = x.evalf(60)
    if v.is_Number and v != 0:
        return 1 if v > 0 else -1
    if x.equals(0):
        return 0
    return 1 if v > 0 else (-1 if v < 0 else 0)


def s_div(x, y):
    if type(x) is fmpq and type(y) is fmpq:
        if y != 0:
            return x / y
        return _ieee_div_by_zero(s_sign(x))
    sy = s_sign(y)
    if sy == 0:
        return _ieee_div_by_zero(s_sign(x))
    return s_norm(s_sym(x) / s_sym(y))


def _ieee_div_by_zero(sign_x):
    S = sympy().S
    if sign_x is None:
        return S.NaN  # symbolic numerator over an exact zero: no single answer
    return {1: S.Infinity, -1: S.NegativeInfinity}.get(sign_x, S.NaN)


def s_pow(x, e):
    """x ** e with PyTorch's real semantics (negative base, fractional exponent: nan)."""
    if type(x) is fmpq and x not in (_Q0, _Q1, -_Q1):
        check_exponent(e)
    if type(x) is fmpq and type(e) is fmpq and e.q == 1:
        n = int(e.p)
        if n >= 0:
            return x ** n
        if x == 0:
            return sympy().S.Infinity  # IEEE pow(+0, -n) = +inf
        return x ** n
    sp = sympy()
    sx, se = s_sym(x), s_sym(e)
    if se.is_zero:
        return _Q1  # torch.pow(x, 0) == 1, even for x == 0, inf or nan
    if sx is sp.S.NaN or se is sp.S.NaN:
        return sp.S.NaN
    sign = s_sign(x)
    if sign == 0:
        es = s_sign(e)
        if es == 1:
            return _Q0
        if es == -1:
            return sp.S.Infinity
    if sign == -1 and not se.is_integer:
        return sp.S.NaN
    if se.is_Rational and sx.is_Rational and se.q > MAX_ROOT_DEGREE:
        # SymPy would look for an exact q-th root of the base (integer_nthroot per factor), which
        # takes minutes for q ~ 1e24; such a root is irrational unless the base is a huge perfect
        # power, so the power stays unevaluated (still exact) and the certified balls carry it
        return s_norm(sp.Pow(sx, se, evaluate=False))
    return s_norm(sp.Pow(sx, se))


#: Largest root degree (an exponent's denominator) for which SymPy looks for an exact root.
MAX_ROOT_DEGREE = 1000


def s_sqrt(x):
    sign = s_sign(x)
    if sign == -1 or sign == "nan":
        return sympy().S.NaN
    return s_norm(sympy().sqrt(s_sym(x)))


def s_log(x):
    sign = s_sign(x)
    S = sympy().S
    if sign == 0:
        return S.NegativeInfinity
    if sign == -1 or sign == "nan":
        return S.NaN
    return s_norm(sympy().log(s_sym(x)))


def fmpq_float(x) -> float:
    try:
        return float(x)
    except OverflowError:  # beyond float64: what float arithmetic would give
        return float("inf") if x > 0 else float("-inf")


def s_float(x) -> float | None:
    """Decimal value; None when the element depends on free symbols."""
    if type(x) is fmpq:
        return fmpq_float(x)
    to_float = getattr(x, "float", None)
    if to_float is not None and not _is_sympy(x):
        return to_float()
    S = sympy().S
    if x is S.NaN:
        return float("nan")
    if x is S.Infinity:
        return float("inf")
    if x is S.NegativeInfinity:
        return float("-inf")
    if has_symbols(x):
        return None
    v = s_approx(x, 30)
    if v is None:
        try:
            return float(x.evalf(30))
        except (TypeError, ValueError):
            return float("nan")
    return float(v)


def s_sci(x, digits: int = 3) -> str:
    """A constant element in scientific notation, at any magnitude (1e400 stays 1e400)."""
    import mpmath
    v = s_approx(x, digits + 10)
    return s_str(x) if v is None else mpmath.nstr(v, digits, min_fixed=-4, max_fixed=6)


def s_str(x, printer=None) -> str:
    """An element as text: fmpq ``p/q``, ``inf``/``-inf``/``nan``, SymPy's ``sstr`` (``printer``:
    one from :func:`memo_printer`, to share the text of common subexpressions)."""
    if type(x) is fmpq:
        return str(x)
    text = getattr(x, "text", None)
    if text is not None and not _is_sympy(x):
        return text() if callable(text) else text
    S = sympy().S
    if x is S.Infinity:
        return "inf"
    if x is S.NegativeInfinity:
        return "-inf"
    if x is S.NaN:
        return "nan"
    # order="none": SymPy's default printer re-sorts every sum, which took minutes on the
    # few-thousand-node closed forms a forward pass can build; args are canonically ordered anyway
    with long_integers():
        if printer is not None:
            return printer.doprint(x)
        return sympy().sstr(x, order="none")


@contextlib.contextmanager
def long_integers():
    """Lift Python's limit on the digits of an int written as text (4,300: a guard against
    untrusted input) while SymPy prints: it writes an Integer through ``str(int)``, and an exact
    closed form can hold longer ones (``(10001/10000) ** 2000.5``). flint writes its own."""
    limit = sys.get_int_max_str_digits()
    if limit == 0:
        yield
        return
    sys.set_int_max_str_digits(0)
    try:
        yield
    finally:
        sys.set_int_max_str_digits(limit)


def memo_printer():
    """SymPy's own str printer (``sstr(x, order="none")``), remembering the text of every
    subexpression it printed: a closed form of a deep chain repeats its inner parts
    (``tanh(w_1*tanh(...) + b_1)`` in every term), and without the memo each repetition is
    printed again (time exponential in depth for text that is only quadratic). The text is
    exactly sstr's: the memo only skips recomputing a subexpression's own text."""
    from sympy.printing.precedence import precedence
    from sympy.printing.str import StrPrinter

    class MemoStrPrinter(StrPrinter):
        def __init__(self):
            super().__init__({"order": "none"})
            self._memo = {}
            self._precedence = {}

        def parenthesize(self, item, level, strict=False):
            # StrPrinter.parenthesize, with each subexpression's precedence worked out once
            # (asked again for every product and power a shared part appears in)
            try:
                p = self._precedence[item]
            except KeyError:
                p = self._precedence[item] = precedence(item)
            except TypeError:  # unhashable
                p = precedence(item)
            if p < level or (not strict and p <= level):
                return "(%s)" % self._print(item)
            return self._print(item)

        def _print(self, expr, **kwargs):
            if kwargs:
                return super()._print(expr, **kwargs)
            try:
                return self._memo[expr]
            except KeyError:
                text = self._memo[expr] = super()._print(expr)
                return text
            except TypeError:  # an unhashable argument (a list of settings, say)
                return super()._print(expr)

    return MemoStrPrinter()


def is_zero(d) -> bool:
    """Is a SymPy difference identically zero? Exact when it is a plain number; otherwise
    decided numerically to 50 digits at the given constants and at two pseudo-random rational
    points for its free symbols (the test SymPy's own ``equals`` relies on, without the
    ``simplify`` that grows super-linearly with expression size)."""
    import mpmath
    sp = sympy()
    d = sp.expand(d) if d.is_polynomial(*d.free_symbols) and len(d.args) < 200 else d
    if d == 0:
        return True
    symbols = sorted(d.free_symbols, key=str)
    points = [{}] if not symbols else [
        {s: sp.Rational(7 + 3 * i + 5 * k, 11 + 2 * i + k) for i, s in enumerate(symbols)} for k in (1, 2)]
    for point in points:
        v = s_approx(d.xreplace(point) if point else d)
        if v is None:
            return bool(sp.simplify(d) == 0)
        if abs(v) > mpmath.mpf(10) ** -40:
            return False
    return True
