"""Everything about hooks: "Hooks registered" (each hook, its target, what it returns), "Module
boundaries" (grad_output and grad_input = J^T grad_output of every hooked module call), and "Hook
calls, in firing order" (what PyTorch hands each hook, identified with the multiplier it is or
written as its node's vector-Jacobian product, and what a returned value replaces)."""

from __future__ import annotations

from adjoint.derivation import HookCall
from adjoint.values.mathtree import TNone
from adjoint.render.latex.layout import Block
from adjoint.render.latex.printer import DerivationPrinter
from adjoint.render.latex.text import _tex_escape_name, code, esc, mcode
from adjoint.render.latex.widths import LINE_EM, tex_width
from adjoint.render.latex.writer import WRT_EM, UnitWriter


class HookSections(UnitWriter):
    """Hooks registered, module boundaries, and every hook call in firing order."""

    # ---- hooks registered --------------------------------------------------------
    _KIND = {"full_backward": "full backward hook (\\texttt{register\\_full\\_backward\\_hook})",
             "full_backward_pre": "backward pre-hook (\\texttt{register\\_full\\_backward\\_pre\\_hook})",
             "backward": "legacy backward hook (\\texttt{register\\_backward\\_hook})",
             "forward": "forward hook", "forward_pre": "forward pre-hook",
             "hook": "tensor hook (\\texttt{Tensor.register\\_hook})",
             "retain_grad": "\\texttt{retain\\_grad()}", "pre": "node pre-hook", "post": "node post-hook",
             "post_accumulate_grad": "post-accumulate-grad hook (\\texttt{register\\_post\\_accumulate\\_grad\\_hook})",
             "multi_grad": "multi-grad hook (\\texttt{torch.autograd.graph.register\\_multi\\_grad\\_hook})",
             "saved_tensors": "pair of saved-tensor hooks (\\texttt{torch.autograd.graph.saved\\_tensors\\_hooks})",
             "pack": "pack hook (\\texttt{saved\\_tensors\\_hooks})",
             "unpack": "unpack hook (\\texttt{saved\\_tensors\\_hooks})",
             "comm_hook": "DDP communication hook (\\texttt{DistributedDataParallel.register\\_comm\\_hook})",
             "disable_saved_tensors_hooks": "\\texttt{torch.autograd.graph.disable\\_saved\\_tensors\\_hooks}",
             "save_on_cpu": "\\texttt{torch.autograd.graph.save\\_on\\_cpu}"}

    #: what a hook is attached to, as the registration list and the calls say it
    _ON = {"module": "module", "tensor": "tensor", "node": "the autograd node that produced tensor",
           "global": "every module (a global hook) --- here module", "multi_grad": "tensors",
           "saved_tensors": "the saved tensors of", "comm": "bucket"}

    def hooks_registered(self) -> str:
        hooks = self.vd.hooks
        if not hooks:
            return "No hooks are registered in this variant: PyTorch's backward pass is the adjoint recursion.\n\n"
        lines = ["Hooks registered, in this order:\n\\begin{enumerate}\n"]
        for h in hooks:
            lines.append(f"\\item {esc(h.label)}: {self._declared(h)}.\n")
        lines.append("\\end{enumerate}\n")
        return "".join(lines)

    def _declared(self, h) -> str:
        """One declared hook: its kind, what it is on, what it returns, its options."""
        if h.on == "global":
            text = (f"{self._KIND[h.kind]}, registered globally (\\texttt{{torch.nn.modules.module.register\\_module\\_"
                    f"{esc(h.kind)}\\_hook}}): it runs for every module call")
        elif h.on == "multi_grad":
            text = (f"{self._KIND['multi_grad']} in mode \\texttt{{{esc(h.mode)}}} on tensors "
                    + ", ".join(code(t) for t in h.tensors))
        elif h.on == "saved":
            text = (f"pair of hooks on one saved tensor (\\texttt{{{esc(h.target)}.grad\\_fn.\\_raw\\_saved\\_"
                    f"{esc(h.slot or '')}.register\\_hooks}}): packed at once by {code('x -> ' + h.pack)}, unpacked "
                    f"by {code('x -> ' + h.unpack)}")
        elif h.on == "disable_saved_tensors_hooks":
            where = ("the calls of " + ", ".join(code(m) for m in h.scope) if h.scope else "the whole forward pass")
            text = (f"{self._KIND[h.kind]} around {where}: entering saved-tensor hooks inside it raises "
                    f"{code(h.message or '')}")
        elif h.on == "save_on_cpu":
            where = ("the calls of " + ", ".join(code(m) for m in h.scope) if h.scope else "the whole forward pass")
            text = (f"{self._KIND[h.kind]} (\\texttt{{pin\\_memory={h.pin_memory}}}) around {where}: PyTorch's own "
                    "pair of saved-tensor hooks; on a CPU run it keeps each saved tensor "
                    + ("as a copy" if h.pin_memory else "as it is") + " and calls nothing of the file")
        elif h.on == "saved_tensors":
            where = ("the calls of " + ", ".join(code(m) for m in h.scope) if h.scope else "the whole forward pass")
            text = (f"{self._KIND['saved_tensors']} around {where}: every tensor an op saves for backward is packed "
                    f"by {code('x -> ' + h.pack)} and unpacked by {code('x -> ' + h.unpack)}")
        else:
            what = {"module": "module", "tensor": "tensor", "node": "the autograd node that made tensor"}[h.on]
            text = f"{self._KIND[h.kind]} on {what} {code(h.target)}"
            if getattr(h, "next", ()):   # next: [i, ...]: a node reached through next_functions
                path = "".join(f".next_functions[{i}][0]" for i in h.next)
                text = (f"{self._KIND[h.kind]} on the autograd node {code('grad_fn' + path)} of tensor "
                        f"{code(h.target)}")
        if h.on not in ("saved_tensors", "saved", "disable_saved_tensors_hooks", "save_on_cpu"):
            if h.returns is not None:
                text += f", returning ${self.P.doprint(h.returns)}$"
            elif h.kind != "retain_grad":
                text += ", returning nothing" + ("" if h.does else " (it only observes)")
        if h.does:
            text += "; it runs " + ", ".join(code(x) for x in h.does)
        if h.prepend:
            text += "; \\texttt{prepend=True}: it runs before the hooks of its kind registered earlier"
        if h.with_kwargs:
            text += "; \\texttt{with\\_kwargs=True}: it is handed the call's keyword arguments too"
        if h.always_call:
            text += "; \\texttt{always\\_call=True}: it runs even when the forward raises"
        if h.raises is not None:
            text += f"; it raises \\texttt{{{esc(h.raises_type)}({esc(repr(h.raises))})}}"
        if h.removes:
            text += "; when it runs it removes the handle of " + ", ".join(self._hook_name(i) for i in h.removes)
        if h.remove:
            text += f"; its handle is removed {esc(h.remove.replace('_', ' '))}"
        if h.when == "after_forward":
            text += "; registered after the forward pass"
        if not h.fires and h.kind not in ("retain_grad", "saved_tensors", "save_on_cpu") and h.remove != "before_backward":
            text += "; it never fires in this variant"
        return text

    def _hook_name(self, index: int) -> str:
        hooks = self.vd.hooks
        return f"hook {index + 1} ({esc(hooks[index].label)})" if 0 <= index < len(hooks) else f"hook {index + 1}"

    # ---- module boundaries --------------------------------------------------------------
    def boundaries(self) -> str:
        u = self.u
        out = [self.heading("Module boundaries"),
               "Each module call is one block of the Lagrangian. The multiplier of its output is what its hooks "
               "are handed as \\texttt{grad\\_output} (as it reaches the module, after hooks on the output tensor); "
               "$J^{\\top}\\,\\mathtt{grad\\_output}$ through the module's own equations is \\texttt{grad\\_input} "
               "(before any hook of the module acts).\n\n"]
        if u.boundaries_partial:
            out.append("The module calls with backward hooks in this variant (the others follow the same rule; "
                       "\\texttt{adjoint solve} lists them all):\n\n")
        for bd in u.boundaries:
            call = u.calls[bd.call]
            outs = ", ".join(self.sym(x) for x in call.outs)
            out.append(f"\\textbf{{{esc(bd.callid)}}} ({esc(bd.type)}): "
                       f"{', '.join('$' + self.sym(x) + '$' for x in call.args) or '--'} $\\mapsto$ "
                       + (f"${outs}$" if outs else "--") + "\n")
            b = Block()
            go = bd.grad_output
            outputs = [(f"{mcode('grad_output')}[{i}]", o.value, o.ident) for i, o in enumerate(bd.outputs)] or \
                [(mcode("grad_output"), go, bd.output_ident)]
            for lhs, value, ident in outputs:
                if value is None:
                    b.eq(lhs, "\\mathrm{None}\\quad\\text{(no gradient reaches the output)}")
                else:
                    self.value_rows(b, lhs, value, [self.ident(ident)])
            for i, inp in enumerate(bd.inputs):
                lhs = f"{mcode('grad_input')}[{i}]"
                if inp.value is None and not inp.requires:
                    b.eq(lhs, f"\\mathrm{{None}}\\quad\\text{{(}}{self.sym(inp.var)}\\text{{ does not require grad)}}")
                    continue
                if inp.value is None:   # it requires grad, but no path from the module's output reaches it
                    b.eq(lhs, "\\mathrm{None}\\quad\\text{(no gradient reaches it from the output)}")
                    continue
                segs = [f"J_{{\\mathrm{{{_tex_escape_name(bd.callid)}}}}}^{{\\top}}\\,{mcode('grad_output')}"]
                ident = self.ident(inp.ident)
                if ident is not None:
                    segs.append(ident)
                self.value_rows(b, lhs, inp.value, segs)
            out.append(b.render())
        return "".join(out)

    # ---- hook calls ---------------------------------------------------------------------
    def hook_calls(self, calls: list | None = None) -> str:
        backward = calls is None or calls is self.u.backward_calls
        calls = self.u.hook_calls if calls is None else calls
        out = [self.heading("Hook calls, in firing order")]
        if not calls:
            out.append("No hook fires.\n\n")
        for h in calls:
            out.append(self._hook_call(h))
        if backward:
            out.append(self._silent())
        return "".join(out)

    def _silent(self) -> str:
        """The tensor and node hooks of the graph that do not fire, and why."""
        items = []
        for index, registered, last, why in self.u.silent:
            h = self.vd.hooks[index]
            if why == "removed":                # the registration list and the steps say so already
                continue
            text = f"{esc(h.label)} (on {code(h.target)}, ${self.sym(registered)}$)"
            if why == "stale":
                text += (f": it sits on the node of ${self.sym(registered)}$, the version of {code(h.target)} it was "
                         f"registered on; {code(h.target)} became ${self.sym(last)}$ later (in place, or a view "
                         "regenerated after its base changed), and the old version's node does not run")
            elif why == "no_grad":
                text += f": {code(h.target)} does not require grad, so no gradient is computed for it"
            elif why == "inputs":
                text += (": the backward pass only runs the nodes between the root and its \\texttt{inputs}, and "
                         "this tensor's is not among them")
            else:
                text += ": no gradient reaches its tensor in this backward pass"
            items.append(text)
        if not items:
            return ""
        return "Hooks that do not fire here: " + "; ".join(items) + ".\n\n"

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
        "post_accumulate_grad": "A post-accumulate-grad hook runs on a leaf right after its \\texttt{AccumulateGrad} "
                                "node stored the gradient into \\texttt{.grad}. It is handed the leaf itself, shown "
                                "here by its \\texttt{.grad} (the sum of every backward pass so far), and must "
                                "return \\texttt{None}.",
        "multi_grad": "A multi-grad hook in mode \\texttt{all} runs once the gradients of all its tensors that this "
                      "backward pass computes are known, each handed in \\texttt{grads} (\\texttt{None} for a tensor "
                      "whose gradient is not computed); in mode \\texttt{any} it runs once, at the first of them, "
                      "handed that one as \\texttt{grad}.",
        "pack": "A pack hook runs during the forward pass each time an op saves a tensor for its backward, in the "
                "order the op saves them; what it returns is what the node keeps.",
        "unpack": "An unpack hook runs when a node's backward reads a saved tensor (all of them, in the order they "
                  "were packed, before the node computes anything); it is handed what the pack hook returned, and "
                  "what it returns is what the backward formula uses.",
        "comm_hook": "DistributedDataParallel's Reducer calls it once a bucket of gradients is complete, with the "
                     "bucket's flat buffer (this rank's gradients of the parameters listed, in buffer order); what "
                     "it returns becomes those parameters' \\texttt{.grad} when the backward pass ends.",
    }

    _ACCUMULATE = {
        "pre": "Here the node is the leaf's \\texttt{AccumulateGrad}, which stores the gradient into "
               "\\texttt{.grad}: \\texttt{grad\\_outputs} holds the gradient arriving at the leaf, and the hook runs "
               "before \\texttt{.grad} is updated.",
        "post": "Here the node is the leaf's \\texttt{AccumulateGrad}: it has no inputs, so \\texttt{grad\\_inputs} is "
                "empty, and the hook runs after \\texttt{.grad} was updated.",
    }

    _REPLACES = {"full_backward": "grad_input", "backward": "grad_input", "post": "grad_inputs",
                 "pre": "grad_outputs", "full_backward_pre": "grad_output", "hook": "grad"}

    def _slot_printer(self, h: HookCall) -> DerivationPrinter:
        """A printer that names the atoms of a node's own vector-Jacobian product (its input slots)."""
        names = dict(self.P.names)
        for fid, c in h.slot_vars.items():
            names[f"v#{fid}"] = self.sym(c) if c in self.symtex else f"\\left({self.sym(c)}\\right)"
        return DerivationPrinter(names)

    def _hook_call(self, h: HookCall) -> str:
        u = self.u
        where = f" at node {code(h.node)}" if h.node else ""
        call = f" (call {h.k} of {h.calls_of_module})" if h.k is not None and h.calls_of_module > 1 else ""
        target = code(h.target) + call
        mcall = u.calls[h.call] if h.call is not None and h.on in ("module", "global") else None
        if mcall is not None:
            outs = ", ".join(self.sym(x) for x in mcall.outs)
            target += (f" (${', '.join(self.sym(x) for x in mcall.args)} \\mapsto {outs}$)")
        elif h.on in ("tensor", "node") and h.target_var is not None:
            target += f" (${self.sym(h.target_var)}$)"
        kind = self._KIND.get(h.kind, esc(h.kind))
        if h.kind in ("pack", "unpack"):
            head = (f"The {kind} for the tensor {self._saved(h)}{where}, during the {h.phase} pass." if h.phase != "read"
                    else f"The {kind} for the tensor {self._saved(h)}, run by a read of "
                         "\\texttt{grad\\_fn.\\_saved\\_*} between the passes (no node is running).")
        elif h.on == "saved_tensors":
            head = f"The {kind}{where}, during the {h.phase} pass."
        else:
            head = f"The {kind} on {self._ON[h.on]} {target}{where}, during the {h.phase} pass."
            walk = next((d.next for d in self.vd.hooks if d.index == h.hook and d.on == "node" and d.next), ())
            if walk:   # next: [i, ...]: the node reached from the target's grad_fn, not its grad_fn
                path = "".join(f".next_functions[{i}][0]" for i in walk)
                head = (f"The {kind} on the autograd node {code('grad_fn' + path)} of tensor {code(h.target)}"
                        f"{where}, during the {h.phase} pass.")
        intro = self._INTRO.get(h.kind, "")
        if h.node == "torch::autograd::AccumulateGrad" and h.kind in self._ACCUMULATE:
            intro += " " + self._ACCUMULATE[h.kind]
        out = [f"\\subsubsection*{{{h.number}.\\ {esc(h.label)}}}\n{head} {intro}\n"]
        if h.later and h.target_var is not None:
            out.append(f"The hook sits on the node that made ${self.sym(h.target_var)}$, the version of "
                       f"{code(h.target)} it was registered on; the in-place ops after that made "
                       + ", ".join(f"${self.sym(x)}$" for x in h.later)
                       + ", with nodes of their own, and PyTorch does not move a hook to them: it is handed the "
                       f"gradient of ${self.sym(h.target_var)}$.\n")
        slot_printer = self._slot_printer(h) if h.slot_vars else None
        b = Block()
        chains = []
        for arg in h.args:
            lhs = mcode(arg.name) + self._position(arg.position)
            if arg.value is None:
                why = "\\quad\\text{(no gradient flows to this input)}" if arg.none_flows else ""
                b.eq(lhs, "\\mathrm{None}" + why)
                continue
            if not self.is_tensor_value(arg.value):
                b.eq(lhs, self.plain(arg.value))
                continue
            segs: list = []
            if arg.backward:
                c = arg.var
                if arg.slot_formula is not None:
                    ftex = slot_printer.doprint(arg.slot_formula)
                    segs.append(ftex if tex_width(ftex) < LINE_EM - 12 else
                                f"J_{{[{arg.position}]}}^{{\\top}}\\,{mcode('grad_output')}")
                elif arg.full_vjp:
                    segs.append(f"J^{{\\top}}{mcode('grad_output')}")
                ident = self.ident(arg.ident)
                if ident is not None:
                    dl = self.dfrac("\\ell", self.wrt(c))
                    if arg.ident.kind != "lam_tilde" and tex_width(dl) <= WRT_EM:
                        segs.append(dl)
                    if not segs or ident != segs[-1]:
                        segs.append(ident)
                    if arg.chain is not None:
                        chains.append((lhs, self.chain(arg.chain)))
                elif not segs:
                    if arg.arrival is not None:
                        names, nums, _ = self.arriving(c, arg.arrival)
                        segs.extend([names] + ([nums] if nums else []))
                    else:
                        reaching = f"\\text{{gradient reaching }}{self.wrt(c)}"
                        if tex_width(reaching) <= WRT_EM:
                            segs.append(reaching)
            self.value_rows(b, lhs, arg.value, segs, exact=True)
        out.append(b.render())
        if chains:
            out.append("Written out with the chain rule, factor by factor:\n")
            cb = Block()
            for lhs, (names, nums, total) in chains:
                self.value_rows(cb, lhs, total, [names, nums])
            out.append(cb.render())
        if h.recomputed:
            out.append("This call is made by \\texttt{checkpoint}'s recomputation of its region, in the backward.\n\n")
        if h.reentrant:
            out.append(f"It runs in a reentrant backward (depth {h.reentrant}), started by "
                       "\\texttt{CheckpointFunctionBackward} inside the outer one.\n\n")
        if h.kind == "backward" and h.phase == "backward":
            out.append(self._legacy_contrast(h))
        out.append(self._grads_then(h))
        if h.raised:
            hook = self.vd.hooks[h.hook] if h.hook is not None and 0 <= h.hook < len(self.vd.hooks) else None
            if hook is not None and hook.raises is not None:
                message = esc(repr(hook.raises))
                out.append(f"It raises \\texttt{{{esc(hook.raises_type)}({message})}}: PyTorch stops here "
                           "(see \\emph{The error}).\n\n")
            else:   # its body raised (Python's error, or PyTorch's inside it)
                out.append("Its body raises: PyTorch stops here (see \\emph{The error}).\n\n")
        elif h.returned is None:
            if h.kind in ("forward", "forward_pre") and self._always_after_error(h):
                out.append("It was registered with \\texttt{always\\_call=True}, so PyTorch calls it although the "
                           "forward raised; \\texttt{output} is what the forward had returned by then (\\texttt{None}: "
                           "it did not finish).\n\n")
            elif h.kind in ("pack", "unpack"):
                pass
            elif h.kind != "retain_grad":
                if h.wrote:
                    out.append(self._wrote(h))
                elif h.does:
                    out.append("It returns \\texttt{None}: it only rebinds local names, so nothing it computes "
                               "flows on.\n\n")
                else:
                    out.append("It returns \\texttt{None}: it only observes, and nothing changes.\n\n")
        else:
            out.append(self._returned(h))
        hook = self.vd.hooks[h.hook] if h.hook is not None and 0 <= h.hook < len(self.vd.hooks) else None
        if hook is not None and hook.removes:
            out.append("When it runs it removes the handle of " + ", ".join(self._hook_name(i) for i in hook.removes)
                       + ": a removed hook no longer runs from the next time its dict is read (a dict PyTorch is "
                       "already running from is a copy, so a hook of the same dict still runs this time).\n\n")
        for w in h.why:
            out.append(f"Why: {esc(w)}.\n\n")
        return "".join(out)

    # ---- small pieces of a hook call ----------------------------------------------------
    @staticmethod
    def _position(pos) -> str:
        if pos is None:
            return ""
        if isinstance(pos, str):
            return f"[\\text{{\\texttt{{{esc(repr(pos))}}}}}]"
        if isinstance(pos, tuple):   # an item of a nested tuple (an LSTM's (out, (h_n, c_n)))
            return "".join(f"[{p}]" for p in pos)
        return f"[{pos}]"

    def _saved(self, h: HookCall) -> str:
        """pack / unpack: which tensor, saved by which node as what."""
        what = f"\\texttt{{{esc(h.saved)}}}" if h.saved else "a tensor"
        var = f" (${self.sym(h.saved_var)}$)" if h.saved_var is not None and self.u is not None else ""
        return f"{what}{var} that the node saves"

    @staticmethod
    def _wrote(h) -> str:
        """A hook that wrote in place and returned None (adjoint.engine.hookwrites): what it wrote is said
        under Why."""
        what = ["a gradient it was handed" if w == "gradient" else
                f"its argument \\texttt{{{esc(w[len('argument '):])}}}" if w.startswith("argument ") else esc(w)
                for w in h.wrote if not w.startswith("requires_grad ")]
        switched = [w[len("requires_grad "):].partition("=") for w in h.wrote if w.startswith("requires_grad ")]
        sets = "".join(f"It sets \\texttt{{{esc(name)}.requires\\_grad}} to \\texttt{{{flag}}}. "
                       for name, _, flag in switched)
        if not what:
            return "It returns \\texttt{None}. " + sets + "\n\n"
        return (sets + "It returns \\texttt{None} but writes in place (" + ", ".join(what) + "): the values "
                "shown are what it was handed, before its writes.\n\n")

    def _always_after_error(self, h: HookCall) -> bool:
        err = self.vd.error
        return err is not None and err.after_call is not None and h.number > err.after_call

    def _grads_then(self, h: HookCall) -> str:
        """The .grad of every leaf when the hook ran (None until its AccumulateGrad has run)."""
        if not h.grads_then:
            return ""
        items = []
        for name, value in h.grads_then.items():
            tex = "\\mathrm{None}" if value is None else self.value(value, 14)
            if tex is None:
                tex = ("\\text{(a }" + ("\\times ".join(str(d) for d in value.shape) or "0\\text{-d}")
                       + "\\text{ tensor)}")
            items.append(f"${mcode(name + '.grad')} = {tex}$")
        return "At this moment: " + ", ".join(items) + ".\n\n"

    def _legacy_contrast(self, h: HookCall) -> str:
        if h.legacy_same:
            return ("Here that node's input is the module's input, so this is also what a full backward hook on "
                    "the module would be handed.\n\n")
        b = Block()
        for row in h.legacy_rows:
            ident = self.ident(row.ident) if row.ident is not None and row.ident.kind != "dl" else None
            self.value_rows(b, f"{mcode('grad_input')}[{row.index}]", row.value,
                            [self.dfrac("\\ell", self.wrt(row.var))] + ([ident] if ident else []))
        if not b.rows:
            return ""
        return ("A full backward hook on the same module would instead be handed the gradient with respect to the "
                "module's own input:\n" + b.render())

    def _returned(self, h: HookCall) -> str:
        rep = self._REPLACES.get(h.kind)
        tree = h.returned_trees
        b = Block()
        if isinstance(h.returned, tuple):
            parts = tree if isinstance(tree, list) else [None] * len(h.returned)
            for j, (r, t) in enumerate(zip(h.returned, parts)):
                lhs = f"\\text{{returned}}[{j}]"
                if r is None or not self.is_tensor_value(r):
                    b.eq(lhs, self.plain(r))
                    continue
                self.value_rows(b, lhs, r, [self.P.doprint(t)] if t is not None and not isinstance(t, TNone) else [],
                                exact=True)
        elif not self.is_tensor_value(h.returned):
            b.eq("\\text{returned}", self.plain(h.returned))
        else:
            segs = [self.P.doprint(tree)] if tree is not None else []
            self.value_rows(b, "\\text{returned}", h.returned, segs, exact=True)
        if h.kind == "pack":
            text = ("It returns what the node keeps in place of the tensor (the unpack hook is handed it when the "
                    "node's backward runs):\n")
        elif h.kind == "unpack":
            text = ("It returns the value the node's backward formula uses in place of the tensor it saved (when it "
                    "differs from that tensor, the gradients computed from it change):\n")
        elif h.phase == "forward":
            text = "It returns a value, which replaces the module's " + \
                   ("inputs" if h.kind == "forward_pre" else "output") + " in the forward pass:\n"
        else:
            text = (f"It returns a value, and PyTorch continues with it in place of \\texttt{{{esc(rep or 'it')}}}: "
                    "every gradient computed from it afterwards changes (see \\emph{What the hooks changed}):\n")
        return text + b.render()
