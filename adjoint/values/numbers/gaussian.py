"""Exact complex scalars: :class:`Gaussian` rationals and the text of a complex element,
defined in :mod:`adjoint.format.gaussian` (the expression parser makes them) and used here by
the values layer (:mod:`adjoint.values.complexes`)."""

from adjoint.format.gaussian import Gaussian, complex_text

__all__ = ["Gaussian", "complex_text"]
