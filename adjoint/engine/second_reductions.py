"""Backward formulas recorded as ops (see adjoint.engine.second_formulas) for reductions and
functions whose formulas multiply by a double constant: ``var`` / ``std`` (var_backward,
std_backward), ``amax`` / ``amin`` (scale_grad_by_count), ``prod`` (without a zero in the input),
the 2-norm (``linalg_vector_norm``: norm_backward), ``erf``, ``log2``, ``log10``, ``hardswish``
(HardswishBackwardBackward0) and ``mish`` (infinitely_differentiable_mish_backward).

The order of the recorded nodes is torch 2.13's (``_sequence_nr()`` of first-order gradients,
tests/test_second_order.py): C++ evaluates the right operand of a binary operator first. A
double constant of a formula (``2.0 / sqrt(M_PI)``, ``M_LN2``, ``2.0 / (N - correction)``) is the
double itself, as the recorded ``MulBackward1`` holds it.
"""

from __future__ import annotations

import math
from fractions import Fraction

from adjoint.engine.ops.activations import compare_forward
from adjoint.engine.second_formulas import NotModelled, _dims, reshape


def _double(x: float) -> Fraction:
    return Fraction(float(x))


def _unsqueeze_multiple(rt, g, dims, ndim: int, loc):
    """unsqueeze_multiple(grad, dims, ndim): grad.unsqueeze(d) for each dim in increasing order."""
    for d in sorted({d % ndim for d in dims}):
        g = rt.apply("unsqueeze", [g], d, loc)
    return g


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def var_backward(rt, node, g, x, params):
    """var_backward(grad, self, dim, correction, keepdim): ``(2.0 / dof) * grad * (self -
    self.mean(dim, true))`` -- the unsqueezed gradient first, then the right operand (MeanBackward0
    or MeanBackward1, SubBackward0), then MulBackward1, MulBackward0. dof <= 0 (PyTorch's
    ``where(self == mean, nan, inf)``) is not built."""
    given, correction, keepdim = params
    shape = tuple(x.shape)
    loc = node.loc
    if given is None or not shape:
        dof = _numel(shape) - correction
        mean = None
    else:
        if not keepdim and len(shape) > 1:
            g = _unsqueeze_multiple(rt, g, given, len(shape), loc)
        n = 1
        for d in {d % len(shape) for d in given}:
            n *= shape[d]
        dof = n - correction
        mean = (tuple(given), True)
    if dof <= 0:
        raise NotModelled(f"{node.name} over N <= correction elements")
    centre = rt.apply("mean", [x], None, loc) if mean is None else rt.apply("mean_dim", [x], mean, loc)
    dev = rt.apply("sub", [x, centre], None, loc)
    scaled = rt.apply("mul_scalar", [g], _double(2.0 / float(dof)), loc)
    return rt.apply("mul", [scaled, dev], None, loc)


def _var(rt, node, grads, saved, need):
    return [var_backward(rt, node, grads[0], saved["self"], node.params)]


def _bool(rt, value):
    return rt.tensor(value, dtype="bool")


def _zero_mask(rt, t):
    B = rt.B
    return _bool(rt, B.mask(t.value, lambda s: s == 0))


def _std(rt, node, grads, saved, need):
    # std_backward: var_backward((grad / (result * 2)).masked_fill_(result == 0, 0), self, ...): MulBackward1,
    # DivBackward0, MaskedFillBackward0 (on the fresh quotient), then var_backward's nodes
    result = saved["result"]
    twice = rt.apply("mul_scalar", [result], Fraction(2), node.loc)
    q = rt.apply("div", [grads[0], twice], None, node.loc)
    grad_var = rt.apply("masked_fill", [q, _zero_mask(rt, result)], 0, node.loc)
    return [var_backward(rt, node, grad_var, saved["self"], node.params)]


def _restore(rt, t, shape, dims, keepdim, loc):
    """restore_reduced_dims(output, dims, keepdim): output.reshape(the reduced dims back as 1s)
    without keepdim (at::reshape by the strides: ViewBackward0 of a contiguous one, also for dims=[], a reshape
    to the same shape)."""
    if keepdim:
        return t
    target = tuple(t.shape) if not dims else tuple(1 if i in _dims(dims, len(shape)) else n
                                                    for i, n in enumerate(shape))
    return reshape(rt, t, target, loc)


