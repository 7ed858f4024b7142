"""The values layer: what a value is and how it is computed with, exactly or not.

``exact`` is the tensor (rational, certified or closed-form elements), ``certified`` its
certified elements, ``arith`` its arithmetic with ``pointwise`` (elementwise functions and
sign selections), ``joins`` (concatenation, stacking, writes into a part) and ``ieee``
(infinities and NaN); ``signed_zero`` tracks -0.0 and ``strides`` memory layout. The
answer modes' backends (exact, float64, structure) and the number systems under them live in
``backends``. It may import :mod:`adjoint.format` (for its error type) and nothing above.
"""
