"""Certified elements and tensors: their decisions and their text.

The certified kind of :class:`adjoint.values.exact.Exact` holds balls (:mod:`adjoint.values.numbers.balls`)
and small closed forms (:mod:`adjoint.values.numbers.forms`). This module reads them: each
element's sign (refining the balls until it is decided, else taking 0 and saying so), its
correctly rounded float64, its text (closed form, exact rational, or ``~`` and certified
digits), and :class:`Real`, one element as code that walks elements (the LaTeX printer,
SymPy element functions) sees it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import flint
import numpy as np

from adjoint.values.numbers import balls as Bl
from adjoint.values.numbers import forms as F
from adjoint.values.numbers.symbolic import fmpq_float, loaded, s_norm, s_str, s_sym, sympy

if TYPE_CHECKING:
    from adjoint.values.exact import Exact

fmpq = flint.fmpq


class Real:
    """One element of a certified tensor, for code that walks elements (the LaTeX printer,
    SymPy element functions): its closed form when it has one, else its ball."""

    __slots__ = ("tensor", "index")

    def __init__(self, tensor: "Exact", index: tuple):
        self.tensor = tensor
        self.index = index

    @property
    def form(self):
        return None if self.tensor.forms is None else self.tensor.forms[self.index]

    @property
    def ball(self):
        return self.tensor.balls[self.index]

    def sympy(self):  # noqa: F811  (the element method, not the module function)
        """The closed form, or an atom standing for the certified value."""
        if self.form is not None:
            return s_sym(F.to_sympy(self.form))
        return F.certified_atom(self)

    _sympy_ = sympy  # SymPy's sympify() asks an object for this (the method above, in the class body)

    def sign(self):
        return self.tensor.element_sign(self.index)

    def float(self) -> float:
        return float(self.tensor.floats_flat()[int(np.ravel_multi_index(self.index, self.tensor.shape))]) \
            if self.tensor.ndim else float(self.tensor.floats_flat()[0])

    def approx(self, dps: int):
        import mpmath
        b = self.tensor.ball_with_bits(self.index, int(dps * 3.33) + 8)
        if not b.is_finite():
            return None
        with mpmath.workdps(dps):
            man, exp = b.mid().man_exp() if b.mid() != 0 else (0, 0)
            return mpmath.ldexp(mpmath.mpf(int(man)), int(exp))

    def text(self) -> str:
        flat = int(np.ravel_multi_index(self.index, self.tensor.shape)) if self.tensor.ndim else 0
        return self.tensor.strings_flat()[flat]

    def __repr__(self) -> str:
        return f"Real({self.text()})"


def as_form(e):
    if type(e) is fmpq:
        return e
    if type(e) is Real:
        return e.form if e.form is not None else e
    if loaded():
        S = sympy().S
        if e is S.NaN:
            return F.NAN
        if e is S.Infinity:
            return F.INF
        if e is S.NegativeInfinity:
            return F.NINF
    return e


def balls_of_forms(forms: np.ndarray):
    """A recipe evaluating constant forms (fmpq, Special, SymPy, Real) at the context's precision."""
    def recipe():
        memo: dict = {}
        out = np.empty(forms.shape, dtype=object)
        flat = out.reshape(-1)
        for i, f in enumerate(forms.reshape(-1).tolist()):
            if type(f) is fmpq:
                flat[i] = flint.arb(f)
            elif type(f) is F.Special:
                flat[i] = flint.arb("nan")
            elif type(f) is Real:
                flat[i] = Bl.balls_at(f.tensor, flint.ctx.prec)[f.index]
            elif type(f) is F.Form:
                flat[i] = F.arb_of_sympy(s_sym(F.to_sympy(f)), memo)
            else:
                flat[i] = F.arb_of_sympy(f, memo)
        return out
    return recipe


