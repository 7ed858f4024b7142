"""All mathematics in the document is printed by :class:`DerivationPrinter`, a subclass of SymPy's
``LatexPrinter``: exact values (``flint.fmpq`` or SymPy expressions) through the number rule
(numbers.py) or SymPy's own printing, exact tensors as numbers, transposed rows or matrices elided to
fit the line, and the ``T*`` expression trees of the derivation (``adjoint.mathtree``) through one
``_print_T*`` method each, with their precedences -- a named function through the notation its
registry entry declares; with ``subst`` the atoms print as their values (the "numbers substituted"
line)."""

from __future__ import annotations

import re
from fractions import Fraction

import flint
import sympy
from sympy.printing.latex import LatexPrinter
from sympy.printing.precedence import PRECEDENCE

from adjoint.derivation import Cx, Exact, Real
from adjoint.derivation import values as E
from adjoint.values.mathtree import (TT, TAtom, TBin, TCall, TConst, TDeriv, TFn, TIndex, TInner, TJac, TLam, TMatMul,
                                    TName, TNeg, TNode, TNone, TOnes, TPlace, TProduct, TPut, TSub, TSumTo, TSym,
                                    TTuple, TVal)
from adjoint.values.mathtree import const_value as _const_value
from adjoint.values.mathtree import is_scalar_shape as _is_scalar_shape
from adjoint.values.mathtree import numel as _numel
from adjoint.values.mathtree import t_shape as _t_shape
from adjoint.derivation.values import decimal_value
from adjoint.render.latex.numbers import Num, _truncated, exact_fraction, format_rational
from adjoint.render.latex.text import _tex_escape_name, symbol_tex
from adjoint.render.latex.text import esc as _tex_escape_text
from adjoint.render.latex.widths import LINE_EM, _choose_columns, tex_width

fmpq = flint.fmpq

#: at most this many rows of a matrix are shown (the middle ones are elided)
MAX_ROWS = 8


_NUM_CACHE: dict = {}
_CLOSED_CACHE: dict = {}
_EDGE = 12          # at most this many leading and trailing columns are ever formatted


