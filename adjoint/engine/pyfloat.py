"""A Python float that ``x.item()`` of a float tensor gives, exact when rational.

adjoint's Python numbers are :class:`~fractions.Fraction`, and a number's type, int or float,
is read from how the file writes it (``3`` or ``3.0``: :func:`adjoint.engine.pyerrors.number_type`).
``x.item()`` of a float tensor is a Python float whatever its value, ``3.0`` too, and one
PyTorch refuses where it takes an int (a size: ``x.view(n)``'s TypeError names ``float``). So it
is a :class:`PyFloat`, a Fraction that says so (:func:`adjoint.engine.pyerrors.type_name`), and
stays one through arithmetic as Python's floats do (``x.item() * 2`` is a float): each operator
wraps what Fraction's gives. Comparisons, ``bool`` and hashing are Fraction's.
"""

from __future__ import annotations

from fractions import Fraction


class PyFloat(Fraction):
    __slots__ = ()

    def __repr__(self) -> str:
        return f"PyFloat({self})"


def _wrapped(name: str):
    base = getattr(Fraction, name)

    def op(self, *others):
        r = base(self, *others)   # (Fraction's // and % of two Fractions give an int: a float here too)
        if isinstance(r, (int, Fraction)) and not isinstance(r, (bool, PyFloat)):
            return PyFloat(r)
        return r

    op.__name__ = name
    return op


def is_int(v) -> bool:
    """A Python int of the problem language: a whole Fraction that is not a PyFloat (nor a bool)."""
    return isinstance(v, Fraction) and not isinstance(v, PyFloat) and v.denominator == 1


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
              "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__", "__neg__", "__pos__",
              "__abs__"):
    setattr(PyFloat, _name, _wrapped(_name))


#: the operators a number expression of literals may use, as Python applies them to its own numbers
_PY_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b,
           "//": lambda a, b: a // b, "**": lambda a, b: a ** b}


def python_number(e):
    """The number Python itself computes for ``e`` when it is made of number literals, unary minus
    and arithmetic alone (``0.1 + 0.2`` is 0.30000000000000004, where adjoint's exact numbers
    hold 3/10), or None for anything else. A literal is the int or the correctly rounded double
    Python parses (``float(Fraction)`` rounds the same); each operator then rounds as Python's
    floats do."""
    from adjoint.format import syntax as S
    if isinstance(e, S.Num) and isinstance(e.value, Fraction):
        return int(e.value) if e.is_int else float(e.value)
    if isinstance(e, S.Neg):
        v = python_number(e.operand)
        return None if v is None else -v
    if isinstance(e, S.Bin) and e.op in _PY_OPS:
        a, b = python_number(e.left), python_number(e.right)
        if a is None or b is None:
            return None
        try:
            v = _PY_OPS[e.op](a, b)
        except (ArithmeticError, ValueError):
            return None
        return v if isinstance(v, (int, float)) else None   # (a negative number's fractional power: complex)
    return None
