"""Everything about hooks: "Hooks registered" (each hook, its target, what it returns), "Module
boundaries" (grad_output and grad_input = J^T grad_output of every hooked module call), and "Hook
calls, in firing order" (what PyTorch hands each hook, identified with the multiplier it is or
written as its node's vector-Jacobian product, and what a returned value replaces)."""

from __future__ import annotations

from ... import syntax as S

from ...prediction import HookRecord
from .expressions import expr_tree, source
from .layout import Block
from .numbers import same
from .printer import DerivationPrinter
from .text import _tex_escape_name, code, esc, mcode
from .trees import TAtom, TIndex, TName, TNode, TNone, TTuple, simplify
from .vjp import vjp_tree
from .widths import LINE_EM, tex_width
from .writer import VariantWriter


class HookSections(VariantWriter):
    """Hooks registered, module boundaries, and every hook call in firing order."""

    # ---- hooks registered --------------------------------------------------------
    _KIND = {"full_backward": "full backward hook (\\texttt{register\\_full\\_backward\\_hook})",
             "full_backward_pre": "backward pre-hook (\\texttt{register\\_full\\_backward\\_pre\\_hook})",
             "backward": "legacy backward hook (\\texttt{register\\_backward\\_hook})",
             "forward": "forward hook", "forward_pre": "forward pre-hook",
             "hook": "tensor hook (\\texttt{Tensor.register\\_hook})",
             "retain_grad": "\\texttt{retain\\_grad()}", "pre": "node pre-hook", "post": "node post-hook",
             "post_accumulate_grad": "post-accumulate-grad hook (\\texttt{register\\_post\\_accumulate\\_grad\\_hook})"}

    def hooks_registered(self) -> str:
        hooks = self.g.variant.hooks
        if not hooks:
            return "No hooks are registered in this variant: PyTorch's backward pass is the adjoint recursion.\n\n"
        lines = ["Hooks registered, in this order:\n\\begin{enumerate}\n"]
        for h in hooks:
            what = {"module": "module", "tensor": "tensor", "node": "the autograd node that made tensor"}[h.on]
            text = f"\\item {esc(h.label)}: {self._KIND[h.kind]} on {what} {code(h.target)}"
            if h.returns is not None:
                text += f", returning ${self.P.doprint(expr_tree(h.returns, {}))}$"
            elif h.kind != "retain_grad":
                text += ", returning nothing (it only observes)"
            if h.does:
                text += "; it runs " + ", ".join(code(f"{S.to_source(x.target)} = {source(x.value)}") for x in h.does)
            if h.remove:
                text += f"; its handle is removed {esc(h.remove.replace('_', ' '))}"
            if h.when == "after_forward":
                text += "; registered after the forward pass"
            lines.append(text + ".\n")
        lines.append("\\end{enumerate}\n")
        return "".join(lines)

    # ---- module boundaries --------------------------------------------------------------
    def boundaries(self) -> str:
        a, g = self.a, self.g
        out = ["\\subsection{Module boundaries}\n",
               "Each module call is one block of the Lagrangian. The multiplier of its output is what its hooks "
               "are handed as \\texttt{grad\\_output} (as it reaches the module, after hooks on the output tensor); "
               "$J^{\\top}\\,\\mathtt{grad\\_output}$ through the module's own equations is \\texttt{grad\\_input} "
               "(before any hook of the module acts).\n\n"]
        calls = {c.callid: c for c in g.calls}
        hooked = {c.callid for c in g.calls if c.hooked}
        shown = [bd for bd in self.v.boundaries if bd.callid in hooked] or list(self.v.boundaries)
        if len(shown) < len(self.v.boundaries):
            out.append("The module calls with backward hooks in this variant (the others follow the same rule; "
                       "\\texttt{adjoint solve} lists them all):\n\n")
        for bd in shown:
            call = calls.get(bd.callid)
            if call is None:
                continue
            out.append(f"\\textbf{{{esc(bd.callid)}}} ({esc(bd.type)}): "
                       f"{', '.join('$' + self.sym(x) + '$' for x in call.args)} $\\mapsto$ ${self.sym(call.out)}$\n")
            b = Block()
            go = bd.grad_output[0]
            if go is None:
                b.eq(mcode("grad_output"), "\\mathrm{None}\\quad\\text{(no gradient reaches the output)}")
            else:
                self.value_rows(b, mcode("grad_output"), go, [self.ident(a.canon(call.out), go)])
            for i, (x, gi) in enumerate(zip(call.args, bd.grad_input)):
                lhs = f"{mcode('grad_input')}[{i}]"
                if gi is None:
                    b.eq(lhs, f"\\mathrm{{None}}\\quad\\text{{(}}{self.sym(x)}\\text{{ does not require grad)}}")
                    continue
                segs = [f"J_{{\\mathrm{{{_tex_escape_name(bd.callid)}}}}}^{{\\top}}\\,{mcode('grad_output')}"]
                ident = self.ident(a.canon(x), gi, strict=True)
                if ident is not None:
                    segs.append(ident)
                self.value_rows(b, lhs, gi, segs)
            out.append(b.render())
        return "".join(out)

    # ---- hook calls ---------------------------------------------------------------------
    def hook_calls(self) -> str:
        calls = self.v.hook_calls
        out = ["\\subsection{Hook calls, in firing order}\n"]
        if not calls:
            out.append("No hook fires.\n\n")
            return "".join(out)
        for i, h in enumerate(calls, 1):
            out.append(self._hook_call(i, h))
        return "".join(out)

    def _find_call(self, h: HookRecord):
        for c in self.g.calls:
            if c.path == h.target and (h.k is None or c.k == h.k):
                return c
        return None

    def _arg_vars(self, h: HookRecord) -> dict:
        g, a = self.g, self.a
        if h.on == "module":
            call = self._find_call(h)
            if call is None:
                return {}
            if h.kind == "full_backward":
                return {"grad_output": [call.out], "grad_input": list(call.args)}
            if h.kind == "full_backward_pre":
                return {"grad_output": [call.out]}
            if h.kind == "backward" and call.legacy_node is not None:
                eqn = g.eqns[call.legacy_node]
                return {"grad_output": list(eqn.outs), "grad_input": list(eqn.node.edges)}
            return {}
        vid = g.names.get(h.target)
        if vid is None:
            return {}
        if h.on == "tensor":
            return {"grad": [vid]}
        eqn = a.made_by.get(vid)
        if eqn is None or eqn.node is None:
            return {}
        if h.kind == "pre":
            return {"grad_outputs": list(eqn.outs)}
        return {"grad_inputs": list(eqn.node.edges), "grad_outputs": list(eqn.outs)}

    _INTRO = {
        "full_backward": "A full backward hook runs once the module's gradient with respect to its inputs is known. "
                         "It is handed \\texttt{grad\\_output}, the gradient of $\\ell$ with respect to the module's "
                         "output, and \\texttt{grad\\_input}, the gradient with respect to the module's positional "
                         "inputs ($J^{\\top}\\,\\mathtt{grad\\_output}$ through the whole module). A returned tuple "
                         "replaces \\texttt{grad\\_input} for everything upstream.",
        "full_backward_pre": "A backward pre-hook runs when the gradient with respect to the module's output arrives, "
                             "before the module's own backward. A returned tuple replaces \\texttt{grad\\_output} for "
                             "everything inside and upstream of the module.",
        "backward": "The legacy \\texttt{register\\_backward\\_hook} is attached to the autograd node that produced the "
                    "module's output, i.e.\\ only to the module's last operation. It is handed that node's "
                    "\\texttt{grad\\_output} and, as \\texttt{grad\\_input}, the node's gradients with respect to its "
                    "own inputs --- not the module's inputs, unless the module is a single operation.",
        "hook": "A tensor hook runs when the gradient with respect to its tensor has been summed over all uses. It is "
                "handed that gradient as \\texttt{grad}; a returned tensor replaces it for later hooks, "
                "\\texttt{retain\\_grad} and everything upstream.",
        "pre": "A node pre-hook runs before its autograd node, with the gradients arriving at the node's outputs "
               "(\\texttt{grad\\_outputs}); a returned tuple replaces them.",
        "post": "A node post-hook runs after its autograd node, with the gradients the node computed for its inputs "
                "(\\texttt{grad\\_inputs}) and those it received (\\texttt{grad\\_outputs}); a returned tuple "
                "replaces \\texttt{grad\\_inputs}.",
        "forward": "A forward hook runs right after the module's forward, with its inputs and output; a returned "
                   "tensor replaces the output (its operations join the graph).",
        "forward_pre": "A forward pre-hook runs right before the module's forward, with its inputs; a returned value "
                       "replaces the inputs.",
    }

    _REPLACES = {"full_backward": "grad_input", "backward": "grad_input", "post": "grad_inputs",
                 "pre": "grad_outputs", "full_backward_pre": "grad_output", "hook": "grad"}

    def _hook_node(self, h: HookRecord):
        """The autograd node (eqn) whose gradients a legacy or node hook sees."""
        if h.on == "module" and h.kind == "backward":
            call = self._find_call(h)
            return self.g.eqns[call.legacy_node] if call is not None and call.legacy_node is not None else None
        if h.on == "node":
            vid = self.g.names.get(h.target)
            return self.a.made_by.get(vid) if vid is not None else None
        return None

    def slot_formulas(self, eqn, lam: TNode) -> tuple[dict, DerivationPrinter]:
        """J_slot^T lam for each input slot of one autograd node, and a printer that names the slots."""
        a = self.a
        ins, names = [], dict(self.P.names)
        for k, i in enumerate(eqn.ins):
            if isinstance(i, int):
                fid = -(k + 1)
                ins.append(TAtom(fid, a.g.vars[i].shape))
                c = a.canon(i)
                names[f"v#{fid}"] = self.sym(c) if c in a.sym else f"\\left({self.sym(c)}\\right)"
            else:
                ins.append(a._operand(i, [], {}))
        functions: dict = {}
        out_shape = a.g.vars[eqn.outs[0]].shape
        tree = a.eqn_tree(eqn, ins, out_shape, TAtom(a.canon(eqn.outs[0]), out_shape), functions)
        trees: dict = {}
        vjp_tree(tree, lam, trees, functions)
        return {-fid - 1: simplify(t) for fid, t in trees.items() if fid < 0}, DerivationPrinter(names)

    def _hook_call(self, i: int, h: HookRecord) -> str:
        a = self.a
        where = f" at node {code(h.node)}" if h.node else ""
        call = f" (call {h.k} of {h.calls_of_module})" if h.k is not None and h.calls_of_module > 1 else ""
        target = code(h.target) + call
        mcall = self._find_call(h) if h.on == "module" else None
        if mcall is not None:
            target += (f" (${', '.join(self.sym(x) for x in mcall.args)} \\mapsto {self.sym(mcall.out)}$)")
        elif h.on in ("tensor", "node") and self.g.names.get(h.target) is not None:
            target += f" (${self.sym(self.g.names[h.target])}$)"
        kind = self._KIND.get(h.kind, esc(h.kind))
        on = {"module": "module", "tensor": "tensor", "node": "the autograd node that produced tensor"}[h.on]
        out = [f"\\subsubsection*{{{i}.\\ {esc(h.label)}}}\n"
               f"The {kind} on {on} {target}{where}, during the {h.phase} pass. {self._INTRO.get(h.kind, '')}\n"]
        arg_vars = self._arg_vars(h)
        slots, slot_printer = {}, None
        node = self._hook_node(h)
        slot_arg = {"backward": "grad_input", "post": "grad_inputs"}.get(h.kind)
        if node is not None and slot_arg is not None and node.node is not None:
            out_arg = "grad_output" if h.kind == "backward" else "grad_outputs"
            out_shape = self.g.vars[node.outs[0]].shape
            slots, slot_printer = self.slot_formulas(node, TIndex(TName(out_arg), 0, out_shape))
        b = Block()
        chains = []
        for name, value in h.args.items():
            items = value if isinstance(value, tuple) else (value,)
            vids = arg_vars.get(name, [])
            for j, item in enumerate(items):
                lhs = mcode(name) + (f"[{j}]" if isinstance(value, tuple) else "")
                vid = vids[j] if j < len(vids) else None
                if item is None:
                    why = "\\quad\\text{(no gradient flows to this input)}" if vids else ""
                    b.eq(lhs, "\\mathrm{None}" + why)
                    continue
                segs: list = []
                if vid is not None and h.phase == "backward":
                    c = a.canon(vid)
                    if name == slot_arg and j in slots:
                        ftex = slot_printer.doprint(slots[j])
                        segs.append(ftex if tex_width(ftex) < LINE_EM - 12 else
                                    f"J_{{[{j}]}}^{{\\top}}\\,{mcode('grad_output')}")
                    elif h.kind == "full_backward" and name == "grad_input":
                        segs.append(f"J^{{\\top}}{mcode('grad_output')}")
                    ident = self.ident(c, item, strict=True)
                    if ident is not None:
                        if not ident.startswith("\\tilde"):
                            segs.append(self.dfrac("\\ell", self.wrt(c)))
                        if not segs or ident != segs[-1]:
                            segs.append(ident)
                        ch = self.chain(c) if not ident.startswith("\\tilde") else None
                        if ch is not None and same(ch[2], item) and len(ch[0]) == 1 and "\\cdot" in ch[0][0]:
                            chains.append((lhs, ch))
                    elif not segs:
                        names, nums, total = self.arriving(c)
                        if total is not None and same(total, item) and names:
                            segs.extend([names] + ([nums] if nums else []))
                        else:
                            segs.append(f"\\text{{gradient reaching }}{self.wrt(c)}")
                self.value_rows(b, lhs, item, segs, exact=True)
        out.append(b.render())
        if chains:
            out.append("Written out with the chain rule, factor by factor:\n")
            cb = Block()
            for lhs, (names, nums, total) in chains:
                self.value_rows(cb, lhs, total, [names, nums])
            out.append(cb.render())
        if h.kind == "backward" and h.phase == "backward":
            out.append(self._legacy_contrast(h))
        if h.returned is None:
            if h.kind != "retain_grad":
                hook = self._declared(h)
                if hook is not None and hook.does:
                    out.append("It returns \\texttt{None}: whatever it rebinds inside, PyTorch ignores; nothing "
                               "changes.\n\n")
                else:
                    out.append("It returns \\texttt{None}: it only observes, and nothing changes.\n\n")
        else:
            out.append(self._returned(h))
        for w in h.why:
            out.append(f"Why: {esc(w)}.\n\n")
        return "".join(out)

    def _legacy_contrast(self, h: HookRecord) -> str:
        call = self._find_call(h)
        if call is None:
            return ""
        bd = next((b for b in self.v.boundaries if b.callid == call.callid), None)
        if bd is None or not bd.grad_input:
            return ""
        got = h.args.get("grad_input")
        gi = bd.grad_input
        if isinstance(got, tuple) and len(got) == len(gi) and all(same(x, y) for x, y in zip(got, gi)):
            return ("Here that node's input is the module's input, so this is also what a full backward hook on "
                    "the module would be handed.\n\n")
        b = Block()
        for i, (x, v) in enumerate(zip(call.args, gi)):
            if v is None:
                continue
            ident = self.ident(self.a.canon(x), v, strict=True)
            self.value_rows(b, f"{mcode('grad_input')}[{i}]", v,
                            [self.dfrac("\\ell", self.wrt(x))] + ([ident] if ident and "frac" not in ident else []))
        if not b.rows:
            return ""
        return ("A full backward hook on the same module would instead be handed the gradient with respect to the "
                "module's own input:\n" + b.render())

    def _declared(self, h: HookRecord):
        hooks = self.g.variant.hooks
        if 0 <= h.index < len(hooks) and hooks[h.index].label == h.label:
            return hooks[h.index]
        return next((x for x in hooks if x.label == h.label), None)

    def _returned(self, h: HookRecord) -> str:
        rep = self._REPLACES.get(h.kind)
        hook = self._declared(h)
        tree = expr_tree(hook.returns, {}) if hook is not None and hook.returns is not None else None
        b = Block()
        if isinstance(h.returned, tuple):
            parts = tree.items if isinstance(tree, TTuple) and len(tree.items) == len(h.returned) else [None] * len(
                h.returned)
            for j, (r, t) in enumerate(zip(h.returned, parts)):
                lhs = f"\\text{{returned}}[{j}]"
                if r is None:
                    b.eq(lhs, "\\mathrm{None}")
                    continue
                self.value_rows(b, lhs, r, [self.P.doprint(t)] if t is not None and not isinstance(t, TNone) else [],
                                exact=True)
        else:
            segs = [self.P.doprint(tree)] if tree is not None else []
            self.value_rows(b, "\\text{returned}", h.returned, segs, exact=True)
        if h.phase == "forward":
            text = "It returns a value, which replaces the module's " + \
                   ("inputs" if h.kind == "forward_pre" else "output") + " in the forward pass:\n"
        else:
            text = (f"It returns a value, and PyTorch continues with it in place of \\texttt{{{esc(rep or 'it')}}}: "
                    "every gradient computed from it afterwards changes (see \\emph{What the hooks changed}):\n")
        return text + b.render()
