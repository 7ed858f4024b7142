"""The sections "The model" (a table of symbols, then every module call in the order it runs with
the equations computed in it and their autograd nodes) and "Forward pass" (given values, then each
equation symbolically, with the numbers substituted, and its value)."""

from __future__ import annotations

from adjoint.derivation import Step
from adjoint.values.mathtree import TAtom
from adjoint.render.latex.layout import Block
from adjoint.render.latex.text import code, esc
from adjoint.render.latex.widths import LINE_EM, tex_width
from adjoint.render.latex.writer import UnitWriter


class ModelSections(UnitWriter):
    """The model and the forward pass."""

    # ---- the model -------------------------------------------------------------------
    def model(self) -> str:
        u, t = self.u, self.t
        out = [self.heading("The model"),
               "Tensors given to the computation (leaves), and the named tensors it computes:\n\n"]
        rows = []
        for vid in u.leaves:
            rg = "requires grad" if t[vid].requires_grad else "constant"
            what = {"detached": "a copy detached from the graph (\\texttt{detach()}): a constant",
                    "made": "made in the forward from no tensor that requires grad: a constant"}.get(
                t[vid].role, f"{t[vid].role}, {rg}")
            rows.append((self.symtex[vid], self.names_text(vid), what, t[vid].shape))
        for s in u.states:
            names = self.names_text(s) if t[s].names or t[s].version is None or not t[s].version.tensor \
                else code(t[s].version.tensor)
            rows.append((self.symtex[s], names, self._state_role(s), t[s].shape))
        if not u.root_is_state:
            rows.append(("\\ell", code("loss"), "the loss", t[u.root].shape))
        out.append("\\begin{center}\\begin{tabular}{@{}l p{5.0cm} p{6.6cm} l@{}}\n")
        out.append("symbol & PyTorch name & what & shape\\\\ \\hline\n")
        for symb, names, what, shape in rows:
            sh = "$" + "\\times ".join(map(str, shape)) + "$" if shape else "scalar"
            out.append(f"${symb}$ & {names} & {what} & {sh}\\\\\n")
        out.append("\\end{tabular}\\end{center}\n")
        out.append("Module calls in the order they run, each followed by the equations of the tensors computed "
                   "directly in it and the autograd nodes (PyTorch operations) behind each equation:\n\n")
        events = []
        for call in u.calls:
            events.append(((call.order, call.depth), "call", call))
        for st in u.steps:
            if st.index is not None:
                events.append(((st.order, 99), "step", st))
        events.sort(key=lambda e: e[0])
        for _, kind, obj in events:
            out.append(self._call_text(obj) if kind == "call" else
                       self._step_text(obj, u.calls[obj.call].depth + 1 if obj.call is not None else 0))
        if u.loss_step is not None:
            out.append(self._step_text(u.loss_step, 0, "Loss"))
        elif u.backward_number is None:
            pass                                # no backward pass runs through this forward pass
        elif u.grad_output is not None:
            seed = self.value(u.seed) or "v"
            out.append(f"There is no loss: \\texttt{{backward}} starts from ${self.symtex[u.root]}$ with the given "
                       f"gradient $v = {seed}$, so the scalar being differentiated is "
                       f"$\\ell = \\langle v, {self.symtex[u.root]}\\rangle$.\n\n")
        else:
            out.append(f"There is no loss: \\texttt{{backward}} starts from the one-element output, so "
                       f"$\\ell = {self.symtex[u.root]}$.\n\n")
        return "".join(out)

    def _state_role(self, s: int) -> str:
        info = self.t[s]
        parts = []
        if info.version is not None:
            parts.append(self._version_text(info.version))
        if info.call is not None:
            call = self.u.calls[info.call]
            kind = f" ({esc(call.type)})" if call.kind == "builtin" else ""
            parts.append(f"output of module {code(call.callid)}{kind}")
        if info.role == "base":
            parts.append("the tensor " + (f"{code(info.base_of)} is a view of" if info.base_of else "a view looks into")
                         + " (PyTorch's \\texttt{\\_base}), unnamed in the file")
        return "; ".join(parts) or "intermediate"

    def _version_text(self, v) -> str:
        """How a later version of a tensor came to be, in words."""
        prev = f" (before: ${self.sym(v.previous)}$)" if v.previous is not None else ""
        if v.kind == "inplace":
            return f"{code(v.tensor)} after the in-place {code(v.method)}{prev}"
        if v.kind == "copy_slices":
            via = f" on its view {code(v.view)}" if v.view else " on a view of it"
            what = code(v.tensor) if v.tensor else "the base"
            return f"{what} after an in-place {code(v.method)}{via} (\\texttt{{CopySlices}}){prev}"
        return (f"{code(v.tensor)} read again after its base changed: PyTorch regenerates its \\texttt{{grad\\_fn}} "
                "as \\texttt{AsStridedBackward0}")

    def _call_text(self, call) -> str:
        indent = f"\\hspace*{{{1.5 * call.depth:.1f}em}}"
        kind = {"builtin": lambda: esc(call.type), "function": lambda: "custom autograd Function " + code(call.type),
                "custom": lambda: "custom module"}[call.kind]()
        ins = ", ".join(f"${self.sym(x)}$" for x in call.args)
        head = f"{indent}\\textbf{{{esc(call.callid)}}} ({kind}"
        if call.k > 1:
            head += f", call {call.k}"
        outs = ", ".join(self.sym(x) for x in call.outs)
        head += f"): {ins or '--'} $\\mapsto$ " + (f"${outs}$" if outs else "--")   # a dict has no tensor symbol
        if call.forward_source is not None:
            head += f"; forward: {code(call.forward_source)}"
        if call.backward_source is not None:
            head += f"; its backward is declared as {code(call.backward_source)}"
        if call.checkpoint is not None:
            head += f"; called through \\texttt{{checkpoint}} ({esc(call.checkpoint)})"
        return head + ".\n\n"

    def _step_text(self, st: Step, depth: int, label: str | None = None) -> str:
        indent = f"\\hspace*{{{1.5 * depth:.1f}em}}"
        eq = f"{self.symtex[st.var]} = {self.P.doprint(st.tree)}"
        nodes = ", ".join(code(n) for n in st.nodes) if st.nodes else "no autograd node"
        pre = f"{label}: " if label else ""
        if tex_width(eq) > LINE_EM - 1.5 * depth - 12:
            b = Block()
            terms = self._terms(st.tree)
            b.eq(self.symtex[st.var], terms if self.fits(terms) else self._phi(st))
            return f"{indent}{pre}\n{b.render()}{indent}\\quad autograd nodes: {nodes}.\n\n"
        return f"{indent}{pre}${eq}$ \\quad ({nodes})\n\n"

    # ---- forward ------------------------------------------------------------------
    def forward(self) -> str:
        u = self.u
        out = [self.heading("Forward pass", "values"), "Given:\n"]
        b = Block()
        for vid in u.leaves:
            self.value_rows(b, self.symtex[vid], self.t[vid].value, [])
        out.append(b.render())
        out.append("Each equation, then with the numbers substituted, then its value:\n")
        b = Block()
        for st in u.steps:
            if st.index is not None:
                self._forward_row(b, st)
        if u.loss_step is not None:
            self._forward_row(b, u.loss_step)
        out.append(b.render())
        return "".join(out)

    def _forward_row(self, b: Block, st: Step) -> None:
        lhs = self.symtex[st.var]
        value = self.t[st.var].value
        avail = LINE_EM - tex_width(lhs) - 3
        terms = self._terms(st.tree)
        segs: list = [terms if self.fits(terms) else self._phi(st)]
        subst = self.S.doprint(st.tree)
        vtex = self.value(value, avail)
        if tex_width(subst) <= avail and subst != vtex and not isinstance(st.tree, TAtom):
            segs.append(subst)
        self.value_rows(b, lhs, value, segs)
