"""The float64 backend: the same engine on numpy float64 arrays (``--float64``).

For models too large for exact arithmetic: every op rule runs unchanged on IEEE doubles, so
the node chain, the hook calls and their order are PyTorch's, and the numbers are what a
float64 PyTorch run gives up to its own rounding (summation order differs). IEEE itself makes
the infinities, NaNs and signed zeros PyTorch makes (``x / 0``, ``sqrt'(0)``, ``-0.0``), so
nothing is tracked on the side and nothing is refused: a value beyond float64's range is
``inf``, as in PyTorch.

A value is a :class:`F64`: the array, with the JSON fields of the contract (``value``: the
floats; ``exact``: null, since this mode has no exact values). Free symbols need numbers
(``symbols:``): a literal holding an unbound symbol is refused.
"""

from __future__ import annotations

from fractions import Fraction

import math
import os
from contextlib import contextmanager

import numpy as np

from adjoint.values.backends.composed import Composed
from adjoint.format.errors import ProblemError
from adjoint.values.backends.inexact import NoExactChecks
from adjoint.values.backends import float64_conv
from adjoint.values.asdata import AsData

_SIGN_KEYS = (-1, 0, 1, "nan")


class F64(AsData):
    """An immutable float64 tensor value."""

    __slots__ = ("a",)

    def __init__(self, a):
        self.a = np.asarray(a, dtype=np.float64)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.a.shape)

    @property
    def size(self) -> int:
        return int(self.a.size)

    @property
    def ndim(self) -> int:
        return self.a.ndim

    def floats(self):
        return self.a.tolist() if self.a.ndim else float(self.a)

    def strings(self, printer=None):
        """No exact text in this mode (the contract's ``exact`` is null)."""
        return None

    def flat(self) -> list[float]:
        return self.a.reshape(-1).tolist()

    def ints(self):
        """Nested Python ints (an integer tensor's values)."""
        out = self.a.astype(np.int64)
        return out.tolist() if out.ndim else int(out)

    def equals(self, other) -> bool:
        """The same doubles (nan equals nan; -0.0 equals 0.0, as ``==`` has it)."""
        return isinstance(other, F64) and self.shape == other.shape and bool(
            np.array_equal(self.a, other.a, equal_nan=True))

    def item(self) -> float:
        return float(self.a.reshape(-1)[0])

    def __repr__(self) -> str:
        return f"F64({self.floats()!r})"


#: the constants derivatives.yaml's log2 and log10 backward divide by (the doubles those literals are)
LN_CONSTANTS = {2: 0.6931471805599453, 10: 2.3025850929940456}


#: Dekker's splitting constant (2**27 + 1), and where his product stops being exact: an operand
#: whose split overflows, a product whose low part underflows
_SPLITTER = 134217729.0
_SPLIT_LIMIT = 2.0 ** 995
_TINY = 2.0 ** -960


def _two_product(a, b):
    """``a * b`` as ``p + e`` exactly (Dekker), elementwise, within the limits above."""
    p = a * b
    t = _SPLITTER * a
    ah = t - (t - a)
    al = a - ah
    t = _SPLITTER * b
    bh = t - (t - b)
    bl = b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _two_sum(a, b):
    """``a + b`` as ``s + e`` exactly (Knuth), elementwise, barring overflow."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _v(a) -> F64:
    return F64(a)


def _complex(re: np.ndarray, im: np.ndarray) -> np.ndarray:
    """The complex128 array of these parts (set, not ``re + 1j * im``, which makes nan of an inf)."""
    out = np.empty(np.broadcast_shapes(np.shape(re), np.shape(im)), dtype=np.complex128)
    out.real, out.imag = re, im
    return out


def _signed_zeros(a: np.ndarray, lit) -> np.ndarray:
    """The literal's floats with its written -0.0 (numpy's float64 carries the sign as PyTorch's does)."""
    mask = lit.negzero_mask()
    return a if mask is None else np.where(mask, -0.0, a)


