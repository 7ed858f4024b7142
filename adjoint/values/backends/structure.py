"""The structure backend: shapes only, no values (``--structure``).

Which nodes exist, their edges and creation order, which hooks fire and in which order, what
is None and what is a zero tensor, which errors PyTorch raises for shapes: none of it depends
on values, so a model of any size runs in time proportional to its number of ops. A value is
a :class:`Shaped`: only its shape. The contract's ``value`` and ``exact`` fields are null.

Answers that depend on values are not given: a kink convention (``relu'(0)``) is never noted,
a hook's custom Function formula is not checked, and an op whose result shape would depend on
values (none among the ops so far) could not be modelled here.
"""

from __future__ import annotations

import numpy as np
from adjoint.values.backends.composed import Composed
from adjoint.values.numbers.sizes import broadcast_shape

from adjoint.values.backends.inexact import NoExactChecks


class Shaped:
    """A tensor value of which only the shape is known; an integer tensor given in the file
    (class indices, embedding indices) also keeps its integers in ``known``, since they decide
    shapes and which elements a gradient reaches."""

    __slots__ = ("shape", "known")

    def __init__(self, shape, known: np.ndarray | None = None):
        self.shape = tuple(int(d) for d in shape)
        self.known = known

    def ints(self):
        """The integers of an integer tensor the file gave (None: computed, unknown here)."""
        if self.known is None:
            return None
        return self.known.tolist() if self.known.ndim else int(self.known)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def floats(self):
        return None

    def equals(self, other) -> bool:
        """Only shapes are known, so two values are never known to be equal (a report then shows
        each variant's own, rather than claim they agree); a value equals itself."""
        return other is self

    def strings(self, printer=None):
        return None

    def __repr__(self) -> str:
        return f"Shaped({list(self.shape)})"


def _b(*xs) -> Shaped:
    return Shaped(broadcast_shape(*[x.shape for x in xs]))


def _same(x) -> Shaped:
    return Shaped(x.shape)


def _probe(shape) -> np.ndarray:
    """A stand-in array of ``shape`` (zero bytes per element) for numpy's shape rules."""
    return np.broadcast_to(np.empty((), dtype=np.int8), tuple(shape))


