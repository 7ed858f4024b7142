"""What a variant with ``steps`` adds to the document: the steps in order ("Steps": each forward and
backward pass, hooks registered or removed between them, ``zero_grad``, SGD steps with the new
values) and, when PyTorch raised, "The error": its message, why PyTorch raises it, and the calls
made before it."""

from __future__ import annotations

from adjoint.derivation import ErrorInfo, StepInfo
from adjoint.render.latex.layout import Block
from adjoint.render.latex.text import code, esc, mcode
from adjoint.render.latex.writer import UnitWriter

#: why PyTorch raises, by the engine's cause
_WHY = {
    "hook_raised": "the hook's own code raises it (its \\texttt{raises:}); PyTorch does not catch exceptions from "
                   "hooks, so the exception leaves the forward or backward call at once and nothing after it runs "
                   "(except \\texttt{always\\_call} forward hooks, which PyTorch still calls on the way out).",
    "freed_graph": "this backward pass needs tensors that the graph saved for backward, but an earlier backward "
                   "pass through the same graph ran without \\texttt{retain\\_graph=True}, which frees them once "
                   "each node has used them.",
    "saved_modified": "a tensor that a node saved for its backward was modified in place after it was saved. Every "
                      "tensor has a version counter that each in-place op increments; the node remembers the version "
                      "it saved and checks it when its backward unpacks the tensor, because the values it needs are "
                      "gone.",
    "leaf_inplace": "an in-place op would overwrite a leaf that requires grad (or a view of one) while grad mode is "
                    "on: its \\texttt{.grad} is the gradient with respect to the value it had, so PyTorch refuses "
                    "(do it under \\texttt{no\\_grad}, or on a clone).",
    "view_inplace": "an in-place op on a view PyTorch cannot rebase: the output of a custom Function returned as is "
                    "(\\texttt{BackwardHookFunction} does this to the inputs and outputs of a module with full "
                    "backward hooks), a piece of a multi-output view op (\\texttt{split}, \\texttt{chunk}, "
                    "\\texttt{unbind}), or a view made under \\texttt{no\\_grad}; rewriting its base's history would "
                    "bypass that node's backward.",
    "hook_result": "the hook returned something PyTorch does not accept from that kind of hook.",
    "python": "the hook's own code raises Python's error: it computes with an argument PyTorch hands as None "
              "(no gradient flows there), or reads past the end of a tuple; PyTorch does not catch exceptions from "
              "hooks, so the exception leaves the forward or backward call at once and nothing after it runs.",
    "constructor": "a \\texttt{torch.nn} constructor checks its arguments and refuses these (PyTorch's own "
                   "\\texttt{raise} or \\texttt{assert} in the module's \\texttt{\\_\\_init\\_\\_}), so the script stops "
                   "before the model exists: no forward, no backward, no hook.",
    "register": "PyTorch refuses the registration itself: the tensor or module cannot take that kind of hook "
                "(a hook on a tensor that does not require grad, a post-accumulate hook on a non-leaf, an "
                "unknown multi-grad mode, legacy and full backward hooks on one module).",
    "autograd": "the backward call itself is refused before or after the graph runs: what it starts from does not "
                "require grad, or an input asked for received no gradient.",
    "dtype": "the kernel refuses its operands' dtypes: PyTorch has no negation or subtraction of bool tensors "
             "(a mask is inverted with \\texttt{\\textasciitilde} or \\texttt{logical\\_not}), no bitwise not "
             "(\\texttt{\\textasciitilde}) of a float tensor, and an in-place op "
             "cannot write a float result into a bool or int64 tensor.",
    "hook_arity": "Python cannot call the hook: PyTorch calls a pack hook with the one tensor it saves, and this "
                  "hook requires more positional arguments.",
    "not_a_tensor": "a built-in module's forward hands its input straight to a PyTorch function that takes a "
                    "tensor (or reads a tensor attribute of it), and this input is not one: a module that returns "
                    "several outputs, such as an RNN's \\texttt{(output, h\\_n)}, must be indexed or unpacked first.",
    "forward_raised": "a module's forward raises it (its \\texttt{raise} line); \\texttt{nn.Module.\\_call\\_impl} "
                      "does not catch it, but still calls the module's \\texttt{always\\_call} forward hooks on the "
                      "way out (handed the output \\texttt{None}).",
}


