"""The document: :func:`render_document` writes the preamble, the title, a reading guide and then, for
every variant (each on a new page), its :class:`_Variant` -- the sections in the order a person
would write them, a section identical to an earlier variant's replaced by a reference to it."""

from __future__ import annotations

from ...derivation import ProblemDerivation, derive
from ...derivation import values as E
from .numbers import SHORT_FRACTION, SIG_DIGITS, format_rational
from .section_gradients import GradientSections
from .section_hooks import HookSections
from .section_lagrangian import LagrangianSection
from .section_model import ModelSections
from .text import esc, symbol_tex


PREAMBLE = r"""\documentclass[11pt,a4paper]{article}
\usepackage[margin=2cm]{geometry}
\usepackage{amsmath,amssymb}
\setcounter{MaxMatrixCols}{40}
\allowdisplaybreaks
\setlength{\parindent}{0pt}
\setlength{\parskip}{0.7ex plus 0.3ex}
\raggedright
"""


def render_document(prediction) -> str:
    """The whole derivation of every variant of a solved problem (``adjoint.prediction.Prediction``)
    as one standalone LaTeX document."""
    return typeset(derive(prediction))


def typeset(d: ProblemDerivation) -> str:
    """The document of a derivation record."""
    out = [PREAMBLE]
    out.append(f"\\title{{The derivation of \\texttt{{{esc(d.name)}}}}}\n")
    out.append("\\author{written by \\texttt{adjoint latex}}\n\\date{}\n\\begin{document}\n\\maketitle\n")
    if d.description:
        out.append(esc(" ".join(d.description.split())) + "\n\n")
    if d.symbols:
        out.append("Symbols are replaced by the values of the problem's \\texttt{symbols:} ("
                   + ", ".join(f"${symbol_tex(k)} = {format_rational(E.q(v)).signed()}$"
                               for k, v in d.symbols.items()) + ").\n\n")
    out.append(_reading_guide(len(d.variants)))
    shared: dict[str, str] = {}
    for i, v in enumerate(d.variants):
        if i:
            out.append("\\clearpage\n")          # each variant starts on its own page
        named = len(d.variants) > 1 or v.name != "default"
        out.append(_Variant(v, v.units[-1]).render(shared, named))
    out.append("\\end{document}\n")
    return "".join(out)


def _reading_guide(n: int) -> str:
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
        "columns.\n\n")


class _Variant(ModelSections, LagrangianSection, HookSections, GradientSections):
    """One variant's section of the document."""

    # ---- entry ---------------------------------------------------------------
    def render(self, shared: dict, many: bool) -> str:
        v = self.vd
        title = f"Variant \\texttt{{{esc(v.name)}}}" if many else "The derivation"
        out = [f"\\section{{{title}}}\n"]
        desc = self.vd.description
        if desc:
            out.append(esc(" ".join(str(desc).split())) + "\n\n")
        out.append(self.hooks_registered())
        common = self.model() + self.forward() + self.lagrangian()
        if common in shared:
            out.append("\\subsection{Model, forward pass and multipliers}\nThe model, its forward pass and the "
                       f"adjoint recursion without hooks are exactly those of variant \\texttt{{{esc(shared[common])}}}"
                       " above; the symbols and values below refer to them.\n\n")
        else:
            shared[common] = v.name
            out.append(common)
        out.append(self._once(shared, "boundaries", self.boundaries(), "Module boundaries"))
        out.append(self.hook_calls())
        out.append(self.effects())
        out.append(self._once(shared, "gradients", self.gradients(), "Final gradients"))
        out.append(self.notes())
        return "".join(out)

    def _once(self, shared: dict, key: str, text: str, title: str) -> str:
        """A section identical to an earlier variant's is replaced by a reference to it."""
        if not text:
            return text
        if (key, text) in shared:
            return (f"\\subsection{{{title}}}\nExactly as in variant \\texttt{{{esc(shared[(key, text)])}}} "
                    "above.\n\n")
        shared[(key, text)] = self.vd.name
        return text