def signs(x, undecided) -> np.ndarray:
    flat_b = x.balls.reshape(-1)
    forms = x.forms.reshape(-1) if x.forms is not None else None
    signs = np.asarray(Bl.signs(flat_b), dtype=object)
    if forms is not None:
        for i, f in enumerate(forms.tolist()):
            if type(f) is fmpq:
                signs[i] = (f > 0) - (f < 0)
            elif f is F.NAN:
                signs[i] = "nan"
            elif f is F.INF:
                signs[i] = 1
            elif f is F.NINF:
                signs[i] = -1
    open_ = np.array([s == 2 for s in signs.tolist()], dtype=bool)
    while open_.any() and x.prec < Bl.MAX_PREC:
        Bl.refine(x, Bl.next_precision(x.prec, None, 0))
        flat_b = x.balls.reshape(-1)
        idx = np.nonzero(open_)[0]
        fresh = np.asarray(Bl.signs(flat_b[idx]), dtype=object)
        signs[idx] = fresh
        open_[idx] = [s == 2 for s in fresh.tolist()]
    if open_.any():
        for i in np.nonzero(open_)[0].tolist():
            f = forms[i] if forms is not None else None
            if f is not None and type(f) is not Real:
                v = s_norm(F.to_sympy(f))
                if type(v) is fmpq or s_sym(v) == 0:
                    signs[i] = 0 if type(v) is not fmpq else (v > 0) - (v < 0)
                    open_[i] = False
                    continue
            signs[i] = 0
        if open_.any() and undecided is not None:
            undecided(open_.reshape(x.shape))
    return signs.reshape(x.shape)


def floats(x) -> list:
    flat_b = x.balls.reshape(-1)
    vals = np.asarray(Bl.certain_floats(flat_b, x.prec), dtype=object)
    forms = x.forms.reshape(-1) if x.forms is not None else None
    if forms is not None:
        for i, f in enumerate(forms.tolist()):
            if type(f) is F.Special:
                vals[i] = f.value
            elif type(f) is fmpq:
                vals[i] = fmpq_float(f)
    open_ = np.array([v != v for v in vals.tolist()], dtype=bool)
    if forms is not None:
        open_ &= np.array([f is not F.NAN for f in forms.tolist()], dtype=bool)
    while open_.any() and x.prec < Bl.MAX_PREC:
        idx = np.nonzero(open_)[0]
        Bl.refine(x, Bl.next_precision(x.prec, Bl.worst_accuracy(x.balls.reshape(-1)[idx]), 64))
        idx = np.nonzero(open_)[0]
        fresh = np.asarray(Bl.certain_floats(x.balls.reshape(-1)[idx], x.prec), dtype=object)
        vals[idx] = fresh
        open_[idx] = [v != v for v in fresh.tolist()]
    for i in np.nonzero(open_)[0].tolist():  # a ball straddling a rounding boundary at MAX_PREC
        vals[i] = float(x.balls.reshape(-1)[i])
    return [float(v) for v in vals.tolist()]


def strings(x, printer=None) -> list[str]:
    forms = x.forms.reshape(-1).tolist() if x.forms is not None else [None] * x.size
    wide = Bl.needs_digits(x.balls.reshape(-1))
    if forms is not None:
        wide &= np.array([f is None or type(f) is Real for f in forms], dtype=bool)
    while wide.any() and x.prec < Bl.MAX_PREC:
        idx = np.nonzero(wide)[0]
        Bl.refine(x, Bl.next_precision(x.prec, Bl.worst_accuracy(x.balls.reshape(-1)[idx]), Bl.DIGIT_BITS))
        wide &= Bl.needs_digits(x.balls.reshape(-1))
    flat_b = x.balls.reshape(-1).tolist()   # plain lists: no numpy indexing per element
    with Bl.workprec(x.prec):
        return [_text(f, b, w, printer) for f, b, w in zip(forms, flat_b, wide.reshape(-1).tolist())]


def _text(f, b, wide: bool, printer) -> str:
    if f is not None and type(f) is not Real:
        if type(f) is F.Special:
            return f.text
        plain = F.plain_text(f)
        if plain is not None:
            return plain
        return s_str(s_norm(F.to_sympy(f)), printer)
    if b.is_exact():
        return str(Bl.exact_value(b))
    return Bl.certified_text(b, wide)




_is_special_any = np.frompyfunc(lambda f: type(f) is F.Special, 1, 1)


def is_special(forms):
    """Mask of the IEEE specials (``inf``, ``-inf``, ``nan`` forms) among ``forms``, an object
    array: a bool array of its shape, made by one comprehension (no Python call per element)."""
    if type(forms) is not np.ndarray:
        return _is_special_any(forms)
    special = F.Special
    return np.array([type(f) is special for f in forms.reshape(-1).tolist()], dtype=bool).reshape(forms.shape)