def _amax(rt, node, grads, saved, need):
    # AmaxBackward0 / AminBackward0: scale_grad_by_count(restore_reduced_dims(grad, dim, keepdim),
    # restore_reduced_dims(result, dim, keepdim) == self, dim) = (grad / mask.sum(dim, true)) * mask: the
    # arguments right to left (the result's view, then the gradient's), the count an int64 tensor without
    # grad (DivBackward0), times the bool mask (MulBackward0)
    B = rt.B
    dims, keepdim = node.params
    x, result = saved["self"], saved["result"]
    shape = tuple(x.shape)
    r = _restore(rt, result, shape, dims, keepdim, node.loc)
    g = _restore(rt, grads[0], shape, dims, keepdim, node.loc)
    mask = B.broadcast_to(compare_forward(B, [r.value, x.value], "eq"), shape)
    all_dims = tuple(range(len(shape))) if not dims else tuple(dims)
    count = rt.tensor(B.sum_dims(mask, all_dims, True), dtype="int64")
    share = rt.apply("div", [g, count], None, node.loc)
    return [rt.apply("mul", [share, _bool(rt, mask)], None, node.loc)]


def _prod_factor(rt, node, g, x, result):
    if rt.B.any_zero(x.value):
        raise NotModelled(f"{node.name} of an input with a zero")
    return rt.apply("mul", [g, rt.apply("div", [result, x], None, node.loc)], None, node.loc)


def _prod(rt, node, grads, saved, need):
    # ProdBackward0: prod_backward(grad, self, result): grad itself for a 0-d self; without a zero
    # grad * (result / self) (DivBackward0, MulBackward0); with one, prod_safe_zeros_backward (not built)
    x = saved["self"]
    if not x.shape:
        return [grads[0]]
    return [_prod_factor(rt, node, grads[0], x, saved["result"])]


def _prod_dim(rt, node, grads, saved, need):
    # ProdBackward1: without keepdim grad.unsqueeze(dim), then result.unsqueeze(dim); then as ProdBackward0
    x, result, g = saved["self"], saved["result"], grads[0]
    if not x.shape:
        return [g]
    dim, keepdim = node.params[0], node.params[1]
    if not keepdim:
        d = dim % len(x.shape)
        g = rt.apply("unsqueeze", [g], d, node.loc)
        result = rt.apply("unsqueeze", [result], d, node.loc)
    return [_prod_factor(rt, node, g, x, result)]


def _norm(rt, node, grads, saved, need):
    # LinalgVectorNormBackward0 / NormBackward1: norm_backward(grad, self, p, norm, dim, keepdim): without keepdim
    # (and a self that is not 0-d) grad, then norm, unsqueezed at the dims; then by the order (FunctionsManual.cpp):
    # 2: grad * (self / norm).masked_fill_(norm == 0, 0): DivBackward0, MaskedFillBackward0, MulBackward0;
    # 1: self.sgn() * grad: SgnBackward0, MulBackward0;
    # +-inf: self_abs = self.abs() (an AbsBackward0 nothing uses: the mask self_abs == norm | isnan is a bool tensor
    # without node), then self.sgn() * ((grad / mask.sum(dim, true)) * mask), the right operand first:
    # DivBackward0 (an int64 count), MulBackward0, SgnBackward0, MulBackward0 (torch 2.13's sequence numbers).
    # other orders write in place: self.abs().pow_(e) is a PowBackward0 that saves a clone of its self (one
    # more sequence_nr: adjoint.engine.inplace.apply_inplace), masked_fill_ a MaskedFillBackward0 (saving
    # nothing, as out of place):
    # p > 2: self * self.abs().pow_(p - 2), then scale_v = grad / norm.pow(p - 1), masked_fill_(norm == 0, 0),
    # then self_scaled * scale_v; 1 < p < 2: self.sgn() * self.abs().pow_(p - 1) (the right operand first),
    # the same scale_v; p < 1: self.sgn() * self.abs().pow_(p - 1).masked_fill_(self == 0, 0), then
    # (self_scaled * grad) * norm.pow(1 - p), the right operand first (torch 2.13's sequence numbers)
    from adjoint.engine.ops.reductions import norm_params
    order, dims, keepdim = norm_params(node.params)
    if order not in (1, 2, "inf", "-inf") and not _dyadic(order):
        raise NotModelled(f"{node.name} of order {order if isinstance(order, str) else format(float(order), 'g')}")
    x, norm, g, loc = saved["self"], saved["result"], grads[0], node.loc
    if not keepdim and x.shape:
        g = _unsqueeze_multiple(rt, g, dims, len(x.shape), loc)
        norm = _unsqueeze_multiple(rt, norm, dims, len(x.shape), loc)
    if order == 1:
        return [rt.apply("mul", [rt.apply("sgn", [x], None, loc), g], None, loc)]
    if order == 2:
        q = rt.apply("div", [x, norm], None, loc)
        safe = rt.apply("masked_fill", [q, _zero_mask(rt, norm)], 0, loc)
        return [rt.apply("mul", [g, safe], None, loc)]
    if order not in ("inf", "-inf"):
        return [_norm_p(rt, x, norm, g, Fraction(order), loc)]
    B = rt.B
    shape = tuple(x.shape)
    a = rt.apply("abs", [x], None, loc)
    nan = B.choose(B.sub(a.value, a.value), "!=", B.full(shape, 1), B.zeros(shape))   # isnan: nan - nan is nan
    equal = B.broadcast_to(compare_forward(B, [a.value, norm.value], "eq"), shape)
    mask = B.choose(B.add(equal, nan), ">", B.full(shape, 1), B.zeros(shape))
    all_dims = tuple(range(len(shape))) if not dims else tuple(d % len(shape) for d in dims)
    count = rt.tensor(B.sum_dims(mask, all_dims, True), dtype="int64")
    share = rt.apply("mul", [rt.apply("div", [g, count], None, loc), _bool(rt, mask)], None, loc)
    return [rt.apply("mul", [rt.apply("sgn", [x], None, loc), share], None, loc)]


