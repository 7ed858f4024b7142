"""The sections "The model" (a table of symbols, then every module call in the order it runs with
the equations computed in it and their autograd nodes) and "Forward pass" (given values, then each
equation symbolically, with the numbers substituted, and its value)."""

from __future__ import annotations

from ...expr import simple_program
from .analysis import Step
from .expressions import source
from .layout import Block
from .text import code, esc
from .trees import TAtom
from .widths import LINE_EM, tex_width
from .writer import VariantWriter


class ModelSections(VariantWriter):
    """The model and the forward pass."""

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
            assigns, returned = simple_program(mod.forward)
            src = "; ".join([f"{x.name} = {source(x.value)}" for x in assigns] + [f"return {source(returned)}"])
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