class StructureBackend(NoExactChecks, Composed):
    """Shapes only; the method API of :class:`adjoint.values.backends.exact.ExactBackend`."""

    name = "structure"
    max_elements = None   # shapes only: no limit
    closed = False

    def __init__(self, dtype: str = "float32", symbols: dict | None = None):
        self.dtype = dtype
        self.symbols = symbols

    # ------------------------------------------------------------------ construction
    def literal(self, lit):
        known = None
        if isinstance(lit.items, tuple) and not lit.symbols and all(
                (getattr(e, "denominator", None) == 1 or isinstance(e, int)) and -2 ** 63 <= e < 2 ** 63
                for e in lit.items):   # integers an int64 holds (1e200 is an integer too)
            known = np.array([int(e) for e in lit.items], dtype=np.int64).reshape(lit.shape)
        return Shaped(lit.shape, known)

    def scalar(self, value):
        return Shaped(())

    def zeros(self, shape):
        return Shaped(shape)

    def full(self, shape, value):
        return Shaped(shape)

    # ------------------------------------------------------------------ queries
    def shape(self, x):
        return x.shape

    def numel(self, x):
        return x.size

    def any_zero(self, x) -> bool:
        return False  # unknown: no convention at a kink is reported

    def all_zero(self, x) -> bool:
        return False

    def has_nonfinite(self, x) -> bool:
        return False   # unknown: shapes only

    def is_symbolic(self, x) -> bool:
        return False

    # ------------------------------------------------------------------ arithmetic and functions
    def add(self, x, y):
        return _b(x, y)

    sub = mul = div = pow = atan2 = fmod = remainder = add

    def rounded_quotient(self, x, y, mode: str):
        return _b(x, y)

    def neg(self, x):
        return _same(x)

    relu = tanh = sigmoid = onednn_sigmoid = exp = log = sin = cos = sqrt = abs = sgn = neg
    rsqrt = log1p = expm1 = atan = sinh = cosh = tan = log2 = log10 = neg

    def mask(self, x, predicate):
        return _same(x)

    def where(self, cond, x, y):
        return _b(cond, x, y)

    def select_positive(self, x, g):
        return _same(x)

    def negate_at_negzero(self, x, ref):
        return x

    # ------------------------------------------------------------------ structure and products
    def reshape(self, x, shape):
        return Shaped(shape)

    def t2(self, x):
        return Shaped(x.shape[::-1]) if x.ndim == 2 else _same(x)

    def broadcast_to(self, x, shape):
        return Shaped(shape)

    def index(self, x, key):
        return Shaped(_probe(x.shape)[key].shape)

    def permute(self, x, perm):
        return Shaped(tuple(x.shape[p] for p in perm))

    def place(self, shape, key, g):
        return Shaped(shape)

    def assign(self, base, key, new):
        return _same(base)

    def place_add(self, shape, key, g):
        return Shaped(shape)

    def concat(self, xs, axis):
        return Shaped(np.concatenate([_probe(x.shape) for x in xs], axis=axis).shape)

    def stack(self, xs, axis):
        return Shaped(np.stack([_probe(x.shape) for x in xs], axis=axis).shape)

    def sum_to(self, x, shape):
        return Shaped(shape)

    def matmul2d(self, x, y):
        return Shaped((x.shape[0], y.shape[1]))

    def outer(self, x, y):
        return Shaped((x.size, y.size))

    def total(self, x):
        return Shaped(())

    # ------------------------------------------------------------------ checks
    def is_value(self, x) -> bool:
        return isinstance(x, Shaped)

    def symbols_like(self, shape, prefix: str):
        raise NotImplementedError("structure mode has no values")

    def equals(self, x, y) -> bool:
        return x.shape == y.shape

    def same_value(self, x, y) -> bool:
        """Shapes are all there is: one shape gives the same VJP shapes (integer values, known only
        for tensors given in the file, are never gradients)."""
        return x is y or (x.shape == y.shape and x.known is None and y.known is None)



    # ------------------------------------------------------------------ the op families' methods
    # Shapes follow the exact backend's; where PyTorch's choice depends on values (the element a
    # max or a max pooling selects) the first candidate stands in: it decides no shape, node or
    # hook call, only where a gradient's values would land.
    def clamp(self, x, lo=None, hi=None):
        return _same(x)

    clamped_log = erf = clamp

    def float_held(self, x, dtype: str) -> bool:
        """Shapes only: a rounding changes no shape, node or hook call, so every value is taken as held."""
        return True

    def ints(self, x) -> list[int]:
        """An integer tensor's values: those the file gave, else zeros (a valid index anywhere)."""
        return [int(v) for v in self.as_indices(x).reshape(-1)]

    def integers(self, values, shape):
        return Shaped(shape, np.array([int(v) for v in values], dtype=np.int64).reshape(tuple(shape)))

    def constant(self, values, shape):
        return Shaped(shape)

    def as_indices(self, x) -> np.ndarray:
        return x.known if x.known is not None else np.zeros(x.shape, dtype=np.int64)

    def first_outside(self, x, lo, hi) -> int | None:
        return None  # no values to be outside

    def choose(self, test, rel: str, a, b):
        return _b(test, a, b)

    def pi(self):
        return Shaped(())

    def ln(self, base: int):
        return Shaped(())

    def sum_dims(self, x, dims, keepdim: bool):
        dims = {d for d in (tuple(dims) if dims else tuple(range(x.ndim))) if d < x.ndim}
        if keepdim:
            return Shaped(tuple(1 if d in dims else n for d, n in enumerate(x.shape)))
        return Shaped(tuple(n for d, n in enumerate(x.shape) if d not in dims))

    def amax(self, x, dims, keepdim: bool, largest: bool = True):
        return self.sum_dims(x, dims, keepdim)

    def argmax(self, x, dim: int, keepdim: bool, largest: bool = True):
        out = self.sum_dims(x, (dim,), keepdim)
        return out, Shaped(out.shape, np.zeros(out.shape, dtype=np.int64))

    def sort_order(self, x, dim: int, descending: bool):
        shape = [1] * len(x.shape)
        shape[dim] = x.shape[dim]
        idx = np.broadcast_to(np.arange(x.shape[dim], dtype=np.int64).reshape(shape), x.shape)
        return Shaped(x.shape, np.array(idx)), np.zeros(x.shape, dtype=bool)

    def place_along(self, shape, dim: int, indices, g, keepdim: bool):
        return Shaped(shape)

    def bmm(self, a, b):
        return Shaped((a.shape[0], a.shape[1], b.shape[2]))   # (n, p, q) @ (n, q, r)

    def window_max(self, x, windows):
        rows = x.shape[0]
        first = np.array([int(w[0]) for w in windows], dtype=np.int64)
        return Shaped((rows, len(windows))), np.tile(first, (rows, 1)), False