class Float64Backend(NoExactChecks, Composed):
    """numpy float64 values; the method API of :class:`adjoint.values.backends.exact.ExactBackend`."""

    name = "float64"
    max_elements = 100_000_000   # per tensor: 800 MB of doubles
    closed = False

    def __init__(self, dtype: str = "float32", symbols: dict | None = None):
        self.dtype = dtype
        self.symbols = symbols

    # ------------------------------------------------------------------ construction
    def literal(self, lit):
        if not lit.symbols:
            a = lit.memo.get("float64")
            if a is None:
                items = lit.items
                a = (np.array([float(e) for e in items], dtype=np.float64) if isinstance(items, tuple)
                     else items.floats()).reshape(lit.shape)
                a = _signed_zeros(a, lit)
                a.flags.writeable = False
                lit.memo["float64"] = a
            return F64(a)
        out = []
        for e in lit.items:
            name = getattr(e, "name", None)
            if name is None:
                out.append(float(e))
            elif self.symbols is not None and name in self.symbols:
                out.append(float(self.symbols[name] * e.coeff))
            else:
                raise ProblemError(lit.loc, f"free symbol '{name}' has no value, and float64 mode computes with "
                                            f"numbers; add symbols: {{{name}: 0.5}} or another number")
        return F64(_signed_zeros(np.array(out, dtype=np.float64).reshape(lit.shape), lit))

    def scalar(self, value):
        return F64(float(value.item() if isinstance(value, F64) else value))

    def zeros(self, shape):
        return F64(np.zeros(tuple(shape)))

    def full(self, shape, value):
        return F64(np.full(tuple(shape), float(value)))

    # ------------------------------------------------------------------ queries
    def shape(self, x):
        return x.shape

    def numel(self, x):
        return x.size

    def any_zero(self, x) -> bool:
        return bool(np.any(x.a == 0))

    def all_zero(self, x) -> bool:
        return bool(np.all(x.a == 0))

    def is_symbolic(self, x) -> bool:
        return False

    # ------------------------------------------------------------------ arithmetic
    # IEEE results (inf, nan) are PyTorch's too: numpy's warnings about them are silenced
    def add(self, x, y):
        with np.errstate(all="ignore"):
            return _v(x.a + y.a)

    def sub(self, x, y):
        with np.errstate(all="ignore"):
            return _v(x.a - y.a)

    def mul(self, x, y):
        with np.errstate(all="ignore"):
            return _v(x.a * y.a)

    def div(self, x, y):
        with np.errstate(all="ignore"):
            return _v(x.a / y.a)

    def neg(self, x):
        return _v(-x.a)

    def fma(self, a, b, c):
        """``a * b + c`` rounded once (the fused multiply-add of ATen's ``add(c, b, alpha=a)``, as
        torch.optim's updates run it). Vectorised with error-free transformations (Dekker's product,
        Knuth's sum): ``a * b + c`` is exactly ``fused + d + te`` with ``fused`` the rounding of ``sh +
        t``, which is the answer unless ``d + te`` reaches half the gap to ``fused``'s neighbour. Those
        elements, and operands near overflow or results near underflow (where the transformations
        are not exact), go through exact rationals. A non-finite operand, or an exact 0 (its sign), is numpy's ``a * b + c``."""
        with np.errstate(all="ignore"):
            x, y, z = np.broadcast_arrays(np.asarray(a.a, dtype=np.float64), np.asarray(b.a, dtype=np.float64),
                                          np.asarray(c.a, dtype=np.float64))
            plain = x * y + z
            ph, pl = _two_product(x, y)
            sh, sl = _two_sum(ph, z)
            t, te = _two_sum(sl, pl)
            fused, d = _two_sum(sh, t)   # a * b + c == fused + d + te exactly
            # fused is the one rounding of a * b + c unless d + te reaches half the gap to its
            # neighbour (the gap below a power of two is half the one above: the smaller is taken)
            mantissa = np.frexp(fused)[0]
            gap = np.spacing(np.abs(fused)) * np.where(np.abs(mantissa) == 0.5, 0.5, 1.0)
            finite = np.isfinite(x) & np.isfinite(y) & np.isfinite(z)
            unsure = finite & (((te != 0) & (np.abs(d) + np.abs(te) >= gap / 2)) | ~np.isfinite(fused)
                               | ~np.isfinite(pl) | (np.abs(x) > _SPLIT_LIMIT) | (np.abs(y) > _SPLIT_LIMIT)
                               | ((np.abs(ph) < _TINY) & (x != 0) & (y != 0)) | (np.abs(fused) < _TINY))
            out = np.where(finite & ~unsure & (fused != 0), fused, plain)
        out = np.array(out, dtype=np.float64, copy=True)
        flat = out.reshape(-1)
        for i in np.flatnonzero(unsure.reshape(-1)):
            p, q, r = float(x.reshape(-1)[i]), float(y.reshape(-1)[i]), float(z.reshape(-1)[i])
            exact = Fraction(p) * Fraction(q) + Fraction(r)
            if exact == 0:
                continue
            try:
                flat[i] = float(exact)
            except OverflowError:
                flat[i] = np.inf if exact > 0 else -np.inf
        return _v(out)

    def pow(self, x, e):
        """``x ** e`` of two tensors (and ``number ** tensor``): C's ``pow`` element by element, as
        ATen's pow(Tensor, Tensor) kernel runs it (no special exponents: ``x ** full(3.0)`` is
        ``pow(x, 3.0)``, not ``x * x * x``)."""
        return _v(c_pow(x.a, e.a))

    def pow_number(self, x, e):
        """``x ** e`` with ``e`` a Python number: ATen's pow(Tensor, Scalar) (:func:`aten_pow_scalar`)."""
        return _v(aten_pow_scalar(x.a, float(e.a)))

    def float_pow(self, x, e):
        """Python's ``float ** float`` (Composed.float_pow): C's ``pow``, as CPython's float_pow calls it."""
        return _v(np.float64(float(x.a) ** float(e.a)))

    # ------------------------------------------------------------------ complex kernels
    # a complex value's parts (adjoint.values.backends.complex) through PyTorch's CPU kernels,
    # which are numpy's: c10::complex's division is numpy's (scaled by the larger of |c| and |d|;
    # by a complex zero, a / |c| and b / |d|), abs is hypot, exp is C's cexp. Written over the
    # parts' formulas, |z|^2 and c^2 + d^2 overflow (or underflow) where PyTorch's do not.
    def complex_div(self, a, b, c, d):
        with np.errstate(all="ignore"):
            q = _complex(a.a, b.a) / _complex(c.a, d.a)
        return _v(q.real.copy()), _v(q.imag.copy())

    def has_nonfinite(self, x) -> bool:
        return not bool(np.all(np.isfinite(x.a)))

    def complex_abs(self, a, b):
        return _v(np.hypot(a.a, b.a))

    def complex_exp(self, a, b):
        with np.errstate(all="ignore"):
            e = np.exp(_complex(a.a, b.a))
        return _v(e.real.copy()), _v(e.imag.copy())

    def complex_function(self, name: str, a, b):
        """sin, cos, tan, sinh, cosh, tanh, sigmoid, log, sqrt of a + bi: numpy's (C's csin ... clog, csqrt,
        as PyTorch's CPU kernels call them; sigmoid is ``1 / (1 + exp(-z))``)."""
        fn = (lambda z: 1.0 / (1.0 + np.exp(-z))) if name == "sigmoid" else getattr(np, name)
        with np.errstate(all="ignore"):
            v = fn(_complex(a.a, b.a))
        return _v(v.real.copy()), _v(v.imag.copy())

    # ------------------------------------------------------------------ elementwise functions
    def relu(self, x):
        a = x.a
        return _v(np.where((a > 0) | (a == 0) | np.isnan(a), a, 0.0))  # relu keeps -0.0 and nan

    def _fn(self, fn, x):
        with np.errstate(all="ignore"):
            return _v(fn(x.a))

    def tanh(self, x):
        return self._fn(np.tanh, x)

    def onednn_sigmoid(self, x):
        """oneDNN's logistic (its fused LSTM's gates): the same doubles as :meth:`sigmoid` here."""
        return self.sigmoid(x)

    def sigmoid(self, x):
        return self._fn(lambda a: 1.0 / (1.0 + np.exp(-a)), x)

    def exp(self, x):
        return self._fn(np.exp, x)

    def log(self, x):
        return self._fn(np.log, x)

    def sin(self, x):
        return self._fn(np.sin, x)

    def cos(self, x):
        return self._fn(np.cos, x)

    def sqrt(self, x):
        return self._fn(np.sqrt, x)

    def rsqrt(self, x):
        """``1 / sqrt(x)``, as ATen's CPU kernel computes it (two roundings; -inf at -0.0)."""
        return self._fn(lambda a: 1.0 / np.sqrt(a), x)

    def log1p(self, x):
        return self._fn(np.log1p, x)

    def expm1(self, x):
        return self._fn(np.expm1, x)

    def atan(self, x):
        return self._fn(np.arctan, x)

    def atan2(self, y, x):
        """C's atan2 (IEEE's signed zeros: atan2(-0.0, -1) = -pi)."""
        with np.errstate(all="ignore"):
            return _v(np.arctan2(y.a, x.a))

    def fmod(self, a, b):
        """C's fmod (ATen's CPU kernel): exact in doubles, the sign of ``a``; nan where ``b`` is 0."""
        with np.errstate(all="ignore"):
            return _v(np.fmod(a.a, b.a))

    def remainder(self, a, b):
        """ATen's floating remainder: ``fmod(a, b)``, plus ``b`` where that is non-zero and its sign is
        not ``b``'s (a zero keeps fmod's sign, -0.0 for a negative ``a``)."""
        with np.errstate(all="ignore"):
            mod = np.fmod(a.a, b.a)
            bb = np.broadcast_to(b.a, np.shape(mod))
            return _v(np.where((mod != 0) & ((bb < 0) != (mod < 0)), mod + bb, mod))

    def rounded_quotient(self, a, b, mode: str):
        """``a.div(b, rounding_mode=mode)`` in doubles: ``trunc(a / b)``; ATen's div_floor_floating for
        "floor" (``(a - fmod(a, b)) / b``, one less where the remainder's sign is not ``b``'s, rounded
        to the nearest integer; a / b where ``b`` is 0)."""
        x, y = np.broadcast_arrays(np.asarray(a.a, dtype=np.float64), np.asarray(b.a, dtype=np.float64))
        with np.errstate(all="ignore"):
            if mode == "trunc":
                return _v(np.trunc(x / y))
            mod = np.fmod(x, y)
            div = (x - mod) / y
            div = np.where((mod != 0) & ((y < 0) != (mod < 0)), div - 1.0, div)
            fl = np.floor(div)
            fl = np.where(div - fl > 0.5, fl + 1.0, fl)
            fl = np.where(div != 0, fl, np.copysign(0.0, x / y))
            return _v(np.where(y == 0, x / y, fl))

    def sinh(self, x):
        return self._fn(np.sinh, x)

    def cosh(self, x):
        return self._fn(np.cosh, x)

    def tan(self, x):
        return self._fn(np.tan, x)

    def log2(self, x):
        return self._fn(np.log2, x)

    def log10(self, x):
        return self._fn(np.log10, x)

    def abs(self, x):
        return _v(np.abs(x.a))

    def sgn(self, x):
        """at::sgn of a real tensor is at::sign, ``(0 < a) - (a < 0)``: 0 at nan (numpy's sign is
        nan there), so ``abs'(nan) = 0`` and a nan element takes no gradient through sgn."""
        a = x.a
        return _v(np.where(np.isnan(a), 0.0, np.sign(a)))

    # ------------------------------------------------------------------ selections
    def mask(self, x, predicate):
        """0/1 mask from a predicate on each element's sign (-1, 0, 1, 'nan')."""
        table = {k: 1.0 if predicate(k) else 0.0 for k in _SIGN_KEYS}
        a = x.a
        out = np.where(np.isnan(a), table["nan"],
                       np.where(a > 0, table[1], np.where(a < 0, table[-1], table[0])))
        return _v(out)

    def where(self, cond, x, y):
        return _v(np.where(cond.a != 0, x.a, y.a))

    def select_positive(self, x, g):
        """ATen's ``x <= 0 ? 0 : g``: a nan x keeps g."""
        return _v(np.where(x.a <= 0, 0.0, np.broadcast_to(g.a, x.shape)))

    def negate_at_negzero(self, x, ref):
        """IEEE already signs the infinity at -0.0 (g / (2 * -0.0) is -inf): nothing to do."""
        return x

    # ------------------------------------------------------------------ structure and products
    def reshape(self, x, shape):
        return _v(x.a.reshape(tuple(shape)))

    def t2(self, x):
        return _v(x.a.T if x.a.ndim == 2 else x.a)   # a view: values are never written in place

    def broadcast_to(self, x, shape):
        return _v(np.broadcast_to(x.a, tuple(shape)).copy())

    def index(self, x, key):
        a = x.a
        if _whole(key, a) and (a.flags.c_contiguous or a.flags.f_contiguous):
            return x   # all of x (a group's weight when groups == 1): the copy would have x's layout
        return _v(np.array(a[key], dtype=np.float64, copy=True))

    def permute(self, x, perm):
        # a C-ordered copy (np.ascontiguousarray would make a 0-d array 1-d)
        return _v(np.transpose(x.a, perm).copy(order="C"))

    def place(self, shape, key, g):
        return self.assign(self.zeros(shape), key, g)

    def assign(self, base, key, new):
        a = np.array(base.a, copy=True)
        a[key] = np.broadcast_to(new.a, np.shape(a[key]))
        return _v(a)

    def place_add(self, shape, key, g):
        """zeros(shape) with ``g`` added at ``key``, repeated indices adding up one after another
        in the key's order (as ``np.add.at``, and as bincount does: the same doubles, several
        times faster for a convolution's col2im)."""
        shape = tuple(shape)
        size = math.prod(shape)
        where = np.arange(size).reshape(shape)[key]
        added = np.broadcast_to(g.a, where.shape)
        return _v(np.bincount(where.reshape(-1), weights=added.reshape(-1), minlength=size).reshape(shape))

    def concat(self, xs, axis):
        return _v(np.concatenate([x.a for x in xs], axis=axis))

    def stack(self, xs, axis):
        return _v(np.stack([x.a for x in xs], axis=axis))

    def sum_to(self, x, shape):
        shape = tuple(shape)
        if x.shape == shape:
            return x
        lead = x.ndim - len(shape)
        axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and x.shape[lead + i] != 1)
        return _v(np.sum(x.a, axis=axes, keepdims=True).reshape(shape))

    def matmul2d(self, x, y):
        with np.errstate(all="ignore"):
            return _v(x.a @ y.a)

    def outer(self, x, y):
        with np.errstate(all="ignore"):
            return _v(np.outer(x.a, y.a))

    def total(self, x):
        with np.errstate(all="ignore"):
            return _v(np.sum(x.a))

    # ------------------------------------------------------------------ checks (none: IEEE is PyTorch's arithmetic)
    def is_value(self, x) -> bool:
        return isinstance(x, F64)

    def symbols_like(self, shape, prefix: str):
        raise NotImplementedError("float64 mode has no symbols")

    def equals(self, x, y) -> bool:
        return x.shape == y.shape and bool(np.all((x.a == y.a) | (np.isnan(x.a) & np.isnan(y.a))))

    def same_value(self, x, y) -> bool:
        """The very same doubles, signs of zeros and NaNs included: whatever is computed from one
        is what would be computed from the other (the boundaries reuse the engine's VJPs on it)."""
        return x is y or (x.shape == y.shape and bool(np.array_equal(x.a, y.a, equal_nan=True))
                          and bool(np.array_equal(np.signbit(x.a), np.signbit(y.a))))



    # ------------------------------------------------------------------ the op families' methods
    # (activations, reductions, losses, nn): the same API as the exact backend's family blocks,
    # with PyTorch's CPU conventions where numpy's differ
    def clamp(self, x, lo=None, hi=None):
        """max(min(x, hi), lo): lo wins when lo > hi, as torch.clamp; nan stays nan."""
        a = x.a
        if hi is not None:
            a = np.minimum(a, float(hi))
        if lo is not None:
            a = np.maximum(a, float(lo))
        return _v(a)

    def clamped_log(self, x):
        """max(log(x), -100) elementwise (binary_cross_entropy's kernel)."""
        with np.errstate(all="ignore"):
            return _v(np.maximum(np.log(x.a), -100.0))

    def ints(self, x) -> list[int]:
        return [int(v) for v in x.a.reshape(-1)]

    def float_held(self, x, dtype: str) -> bool:
        """Every double is one of ``dtype`` too (float32: the same after a round trip; nan and
        the infinities are held)."""
        if dtype == "float64":
            return True
        with np.errstate(all="ignore"):
            back = x.a.astype(np.dtype(dtype)).astype(np.float64)
        return bool(np.all((back == x.a) | np.isnan(x.a)))

    def integers(self, values, shape):
        return _v(np.array([int(v) for v in values], dtype=np.float64).reshape(tuple(shape)))

    def constant(self, values, shape):
        return _v(np.array([float(v) for v in values], dtype=np.float64).reshape(tuple(shape)))

    def as_indices(self, x) -> np.ndarray:
        return x.a.astype(np.int64)

    def first_outside(self, x, lo, hi) -> int | None:
        a = np.asarray(x.a).reshape(-1)
        bad = np.flatnonzero(~((a >= float(lo)) & (a <= float(hi))))   # nan is outside
        return int(bad[0]) if bad.size else None

    def choose(self, test, rel: str, a, b):
        """Elementwise ``a if test REL 0 else b`` (IEEE: a comparison with nan is false, != true)."""
        t = test.a
        holds = {">": t > 0, ">=": t >= 0, "<": t < 0, "<=": t <= 0, "==": t == 0, "!=": t != 0}[rel]
        return _v(np.where(holds, a.a, b.a))

    def erf(self, x):
        return _v(np.vectorize(math.erf, otypes=[np.float64])(x.a) if x.size else x.a)

    def pi(self):
        return F64(math.pi)

    def ln(self, base: int):
        """log(base) as derivatives.yaml writes it for log2 / log10 (``0.6931471805599453``,
        ``2.3025850929940456``: the latter is a double one ulp from numpy's log(10))."""
        return F64(LN_CONSTANTS[base])

    def sum_dims(self, x, dims, keepdim: bool):
        dims = _reduced(x, dims)
        with np.errstate(all="ignore"):
            return _v(np.sum(x.a, axis=dims, keepdims=keepdim))

    def amax(self, x, dims, keepdim: bool, largest: bool = True):
        """The largest (smallest) element over ``dims``; nan propagates (np.max does too)."""
        dims = _reduced(x, dims)
        return _v((np.max if largest else np.min)(x.a, axis=dims, keepdims=keepdim))

    def argmax(self, x, dim: int, keepdim: bool, largest: bool = True):
        """(values, indices) over one dim, the first index among ties and the first nan (max.dim on CPU)."""
        if x.ndim == 0:
            return x, F64(0.0)
        a = x.a
        nan = np.isnan(a)
        key = np.where(nan, np.inf, a) if largest else np.where(nan, -np.inf, a)
        pick = np.argmax(key, axis=dim) if largest else np.argmin(key, axis=dim)
        first_nan = np.argmax(nan, axis=dim)
        idx = np.where(np.any(nan, axis=dim), first_nan, pick)
        vals = np.take_along_axis(a, np.expand_dims(idx, dim), axis=dim)
        if not keepdim:
            vals = np.squeeze(vals, axis=dim)
        else:
            idx = np.expand_dims(idx, dim)
        return _v(vals), _v(idx.astype(np.float64))

    def sort_order(self, x, dim: int, descending: bool):
        """(indices, tied) of a stable sort along ``dim`` (nan largest), as the exact backend's."""
        a = x.a
        nan = np.isnan(a)
        key = np.where(nan, np.inf, a)
        if descending:
            key = -key
        idx = np.argsort(key, axis=dim, kind="stable")
        keys = np.take_along_axis(key, idx, axis=dim)
        same = np.diff(keys, axis=dim) == 0
        pad = [(0, 0)] * a.ndim
        pad[dim] = (1, 0)
        before = np.pad(same, pad)
        pad[dim] = (0, 1)
        return _v(idx.astype(np.float64)), before | np.pad(same, pad)

    def place_along(self, shape, dim: int, indices, g, keepdim: bool):
        """zeros(shape) with ``g`` written at ``indices`` along ``dim`` (value_selecting_reduction_backward)."""
        shape = tuple(shape)
        if not shape:
            return g
        kept = tuple(1 if d == dim else n for d, n in enumerate(shape))
        out = np.zeros(shape)
        np.put_along_axis(out, indices.a.astype(np.int64).reshape(kept), g.a.reshape(kept), axis=dim)
        return _v(out)

    def bmm(self, a, b):
        with np.errstate(all="ignore"):
            return _v(np.matmul(a.a, b.a))

    def window_max(self, x, windows):
        """Max pooling's selection (see the exact backend's): per row and window the first
        largest element, the last nan when there is one; (values, indices, some window tied)."""
        a = x.a
        rows = a.shape[0]
        vals = np.empty((rows, len(windows)))
        idx = np.zeros((rows, len(windows)), dtype=np.int64)
        tied = False
        for o, win in enumerate(windows):
            win = np.asarray(win, dtype=np.int64)
            sub = a[:, win]
            nan = np.isnan(sub)
            best = np.argmax(np.where(nan, -np.inf, sub), axis=1)
            last_nan = sub.shape[1] - 1 - np.argmax(nan[:, ::-1], axis=1)
            has_nan = nan.any(axis=1)
            pick = np.where(has_nan, last_nan, best)
            top = sub[np.arange(rows), best]
            tied = tied or bool(np.any(~has_nan & ((sub == top[:, None]).sum(axis=1) > 1)))
            idx[:, o] = win[pick]
            vals[:, o] = sub[np.arange(rows), pick]
        return _v(vals), idx, tied

    # ------------------------------------------------------------------ convolution kernels (optional API)
    # engine/ops/conv.py uses them when a backend has them (this one; the bound backend sets them
    # to None): the generic lowering's values, from strided windows instead of gathers
    def conv_patches(self, x, k_shape, stride, padding, dilation, groups: int, group: int):
        """One group's im2col patches (N * L, Cg * K), as conv.py's index-permute-reshape makes them."""
        return _v(float64_conv.patches(x.a, k_shape, stride, padding, dilation, groups, group))

    def conv_fold(self, gcols, x_shape, k_shape, stride, padding, dilation):
        """col2im of each group's patch gradients, cropped: conv.py's place_add (the same doubles)."""
        return _v(float64_conv.fold([g.a for g in gcols], tuple(x_shape), k_shape, stride, padding, dilation))


