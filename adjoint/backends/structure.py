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


class Shaped:
    """A tensor value of which only the shape is known."""

    __slots__ = ("shape",)

    def __init__(self, shape):
        self.shape = tuple(int(d) for d in shape)

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

    def strings(self, printer=None):
        return None

    def __repr__(self) -> str:
        return f"Shaped({list(self.shape)})"


def _b(*xs) -> Shaped:
    return Shaped(np.broadcast_shapes(*[x.shape for x in xs]))


def _same(x) -> Shaped:
    return Shaped(x.shape)


def _probe(shape) -> np.ndarray:
    """A stand-in array of ``shape`` (zero bytes per element) for numpy's shape rules."""
    return np.broadcast_to(np.empty((), dtype=np.int8), tuple(shape))


class StructureBackend:
    """Shapes only; the method API of :class:`adjoint.backends.exact.ExactBackend`."""

    name = "structure"
    closed = False

    def __init__(self, dtype: str = "float32", symbols: dict | None = None):
        self.dtype = dtype
        self.symbols = symbols

    def notes(self) -> list[str]:
        return []

    # ------------------------------------------------------------------ construction
    def literal(self, lit):
        return Shaped(lit.shape)

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

    def is_symbolic(self, x) -> bool:
        return False

    # ------------------------------------------------------------------ arithmetic and functions
    def add(self, x, y):
        return _b(x, y)

    sub = mul = div = pow = add

    def neg(self, x):
        return _same(x)

    relu = tanh = sigmoid = exp = log = sin = cos = sqrt = abs = sgn = neg

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
    def check_literal(self, value, decl) -> None:
        return None

    def check_output(self, value, loc, what: str) -> None:
        return None

    def is_value(self, x) -> bool:
        return isinstance(x, Shaped)

    def symbols_like(self, shape, prefix: str):
        raise NotImplementedError("structure mode has no values")

    def equals(self, x, y) -> bool:
        return x.shape == y.shape

    def strings(self, x):
        return None

    def after_op(self, op, ins, params, out, loc, check: bool):
        return out
