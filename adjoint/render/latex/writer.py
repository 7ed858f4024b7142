"""What every section of a derivation writes with (:class:`UnitWriter`): the symbols of tensors,
values fitted to the line (as a matrix, else element by element) with their exact fractions,
derivatives, a formula as summands that can break across lines, and the three ways the document
names a gradient the record identified -- as a multiplier (:meth:`~UnitWriter.ident`:
``lambda_k``, ``lambda~_k``, ``dl/dtheta``), as a chain-rule product over paths
(:meth:`~UnitWriter.chain`), and as what arrives at a tensor from the equations that read it
(:meth:`~UnitWriter.arriving`). The mathematics is the record's (``adjoint.derivation``); this
only typesets it."""

from __future__ import annotations

from fractions import Fraction

import flint
import numpy as np

from adjoint.derivation import Arrival, Chain, Cx, Exact, Ident, Step, Symbol, Typed, Unit, VariantDerivation
from adjoint.derivation import values as E
from adjoint.values.mathtree import TBin, TDeriv, TMatMul, TNode, TProduct, TSym, TVal
from adjoint.render.latex.layout import Block, Terms, sym_pieces
from adjoint.render.latex.printer import MAX_ROWS, DerivationPrinter
from adjoint.render.latex.numbers import format_rational
from adjoint.render.latex.text import _tex_escape_name, code, esc, symbol_tex
from adjoint.render.latex.widths import LINE_EM, tex_width

fmpq = flint.fmpq

#: the widest "d l / d (expression)" written as a name for a gradient; an unnamed tensor made by a
#: long chain of ops (inside MultiheadAttention) would otherwise be written as its whole formula
WRT_EM = LINE_EM - 12


def symbol_of(s: Symbol) -> str:
    """A tensor's symbol as LaTeX: x, W_{f0}, b^{(\\mathrm{a\\_b})}, x_{3}, \\ell."""
    if s.kind == "state":
        return f"{s.base}_{{{s.index}}}"
    if s.kind == "loss":
        return "\\ell"
    sym = symbol_tex(s.letter)
    if not s.module:
        return sym
    path = f"\\mathrm{{{_tex_escape_name(s.module)}}}"
    return f"{sym}^{{({path})}}" if "_" in sym else f"{sym}_{{{path}}}"