class StepSections(UnitWriter):
    """The steps of a variant and the error PyTorch raised."""

    def steps_list(self) -> str:
        out = ["\\subsection{Steps}\nThe variant runs these steps, in order (\\texttt{.grad} accumulates across "
               "backward passes until \\texttt{zero\\_grad}):\n\\begin{enumerate}\n"]
        for info in self.vd.steps:
            out.append(f"\\item {self._step_line(info)}\n")
        out.append("\\end{enumerate}\n")
        for info in self.vd.steps:
            if info.kind == "step" and info.updates:
                out.append(self._updates(info))
        return "".join(out)

    def _step_line(self, info: StepInfo) -> str:
        if not info.ran:
            return f"\\texttt{{{esc(info.kind)}}}: never runs (PyTorch raised before)."
        if info.kind == "forward":
            text = f"forward pass {info.forward}" if info.forward is not None else "a forward pass"
            if info.inputs:
                text += " with new values for " + ", ".join(code(n) for n in info.inputs)
            if info.call is not None:
                text += f": only {code(info.call)} is called, with the inputs, building a graph of its own"
            else:
                text += (": the model runs, building a graph" if info.forward in (None, 1)
                         else ": the model runs again, building a new graph")
            if info.failed:
                text += "; PyTorch raises during it (see \\emph{The error})"
            return text + "."
        if info.kind == "backward":
            what = ("\\texttt{torch.autograd.grad}" if info.method == "grad" else "\\texttt{backward()}")
            text = f"backward pass {info.backward}" if info.backward is not None else "a backward pass"
            text += f" ({what}"
            if info.inputs:
                text += " with respect to " + ", ".join(code(n) for n in info.inputs)
            if info.retain_graph:
                text += ", \\texttt{retain\\_graph=True}: the saved tensors are kept for another pass"
            text += second_words(info.second) + ")"
            if info.forward is not None:
                text += f" through the graph of forward pass {info.forward}"
            if info.failed:
                text += "; PyTorch raises during it (see \\emph{The error})"
            return text + "."
        if info.kind in ("register", "remove"):
            verb = "registered" if info.kind == "register" else "removed (\\texttt{handle.remove()})"
            return "hooks " + verb + ": " + ", ".join(self._hook_name(i) for i in info.hooks) + "."
        if info.kind == "registered":
            path, kind, name, count = info.counts
            attr = {"forward_pre": "_forward_pre_hooks", "forward": "_forward_hooks",
                    "full_backward_pre": "_backward_pre_hooks",
                    "forward_always_call": "_forward_hooks_always_called"}.get(kind, "_backward_hooks")
            where = "torch.nn.modules.module._global" + attr if path == "global" else path + "." + attr
            return (f"{code(name)} $= {count}$: the hooks registered in \\texttt{{{esc(where)}}} "
                    "at this point (its \\texttt{len()}).")
        if info.kind == "zero_grad":
            return ("\\texttt{zero\\_grad(set\\_to\\_none=True)}: every \\texttt{.grad} is set to \\texttt{None}, so "
                    "the next backward pass starts accumulating afresh.")
        if info.kind == "read":
            return self._read_line(info)
        if info.kind == "clip_grad_value":
            c = self.plain(info.clip[0])
            return (f"\\texttt{{torch.nn.utils.clip\\_grad\\_value\\_}} over \\texttt{{model.parameters()}}: every "
                    f"\\texttt{{.grad}} is clamped in place to $[-{c}, {c}]$.")
        if info.kind == "clip_grad_norm":
            max_norm, norm_type = info.clip[0], info.clip[1]
            order = "\\infty" if norm_type == "inf" else self.plain(norm_type)
            return (f"\\texttt{{torch.nn.utils.clip\\_grad\\_norm\\_}} over \\texttt{{model.parameters()}} (max norm "
                    f"${self.plain(max_norm)}$, norm type ${order}$): the norm $n$ of all the gradients together is "
                    f"taken, and every \\texttt{{.grad}} is multiplied in place by "
                    f"$\\min({self.plain(max_norm)} / (n + 10^{{-6}}), 1)$.")
        if info.optimizer is not None and len(info.optimizer) == 4:   # {step: {optimizer: {type: Adam}}}
            kind, lr, (b1, b2), eps = info.optimizer
            return (f"\\texttt{{torch.optim.{kind}}} over \\texttt{{model.parameters()}} steps (learning rate "
                    f"${self.plain(lr)}$, betas $({self.plain(b1)}, {self.plain(b2)})$, eps ${self.plain(eps)}$): "
                    "under \\texttt{no\\_grad} each parameter with a gradient is updated in place from its running "
                    "averages of the gradient and its square, kept across steps.")
        if info.optimizer is not None:   # its settings (OptimizerDecl.settings)
            kind, lr, (b1, b2), eps, wd, maximize, momentum, dampening, nesterov, amsgrad = info.optimizer
            if kind == "SGD":
                shown = [f"learning rate ${self.plain(lr)}$", f"momentum ${self.plain(momentum)}$",
                         f"dampening ${self.plain(dampening)}$", f"weight decay ${self.plain(wd)}$"] + \
                    (["Nesterov"] if nesterov else []) + (["maximizing"] if maximize else [])
                how = "from its gradient (and its momentum buffer, kept across steps)"
            else:
                shown = [f"learning rate ${self.plain(lr)}$", f"betas $({self.plain(b1)}, {self.plain(b2)})$",
                         f"eps ${self.plain(eps)}$", f"weight decay ${self.plain(wd)}$"] + \
                    (["AMSGrad"] if amsgrad else []) + (["maximizing"] if maximize else [])
                how = "from its running averages of the gradient and its square, kept across steps"
            return (f"\\texttt{{torch.optim.{kind}}} over \\texttt{{model.parameters()}} steps ({', '.join(shown)}): "
                    f"under \\texttt{{no\\_grad}} each parameter with a gradient is updated in place {how}.")
        lr = self.plain(info.lr)
        return (f"an SGD step with learning rate ${lr}$: under \\texttt{{no\\_grad}}, $p \\leftarrow p - {lr}\\,"
                "p.\\mathrm{grad}$ for every parameter with a gradient (in place: each parameter's version "
                "counter goes up, so a graph that saved it can no longer run backward).")

    def _read_line(self, info: StepInfo) -> str:
        r = info.read
        if r is None:
            return "a read between the passes; PyTorch raises during it (see \\emph{The error})."
        text = f"{code(r.name)} $=$ {code(r.expr)}, read between the passes"
        if isinstance(r.value, bool) or r.value is None:
            return text + f": \\texttt{{{r.value}}}."
        text += (": the saved tensor itself (" + ", ".join(code(n) for n in r.is_names) + ")" if r.is_names
                 else ": a new tensor (what the unpack gives)")
        text += (f", whose \\texttt{{grad\\_fn}} is \\texttt{{{esc(r.grad_fn)}}}" if r.grad_fn else ", with no grad\\_fn")
        shown = self.value(r.value, 14)
        return text + (f", ${shown}$." if shown else ".")

    def _updates(self, info: StepInfo) -> str:
        b = Block()
        lr = self.plain(info.lr)
        for name, before, grad, after in info.updates:
            lhs = mcode(name)
            b.eq(lhs, f"{self.value(before, 14) or mcode(name)} - {lr} \\cdot "
                      f"{self.value(grad, 14) or mcode(name + '.grad')}", rel="\\leftarrow")
            self.value_rows(b, "", after, [])
        return f"The SGD step of step {info.index + 1}, parameter by parameter:\n" + b.render()

    def error_section(self, err: ErrorInfo) -> str:
        if err.during == "setup":
            when = "while the model is built, in a module's constructor, before any hook is registered"
        elif err.during == "register":
            when = "while the hooks are registered, " + (f"in step {err.step + 1}" if err.step >= 0 else
                                                          "before the first step")
        else:
            when = (f"in the read of step {err.step + 1}" if err.during == "read" else
                    f"during the {'backward' if err.during == 'backward' else 'forward'} pass (step {err.step + 1})")
        out = ["\\subsection{The error}\n",
               f"PyTorch raises \\texttt{{{esc(err.type)}}} {when}:\n"
               f"\\begin{{quote}}\\texttt{{{esc(err.message)}}}\\end{{quote}}\n",
               f"Why: {_WHY.get(err.cause, 'this is what PyTorch does here.')}\n\n"]
        if err.raised_by is not None:
            out.append(f"The hook call that raises is number {err.raised_by}. ")
        if err.after_call is not None:
            out.append(f"The last hook call made before the error left PyTorch is number {err.after_call}; "
                       "the variant's answer is the error and the calls made until then (the calls PyTorch still "
                       "makes while the error propagates included).\n\n")
        else:
            out.append("No hook was called before the error.\n\n")
        if err.calls:
            out.append("The hook calls of the step that raised, in firing order:\n\n")
            for h in err.calls:
                out.append(self._hook_call(h))
        return "".join(out)


def second_words(s: dict | None) -> str:
    """The second-order options of a backward step, in the step list."""
    if not s:
        return ""
    text = ""
    if s["roots"]:
        text += (", from " if len(s["roots"]) == 1 else ", from the roots ") + ", ".join(code(r) for r in s["roots"])
    if s["create_graph"]:
        text += (", \\texttt{create\\_graph=True}: each node's backward formula runs as recorded operations, so the "
                 "gradients it returns have a graph of their own")
    if s["allow_unused"]:
        text += ", \\texttt{allow\\_unused=True}"
    if s["materialize_grads"]:
        text += ", \\texttt{materialize\\_grads=True}"
    if s["names"]:
        text += "; it returns " + ", ".join(code(n) for n in s["names"])
    return text
