"""What every section of a variant's derivation writes with (:class:`VariantWriter`): symbols of
tensors, values fitted to the line (as a matrix, else element by element) with their exact
fractions, derivatives, a formula as summands that can break across lines, and the three ways the
document names a gradient -- as a multiplier (:meth:`~VariantWriter.ident`: ``lambda_k``,
``lambda~_k``, ``dl/dtheta``), as a chain-rule product over paths (:meth:`~VariantWriter.chain`),
and as what arrives at a tensor from the equations that read it (:meth:`~VariantWriter.arriving`)."""

from __future__ import annotations

import flint
import numpy as np

from ... import exact as E
from ...exact import Exact
from ...prediction import Prediction, VariantPrediction
from .analysis import Analysis, Step
from .layout import Block, Terms, sym_pieces
from .numbers import same
from .printer import MAX_ROWS, DerivationPrinter
from .text import code
from .trees import TBin, TDeriv, TMatMul, TNode, TProduct, TSym, TVal
from .widths import LINE_EM, tex_width

fmpq = flint.fmpq


class VariantWriter:
    """One variant's derivation being written: its analysis, printers (symbols; numbers substituted)
    and the helpers every section writes with. The sections are mixins (section_*.py)."""

    def __init__(self, pred: Prediction, v: VariantPrediction, a: Analysis):
        self.pred = pred
        self.v = v
        self.a = a
        self.g = a.g
        self.P = DerivationPrinter(a.names)
        self.values = {vid: a.fwd.values[vid] for vid in a.sym}
        self.S = self.P.with_subst(self.values)

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

    # ---- naming a gradient --------------------------------------------------------------
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
