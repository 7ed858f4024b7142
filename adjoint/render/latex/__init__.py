"""``adjoint latex``: the hand derivation of a problem as a standalone LaTeX document.

For every variant the document derives, in the order a person would on paper: the model as
equations (one per named tensor, with the autograd nodes it creates), the forward pass
(symbolic, then with numbers), the Lagrangian ``L = loss + sum_k <lambda_k, Phi_k(...) - x_k>``
with its stationarity conditions and the adjoint recursion ``lambda = J^T lambda`` with
values, every hook call in firing order (what it is handed, identified with a multiplier,
and what a returned value changes upstream), and the final gradients written factor by
factor. docs/latex.md describes the layout and the number-formatting rule.

All mathematics is printed by :class:`DerivationPrinter`, a subclass of SymPy's
``LatexPrinter``: exact values (``flint.fmpq`` or SymPy expressions) go through its number
rule or SymPy's own printing, the expression trees built from the traced graph (``T*``
classes) through ``_print_T*`` methods. Numbers are never taken from floats: every value
shown is derived from the exact prediction (``VariantPrediction.graph`` / ``.forward``), and
the gradients PyTorch actually carries (hooks included) come from the engine's record
(``VariantPrediction.backward``).

The modules, from the bottom up:

* ``numbers.py``      the number rule, exact fractions, decimals of closed forms, equality of values
* ``widths.py``       how wide a piece of math LaTeX is; the line width
* ``text.py``         escaping text, code, names as math symbols
* ``trees.py``        the ``T*`` expression trees and their display simplifications
* ``vjp.py``          reverse mode on trees: J^T lambda as a tree
* ``symbolic.py``     scalar trees as SymPy expressions (local derivatives)
* ``expressions.py``  problem expressions (hook returns, declared backwards) as trees and source
* ``printer.py``      ``DerivationPrinter``: every formula, number and tensor is typeset here
* ``analysis.py``     one variant analysed from the exact graph: steps, multipliers, chain-rule paths
* ``layout.py``       packing equations into ``align*`` rows of the line width
* ``writer.py``       the helpers every section writes with (values, derivatives, naming a gradient)
* ``section_model.py``, ``section_lagrangian.py``, ``section_hooks.py``, ``section_gradients.py``
  the sections of a variant, in document order
* ``document.py``     ``render_document``: preamble, reading guide, one section per variant

Nothing here imports torch.
"""

from .document import render_document
from .numbers import format_rational
from .printer import DerivationPrinter
from .text import code
from .widths import tex_width

__all__ = ["DerivationPrinter", "code", "format_rational", "render_document", "tex_width"]
