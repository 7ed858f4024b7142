"""The document: :func:`render_document` writes the preamble, the title, a reading guide and then, for
every variant (each on a new page), its :class:`_Variant` -- the sections in the order a person
would write them, a section identical to an earlier variant's replaced by a reference to it."""

from __future__ import annotations

import shlex

from adjoint.derivation import ProblemDerivation, derive_problem
from adjoint.derivation import values as E
from adjoint.render.latex.numbers import SHORT_FRACTION, SIG_DIGITS, format_rational
from adjoint.render.latex.section_gradients import GradientSections
from adjoint.render.latex.section_hooks import HookSections
from adjoint.render.latex.section_lagrangian import LagrangianSection
from adjoint.render.latex.section_model import ModelSections
from adjoint.render.latex.section_steps import StepSections
from adjoint.render.latex.text import esc, symbol_tex
from adjoint.render.latex.lines import wrap
from adjoint.values.numbers.symbolic import long_integers
from adjoint.render.latex.section_second import second_section


PREAMBLE = r"""\documentclass[11pt,a4paper]{article}
\usepackage[margin=2cm]{geometry}
\usepackage{amsmath,amssymb}
\usepackage{graphicx}
\setcounter{MaxMatrixCols}{40}
\allowdisplaybreaks
\setlength{\parindent}{0pt}
\setlength{\parskip}{0.7ex plus 0.3ex}
\raggedright
"""


def render_document(prediction) -> str:
    """The whole derivation of every variant of a solved problem (``adjoint.answer.prediction.Prediction``)
    as one standalone LaTeX document."""
    with long_integers():   # SymPy's LaTeX of an Integer is str(int), which Python limits
        if getattr(prediction.problem, "distributed", None) is not None:
            from adjoint.derivation.ddp import derive_distributed

            d, infos = derive_distributed(prediction)
            return wrap(typeset(d, infos))
        return wrap(typeset(derive_problem(prediction)))


def typeset(d: ProblemDerivation, ddp: list | None = None) -> str:
    """The document of a derivation record (``ddp``: a distributed file's DistributedInfo per variant,
    adjoint.derivation.ddp: its section ends each variant)."""
    out = [PREAMBLE]
    out.append(f"\\title{{The derivation of \\texttt{{{esc(d.name)}}}}}\n")
    out.append("\\author{written by \\texttt{adjoint latex}}\n\\date{}\n\\begin{document}\n\\maketitle\n")
    if d.description:
        out.append(esc(" ".join(d.description.split())) + "\n\n")
    if d.symbols:
        out.append("Symbols are replaced by the values of the problem's \\texttt{symbols:} ("
                   + ", ".join(f"${symbol_tex(k)} = {format_rational(E.q(v)).signed()}$"
                               for k, v in d.symbols.items()) + ").\n\n")
    out.append(_reading_guide(len(d.variants), d.notations))
    shared: dict = {}
    for i, v in enumerate(d.variants):
        if i:
            out.append("\\clearpage\n")          # each variant starts on its own page
        named = len(d.variants) > 1 or v.name != "default"
        simple = not v.stepped and v.error is None and len(v.units) == 1
        figure = graph_figure(d.path, v, i + 1, named)
        out.append(_simple(v, shared, named, figure) if simple else _stepped(v, shared, named, figure))
        if ddp is not None and getattr(ddp[i], "fsdp", False):
            from adjoint.render.latex.section_fsdp import fsdp_section
            out.append(fsdp_section(ddp[i]))
        elif ddp is not None:
            from adjoint.render.latex.section_ddp import DistributedSection
            out.append(DistributedSection(v, None).ddp_section(ddp[i]))
    out.append("\\end{document}\n")
    return "".join(out)


