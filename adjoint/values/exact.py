"""Exact tensors: rationals, certified reals, and SymPy closed forms.

An :class:`Exact` is an immutable n-d array of one of three kinds:

* ``rational``: every element an exact rational, held as integer numerators over one
  common denominator (:mod:`adjoint.values.numbers.rational`): the common case, vectorised;
* ``real``: certified numbers (:mod:`adjoint.values.numbers.balls`): one ball per element,
  recomputable at any precision through the tensor's recipe, and per element an optional
  small closed form (:mod:`adjoint.values.numbers.forms`): an exact rational, an IEEE special, or
  an expression such as ``tanh(3/8)`` while it stays small. Transcendental values of a file
  without free symbols are of this kind;
* ``elements``: an object array of single elements, each an ``fmpq`` or a SymPy expression
  (free symbols, and every closed form of a file that has free symbols, of any size; SymPy's
  ``oo``/``-oo``/``nan`` there): the closed-form mode.

Operations (:mod:`adjoint.values.arith`, :mod:`adjoint.values.pointwise`) keep the kinds apart and promote
rational < real < elements. A certified tensor whose every element turns out exact becomes
rational again, so rational work never pays for balls, and neither ever pays for SymPy.

The element functions (``s_*``) live in :mod:`adjoint.values.numbers.symbolic` and are re-exported
here: IEEE conventions (x/0 = +-inf, 0/0 = nan, sqrt of a negative = nan) and SymPy's
closed forms; SymPy is imported on first use only.
"""

from __future__ import annotations

from fractions import Fraction

import flint
import numpy as np

from adjoint.values import certified as C
from adjoint.values.numbers import balls as Bl
from adjoint.values.numbers import forms as F
from adjoint.values.numbers.rational import QArray
from adjoint.values.asdata import AsData
from adjoint.values.numbers.symbolic import (MAX_EXACT_EXPONENT, ExactLimit, check_exponent, fmpq_float, is_zero, loaded, long_integers,  # noqa: F401
                                has_symbols, memo_printer, s_approx, s_div, s_float, s_is_nan, s_is_nonfinite, s_log, s_mul, s_norm, s_pow,
                                s_sci, s_sign, s_sqrt, s_str, s_sym, sympy)

fmpq = flint.fmpq
Real = C.Real
_is_special = C.is_special
_Q0 = fmpq(0)
_Q1 = fmpq(1)

REPR_ELEMENTS = 12  # repr() shows every element up to this many, then the shape and the first few


def q(value) -> fmpq:
    """An exact rational from int, Fraction, fmpq or a SymPy Rational."""
    if type(value) is fmpq:
        return value
    if isinstance(value, Fraction):
        return fmpq(value.numerator, value.denominator)
    if isinstance(value, int):
        return fmpq(value)
    if loaded() and isinstance(value, sympy().Rational):
        return fmpq(int(value.p), int(value.q))
    raise TypeError(f"not an exact rational: {value!r}")


def _element(e):
    t = type(e)
    if t is fmpq:
        return e
    if t is Fraction:
        return fmpq(e.numerator, e.denominator)
    if t is int:
        return fmpq(e)
    return s_norm(e)


# ----------------------------------------------------------------------------- tensors

