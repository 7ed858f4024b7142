"""``adjoint latex``: the hand derivation of a problem as a standalone LaTeX document.

For every variant the document derives, in the order a person would on paper: the model as
equations (one per named tensor, with the autograd nodes it creates), the forward pass
(symbolic, then with numbers), the Lagrangian ``L = loss + sum_k <lambda_k, Phi_k(...) - x_k>``
with its stationarity conditions and the adjoint recursion ``lambda = J^T lambda`` with
values, every hook call in firing order (what it is handed, identified with a multiplier,
and what a returned value changes upstream), and the final gradients written factor by
factor; for a variant with steps, each forward and backward pass in order, and PyTorch's
error when it raised. docs/latex.md describes the layout and the number-formatting rule.

The mathematics is not computed here: it is the derivation record (``adjoint.derivation``,
``VariantPrediction.derivation``), the only thing of the engine this package imports. All
mathematics is printed by :class:`DerivationPrinter`, a subclass of SymPy's ``LatexPrinter``:
exact values (``flint.fmpq`` or SymPy expressions) go through its number rule or SymPy's own
printing, the record's trees (``adjoint.values.mathtree``) through ``_print_T*`` methods.

The modules, from the bottom up:

* ``numbers.py``      the number rule and exact fractions
* ``widths.py``       how wide a piece of math LaTeX is; the line width
* ``chars.py``, ``text.py``  escaping text, code, names as math symbols
* ``printer.py``      ``DerivationPrinter``: every formula, number and tensor is typeset here
* ``layout.py``       packing equations into ``align*`` rows of the line width
* ``writer.py``       the helpers every section writes with (symbols, values, derivatives, naming a gradient)
* ``section_model.py``, ``section_lagrangian.py``, ``section_hooks.py``, ``section_gradients.py``,
  ``section_steps.py``  the sections, in document order
* ``document.py``     ``render_document`` / ``typeset``: preamble, reading guide, one section per variant

Nothing here imports torch.
"""

from adjoint.render.latex.document import render_document, typeset
from adjoint.render.latex.numbers import format_rational
from adjoint.render.latex.printer import DerivationPrinter
from adjoint.render.latex.text import code
from adjoint.render.latex.widths import tex_width

__all__ = ["DerivationPrinter", "code", "format_rational", "render_document", "tex_width", "typeset"]
