"""Complex tensor declarations: ``{value: RE, imag: IM, dtype: complex128}``.

An input or a parameter of dtype ``complex64`` or ``complex128`` is written as its real part
(``value``, any real literal: a nested list of numbers) and its imaginary part (``imag``, a
literal of the same shape; omitted, it is zero). Every number is exact, as everywhere, so an
element is the Gaussian rational ``RE + IM*i``. Free symbols and side files are not read as
complex parts (refused with the line).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from adjoint.format.checks import boolean, mapping
from adjoint.format.errors import Loc, ProblemError
from adjoint.format.literals import parse_literal
from adjoint.format.loader import YMap, YScalar
from adjoint.format.problem import Literal, TensorDecl

COMPLEX_DTYPES = ("complex64", "complex128")


@dataclass(frozen=True)
class ComplexLiteral(Literal):
    """A complex tensor literal: ``items`` are the real parts, ``imag`` the imaginary parts."""

    imag: Literal | None = None


def is_complex_node(node) -> bool:
    """A mapping whose ``dtype`` names a complex dtype."""
    if not isinstance(node, YMap):
        return False
    d = node.get("dtype")
    return isinstance(d, YScalar) and d.text in COMPLEX_DTYPES


def complex_decl(name: str, node: YMap, loc: Loc, what: str, default_rg: bool) -> TensorDecl:
    """``{value: RE, imag: IM, dtype: complex64|complex128, requires_grad: BOOL}``."""
    mapping(node, what, ("value", "dtype"), ("imag", "requires_grad"))
    dtype = node.get("dtype").text
    rg_node = node.get("requires_grad")
    rg = boolean(rg_node, f"requires_grad of {what}") if rg_node is not None else default_rg
    re = parse_literal(node.get("value"), what)
    _numbers_only(re, node.get("value").loc, what, "value")
    if node.get("imag") is not None:
        im = parse_literal(node.get("imag"), f"the imag of {what}")
        _numbers_only(im, node.get("imag").loc, what, "imag")
        if tuple(im.shape) != tuple(re.shape):
            raise ProblemError(node.get("imag").loc, f"the imag of {what} has shape {list(im.shape)} but its value has "
                                                     f"shape {list(re.shape)}; give imag the value's shape")
    else:
        n = 1
        for d in re.shape:
            n *= d
        im = Literal(re.shape, (Fraction(0),) * n, node.loc)
    lit = ComplexLiteral(re.shape, re.items, node.loc, imag=im)
    return TensorDecl(name, lit, rg, loc, dtype)


def _numbers_only(lit: Literal, loc: Loc, what: str, key: str) -> None:
    if not isinstance(lit.items, tuple):
        raise ProblemError(loc, f"the {key} of complex {what} is read from a side file, which is not read as a complex "
                                "part; write the numbers in the file")
    if lit.symbols:
        raise ProblemError(loc, f"the {key} of complex {what} holds the free symbol '{lit.symbols[0]}'; complex "
                                "tensors hold numbers only")
    if lit.negzero:
        raise ProblemError(loc, f"the {key} of complex {what} holds a -0.0, whose sign a complex part does not keep "
                                "in adjoint yet; write 0 (or make the tensor real)")