class Exact(AsData):
    """Immutable exact tensor (see the module docstring for the three kinds)."""

    __slots__ = ("shape", "kind", "qa", "elems", "balls", "prec", "forms", "recipe", "inputs", "negzero", "_memo")

    def __init__(self, a: np.ndarray | None = None, rational: bool | None = None):
        """From an object array of elements (fmpq, Fraction, int, SymPy); ``rational=True``
        promises every element is an fmpq."""
        self.negzero = None  # bool mask of zeros PyTorch holds as -0.0 (see adjoint.values.signed_zero)
        self._memo = None
        self.qa = self.elems = self.balls = self.forms = self.recipe = None
        self.inputs = ()
        self.prec = 0
        if a is None:
            return
        a = np.asarray(a, dtype=object)
        self.shape = tuple(a.shape)
        flat = a.reshape(-1).tolist()
        if rational or all(type(e) is fmpq for e in flat):
            qa = QArray.from_fmpq(flat, a.shape)
            if qa is not None:
                self.kind, self.qa = "rational", qa
                return
            self.kind, self.elems = "elements", a
            return
        flat = [_element(e) for e in flat]
        if any(has_symbols(e) for e in flat):
            self._set_elements(flat)
            return
        self._set_forms(flat)

    def _set_elements(self, flat: list) -> None:
        out = np.empty(len(flat), dtype=object)
        out[:] = [s_sym(e) if type(e) is not fmpq else e for e in flat]
        self.kind, self.elems = "elements", out.reshape(self.shape)

    def _set_forms(self, flat: list) -> None:
        """Certified values from constant elements (fmpq, SymPy constants, certified elements)."""
        forms = np.empty(len(flat), dtype=object)
        forms[:] = [C.as_form(e) for e in flat]
        forms = forms.reshape(self.shape)
        self.kind = "real"
        self.forms = forms
        self.recipe = C.balls_of_forms(forms)
        self.inputs = ()
        self.prec = Bl.PREC
        with Bl.workprec(Bl.PREC):
            self.balls = self.recipe()

    # ------------------------------------------------------------------ makers
    @staticmethod
    def from_q(qa: QArray) -> "Exact":
        out = Exact()
        out.shape, out.kind, out.qa = tuple(qa.shape), "rational", qa
        return out

    @staticmethod
    def from_elements(a: np.ndarray) -> "Exact":
        """The closed-form kind, as is (elements already fmpq or SymPy)."""
        out = Exact()
        out.shape, out.kind, out.elems = tuple(a.shape), "elements", a
        return out

    @staticmethod
    def certified(shape, recipe, inputs: tuple, forms: np.ndarray | None = None, prec: int | None = None,
                  settle: bool = True) -> "Exact":
        """A certified tensor: ``recipe(*balls of inputs)`` at the inputs' precision. Elements
        whose ball comes out exact (radius 0) are known exactly; when all are, the result is
        rational."""
        if prec is None:
            prec = min([i.prec for i in inputs if i.kind == "real"], default=Bl.PREC)
        with Bl.workprec(prec):
            balls = recipe(*[Bl.balls_at(i, prec) for i in inputs])
        out = Exact()
        out.shape, out.kind = tuple(shape), "real"
        out.balls = Bl.as_array(balls, tuple(shape))
        out.prec, out.recipe, out.inputs = prec, recipe, tuple(inputs)
        out.forms = forms
        return out._settled() if settle else out

    def _settled(self) -> "Exact":
        """Exact balls become rational forms; all elements exact: a rational tensor."""
        exact = np.asarray(Bl._exact(self.balls), dtype=bool)
        if self.forms is not None:
            exact &= ~np.asarray(_is_special(self.forms), dtype=bool)
        if exact.any():
            if self.forms is None:
                self.forms = np.empty(self.shape, dtype=object)
            flat_f = self.forms.reshape(-1)
            flat_b = self.balls.reshape(-1)
            for i in np.nonzero(exact.reshape(-1))[0].tolist():
                if type(flat_f[i]) is not fmpq:
                    flat_f[i] = Bl.exact_value(flat_b[i])
        if self.forms is None:
            return self
        flat = self.forms.reshape(-1).tolist()
        if all(type(f) is fmpq for f in flat):
            qa = QArray.from_fmpq(flat, self.shape)
            if qa is not None:
                out = Exact.from_q(qa)
                out.negzero = self.negzero
                return out
        return self

    @staticmethod
    def of(elements, shape) -> "Exact":
        """From a flat sequence of elements (fmpq, Fraction, int or SymPy) and a shape."""
        elements = list(elements)
        if all(type(e) is Fraction or type(e) is int for e in elements):
            return Exact.from_q(QArray.from_fractions(elements, tuple(shape)))
        flat = [_element(e) for e in elements]
        a = np.empty(len(flat), dtype=object)
        a[:] = flat
        return Exact(a.reshape(tuple(shape)))

    @staticmethod
    def scalar(value) -> "Exact":
        return Exact.of([value], ())

    @staticmethod
    def full(shape, value) -> "Exact":
        shape = tuple(shape)
        if isinstance(value, (int, Fraction)) or type(value) is fmpq:
            return Exact.from_q(QArray.full(shape, q(value)))
        value = s_norm(value)
        if type(value) is fmpq:
            return Exact.from_q(QArray.full(shape, value))
        a = np.empty(shape, dtype=object)
        a.fill(value)
        return Exact(a)

    @staticmethod
    def zeros(shape) -> "Exact":
        return Exact.full(shape, _Q0)

    # ------------------------------------------------------------------ inspection
    @property
    def rational(self) -> bool:
        return self.kind == "rational"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def a(self) -> np.ndarray:
        """The elements as an object array: fmpq, SymPy, or :class:`Real` (made on demand)."""
        memo = self._memos()
        if "a" not in memo:
            if self.kind == "rational":
                memo["a"] = self.qa.elements()
            elif self.kind == "elements":
                memo["a"] = self.elems
            else:
                out = np.empty(self.shape, dtype=object)
                flat = out.reshape(-1)
                forms = self.forms.reshape(-1) if self.forms is not None else None
                balls = self.balls.reshape(-1)
                for i, idx in enumerate(np.ndindex(*self.shape)):
                    f = forms[i] if forms is not None else None
                    if type(f) is fmpq:
                        flat[i] = f
                    elif type(f) is F.Special:
                        flat[i] = f.sympy()
                    elif f is None and balls[i].is_exact():
                        flat[i] = Bl.exact_value(balls[i])
                    else:
                        flat[i] = Real(self, idx)
                memo["a"] = out
        return memo["a"]

    def _memos(self) -> dict:
        if self._memo is None:
            self._memo = {}
        return self._memo

    def flat(self) -> list:
        return self.a.reshape(-1).tolist()

    def item(self):
        """The one element, exact: a ``flint.fmpq`` rational, a SymPy expression or a certified
        real (``float()`` gives its decimal). More than one element: PyTorch's own RuntimeError."""
        if self.size != 1:
            raise RuntimeError(f"a Tensor with {self.size} elements cannot be converted to Scalar")
        if self.kind == "rational":
            return self.qa.item()
        return self.a.reshape(-1)[0]

    # conversions, as a PyTorch tensor converts --------------------------------
    def __float__(self) -> float:
        """The decimal of a one-element value (the float64 nearest the exact value)."""
        if self.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return float(np.asarray(self._numbers(), dtype=np.float64).reshape(-1)[0])

    def tolist(self):
        """Nested Python floats (a 0-d value: one float), as ``Tensor.tolist()`` gives."""
        return self._numbers()

    def __array__(self, dtype=None, copy=None):
        """``numpy.asarray(value)``: float64 (the nearest double of every exact element)."""
        out = np.asarray(self._numbers(), dtype=np.float64)
        return out if dtype is None else out.astype(dtype)

    def _repr_latex_(self) -> str:
        """A notebook shows a value as exact mathematics (a matrix for 2-d, a column for 1-d)."""
        def cell(e):
            with long_integers():
                return sympy().latex(s_sym(e))
        if self.size > REPR_ELEMENTS * 4 or self.ndim > 2:
            return f"$\\text{{tensor of shape }}{list(self.shape)}$"
        if self.ndim == 0:
            return f"${cell(self.item())}$"
        rows = [[cell(e) for e in row] for row in (self.a if self.ndim == 2 else self.a.reshape(1, -1))]
        body = " \\\\ ".join(" & ".join(r) for r in rows)
        matrix = f"\\begin{{bmatrix}} {body} \\end{{bmatrix}}"
        return f"${matrix}" + ("^{\\top}$" if self.ndim == 1 and self.size > 1 else "$")

    def _numbers(self):
        floats = self.floats()
        if floats is None:
            names = sorted({str(s) for e in self.a.reshape(-1) for s in getattr(e, "free_symbols", ())})
            raise TypeError(f"this value is a closed form in the free symbol(s) {', '.join(names)}, not a number; "
                            "solve with numeric=True (solve --numeric) to substitute the file's symbols:, or "
                            "use .item() / .strings() for the exact form")
        return floats

    def is_symbolic(self) -> bool:
        if self.kind != "elements":
            return False
        memo = self._memos()
        if "symbolic" not in memo:
            memo["symbolic"] = any(has_symbols(e) for e in self.elems.reshape(-1).tolist())
        return memo["symbolic"]

    def has_nonfinite(self) -> bool:
        if self.kind == "rational":
            return False
        if self.kind == "real":
            return self.forms is not None and bool(np.any(_is_special(self.forms)))
        return any(s_is_nonfinite(e) for e in self.elems.reshape(-1))

    def rational_balls(self, prec: int) -> np.ndarray:
        """Balls of a rational tensor at ``prec`` bits (made once per precision, and kept with
        the integer array: a weight's serve every solve of the problem)."""
        memo = self.qa._ball_memo()
        key = ("balls", prec)
        if key not in memo:
            with Bl.workprec(prec):
                memo[key] = Bl.of_rational(self.qa.num, self.qa.den)
        return memo[key]

    def form_array(self) -> np.ndarray | None:
        """Per element its closed form (fmpq for rationals), or None when no element has one."""
        if self.kind == "rational":
            return self.a
        if self.kind == "real":
            return self.forms
        return self.elems

    # ------------------------------------------------------------------ certified details
    def element_sign(self, index) -> int | str | None:
        return self.signs(lambda where: None).reshape(-1)[int(np.ravel_multi_index(index, self.shape))] \
            if self.ndim else self.signs(lambda where: None).reshape(-1)[0]

    def ball_with_bits(self, index, bits: int):
        """The ball of one element with ``bits`` of relative accuracy (or as close as refinement gets)."""
        while True:
            b = self.balls[index]
            if b.rel_accuracy_bits() >= bits or self.prec >= Bl.MAX_PREC or b.is_exact():
                return b
            Bl.refine(self, Bl.next_precision(self.prec, b.rel_accuracy_bits() if not b.contains(0) else None, bits))

    def signs(self, undecided=None) -> np.ndarray:
        """Per element: -1, 0, 1, 'nan' (or None: depends on free symbols), as an object array.
        A certified element whose ball contains zero is recomputed at higher precision; past
        :data:`balls.MAX_PREC` its closed form decides, else it counts as 0 and
        ``undecided(mask)`` is told which elements were so taken."""
        if self.kind == "rational":
            return np.asarray(self.qa.signs().astype(object), dtype=object)
        if self.kind == "elements":
            out = np.empty(self.shape, dtype=object)
            out.reshape(-1)[:] = [s_sign(e) for e in self.elems.reshape(-1)]
            return out
        return C.signs(self, undecided)

    def zero_mask(self) -> np.ndarray:
        """Exactly-zero elements (certified ones decided as :meth:`signs` does)."""
        if self.kind == "rational":
            return self.qa.zeros()
        if self.kind == "elements":
            return np.array([e == 0 for e in self.elems.reshape(-1)], dtype=bool).reshape(self.shape)
        s = self.signs()
        return np.array([v == 0 for v in s.reshape(-1).tolist()], dtype=bool).reshape(self.shape)

    # ------------------------------------------------------------------ output
    def floats(self):
        """Nested list of floats, or None when any element is symbolic."""
        if self.kind == "rational":
            memo = self._memos()
            if "floats_array" not in memo:
                memo["floats_array"] = self.qa.floats()
            f = memo["floats_array"]
            return f.tolist() if self.ndim else float(f.reshape(-1)[0])
        vals = self.floats_flat()
        if vals is None:
            return None
        return nest(list(vals), self.shape)

    def floats_flat(self):
        memo = self._memos()
        if "floats" not in memo:
            if self.kind == "rational":
                memo["floats"] = self.qa.floats().reshape(-1).tolist()
            elif self.kind == "elements":
                vals = [s_float(e) for e in self.elems.reshape(-1)]
                memo["floats"] = None if any(v is None for v in vals) else vals
            else:
                memo["floats"] = C.floats(self)
        return memo["floats"]

    def strings(self, printer=None):
        """Nested lists of the elements' exact text (``printer``: a shared SymPy printer from
        :func:`adjoint.values.numbers.symbolic.memo_printer`, for closed forms across tensors)."""
        return nest(self.strings_flat(printer), self.shape)

    def strings_flat(self, printer=None) -> list[str]:
        memo = self._memos()
        if "strings" not in memo:
            if self.kind == "rational":
                memo["strings"] = self.qa.strings()
            elif self.kind == "elements":
                flat = self.elems.reshape(-1).tolist()
                if printer is None and any(type(e) is not fmpq for e in flat):
                    printer = memo_printer()
                memo["strings"] = [s_str(e, printer) for e in flat]
            else:
                memo["strings"] = C.strings(self, printer)
        return memo["strings"]

    def ints(self):
        """Nested list of Python ints (an integer tensor's values)."""
        vals = [int(e) if type(e) is fmpq else int(s_sym(e)) for e in self.a.reshape(-1).tolist()]
        return nest(vals, self.shape)

    def __repr__(self) -> str:
        if self.size <= REPR_ELEMENTS:
            return f"Exact({self.strings()!r})"
        first = ", ".join(s_str(e) for e in self.flat()[:4])
        return f"Exact(shape={list(self.shape)}, [{first}, ...])"

    # ------------------------------------------------------------------ structure
    def restructured(self, fn) -> "Exact":
        """The same elements rearranged by ``fn`` (a numpy reshaping / transposing / indexing
        function), the -0.0 mask rearranged with them."""
        if self.kind == "rational":
            out = Exact.from_q(self.qa.restructured(fn))
        elif self.kind == "elements":
            out = Exact.from_elements(np.asarray(fn(self.elems), dtype=object))
        else:
            def recipe(b):
                return np.asarray(fn(b), dtype=object)
            forms = np.asarray(fn(self.forms), dtype=object) if self.forms is not None else None
            out = Exact.certified(np.shape(recipe(self.balls)), recipe, (self,), forms, self.prec, settle=False)
        if self.negzero is not None:
            out.negzero = np.asarray(fn(self.negzero), dtype=bool)
        return out

    def reshape(self, shape) -> "Exact":
        shape = tuple(shape)
        return self.restructured(lambda a: a.reshape(shape))

    def transpose(self) -> "Exact":
        if self.kind == "rational" and self.ndim == 2:
            from adjoint.values.numbers.rational import transpose
            out = Exact.from_q(transpose(self.qa))
            if self.negzero is not None:
                out.negzero = self.negzero.T.copy()
            return out
        return self.restructured(lambda a: a.T.copy() if a.ndim == 2 else a)

    def broadcast_to(self, shape) -> "Exact":
        shape = tuple(shape)
        if shape == self.shape:
            return self
        return self.restructured(lambda a: np.broadcast_to(a, shape).copy())

    def with_negzero(self, mask) -> "Exact":
        """The same values, marking which zeros are -0.0 in PyTorch's floats."""
        if mask is None:
            return self
        out = self._copy()
        out.negzero = mask
        return out

    def _copy(self) -> "Exact":
        out = Exact()
        for name in ("shape", "kind", "qa", "elems", "balls", "prec", "forms", "recipe", "inputs"):
            setattr(out, name, getattr(self, name))
        out._memo = self._memo
        return out

    def as_sym(self) -> "Exact":
        """The same values in the closed-form kind (SymPy elements)."""
        if self.kind == "elements":
            return self
        a = np.empty(self.shape, dtype=object)
        a.reshape(-1)[:] = [s_sym(e) for e in self.a.reshape(-1).tolist()]
        out = Exact.from_elements(a)
        out.negzero = self.negzero
        return out

    def map(self, fn) -> "Exact":
        """Elementwise fn(x) -> element; result re-normalised. ``fn`` gets fmpq, SymPy or
        :class:`Real` elements (``s_sym`` turns any of them into SymPy)."""
        out = np.empty(self.shape, dtype=object)
        flat = out.reshape(-1)
        for i, e in enumerate(self.a.reshape(-1).tolist()):
            flat[i] = s_norm(fn(e))
        if self.kind == "elements":
            if all(type(e) is fmpq for e in flat.tolist()):
                return Exact(out, True)
            return Exact.from_elements(out)
        return Exact(out)

    def subs(self, mapping: dict) -> "Exact":
        if self.kind != "elements":
            return self
        return self.map(lambda e: s_sym(e).xreplace(mapping))



def nest(vals: list, shape: tuple[int, ...]):
    """A flat row-major list as nested lists of ``shape`` (the element itself for shape ())."""
    if not shape:
        return vals[0]
    a = np.empty(len(vals), dtype=object)
    a[:] = vals
    return a.reshape(shape).tolist()


def _to_sym_array(a: np.ndarray) -> np.ndarray:
    out = np.empty(a.shape, dtype=object)
    flat = out.reshape(-1)
    for i, e in enumerate(a.reshape(-1).tolist()):
        flat[i] = s_sym(e)
    return out