def _plain(e):
    """A certified element (adjoint.values.exact.Real) as SymPy: its closed form, or an atom for its digits."""
    return e.sympy() if type(e) is Real else e


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

    def _print_Basic(self, expr, *args, **kwargs):
        # SymPy's own _latex methods (pi's \pi), which printmethod = "_adjoint_latex" bypasses
        own = getattr(expr, "_latex", None)
        if callable(own):
            return own(self)
        return super()._print_Basic(expr, *args, **kwargs)

    def _subst_scalar(self, value: Exact) -> str:
        tex = self.elem(value.item())
        return f"\\left({tex}\\right)" if tex.startswith("-") or elem_prec(value.item()) < 50 else tex

    def parenthesize(self, item, level, is_neg=False, strict=False):
        if self.subst is not None and isinstance(item, sympy.Symbol) and level >= PRECEDENCE["Pow"]:
            tex = self._print(item)
            if "\\frac" in tex or "\\ldots" in tex:
                return f"\\left({tex}\\right)"
        return super().parenthesize(item, level, is_neg, strict)

    def _print_CertifiedReal(self, expr):
        """An element with no closed form inside a SymPy expression: its certified digits."""
        return expr.element.text().lstrip("~")

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
        e = _plain(e)
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
        e = _plain(e)
        if e in _CLOSED_CACHE:
            return _CLOSED_CACHE[e]
        tex = None
        if type(e).__name__ == "CertifiedReal":   # no closed form: its digits are the number rule's
            pass
        elif e.free_symbols or _small(e, 40):
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
        e = _plain(e)
        if type(e) is fmpq or isinstance(e, sympy.Rational):
            return exact_fraction(E.q(e), slash)
        n = self.num(e)
        if n.kind == "approx" and not isinstance(e, sympy.Rational):
            closed = self.closed_form(e)
            if closed is not None and tex_width(closed) <= self.budget * 0.6:
                return closed
        return None

    def _print_Cx(self, x) -> str:
        tex = self.complex_tensor(x, self.budget)
        return tex if tex is not None else f"\\text{{(a complex tensor of shape {list(x.shape)})}}"

    def _print_Exact(self, x: Exact) -> str:
        tex = self.tensor(x, self.budget)
        return tex if tex is not None else self.tensor(x, 10 ** 6, max_cols=6)

    def tensor(self, x: Exact, budget: float, max_cols: int | None = None) -> str | None:
        """An exact tensor as a number, a column vector (written as a transposed row) or a
        matrix, eliding middle columns/rows to fit ``budget`` em; None if it cannot fit."""
        if isinstance(x, Cx):
            return self.complex_tensor(x, budget, max_cols)
        if x.size == 0:   # an empty tensor (an adaptive pool to a size of 0): its shape
            return "\\left[\\,\\right]_{" + " \\times ".join(str(n) for n in x.shape) + "}"
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

    def complex_elem(self, re_e, im_e, slash: bool = False) -> str:
        """``a + b i`` (``a``, ``b i``, or ``0`` when a part is zero)."""
        a, b = self.elem(re_e, slash), self.elem(im_e, slash)
        if b in ("0", "-0"):
            return a
        neg = b.startswith("-")
        mag = b[1:] if neg else b
        mag = "" if mag == "1" else mag
        if a in ("0", "-0"):
            return f"{'-' if neg else ''}{mag}\\mathrm{{i}}"
        return f"{a} {'-' if neg else '+'} {mag}\\mathrm{{i}}"

    def complex_tensor(self, x, budget: float, max_cols: int | None = None) -> str | None:
        """A complex tensor (:class:`adjoint.values.complexes.Cx`): each element ``a + b i``, as a number,
        a transposed row or a matrix; None when it does not fit or has more dimensions."""
        if not isinstance(x.re, Exact) or not isinstance(x.im, Exact):
            return None
        cells = [self.complex_elem(a, b, slash=x.size > 1) for a, b in zip(x.re.flat(), x.im.flat())]
        if x.size == 1:
            return cells[0]
        if x.ndim == 1:
            body = self._row_fit(cells, budget - 1.5, max_cols)
            return None if body is None else f"\\begin{{bmatrix}}{body}\\end{{bmatrix}}^{{\\top}}"
        if x.ndim == 2:
            m, n = x.shape
            grid = [cells[i * n:(i + 1) * n] for i in range(m)]
            keep = self._cols_fit(grid, n, budget, max_cols)
            if keep is None or None in keep or m > MAX_ROWS:
                return None
            return "\\begin{bmatrix}" + " \\\\ ".join(" & ".join(r[j] for j in keep) for r in grid) + "\\end{bmatrix}"
        return None

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
            if isinstance(v, Cx):   # a + b i: a sum
                return 40 if v.size == 1 else 100
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
            if isinstance(v, Cx):
                return 40 if v.size == 1 else 100
            if v is not None and v.size == 1 and self.elem(v.item()).startswith("-"):
                return 45
            return 100
        if isinstance(n, TVal):
            if isinstance(n.value, Cx):
                return 40 if n.value.size == 1 else 100
            if n.value.size == 1:
                e = n.value.item()
                return 45 if self.elem(e).startswith("-") else min(elem_prec(e), 100)
            return 100
        if isinstance(n, TConst):
            if isinstance(n.value, Cx):      # a + b i
                return 40 if n.value.size == 1 else 100
            if type(n.value).__name__ == "Gaussian":
                return 40
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
        if isinstance(n.value, (Exact, Cx)):
            return self._print(n.value)
        if type(n.value).__name__ == "Gaussian":   # a complex Python number
            return self.complex_elem(fmpq(n.value.re.numerator, n.value.re.denominator),
                                     fmpq(n.value.im.numerator, n.value.im.denominator))
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
                if not (isinstance(a, TFn) and a.fn.delimited):
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
                if value.ndim == 2 and isinstance(value, Cx):
                    return self._print(Cx(Exact(value.re.a.T.copy(), value.re.rational),
                                          Exact(value.im.a.T.copy(), value.im.rational)))
                if value.ndim == 2:
                    return self._print(Exact(value.a.T.copy(), value.rational))
        base = self._print(a)
        if self.prec(a) < 100 or isinstance(a, (TT, TBin)) or (isinstance(a, TFn) and not a.fn.delimited):
            base = f"\\left({base}\\right)"
        elif base.endswith("}") and "^" in base:
            base = f"\\left({base}\\right)"
        return f"{base}^{{\\top}}"

    def _print_TFn(self, n: TFn) -> str:
        """The notation the function's registry entry declares: #0, #1 ... its arguments, #* all of them,
        #s the node's subscript."""
        def fill(m: re.Match) -> str:
            key = m.group(1)
            if key == "s":
                return n.sub
            if key == "*":
                return ",\\ ".join(self._print(a) for a in n.args)
            return self._print(n.args[int(key)])
        return re.sub(r"#(\d|s|\*)", fill, n.fn.tex).replace("_{}", "")

    def _print_TJac(self, n: TJac) -> str:
        """J^T lam of a function whose vector-Jacobian product is declared generic."""
        sub = f"_{{{n.of.sub}}}" if n.of.sub else ""
        wrt = f",{n.index + 1}" if len(n.of.args) > 1 else ""
        return (f"J_{{\\operatorname{{{_tex_escape_name(n.of.name)}}}{sub}{wrt}}}^{{\\top}}"
                f"\\,{self.p(n.lam, 51)}")

    def key_text(self, key: tuple, shape=None) -> str:
        """An index key as Python writes it: 0, :, 1:3, ::2, None, ... (a slice's bounds that are the
        dimension's own are left out)."""
        items, dim = [], 0
        for item in key:
            if item is None:
                items.append("\\mathrm{None}")
                continue
            if item is Ellipsis:
                items.append("\\ldots")
                continue
            size = shape[dim] if shape is not None and dim < len(shape) else None
            dim += 1
            if isinstance(item, slice):
                start = "" if item.start in (None, 0) else str(item.start)
                stop = "" if item.stop is None or (size is not None and item.stop >= size) else str(item.stop)
                step = "" if item.step in (None, 1) else f"{{:}}{item.step}"
                items.append(f"{start}{{:}}{stop}{step}")
            else:
                items.append(str(item))
        while len(items) > 1 and items[-1] == "{:}":
            items.pop()
        return ",".join(items)

    def _print_TSub(self, n: TSub) -> str:
        return f"{self.p(n.a, 100)}[{self.key_text(n.key, n.a.shape)}]"

    def _print_TPlace(self, n: TPlace) -> str:
        dims = "\\times ".join(str(d) for d in n.shape) or "()"
        return (f"\\operatorname{{place}}_{{[{self.key_text(n.key, n.shape)}]}}^{{{dims}}}"
                f"\\left({self._print(n.a)}\\right)")

    def _print_TPut(self, n: TPut) -> str:
        return (f"{self.p(n.base, 100)}\\left[{self._print(n.region)} \\leftarrow "
                f"{self._print(n.value)}\\right]")

    def _print_TCall(self, n: TCall) -> str:
        args = ",\\ ".join(self._print(a) for a in n.args)
        tex = f"\\operatorname{{{_tex_escape_name(n.name)}}}\\left({args}\\right)"
        return tex if n.output is None else f"{tex}_{{[{n.output}]}}"

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
        if isinstance(n.index, str):
            return f"{self.p(n.a, 100)}[\\text{{\\texttt{{{_tex_escape_text(repr(n.index))}}}}}]"
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