def c_pow(base, exp) -> np.ndarray:
    """C's ``pow`` (the C library's, as ATen's scalar loops call ``::pow`` / ``std::pow`` on CPU)
    elementwise: numpy's ``power`` takes its own SIMD road (SVML on AVX-512), an ulp away from
    it in about one element in six. ``math.pow`` is C's ``pow``; where it raises (a negative
    base to a fraction, zero to a negative power, an overflow) the result is IEEE's special
    value, the same in every C library and in numpy."""
    with np.errstate(all="ignore"):
        b, e = np.broadcast_arrays(np.asarray(base, dtype=np.float64), np.asarray(exp, dtype=np.float64))
        out = np.array(np.power(b, e), dtype=np.float64)   # the special values; the others replaced below
    flat, fb, fe = out.reshape(-1), b.reshape(-1), e.reshape(-1)
    for i in range(flat.size):
        try:
            flat[i] = math.pow(fb[i], fe[i])
        except (ValueError, OverflowError, ZeroDivisionError):
            pass
    return out


def aten_pow_scalar(a: np.ndarray, e: float) -> np.ndarray:
    """``a ** e`` for a number ``e`` as PyTorch 2.13's CPU runs ``pow(Tensor, Scalar)`` on doubles:
    ``pow_out`` fills 1 for ``e == 0`` and copies for ``e == 1``; PowKernel.cpp's
    ``pow_tensor_scalar_kernel`` runs ``sqrt`` for 0.5, ``rsqrt`` (``1 / sqrt``) for -0.5 and
    ``reciprocal`` for -1, and ``pow_tensor_scalar_optimized_kernel`` ``x * x`` for 2, ``x * x * x``
    for 3 and ``1 / (x * x)`` for -2; any other exponent is C's ``pow`` (:func:`c_pow`). A
    contiguous run of 16 or more elements takes Sleef's vectorised ``pow`` in its whole blocks,
    within an ulp of C's: not modelled (docs/values.md)."""
    with np.errstate(all="ignore"):
        if e == 0:
            return np.ones_like(a)
        if e == 1:
            return np.array(a, dtype=np.float64, copy=True)
        if e == 0.5:
            return np.sqrt(a)
        if e == -0.5:
            return 1.0 / np.sqrt(a)
        if e == -1:
            return 1.0 / a
        if e == 2:
            return a * a
        if e == 3:
            return a * a * a
        if e == -2:
            return 1.0 / (a * a)
    return c_pow(a, e)


