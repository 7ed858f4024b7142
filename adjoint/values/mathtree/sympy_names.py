"""SymPy functions named in the op registry's ``math`` entries, resolved on first use.

Every op module declares how it reads in the derivation (``Fn(name, tex, vjp, sympy)``) when it
is imported, and a solve imports every op module; a problem of rationals must not load SymPy for
that (docs/values.md). So an entry names its SymPy function (:class:`SymPyName`), which is
looked up, or made, only when a one-element derivation calls it. relu, its derivative (the
indicator 1[x > 0]) and the sigmoid are opaque SymPy functions of their own, which the LaTeX
printer typesets by their class name (``_print_Relu``)."""

from __future__ import annotations

from typing import Callable

from adjoint.values.numbers.symbolic import sympy as load_sympy


class SymPyName:
    """The SymPy function ``name`` (``sympy.Max``), or what ``make()`` builds, on first call."""

    __slots__ = ("name", "_make", "_fn")

    def __init__(self, name: str, make: Callable | None = None):
        self.name = name
        self._make = make
        self._fn = None

    def resolve(self):
        if self._fn is None:
            self._fn = self._make() if self._make is not None else getattr(load_sympy(), self.name)
        return self._fn

    def __call__(self, *args):
        return self.resolve()(*args)

    def __repr__(self) -> str:
        return f"SymPyName({self.name!r})"


def _opaque(name: str, doc: str):
    def make():
        return type(name, (load_sympy().Function,), {"nargs": 1, "__doc__": doc, "__module__": __name__})
    return make


Relu = SymPyName("Relu", _opaque("Relu", "relu as an opaque function (its derivative is written with Indicator)."))
Indicator = SymPyName("Indicator", _opaque("Indicator", "The indicator 1[x > 0] (PyTorch's relu'(x), 0 at x = 0)."))
Sigmoid = SymPyName("Sigmoid", _opaque("Sigmoid", "The logistic sigmoid as an opaque function."))