class UnitWriter:
    """One backward pass's derivation being written: its record, printers (symbols; numbers
    substituted) and the helpers every section writes with. The sections are mixins (section_*.py)."""

    def __init__(self, vd: VariantDerivation, u: Unit | None, prefix: str = ""):
        """``u`` None: what is said about a variant as a whole (its hooks, steps, error), with no pass."""
        self.vd = vd
        self.u = u
        self.prefix = prefix
        self.t = u.tensors if u is not None else []
        self.symtex = {info.id: symbol_of(info.symbol) for info in self.t if info.symbol is not None}
        self.steps = {st.var: st for st in u.steps} if u is not None else {}
        names = {f"v#{vid}": tex for vid, tex in self.symtex.items()}
        if u is not None:
            for s in u.states:
                names[f"l#{s}"] = f"\\lambda_{{{self.t[s].symbol.index}}}"
            names[f"l#{u.root}"] = names.get(f"l#{u.root}", "\\lambda_{\\ell}")
        self.P = DerivationPrinter(names)
        self.values = {vid: getattr(self.t[vid].value, "value", self.t[vid].value) for vid in self.symtex}
        self.S = self.P.with_subst(self.values)

    # ---- small helpers -------------------------------------------------------
    def heading(self, title: str, short: str | None = None) -> str:
        """A subsection; in a variant with steps its title says which pass it is about."""
        if not self.prefix:
            return f"\\subsection{{{title}}}\n"
        title = short or title[0].lower() + title[1:]
        return f"\\subsection{{{self.prefix}{title}}}\n"

    def index(self, vid: int) -> int:
        return self.t[vid].symbol.index

    def is_state(self, vid: int) -> bool:
        return self.t[vid].symbol is not None and self.t[vid].symbol.kind == "state"

    def sym(self, vid) -> str:
        """A tensor as math: its symbol, or the expression that makes it."""
        if vid is None:
            return "\\mathrm{None}"
        if vid in self.symtex:
            return self.symtex[vid]
        return self.P.doprint(self.t[vid].tree)

    def wrt(self, vid) -> str:
        """The symbol of a tensor, parenthesised when it is an expression (as in d l / d (x^T))."""
        tex = self.sym(vid)
        return tex if vid in self.symtex else f"\\left({tex}\\right)"

    def value(self, x: Exact | None, avail: float = LINE_EM - 8) -> str | None:
        """A value that fits ``avail`` em, or None."""
        if x is None:
            return "\\mathrm{None}"
        if isinstance(x, Typed):
            x = x.value
        return self.P.tensor(x, avail)

    @staticmethod
    def is_tensor_value(v) -> bool:
        return isinstance(v, (Exact, Typed, Cx))

    def plain(self, v) -> str:
        """A value that is not a tensor (a hook's Python number, string, flag, tuple or dict) as math."""
        if v is None:
            return "\\mathrm{None}"
        if isinstance(v, bool):
            return f"\\mathtt{{{v}}}"
        if isinstance(v, (int, Fraction)):
            return format_rational(fmpq(Fraction(v).numerator, Fraction(v).denominator)).signed()
        if isinstance(v, str):
            return f"\\text{{\\texttt{{{esc(repr(v))}}}}}"
        if isinstance(v, tuple):
            return "\\left(" + ",\\ ".join(self.plain(x) for x in v) + ("{,}" if len(v) == 1 else "") + "\\right)"
        if isinstance(v, dict):
            return "\\left\\{" + ",\\ ".join(f"{self.plain(k)}: {self.plain(x)}" for k, x in v.items()) + "\\right\\}"
        if self.is_tensor_value(v):
            return self.value(v, 20) or "\\text{(a tensor)}"
        return f"\\text{{{esc(str(v))}}}"

    def value_rows(self, block: Block, lhs: str, x: Exact | None, segs: list, exact: bool = False,
                   tail: str = "") -> None:
        """lhs = segs... = value (as a matrix when it fits, else element by element)."""
        if isinstance(x, Typed):
            tail = f"\\quad\\text{{(\\texttt{{{esc(x.dtype)}}})}}" + tail
            x = x.value
        avail = LINE_EM - max(tex_width(lhs), 4) - 3 - tex_width(tail)
        t = self.value(x, avail)
        while segs and t is not None and _seg_text(segs[-1]) in (t, self.paren(t)):
            segs = segs[:-1]                      # "= 5 = 5": the last step already is the value
        if t is not None:
            extra = self.exact_of(x, avail) if exact else None
            block.eq(lhs, *segs, t + ("" if extra else tail), *([extra + tail] if extra else []))
            return
        if isinstance(x, Cx):   # a complex tensor too wide for one line: its shape
            block.eq(lhs, *segs, f"\\text{{(a complex tensor of shape {list(x.shape)})}}" + tail)
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
        if x is None or x.size > 64 or isinstance(x, Cx):
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
        return TDeriv(TSym(self.symtex[top]), TSym(self.sym(bottom), atomic=bottom in self.symtex))

    def names_text(self, vid: int) -> str:
        names = self.t[vid].names
        return ", ".join(code(n) for n in names) if names else "(unnamed)"

    def paren(self, tex: str) -> str:
        return f"\\left({tex}\\right)" if tex.startswith("-") else tex

    def num_or_name(self, x: Exact, fallback: str) -> str:
        t = self.value(x, 12)
        return self.P.p(TVal(x), 51) if t is not None else fallback

    # ---- formulas as summands -----------------------------------------------------------
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
            if tex_width(tex, budget) <= budget or P.prec(n) != 50:
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

    def _phi(self, st: Step) -> str | Terms:
        """x_k = Phi_k(atoms), for an equation too long to typeset; as pieces that break between
        the arguments (``\\bigl(``, ``\\bigr)``: a ``\\left`` cannot span lines) when it is wide."""
        atoms = [self.sym(x) for x in st.atoms]
        k = st.index if st.index is not None else "\\ell"
        note = "\\quad\\text{(too long to typeset here)}"
        args = ",\\ ".join(atoms)
        one = f"\\Phi_{{{k}}}\\left({args}\\right){note}"
        if tex_width(one) <= LINE_EM - 8 or not atoms:
            return one
        pieces = [a + ("," if i < len(atoms) - 1 else "\\bigr)") for i, a in enumerate(atoms)]
        pieces = [f"\\Phi_{{{k}}}\\bigl({pieces[0]}"] + ["\x01" + p for p in pieces[1:]]
        return Terms(pieces + ["\x01" + note])

    def fits(self, terms, budget: float = LINE_EM - 8) -> bool:
        return all(tex_width(t.lstrip("\x01"), budget) <= budget for t in terms)

    def contrib_terms(self, index: int | None, f: TNode | None, target: int, tilde: bool = False) -> Terms:
        """The vector-Jacobian product of step k for ``target``, as summands; J^T lambda when unprintable."""
        terms = self._terms(f) if f is not None else Terms()
        if f is not None and self.fits(terms):
            return terms
        if index is None:
            return Terms([self.dfrac("\\ell", self.wrt(target))])
        lam = ("\\tilde\\lambda" if tilde else "\\lambda") + f"_{{{index}}}"
        return Terms([f"J_{{{index},{self.sym(target)}}}^{{\\top}}{lam}"])

    # ---- chain rule, factor by factor (one-element problems) ----------------------------------
    def chain(self, ch: Chain | None):
        """(names, numbers, total) of a chain-rule record, or None."""
        if ch is None:
            return None
        names, nums = Terms(), Terms()
        for path in ch.paths:
            fac_names = [TSym("v") if f.top is None else self.deriv(f.top, f.bottom) for f in path]
            names.append(self.P.doprint(TProduct(tuple(fac_names))))
            nums.append(self.P.doprint(TProduct(tuple(TVal(f.value) for f in path))))
        return names, nums, ch.total

    # ---- naming a gradient --------------------------------------------------------------
    def ident(self, ident: Ident | None) -> str | None:
        """A gradient the record identified: lambda_k, its hooked version, or d l / d (...)."""
        if ident is None:
            return None
        if ident.kind == "lam":
            return f"\\lambda_{{{self.index(ident.var)}}}"
        if ident.kind == "lam_tilde":
            return f"\\tilde\\lambda_{{{self.index(ident.var)}}}"
        if ident.kind == "dl":
            tex = self.dfrac("\\ell", self.wrt(ident.var))
        elif ident.kind == "reaching":
            tex = f"\\text{{the gradient reaching }}{self.sym(ident.var)}"
        elif ident.kind == "at_output":
            tex = "\\text{the gradient reaching the module's output}"
        else:
            tex = f"\\text{{the gradient w.r.t. }}{self.wrt(ident.var)}"
        return tex if tex_width(tex) <= WRT_EM else None     # an unnamed tensor's whole formula: not a name

    def arriving(self, c: int, arr: Arrival):
        """(formula terms, number terms, total) of the gradient arriving at tensor ``c``."""
        names, nums = Terms(), Terms()
        for term in arr.terms:
            if self.u.scalar:
                d = term.local
                if term.plain_loss:
                    names.append(self.dfrac("\\ell", self.wrt(c)))
                    nums.append(self.num_or_name(d, names[-1]))
                else:
                    k = term.index if term.index is not None else "\\ell"
                    lam = f"\\tilde\\lambda_{{{k}}}" if term.hooked else f"\\lambda_{{{k}}}"
                    names.append(f"{lam}\\,{self.dfrac(self.symtex[term.step], self.wrt(c))}")
                    nums.append(f"{self.num_or_name(term.seed, lam)} \\cdot {self.num_or_name(d, names[-1])}")
            else:
                names.extend(self.contrib_terms(term.index, term.formula, c, tilde=term.hooked))
        return names, nums, arr.total


def _seg_text(seg) -> str | None:
    if isinstance(seg, Terms):
        return seg[0] if len(seg) == 1 else None
    return seg


def _cells_matrix(cells: np.ndarray) -> str | None:
    if cells.ndim == 1:
        return "\\begin{bmatrix}" + " & ".join(cells) + "\\end{bmatrix}^{\\top}"
    if cells.ndim == 2 and cells.shape[0] <= MAX_ROWS:
        return "\\begin{bmatrix}" + " \\\\ ".join(" & ".join(r) for r in cells) + "\\end{bmatrix}"
    return None
