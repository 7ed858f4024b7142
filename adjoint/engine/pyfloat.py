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