def _whole(key, a: np.ndarray) -> bool:
    """``key`` is a tuple of basic slices that selects every element of ``a`` in order
    (``(slice(None), slice(0, n))``)."""
    if type(key) is not tuple or len(key) > a.ndim:
        return False
    for k, n in zip(key, a.shape):
        if type(k) is not slice or k.step not in (None, 1) or k.indices(n)[:2] != (0, n):
            return False
    return True


def _reduced(x: F64, dims) -> tuple[int, ...]:
    """The dims a reduction sums over: every dim when none given; a 0-d tensor reduces nothing."""
    dims = tuple(dims) if dims else tuple(range(x.ndim))
    return tuple(d for d in dims if d < x.ndim)


# ----------------------------------------------------------------------------- BLAS threads

def blas_threads() -> int:
    """How many threads numpy's BLAS may use for this solve: the cores not already busy.

    OpenBLAS's threads spin while they wait for work; beside another busy process on the same
    cores they spin against it, and one matrix product took 70x the time torch took at the same
    moment (torch sizes its own pool and does not spin that way; the ReLU MLP 256x16's whole
    solve took 5x as long with two threads as with one on two busy cores). So the solve takes
    the cores that the busier of two readings leaves idle: the last minute's load average
    (``os.getloadavg``) and the other processes' tasks runnable right now (``/proc/loadavg``'s
    fourth field less this process's own running threads: it sees a job that started seconds
    ago, and not this process's BLAS or OpenMP workers still spinning after their last call;
    the fewest of :data:`RUNNABLE_READINGS` readings, so that a task runnable for an instant, a
    kernel worker, does not halve the pool for the whole solve); this process counts as one. At
    least one thread, at most the cores this process may run on."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        busy = os.getloadavg()[0]
    except (AttributeError, OSError):
        return cores
    elsewhere = min(_runnable_elsewhere() for _ in range(RUNNABLE_READINGS))
    return max(1, min(cores, int(cores - max(busy, elsewhere + 1) + 1.0)))


#: readings of the runnable count per solve (each about 80 us): a job is runnable in all of them
RUNNABLE_READINGS = 3


def _runnable_elsewhere(proc: str = "/proc") -> int:
    """Other processes' tasks runnable at this moment (0 where /proc is missing): the machine's
    runnable count less this process's threads in state R."""
    try:
        with open(f"{proc}/loadavg") as f:
            total = int(f.read().split()[3].split("/")[0])
        own = 0
        for task in os.listdir(f"{proc}/self/task"):
            try:
                with open(f"{proc}/self/task/{task}/stat") as f:
                    stat = f.read()
            except OSError:   # the thread ended meanwhile
                continue
            own += stat[stat.rindex(")") + 2:].startswith("R")
        return max(0, total - own)
    except (OSError, ValueError, IndexError):
        return 0


_CONTROLLER: list = []   # threadpoolctl's view of the loaded BLAS libraries, made once (a scan costs ~1 ms)


@contextmanager
def blas_limited():
    """numpy's BLAS held to :func:`held_threads` threads while the block runs (threadpoolctl,
    a dependency; the limit is lifted again afterwards). Without threadpoolctl (a stripped
    install) the block runs unlimited."""
    if not _CONTROLLER:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            yield
            return
        _CONTROLLER.append(ThreadpoolController())
    with _CONTROLLER[0].limit(limits=held_threads(_CONTROLLER[0].select(user_api="blas").info()), user_api="blas"):
        yield


def held_threads(pools: list[dict]) -> int:
    """The threads :func:`blas_limited` holds numpy's BLAS to: :func:`blas_threads`, but never more
    than the pool has now (``pools``: threadpoolctl's info of the BLAS libraries). A pool the user
    sized (``OPENBLAS_NUM_THREADS=1``, or threadpoolctl around the call) stays as small as they
    made it: a solve only ever lowers it."""
    now = [p["num_threads"] for p in pools if p.get("num_threads")]
    return max(1, min([blas_threads()] + now))
