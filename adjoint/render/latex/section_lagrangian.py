"""The section "Lagrangian and adjoint recursion": L = loss + sum_k <lambda_k, Phi_k(...) - x_k>
written out, its stationarity conditions, the local derivatives of scalar problems, and the
recursion lambda_k = sum_j J_jk^T lambda_j with every vector-Jacobian product and its value."""

from __future__ import annotations

from fractions import Fraction

import sympy

from .analysis import Step
from .layout import Block, Terms
from .symbolic import to_sympy
from .text import code
from .trees import TConst, simplify
from .vjp import vjp_tree
from .widths import LINE_EM, tex_width
from .writer import VariantWriter

#: a constraint list longer than this is shown in part in the written-out Lagrangian
MAX_CONSTRAINTS = 12


class LagrangianSection(VariantWriter):
    """The Lagrangian, the local derivatives (scalar problems) and the adjoint recursion."""

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