def _reading_guide(n: int, notations: set) -> str:
    which = ("one variant" if n == 1 else f"{n} variants, each with its own hooks; the model, forward pass and "
             "multipliers are derived once and referred to when a later variant shares them")
    return (
        "\\section*{How to read this document}\n"
        f"This file has {which}. For each: the model as equations (one line per named tensor, with the "
        "PyTorch operations it runs), the forward pass with numbers, the Lagrangian and the adjoint "
        "recursion that gives every gradient, every hook call in the order PyTorch fires them, and the final "
        "gradients written factor by factor.\n\n"
        "\\textbf{Notation.} $x_k$ is the $k$-th named intermediate tensor, $\\ell$ the loss, $\\lambda_k$ the "
        "multiplier of $x_k$ (it equals $\\partial\\ell/\\partial x_k$), and $\\tilde\\lambda_k$ the gradient "
        "PyTorch actually carries into $x_k$ when hooks change it. A vector (1-D tensor) is a column, written "
        "as a transposed row $[\\,a\\ \\ b\\,]^{\\top}$; a tensor with one element is written as a number. "
        "Sums, products, quotients, powers and functions of tensors act elementwise (broadcasting as in "
        "PyTorch); $\\odot$ is the elementwise product, juxtaposition the matrix product, $\\mathbf{1}$ a "
        "tensor of ones, $\\mathbf{1}[a>0]$ the elementwise indicator and $\\operatorname{sum}_{\\to n}$ a sum "
        "over broadcast dimensions back to shape $n$. $J^{\\top}\\lambda$ is a vector--Jacobian product: "
        "$(J^{\\top}\\lambda)_i = \\sum_j \\lambda_j\\,\\partial \\Phi_j/\\partial x_i$.\n\n"
        "\\textbf{Numbers} are exact unless they end in $\\ldots$: an integer, a terminating decimal of at most "
        f"{SIG_DIGITS} significant digits ($0.3$, $-1.847648$) or a fraction with numerator and denominator "
        f"below {SHORT_FRACTION} ($\\frac{{1}}{{3}}$) is printed as such; any other value shows its first "
        f"{SIG_DIGITS} significant digits, cut off (not rounded), followed by $\\ldots$. Hook arguments, "
        "returned values and final gradients also give their exact fraction. Closed forms (symbols, $\\tanh$, "
        "$\\sqrt{2}$) are kept when they are short; large tensors show their first and last rows and "
        "columns.\n\n" + _more_notation(notations))


def graph_file(index: int) -> str:
    """The name the picture of the ``index``-th variant (1-based) has beside the document."""
    return f"adjoint-graph-{index}.pdf"


def graph_figure(path: str, v, index: int, named: bool) -> str:
    """The backward graph, drawn by ``adjoint graph``: included when its PDF is beside the
    document (``adjoint latex --pdf`` puts it there), otherwise a line saying how to get it, so
    the document compiles either way."""
    name = graph_file(index)
    where = f" --variant {shlex.quote(v.name)}" if named else ""   # as a shell reads it (two words, a/b)
    hint = (f"(The picture of this graph: \\texttt{{adjoint graph {esc(path)}{esc(where)} -o {name}}} "
            "beside this file, then compile again.)")
    return ("\\subsection{The backward graph}\n"
            "The autograd nodes PyTorch builds (with their \\texttt{sequence\\_nr}), module calls as boxes, "
            "and every hook call, numbered in firing order.\n\n"
            f"\\IfFileExists{{{name}}}{{\\begin{{center}}\\includegraphics[width=\\linewidth,height=0.75\\textheight,"
            f"keepaspectratio]{{{name}}}\\end{{center}}}}{{{hint}}}\n\n")


