"""Value backends: what a tensor's value is, and the arithmetic the op rules are written in.

Every op rule (:mod:`adjoint.engine.ops`) computes through a backend ``B`` handed to it, never on
numbers directly, so one rule serves every answer mode:

* :class:`adjoint.values.backends.exact.ExactBackend`: exact rationals (python-flint), closed forms
  (SymPy) for free symbols and transcendentals, IEEE specials where PyTorch makes them, and
  the -0.0 bookkeeping PyTorch's floats need (the default: ``adjoint solve``).

A backend provides: construction (``literal``, ``scalar``, ``zeros``, ``full``), queries
(``shape``, ``numel``, ``any_zero``, ``all_zero``), broadcasting arithmetic (``add sub mul
div neg pow``), elementwise functions (``relu tanh sigmoid exp log sin cos sqrt abs sgn``),
selections (``mask``, ``where``, ``select_positive``, ``negate_at_negzero``), structure
(``reshape``, ``t2``, ``broadcast_to``, ``sum_to``), products (``matmul2d``, ``outer``) and
reductions (``total``); and ``after_op``, the backend's own checks after each op's forward.
"""
