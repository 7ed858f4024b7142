"""The section "second order" of a backward pass from a root that reads gradients a create_graph
backward returned: the recorded backward formulas as the forward of the second pass, its adjoint
equations (the adjoint of the adjoint, multipliers written \\bar\\lambda), their values, and the
gradients the pass returned. Typesetting only: the record is adjoint.derivation.second's."""

from __future__ import annotations

from adjoint.render.latex.layout import Block
from adjoint.render.latex.printer import DerivationPrinter
from adjoint.render.latex.text import code, esc
from adjoint.render.latex.widths import LINE_EM, tex_width

#: past this many equations the list is cut (the rest said in words)
MAX_EQUATIONS = 40


def _name_tex(name: str) -> str:
    return "\\mathtt{" + esc(name).replace("\\_", "\\_") + "}"


def labels(rec) -> dict:
    """var -> LaTeX symbol: the file's name, else g_k (made by the create_graph backward), r_k (by the root
    expression), u_k (a tensor of the forward pass), c_k (a constant)."""
    out, counts = {}, {}
    letter = {"recorded": "g", "root": "r", "forward": "u", "constant": "c"}
    for t in rec.tensors:
        if t.name:
            out[t.var] = _name_tex(t.name)
            continue
        ch = letter[t.role]
        counts[ch] = counts.get(ch, 0) + 1
        out[t.var] = f"{ch}_{{{counts[ch]}}}"
    return out


def _bar(sym: str) -> str:
    return f"\\bar\\lambda_{{{sym}}}"


def second_section(rec, gradients: list, heading: str, sources: list = ()) -> str:
    lab = labels(rec)
    names = {f"v#{v}": s for v, s in lab.items()}
    names.update({f"l#{v}": _bar(s) for v, s in lab.items()})
    consts = {t.var: t.value for t in rec.tensors if t.role == "constant"}
    P = DerivationPrinter(names, consts)
    passes = ", ".join(str(n) for n in rec.passes)
    out = [heading]
    out.append(
        "This backward pass starts from " + (", ".join(code(x) for x in sources) + ", not from the loss: "
                                             if sources else "") +
        ", ".join(f"${lab[r]}$" for r in rec.roots) + " below, a function of gradients "
        f"that backward pass{'es' if len(rec.passes) > 1 else ''} {passes} returned with "
        "\\texttt{create\\_graph=True}. Such a pass runs every node's backward formula as ops PyTorch records "
        f"({rec.recorded} in all), so its gradients are tensors with their own graph. Differentiating them again "
        "is the adjoint of the adjoint: the recorded formulas are the forward of this pass, and each gets a "
        "multiplier $\\bar\\lambda$ (the derivative of the root with respect to it).\n\n")
    out.append(_forward(rec, lab, P))
    out.append(_adjoint(rec, lab, P))
    out.append(_results(rec, lab, gradients, P))
    return "".join(out)


def _value(P, x, avail: float) -> str | None:
    if x is None:
        return None
    return P.tensor(getattr(x, "value", x), avail)


def _forward(rec, lab: dict, P) -> str:
    n = len(rec.equations)
    back = sum(1 for e in rec.equations if e.stage == "backward")
    out = ["\\subsubsection*{The recorded formulas: the forward of this pass}\n"
           f"The equations are written for the {n} op{'s' if n != 1 else ''} the root depends on: {back} of the "
           f"{rec.recorded} the \\texttt{{create\\_graph}} backward recorded, and {n - back} of the root expression, "
           "in the order PyTorch ran them. $g_k$ is a tensor the backward made, $r_k$ one the root expression made, "
           "$u_k$ a tensor of the forward pass (by its node), $c_k$ a constant; named tensors keep the file's names. "
           "Every equation is one autograd node of the new graph, and belongs to the backward formula of a node of "
           "the first graph:\n"]
    block = Block()
    for e in rec.equations[:MAX_EQUATIONS]:
        rhs = P.doprint(e.tree)
        val = _value(P, rec.tensors[e.out].value, LINE_EM - tex_width(lab[e.out]) - 8)
        block.eq(lab[e.out], rhs, val if val is not None and val != rhs else None)
    out.append(block.render())
    if n > MAX_EQUATIONS:
        out.append(f"({n - MAX_EQUATIONS} more equations of the same kind.)\n\n")
    items = []
    for e in rec.equations[:MAX_EQUATIONS]:
        made = code(e.node) if e.node else "no node (it needs no gradient)"
        if e.stage == "root":
            why = "the root expression"
        elif e.formula_of:
            why = f"the backward formula of {code(e.formula_of)}"
        else:
            why = "PyTorch's engine (two gradients summed, or \\texttt{.grad} updated)"
        items.append(f"${lab[e.out]}$: {made}, from {why}")
    out.append("Nodes: " + "; ".join(items) + ".\n\n")
    fw = [t for t in rec.tensors if t.role == "forward"]
    if fw:
        out.append("Tensors of the forward pass the formulas read: " + "; ".join(
            f"${lab[t.var]}$ ({code(t.grad_fn) + ' output' if t.grad_fn else 'a leaf'})" for t in fw) + ".\n\n")
    if rec.skipped:
        out.append("Ops written in no equation here: " + ", ".join(code(p) for p in rec.skipped) + ".\n\n")
    return "".join(out)


