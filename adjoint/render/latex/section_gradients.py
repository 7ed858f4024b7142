"""The closing sections: "What the hooks changed" (every multiplier and .grad that differs from the
hook-free derivation, before and after), "Final gradients" (the chain rule without hooks, what
PyTorch stores, and the same local derivatives applied to the gradients it actually carried) and
"Notes"."""

from __future__ import annotations

from adjoint.derivation import Exact, Gradient
from adjoint.render.latex.layout import Block, Terms
from adjoint.render.latex.text import code, esc, mcode
from adjoint.render.latex.writer import UnitWriter


_REDUCED = ("The \\texttt{.grad} of this pass are not compared: DistributedDataParallel replaced each by the "
            "ranks' reduced gradient when the pass ended (see \\emph{Final gradients}), so they differ from this "
            "rank's hook-free derivation by that reduction as well as by the hooks.\n\n")


class GradientSections(UnitWriter):
    """What the hooks changed, the final gradients, and the notes."""

    # ---- what the hooks changed ---------------------------------------------------------
    def effects(self) -> str:
        u = self.u
        changed = []
        reduced = u.backward_number in getattr(self.vd, "reduced_passes", ())
        for ch in u.changes:
            if reduced and ch.name is not None:   # DDP replaced .grad by the ranks' reduction: not the hooks' doing
                continue
            if ch.name is None:
                k = self.index(ch.var)
                changed.append((f"\\lambda_{{{k}}}", f"\\tilde\\lambda_{{{k}}}", ch))
            else:
                changed.append((self.dfrac("\\ell", self.wrt(ch.var)), mcode(ch.name + ".grad"), ch))
        if not changed:
            if reduced and u.any_backward_return:
                return (self.heading("What the hooks changed") + "No multiplier of this rank differs from the "
                        "hook-free derivation. " + _REDUCED)
            if u.any_backward_return:
                return (self.heading("What the hooks changed") + "Nothing: no gradient differs from the hook-free "
                        "derivation.\n\n")
            return ""
        out = [self.heading("What the hooks changed"),
               "The gradients that differ from the hook-free derivation: first without hooks, then what PyTorch "
               "carries (for a tensor) or stores in \\texttt{.grad} (for a leaf).\n"]
        b = Block()
        for pure_name, actual_name, ch in changed:
            self.value_rows(b, pure_name, ch.pure, [], tail="\\quad\\text{without hooks}")
            segs = [f"{self.P.elem(ch.ratio)}\\,{pure_name}"] if ch.ratio is not None else []
            self.value_rows(b, actual_name, ch.actual, segs, tail="\\quad\\text{with the hooks}")
        out.append(b.render())
        if reduced:
            out.append(_REDUCED)
        elif u.unchanged:
            out.append("Unchanged: " + ", ".join(code(n + ".grad") for n in u.unchanged)
                       + " (no changed gradient flows into them).\n\n")
        return "".join(out)

    # ---- final gradients -----------------------------------------------------------------
    def gradients(self) -> str:
        u = self.u
        out = [self.heading("Final gradients", "gradients")]
        if u.method == "grad":
            out.append("The backward pass is \\texttt{torch.autograd.grad}: it returns the gradients below and "
                       "leaves every \\texttt{.grad} untouched.\n\n")
        for g in u.gradients:
            out.append(self._gradient(g))
        if u.loss is not None:
            b = Block()
            self.value_rows(b, "\\ell", u.loss, [], exact=True)
            out.append("For reference, the loss:\n" + b.render())
        return "".join(out)

    def second_gradients(self) -> str:
        """The gradients of a pass from a ``root:`` that reads an earlier pass's create_graph gradients:
        PyTorch's values, without the hook-free chain rule of the loss (whose multipliers are not this
        root's: the second-order section above derives this pass)."""
        u = self.u
        out = [self.heading("Final gradients", "gradients")]
        if u.method == "grad":
            out.append("The backward pass is \\texttt{torch.autograd.grad}: it returns the gradients below and "
                       "leaves every \\texttt{.grad} untouched.\n\n")
        out.append("They are derivatives of this pass's root, not of the loss: the second-order derivation above "
                   "gives them (\\emph{What this pass returns}).\n\n")
        for g in u.gradients:
            label = f"\\texttt{{torch.autograd.grad}} for {code(g.name)}" if g.returned else code(g.name + ".grad")
            out.append(f"\\subsubsection*{{{label}}}\n")
            if g.var is None:
                continue
            what = "PyTorch returns" if g.returned else "PyTorch stores"
            if g.value is None:
                out.append(f"{what} \\texttt{{None}}: {self._none_reason(g)}\n\n")
                continue
            b = Block()
            stored = f"\\text{{returned}}_{{{mcode(g.name)}}}" if g.returned else mcode(g.name + ".grad")
            if g.before is not None:
                self.value_rows(b, "\\text{added}", g.added, [], exact=True)
                self.value_rows(b, stored, g.value, [f"{self.paren(self.value(g.before, 12) or mcode('before'))} + "
                                                     "\\text{added}"], exact=True)
                out.append(f"{code(g.name + '.grad')} already held a gradient from an earlier backward pass, and "
                           "PyTorch adds this pass's to it:\n" + b.render())
                continue
            self.value_rows(b, stored, g.value, [], exact=True)
            out.append(f"{what}:\n" + b.render())
        return "".join(out)

    def _gradient(self, g: Gradient) -> str:
        u = self.u
        label = f"\\texttt{{torch.autograd.grad}} for {code(g.name)}" if g.returned else code(g.name + ".grad")
        out = [f"\\subsubsection*{{{label}}}\n"]
        if g.var is None:
            return out[0]
        c = g.var
        b = Block()
        lhs = self.dfrac("\\ell", self.wrt(c))
        if g.state is not None:
            self.value_rows(b, lhs, g.pure if g.pure is not None else Exact.zeros(self.t[c].shape),
                            [f"\\lambda_{{{g.state}}}"])
        elif g.pure is not None:
            if g.chain is not None:
                names, nums, _ = self.chain(g.chain)
                self.value_rows(b, lhs, g.pure, [names, nums])
            else:
                terms = Terms()
                for _, index, f in g.terms:
                    terms.extend(self.contrib_terms(index, f, c))
                self.value_rows(b, lhs, g.pure, [terms] if terms else [])
        else:
            b.eq(lhs, "0\\quad\\text{(no path to the loss)}")
        out.append(("Without hooks, the chain rule gives\n" if u.scalar else "Without hooks:\n") + b.render())
        what = "PyTorch returns" if g.returned else "PyTorch stores"
        if g.value is None:
            out.append(f"{what} \\texttt{{None}}: {self._none_reason(g)}\n\n")
            return "".join(out)
        rb = Block()
        stored = f"\\text{{returned}}_{{{mcode(g.name)}}}" if g.returned else mcode(g.name + ".grad")
        if u.backward_number in getattr(self.vd, "reduced_passes", ()):
            self.value_rows(rb, stored, g.value, [], exact=True)
            out.append(f"{what} what DistributedDataParallel wrote when the backward pass ended: the ranks' "
                       "reduced gradient (see ``What DistributedDataParallel does'' below), not this rank's own:\n"
                       + rb.render())
            return "".join(out)
        if g.before is not None:
            b = Block()
            self.value_rows(b, "\\text{added}", g.added, [], exact=True)
            self.value_rows(b, stored, g.value, [f"{self.paren(self.value(g.before, 12) or mcode('before'))} + "
                                                 "\\text{added}"], exact=True)
            head = (f"{code(g.name + '.grad')} already held a gradient from an earlier backward pass, and PyTorch "
                    "adds to it (\\texttt{.grad} accumulates until \\texttt{zero\\_grad}); ")
            if g.matches:
                return "".join(out) + head + "this pass adds exactly the value above:\n" + b.render()
            out.append(head + "this pass adds a different value, because hooks changed the gradients on the way:\n"
                       + b.render())
            out.append(self._hooked_chain(g, "\\text{added}"))
            return "".join(out)
        self.value_rows(rb, stored, g.value, [], exact=True)
        if g.matches:
            out.append(f"{what} exactly this:\n" + rb.render())
            return "".join(out)
        out.append(f"{what} a different value, because hooks changed the gradients on the way:\n" + rb.render())
        out.append(self._hooked_chain(g, stored))
        return "".join(out)

    def _hooked_chain(self, g: Gradient, stored: str) -> str:
        """value = sum_j J_j^T lambda~_j when hooks only acted between equations; say so, with numbers."""
        c = g.var
        if g.state is not None:
            return "It is the gradient PyTorch carried into this tensor, after the hooks above acted on it.\n\n"
        if g.arrival is not None:
            names, nums, _ = self.arriving(c, g.arrival)
            b = Block()
            self.value_rows(b, stored, g.added if g.before is not None else g.value, [names] + ([nums] if nums else []))
            hooked = [f"$\\tilde\\lambda_{{{k}}}$" for k in g.hooked_steps]
            text = "The same local derivatives, applied to the gradients PyTorch actually carried"
            if hooked:
                text += " (" + ", ".join(hooked) + ", changed by the hooks)"
            return text + ":\n" + b.render()
        if g.arriving is not None:
            names, nums, total = self.arriving(c, g.arriving)
            b = Block()
            self.value_rows(b, "\\text{arriving}", total, [names] + ([nums] if nums else []))
            return ("The gradient arriving at this tensor is\n" + b.render() + "and the tensor hook(s) "
                    + ", ".join(str(n) for n in g.tensor_hooks) + " above replaced it by the stored value.\n\n")
        return ("The difference comes from hooks acting on this tensor's own gradient or inside the equations "
                "that use it (see the hook calls above).\n\n")

    def _none_reason(self, g: Gradient) -> str:
        if g.none_reason == "grad":
            return "\\texttt{torch.autograd.grad} does not accumulate into \\texttt{.grad}."
        if g.none_reason == "inputs":
            return ("\\texttt{backward(inputs=...)} accumulates only into "
                    + ", ".join(code(n) for n in self.u.backward_inputs) + ".")
        return ("no gradient reaches it (it does not influence the loss, or PyTorch recorded no node for its use: "
                "under \\texttt{no\\_grad} or \\texttt{set\\_grad\\_enabled(False)}, or after \\texttt{detach()}; or a "
                "hook returned \\texttt{None} for it).")

    # ---- notes -------------------------------------------------------------------------
    def notes(self) -> str:
        vd = self.vd
        items = [esc(n) for n in vd.notes]
        for f in vd.functions:
            verdict = ("equals the true derivative" if f.matches
                       else f"differs from the true derivative ({esc(f.true)}); PyTorch uses the declared formula")
            items.append(f"Custom Function {code(f.name)} ({code(f.callid)}): the declared backward for "
                         f"{code(f.slot)}, {code(f.declared)}, {verdict}.")
        if not items:
            return ""
        return ("\\subsection{Notes}\n\\begin{itemize}\n" + "".join(f"\\item {t}\n" for t in items)
                + "\\end{itemize}\n")
