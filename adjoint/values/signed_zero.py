"""Which exact zeros PyTorch holds as -0.0.

An exact zero has no sign, but IEEE floats do, and PyTorch's sqrt'(x) = g / (2 sqrt(x)) is
-inf at -0.0 (so is the derivative of x ** 0.5, which PyTorch runs as sqrt). A zero's sign
depends on how it was made, with PyTorch's own kernel choices (probed on 2.13):

* a product or quotient is -0.0 when exactly one factor is negative (IEEE); ``prod`` when an odd
  number of its factors have the sign bit set;
* a sum is -0.0 only when both terms are -0.0; ``a - b`` is ``a + (-b)``; ``-x`` flips;
* relu, tanh, sin, sqrt, ``x ** 0.5`` and odd powers keep a -0.0; views and transposes too;
* ``1 / x`` (``reciprocal``) and odd negative powers of ``-inf`` are -0.0;
* sum, mean, mv, dot, bmm, addmm and norm accumulate from +0.0, so they never give -0.0;
  mm too, except with an inner size of 1 and more than one row and column out, where each
  element is its one product;
  abs gives +0.0; exp, cos, sigmoid never give 0.

:func:`result_mask` gives the sign-bit mask of an op's exact zeros from its inputs' masks.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from adjoint.values.numbers.sizes import broadcast_arrays

from adjoint.values.exact import Exact


def sign_bits(x: Exact, where: np.ndarray | None = None) -> np.ndarray:
    """True where the float PyTorch holds has its sign bit set (negative, or -0.0); with
    ``where``, only those positions are examined (a sign can cost a numerical evaluation)."""
    if x.kind == "rational":
        bits = np.asarray(x.qa.num < 0, dtype=bool)
        if where is not None:
            bits = bits & where
    else:
        bits = np.zeros(x.shape, dtype=bool)
        look = np.ones(x.shape, dtype=bool) if where is None else where
        if look.any():
            signs = x.signs()
            bits = np.array([bool(w) and s == -1 for s, w in zip(signs.reshape(-1).tolist(),
                                                                 look.reshape(-1).tolist())],
                            dtype=bool).reshape(x.shape)
    if x.negzero is not None:
        bits = bits | x.negzero
    return bits


def zero_mask(x: Exact) -> np.ndarray:
    """Exact zeros (certified elements decided by their balls)."""
    return x.zero_mask()


def result_mask(op, ins: list[Exact], params, out: Exact) -> np.ndarray | None:
    """The -0.0 mask of an op's result (None: no -0.0 anywhere), by the op's ``negzero`` rule:
    keep (elementwise, the input's -0.0 survive), structural (views: the value's own reshaping
    carried the mask), keep_odd_pow (``x ** p``), negate, product, input_sign (a zero result is
    -0.0 where the input's sign bit is set), prod, cumprod, sum, difference, addc, never."""
    rule = op.negzero
    if rule == "structural":
        return out.negzero
    if rule == "keep" or (rule == "keep_odd_pow" and _keeps_sign(params)):
        mask = ins[0].negzero
    elif rule == "negate":
        zeros = zero_mask(out)
        mask = zeros & ~_nz(ins[0]) if zeros.any() else None
    elif rule == "product":
        zeros = zero_mask(out)
        if not zeros.any():
            return None
        sa = sign_bits(_view(ins[0], out.shape), zeros)
        sb = sign_bits(_view(ins[1], out.shape), zeros)
        mask = zeros & (sa ^ sb)
    elif rule == "input_sign" or (rule == "keep_odd_pow" and _odd_negative(params)):
        # x times a non-negative factor (hardswish), 1 / x, x ** -3: a zero takes x's sign
        zeros = zero_mask(out)
        if not zeros.any():
            return None
        mask = zeros & sign_bits(_view(ins[0], out.shape), zeros)
    elif rule == "outer":
        # mm with an inner size of 1 writes each element's one product (CPU, checked in torch 2.13:
        # mm([[0], [1]], [[-1, 2]])[0, 0] is -0.0); with more, or with one row or one column out
        # (BLAS hands a gemm whose result is a vector to gemv: mm([[-0.0], [4]], [[1]]) is +0.0),
        # it accumulates from +0.0
        a, b = ins[0], ins[1]
        if len(a.shape) != 2 or len(b.shape) != 2 or a.shape[1] != 1 or a.shape[0] == 1 or b.shape[1] == 1:
            return None
        zeros = zero_mask(out)
        if not zeros.any():
            return None
        sa = sign_bits(a).reshape(-1)
        sb = sign_bits(b).reshape(-1)
        mask = zeros & (sa[:, None] ^ sb[None, :])
    elif rule == "prod":
        # a product of several factors (prod, prod along a dim): a zero's sign is the parity of its
        # factors' sign bits, IEEE's for each multiplication, in any order
        zeros = zero_mask(out)
        if not zeros.any():
            return None
        bits = sign_bits(ins[0]).astype(np.int64)
        parity = bits.sum() % 2 if params is None else bits.sum(axis=params[0], keepdims=bool(params[1])) % 2
        mask = zeros & np.asarray(parity, dtype=bool)
    elif rule == "cumprod":
        # a running product along a dim (cumprod): a zero's sign is the parity of the sign bits of
        # the factors up to it
        zeros = zero_mask(out)
        if not zeros.any():
            return None
        if not out.shape:
            mask = zeros & sign_bits(ins[0])
        else:
            mask = zeros & (np.cumsum(sign_bits(ins[0]).astype(np.int64), axis=params) % 2).astype(bool)
    elif rule == "addc":
        # addcmul / addcdiv: self + value * t1 (* or /) t2; a zero is -0.0 where self is -0.0 and the
        # term is a zero with its sign bit set (IEEE: the parity of value's, t1's and t2's sign bits)
        if ins[0].negzero is None:
            return None
        zeros = zero_mask(out)
        if not zeros.any():
            return None
        term = sign_bits(_view(ins[1], out.shape), zeros) ^ sign_bits(_view(ins[2], out.shape), zeros)
        if Fraction(params) < 0:
            term = ~term
        mask = zeros & _view(ins[0], out.shape).negzero & term
    elif rule == "sum":
        if ins[0].negzero is None or ins[1].negzero is None:
            return None
        a, b = broadcast_arrays(ins[0].negzero, ins[1].negzero)
        mask = a & b
    elif rule == "difference":
        if ins[0].negzero is None:
            return None
        a, b = broadcast_arrays(ins[0].negzero, zero_mask(ins[1]) & ~_nz(ins[1]))
        mask = a & b
    else:
        return None
    if mask is None or not mask.any():
        return None
    return np.asarray(mask, dtype=bool).reshape(out.shape)


def _view(x: Exact, shape) -> Exact:
    """``x`` broadcast to ``shape``, its -0.0 mask with it."""
    return x.broadcast_to(tuple(shape))


def _nz(x: Exact) -> np.ndarray:
    return x.negzero if x.negzero is not None else np.zeros(x.shape, dtype=bool)


def _odd_negative(p) -> bool:
    """x ** p for an odd negative integer p: a zero result (x = +-inf) has x's sign, as C's pow."""
    p = Fraction(p)
    return p.denominator == 1 and p.numerator % 2 == 1 and p < 0


def _keeps_sign(p) -> bool:
    """x ** p keeps -0.0 for odd integer p and for p = 1/2 (PyTorch runs it as sqrt)."""
    p = Fraction(p)
    return p == Fraction(1, 2) or (p.denominator == 1 and p.numerator % 2 == 1 and p > 0)
