"""Sizes known before work: refusals made from shapes and exponents, before any value is made.

The exact mode holds at most ``B.max_elements`` elements per tensor (its elements are Python
integers); a leaf tensor (an input, a parameter, a side file's array) larger than that is
refused at its declaration, before its values are converted."""

from __future__ import annotations

import math

from adjoint.format.errors import ProblemError


def check_leaf_size(decl, backend) -> None:
    """Refuse a declared tensor the value backend cannot hold (known from its shape)."""
    limit = backend.max_elements
    n = math.prod(decl.value.shape)
    if limit is not None and n > limit:
        alternative = {"exact": ", or solve with --float64 or --structure", "float64": ", or solve with --structure"}
        raise ProblemError(decl.loc, f"'{decl.name}' has {n:,} elements, more than the {backend.name} mode holds "
                                     f"({limit:,}); use a smaller tensor{alternative.get(backend.name, '')}")


def broadcast_shape(*shapes) -> tuple[int, ...]:
    """``numpy.broadcast_shapes`` for any number of dimensions (numpy's own stops at 32; PyTorch
    tensors have up to 64): ValueError when the shapes do not broadcast."""
    n = max((len(s) for s in shapes), default=0)
    out = [1] * n
    for s in shapes:
        for i, d in enumerate((1,) * (n - len(s)) + tuple(s)):
            if d != 1:
                if out[i] != 1 and out[i] != d:
                    raise ValueError(f"shapes {[list(t) for t in shapes]} do not broadcast")
                out[i] = int(d)
    return tuple(out)


def expandable(shape: tuple, to: tuple) -> bool:
    """Can ``shape`` be broadcast to ``to`` (is_expandable_to)?"""
    if len(shape) > len(to):
        return False
    for a, b in zip(reversed(shape), reversed(to)):
        if a != b and a != 1:
            return False
    return True


def broadcast_arrays(*arrays):
    """``numpy.broadcast_arrays`` (read-only views) for any number of dimensions."""
    import numpy as np
    shape = broadcast_shape(*[np.shape(a) for a in arrays])
    return [np.broadcast_to(a, shape) for a in arrays]


#: the most elements an op's intermediate array may have in a mode without a size limit (--structure)
MAX_WORK = 100_000_000


def check_work(op, in_shapes, params, backend, loc) -> None:
    """Refuse an op whose lowering would make an array larger than the mode holds (a
    convolution padded by 10**8 makes 2 * 10**8 zeros, whatever its output), from the shapes,
    before anything is made."""
    if op.work is None:
        return
    n = op.work(in_shapes, params)
    limit = backend.max_elements if backend.max_elements is not None else MAX_WORK
    if n > limit:
        raise ProblemError(loc, f"this op ({op.node}) would make {n:,} intermediate elements (padded input or "
                                f"patches), more than the {backend.name} mode holds ({limit:,}); use smaller "
                                "padding, dilation or shapes")


#: the largest denominator (bits) an exact rational may get: more than a float32 ** 4096 needs
#: (0.1 in float32 is 13421773/2**27; its 4096th power has a 110,592-bit denominator)
MAX_EXACT_BITS = 131_072


def check_bits(bits: int) -> None:
    """Refuse, before computing it, an exact value whose denominator would pass MAX_EXACT_BITS
    (x * x squared 16 times, (x ** 4096) ** 4096): ExactLimit, located by the op that asked."""
    if bits > MAX_EXACT_BITS:
        from adjoint.values.numbers.symbolic import ExactLimit
        raise ExactLimit(f"an exact value here would have a denominator of about {int(bits * 0.30103):,} digits, more "
                         f"than adjoint computes exactly (about {int(MAX_EXACT_BITS * 0.30103):,}); use --float64, "
                         "or smaller powers")