#: what each notation beyond the algebra above means, in the order the reading guide lists them
_NOTATION = (
    ("TSub", "$a[i]$, $a[{:},1{:}3]$ index as Python does (PyTorch's \\texttt{select} and \\texttt{slice} views)"),
    ("TPlace", "$\\operatorname{place}^{n}_{[i]}(g)$ is the tensor of shape $n$ that is $g$ at $[i]$ and $0$ "
               "elsewhere: the gradient of an index"),
    ("TPut", "$a\\left[a[i] \\leftarrow v\\right]$ is $a$ with the elements $a[i]$ replaced by $v$: an in-place "
             "write through a view (PyTorch's \\texttt{CopySlices})"),
    ("reshape", "$\\operatorname{reshape}_{n}$, $\\operatorname{expand}_{n}$ (repeat along dims of size 1 to shape "
                "$n$), $\\operatorname{permute}$, $\\operatorname{transpose}$, $\\operatorname{cat}_{d}$, "
                "$\\operatorname{stack}_{d}$ and $\\operatorname{bmm}$ (a matrix product per batch entry) are "
                "PyTorch's ops of those names"),
    ("TJac", "$J_{f}^{\\top}\\lambda$ is the vector--Jacobian product of a function written as a whole (a layer, "
             "a loss, $\\operatorname{softmax}$), as its PyTorch node computes it"),
    ("prime", "$f'$ is the derivative of an elementwise function $f$, applied elementwise"),
    ("complex", "complex numbers are written $a + b\\mathrm{i}$; for complex tensors the gradients are PyTorch's "
                "conjugate Wirtinger derivatives: for the real loss $\\ell$ of $z = x + \\mathrm{i}y$, "
                "$\\partial\\ell/\\partial z$ here is $\\partial\\ell/\\partial x + \\mathrm{i}\\,\\partial\\ell/\\partial y$ "
                "(what \\texttt{z.grad} holds), and every $J^{\\top}\\lambda$ is the conjugate transpose "
                "$\\overline{J}^{\\top}\\lambda$: a formula such as $\\lambda\\,W$ reads $\\lambda\\,\\overline{W}$ and "
                "$\\lambda \\odot \\operatorname{sign}(x)$ takes $\\operatorname{sign}(x) = x/|x|$ (derivatives.yaml's "
                "\\texttt{grad * other.conj()}); the values shown are PyTorch's"),
)


def _more_notation(notations: set) -> str:
    """The notations of this document's formulas beyond the algebra, explained (none for most)."""
    views = {"reshape", "expand", "permute", "transpose", "cat", "stack", "bmm"}
    used = [text for key, text in _NOTATION if key in notations or (key == "reshape" and notations & views)]
    if not used:
        return ""
    return "\\textbf{More notation.} " + "; ".join(used) + ".\n\n"


class _View(ModelSections, LagrangianSection, HookSections, GradientSections, StepSections):
    """One unit (a forward pass and the backward pass through it) of a variant, as sections."""


def _title(v, many: bool) -> list:
    title = f"Variant \\texttt{{{esc(v.name)}}}" if many else "The derivation"
    out = [f"\\section{{{title}}}\n"]
    if v.description:
        out.append(esc(" ".join(str(v.description).split())) + "\n\n")
    return out


def _simple(v, shared: dict, many: bool, figure: str) -> str:
    """A variant without steps: one forward pass, one backward pass (v1's layout)."""
    w = _View(v, v.units[0])
    here = f"variant \\texttt{{{esc(v.name)}}}"
    out = _title(v, many)
    out.append(w.hooks_registered())
    out.append(figure)
    common = w.model() + w.forward() + w.lagrangian()
    if common in shared:
        out.append("\\subsection{Model, forward pass and multipliers}\nThe model, its forward pass and the "
                   f"adjoint recursion without hooks are exactly those of {shared[common]}"
                   " above; the symbols and values below refer to them.\n\n")
    else:
        shared[common] = here
        out.append(common)
    out.append(_once(shared, "boundaries", w.boundaries(), "Module boundaries", here))
    out.append(w.hook_calls())
    out.append(w.effects())
    out.append(_once(shared, "gradients", w.gradients(), "Final gradients", here))
    out.append(w.notes())
    return "".join(out)


