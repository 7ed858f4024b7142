"""The section "Lagrangian and adjoint recursion": L = loss + sum_k <lambda_k, Phi_k(...) - x_k>
written out, its stationarity conditions, the local derivatives of scalar problems, and the
recursion lambda_k = sum_j J_jk^T lambda_j with every vector-Jacobian product and its value."""

from __future__ import annotations

from adjoint.render.latex.layout import Block, Terms
from adjoint.render.latex.text import code
from adjoint.render.latex.widths import LINE_EM, tex_width
from adjoint.render.latex.writer import UnitWriter

#: a constraint list longer than this is shown in part in the written-out Lagrangian
MAX_CONSTRAINTS = 12


class LagrangianSection(UnitWriter):
    """The Lagrangian, the local derivatives (scalar problems) and the adjoint recursion."""

    # ---- Lagrangian and recursion ------------------------------------------------------
    def lagrangian(self) -> str:
        u = self.u
        n = len(u.states)
        out = [self.heading("Lagrangian and adjoint recursion", "Lagrangian and adjoint recursion")]
        loss_args = u.loss_step.atoms if u.loss_step else [u.root]
        loss_arg = ", ".join(self.sym(x) for x in loss_args)
        out.append("Treat every named tensor as an unknown $x_k$, tied to its equation $x_k = \\Phi_k(\\dots)$ by "
                   "a multiplier $\\lambda_k$ (a tensor of the shape of $x_k$):\n")
        lag = Block()
        pieces = [f"\\ell({loss_arg}) + \\sum_{{k=1}}^{{{n}}} \\left\\langle \\lambda_k,\\ \\Phi_k(\\dots) - "
                  "x_k\\right\\rangle" if n else f"\\ell({loss_arg})"]
        if u.loss_step is not None:
            first = self.P.doprint(u.loss_step.tree)
        elif u.grad_output is not None:
            first = f"\\left\\langle v,\\ {self.symtex[u.root]}\\right\\rangle"
        else:
            first = self.symtex[u.root]
        pieces.append("= " + (first if tex_width(first) < LINE_EM - 10 else "\\ell(\\dots)"))
        for i, s in enumerate(u.states):
            if i >= MAX_CONSTRAINTS:
                pieces.append(f"+ \\dots \\quad\\text{{({n - i} more terms of the same form)}}")
                break
            st = self.steps[s]
            item = (f"+ \\left\\langle \\lambda_{{{st.index}}},\\ {self.P.doprint(st.tree)} - "
                    f"{self.symtex[s]}\\right\\rangle")
            if tex_width(item) > LINE_EM - 6:
                item = f"+ \\left\\langle \\lambda_{{{st.index}}},\\ \\Phi_{{{st.index}}} - {self.symtex[s]}\\right\\rangle"
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
        if u.scalar:
            out.append(self.local_derivatives())
        out.append(self.recursion())
        wrong = sorted({f.name for f in self.vd.functions if not f.matches})
        used = self.vd.custom_functions
        if used:
            text = (f"Equations computed by a custom autograd Function ({', '.join(code(n) for n in used)}) enter the "
                    "recursion through their declared backward formulas, because that is what PyTorch runs.")
            if wrong:
                text += (f" The declared backward of {', '.join(code(n) for n in wrong)} differs from the true "
                         "derivative (see the notes), so the multipliers upstream of it are what PyTorch computes, "
                         "not the true $\\partial\\ell/\\partial x_k$.")
            out.append(text + "\n\n")
        return "".join(out)

    def local_derivatives(self) -> str:
        out = ["Every tensor here has one element, so each $J$ is a number, a local derivative. From the "
               "equations above (PyTorch's backward formulas give the same values):\n"]
        b = Block()
        for st in self.u.steps:
            for ld in st.local:
                segs = [self.P.doprint(ld.expr)]
                s = self.S.doprint(ld.expr)
                vt = self.value(ld.value) or ""
                if s != segs[0] and s != vt:
                    segs.append(s)
                if vt != segs[-1]:
                    segs.append(vt)
                b.eq(self.P.doprint(self.deriv(st.var, ld.atom)), *segs)
        out.append(b.render())
        return "".join(out)

    def recursion(self) -> str:
        b = Block()
        for s in reversed(self.u.states):
            self._lambda_row(b, s)
        if not b.rows:
            return ""
        return "The recursion, from the loss back to the first tensor (hooks play no part in it):\n" + b.render()

    def _lambda_row(self, b: Block, s: int) -> None:
        u = self.u
        st = self.steps[s]
        lhs = f"\\lambda_{{{st.index}}}"
        if not self.t[s].requires_grad:
            return
        value = self.t[s].pure
        if s == u.root:
            self.value_rows(b, lhs, u.seed, [self.dfrac("\\ell", self.symtex[s]), "v" if u.grad_output is not None
                                             else None])
            return
        if value is None:
            b.eq(lhs, "0\\quad\\text{(no path to the loss)}")
            return
        names, nums = Terms(), Terms()
        for jv in u.consumers.get(s, []):
            j = self.steps[jv]
            if j.pure_contrib.get(s) is None:
                continue
            if u.scalar:
                d = j.local_values.get(s)
                if j.index is None:
                    names.append(self.dfrac("\\ell", self.symtex[s]))
                    nums.append(self.num_or_name(d, names[-1]))
                else:
                    names.append(f"\\lambda_{{{j.index}}}\\,{self.dfrac(self.symtex[j.var], self.symtex[s])}")
                    lam_name = f"\\lambda_{{{j.index}}}"
                    nums.append(f"{self.num_or_name(self.t[j.var].pure, lam_name)} \\cdot "
                                f"{self.num_or_name(d, names[-1])}")
            else:
                names.extend(self.contrib_terms(j.index, j.vjp.get(s), s))
        segs: list = [names] if names else []
        vt = self.value(value)
        if u.scalar and nums and not (len(nums) == 1 and nums[0] in (vt, self.paren(vt or ""))):
            segs.append(nums)
        self.value_rows(b, lhs, value, segs)