def _dyadic(order) -> bool:
    """An order whose C++ double arithmetic (p - 1, p - 2, 1 - p) is exact: a positive dyadic rational of a small
    denominator (3, 1.5, 0.5, ...); others are refused rather than rounded as C++ would."""
    return isinstance(order, (int, Fraction)) and order > 0 and Fraction(order).denominator in (1, 2, 4, 8, 16)


def _norm_p(rt, x, norm, g, p: Fraction, loc):
    from adjoint.engine.inplace import apply_inplace
    powered = apply_inplace(rt, "pow_scalar", rt.apply("abs", [x], None, loc), [], p - (2 if p > 2 else 1), loc)
    if p < 1:
        powered = rt.apply("masked_fill", [powered, _zero_mask(rt, x)], 0, loc)
    scaled = rt.apply("mul", [x if p > 2 else rt.apply("sgn", [x], None, loc), powered], None, loc)
    if p < 1:
        right = rt.apply("pow_scalar", [norm], 1 - p, loc)
        return rt.apply("mul", [rt.apply("mul", [scaled, g], None, loc), right], None, loc)
    scale = rt.apply("div", [g, rt.apply("pow_scalar", [norm], p - 1, loc)], None, loc)
    scale = rt.apply("masked_fill", [scale, _zero_mask(rt, norm)], 0, loc)
    return rt.apply("mul", [scaled, scale], None, loc)


def _erf(rt, node, grads, saved, need):
    # ErfBackward0: 2.0 / sqrt(M_PI) * exp(-(self.pow(2))) * grad: PowBackward0, NegBackward0, ExpBackward0,
    # MulBackward1 (the double 2 / sqrt(pi)), MulBackward0
    x = saved["self"]
    e = rt.apply("exp", [rt.apply("neg", [rt.apply("pow_scalar", [x], Fraction(2), node.loc)], None, node.loc)],
                 None, node.loc)
    c = rt.apply("mul_scalar", [e], _double(2.0 / math.sqrt(math.pi)), node.loc)
    return [rt.apply("mul", [c, grads[0]], None, node.loc)]


def _log_base(ln: float):
    def formula(rt, node, grads, saved, need):
        # Log2Backward0 / Log10Backward0: grad / (self * M_LN2 or M_LN10): MulBackward1, DivBackward0
        scaled = rt.apply("mul_scalar", [saved["self"]], _double(ln), node.loc)
        return [rt.apply("div", [grads[0], scaled], None, node.loc)]
    return formula


def _hardswish(rt, node, grads, saved, need):
    # HardswishBackward0: hardswish_backward(grad, self): HardswishBackwardBackward0
    return [rt.apply("hardswish_backward", [grads[0], saved["self"]], None, node.loc)]


def _mish(rt, node, grads, saved, need):
    # MishBackward0 under grad mode: infinitely_differentiable_mish_backward: sigmoid = self.sigmoid(),
    # tanh_softplus = self.exp().log1p().tanh(), then grad * (tanh_softplus + self * sigmoid * (1.0 -
    # tanh_softplus * tanh_softplus)), right operands first (sequence numbers in torch 2.13)
    x, loc = saved["self"], node.loc
    s = rt.apply("sigmoid", [x], None, loc)
    t = rt.apply("tanh", [rt.apply("log1p", [rt.apply("exp", [x], None, loc)], None, loc)], None, loc)
    ones = rt.tensor(rt.B.full(tuple(t.shape), 1), dtype=t.dtype)
    rest = rt.apply("sub", [ones, rt.apply("mul", [t, t], None, loc)], None, loc)
    inner = rt.apply("add", [t, rt.apply("mul", [rt.apply("mul", [x, s], None, loc), rest], None, loc)], None, loc)
    return [rt.apply("mul", [grads[0], inner], None, loc)]


REDUCTIONS = {
    "var": _var, "std": _std, "amax": _amax, "amin": _amax, "prod": _prod, "prod_dim": _prod_dim, "norm": _norm,
    "norm_p": _norm,
    "erf": _erf, "log2": _log_base(math.log(2)), "log10": _log_base(math.log(10)), "hardswish": _hardswish,
    "mish": _mish,
}