def _stepped(v, shared: dict, many: bool, figure: str) -> str:
    """A variant with steps (or one PyTorch raised in): the steps, then each forward pass and each backward
    pass in the order they ran, then the error."""
    bare = _View(v, None)
    out = _title(v, many)
    out.append(bare.hooks_registered())
    out.append(figure)
    out.append(bare.steps_list())
    for u in v.units:
        if u.first_of_forward:
            w = _View(v, u, f"Forward pass {u.forward_number}: ")
            here = f"forward pass {u.forward_number} of variant \\texttt{{{esc(v.name)}}}"
            out.append(_once(shared, "model", w.model(), w.heading("The model"), here))
            out.append(_once(shared, "values", w.forward(), w.heading("Forward pass", "values"), here))
            if u.forward_calls:
                out.append(w.hook_calls(u.forward_calls))
        if u.backward_number is None:
            continue
        w = _View(v, u, f"Backward pass {u.backward_number}: ")
        here = f"backward pass {u.backward_number} of variant \\texttt{{{esc(v.name)}}}"
        if u.failed:
            out.append(w.heading("What it does before PyTorch raises", "what it does before PyTorch raises")
                       + "The backward pass stops at the error below; the multipliers are those it would compute.\n\n")
        title = "Lagrangian and adjoint recursion"
        second = second_pass(v, u.backward_number)
        if second and getattr(u, "second", None) is not None:
            info = next(s for s in v.steps if s.kind == "backward" and s.backward == u.backward_number)
            out.append(_once(shared, "second", second_section(u.second, u.gradients, w.heading("Second order",
                             "second order"), info.second["roots"]), w.heading("Second order", "second order"), here))
        elif second:
            out.append(w.heading("Second order", "second order") + second)
        else:
            out.append(_once(shared, "lagrangian", w.lagrangian(), w.heading(title, title), here))
        if not u.failed and not second:
            out.append(_once(shared, "boundaries", w.boundaries(), w.heading("Module boundaries"), here))
        out.append(w.hook_calls(u.backward_calls))
        if not u.failed and second:   # the hook-free derivation is the loss's, not this root's: no comparison
            out.append(_once(shared, "gradients", w.second_gradients(), w.heading("Final gradients", "gradients"),
                             here))
        elif not u.failed:
            out.append(w.effects())
            out.append(_once(shared, "gradients", w.gradients(), w.heading("Final gradients", "gradients"), here))
    if v.error is not None:
        out.append(bare.error_section(v.error))
    out.append(bare.notes())
    return "".join(out)


def _once(shared: dict, key: str, text: str, heading: str, here: str) -> str:
    """A section identical to an earlier one is replaced by a reference to it (``heading``: its title, as
    a subsection command or a plain title)."""
    if not text:
        return text
    body = text.split("\n", 1)[-1]             # its title may name the pass: compare what follows it
    if (key, body) in shared:
        head = heading if heading.startswith("\\subsection") else f"\\subsection{{{heading}}}\n"
        return f"{head}Exactly as in {shared[(key, body)]} above.\n\n"
    shared[(key, body)] = here
    return text


def second_pass(v, number) -> str:
    """For a backward pass from ``root:``/``roots:`` expressions: what it differentiates, in place of the
    forward's Lagrangian (whose multipliers are those of the loss, not of this root)."""
    from adjoint.render.latex.text import code
    info = next((s for s in v.steps if s.kind == "backward" and s.backward == number), None)
    if info is None or not info.second or not info.second["roots"]:
        return ""
    roots = ", ".join(code(r) for r in info.second["roots"])
    return ("This backward pass starts from " + roots + ", not from the loss. A gradient an earlier pass returned "
            "with \\texttt{create\\_graph=True} is itself a function of the inputs and parameters, computed by the "
            "recorded backward formulas; differentiating it again is the adjoint of the adjoint recursion "
            "(second derivatives: the gradient of a gradient penalty, a Hessian-vector product). The multipliers "
            "of the forward's Lagrangian above are those of the loss and do not apply here; the hook calls and "
            "the gradients below are what PyTorch computes, node by node, through the recorded graph and the "
            "forward's graph.\n\n")