def _adjoint(rec, lab: dict, P) -> str:
    out = ["\\subsubsection*{The adjoint of the adjoint}\n"
           "Each root starts with its gradient ($\\mathbf{1}$ unless given), and every tensor $u$ of the equations "
           "above gets $\\bar\\lambda_u = \\sum_j J_{ju}^{\\top}\\bar\\lambda_j$ over the equations $j$ that read it. "
           "Values are computed with each node's own vector--Jacobian product, hooks ignored:\n"]
    block = Block()
    for r, s in zip(rec.roots, rec.seeds):
        block.eq(_bar(lab[r]), _value(P, s, LINE_EM - 12) or "\\text{(its gradient)}")
    for a in rec.adjoints:
        sym = _bar(lab[a.var])
        rhs = " + ".join(P.doprint(tree) for _, tree in a.terms)
        if tex_width(rhs) > LINE_EM - 12:
            rhs = " + ".join(f"J_{{{lab[o]}}}^{{\\top}}{_bar(lab[o])}" for o, _ in a.terms)
        val = _value(P, rec.tensors[a.var].bar, LINE_EM - tex_width(sym) - 8)
        block.eq(sym, rhs, val)
    out.append(block.render())
    return "".join(out)


def _results(rec, lab: dict, gradients: list, P) -> str:
    fw = [t for t in rec.tensors if t.role == "forward" and t.bar is not None]
    out = ["\\subsubsection*{What this pass returns}\n"]
    if fw:
        out.append("For a tensor of the forward pass, $\\bar\\lambda$ above is the part that flows through the "
                   "recorded formulas; PyTorch carries the $\\bar\\lambda$ of " +
                   ", ".join(f"${lab[t.var]}$" for t in fw if t.grad_fn) +
                   " on through the forward's graph (its equations above, with $\\bar\\lambda$ in place of "
                   "$\\lambda$), and a leaf's gradient is the sum of both parts. " if any(t.grad_fn for t in fw)
                   else "For a leaf of the forward pass, $\\bar\\lambda$ above is its whole gradient. ")
    split = {t.name: t for t in rec.totals}
    if rec.totals:
        root = lab[rec.roots[0]] if len(rec.roots) == 1 else "r"
        out.append("Carried back through the forward's equations (hooks ignored), they add up to the gradients "
                   "PyTorch returns, exactly: each is the leaf's own $\\bar\\lambda$ plus "
                   "$\\sum_k J_{k\\theta}^{\\top}\\bar\\lambda_k$ over the forward's equations $k$ that read it "
                   "(the forward's recursion above, seeded with the $\\bar\\lambda$ of its tensors):\n")
        block = Block()
        for t in rec.totals:
            own = _bar(lab[t.var]) if t.var is not None else None
            lhs = f"\\frac{{\\partial {root}}}{{\\partial {_name_tex(t.name)}}}"
            sym = (own + " + " if own else "") + "\\sum_k J_{k}^{\\top}\\bar\\lambda_k"
            parts = None
            if own is not None:
                a, b = _value(P, t.direct, 24), _value(P, t.through_forward, 24)
                if a is not None and b is not None:
                    parts = a + " + " + (f"\\left({b}\\right)" if b.startswith("-") else b)
                    if tex_width(parts) > LINE_EM - 14:
                        parts = None
            block.eq(lhs, sym, parts, _value(P, t.total, LINE_EM - 14) or "\\text{(below)}")
        out.append(block.render())
    shown = [g for g in gradients if g.value is not None and g.name not in split]
    if shown and rec.totals:
        out.append("The other gradients this pass leaves (the engine's values):\n")
    if shown:
        out.append("The gradients PyTorch hands back (the values the engine computed; the gradients section below "
                   "gives each exactly):\n")
        block = Block()
        for g in shown:
            lhs = (f"\\frac{{\\partial}}{{\\partial {_name_tex(g.name)}}}" if g.returned
                   else f"{_name_tex(g.name)}.\\mathtt{{grad}}")
            block.eq(lhs, _value(P, g.value, LINE_EM - 14) or "\\text{(below)}")
        out.append(block.render())
    elif not rec.totals:
        out.append("This pass returns no gradient.\n\n")
    return "".join(out)
