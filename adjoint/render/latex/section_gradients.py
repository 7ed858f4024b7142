"""The closing sections: "What the hooks changed" (every multiplier and .grad that differs from the
hook-free derivation, before and after), "Final gradients" (the chain rule without hooks, what
PyTorch stores, and the same local derivatives applied to the gradients it actually carried) and
"Notes"."""

from __future__ import annotations

from ...exact import Exact
from .layout import Block, Terms
from .numbers import _ratio, same
from .text import code, esc, mcode
from .writer import VariantWriter


class GradientSections(VariantWriter):
    """What the hooks changed, the final gradients, and the notes."""

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
