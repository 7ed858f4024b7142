"""Python's ``float("-inf")`` / ``float("inf")`` in problem expressions.

An infinite number is not an exact rational, so it is its own value: :class:`Infinite`. The
expression language accepts it only where PyTorch writes it into a tensor as given
(``masked_fill``'s value, the idiom of attention masks: ``scores.masked_fill(mask,
float("-inf"))``); anywhere else (arithmetic, a wrapped scalar) it is refused with one line.
``float(NUMBER)`` is the number itself (exact), as Python's float of a short decimal is what
PyTorch then rounds.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.errors import Loc, ProblemError
from adjoint.format.problem import Infinite
from adjoint.engine.graph import Tensor


#: the largest finite float64 (sys.float_info.max)
FLOAT64_MAX = Fraction(1.7976931348623157e308)
_SPELLINGS = {"inf": False, "+inf": False, "infinity": False, "+infinity": False, "-inf": True, "-infinity": True}


def python_float(args: list, kwargs: dict, loc: Loc):
    """``float(x)`` as Python evaluates it, for the values a problem expression has."""
    if kwargs or len(args) != 1:
        raise ProblemError(loc, "float() takes exactly one positional argument here, as in float(\"-inf\")")
    x = args[0]
    if isinstance(x, str):
        word = x.strip().lower()
        if word in _SPELLINGS:
            return Infinite(_SPELLINGS[word])
        if word in ("nan", "+nan", "-nan"):
            raise ProblemError(loc, "float('nan') is not modelled: write a finite number or float(\"-inf\")")
        raise ProblemError(loc, f"float() of the string {x!r}: only float(\"inf\") and float(\"-inf\") are allowed; "
                                "write other numbers as numbers (0.5)")
    if isinstance(x, Fraction) and not isinstance(x, bool):
        if abs(x) > FLOAT64_MAX:   # Python's OverflowError for an int, inf for a float: which, not known here
            raise ProblemError(loc, "float() of a number beyond float64's range is not modelled")
        return x   # a Python int beyond int64 (float(2 ** 64)) too: float() is Python's, no PyTorch Scalar
    if isinstance(x, Infinite):
        return x
    what = "a tensor" if isinstance(x, Tensor) else type(x).__name__
    raise ProblemError(loc, f"float() of {what} is not modelled here: float(\"-inf\") and float(NUMBER) are")
