"""The number systems values are made of: exact rationals as integer arrays over one denominator
(``rational``), certified balls and their refinement (``balls``), small closed forms
(``forms``), SymPy elements, loaded on first use (``symbolic``), and one record per elementary
function (``elementary``). The tensors of :mod:`adjoint.values` are built on these; they import
nothing else of adjoint."""
