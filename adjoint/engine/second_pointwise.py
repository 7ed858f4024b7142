"""Backward formulas recorded as ops (see adjoint.engine.second_formulas) for ``sign`` (zeros),
``abs`` and ``sgn`` (whose real gradient is a ZeroTensor: adjoint.engine.zerotensor),
``x - number``
(``SubBackward1``: C++'s ``tensor - double``, as in ``cosine_embedding_loss``), ``addcmul``,
``addcdiv`` and ``logsumexp``.

The order of the recorded nodes is torch 2.13's (``_sequence_nr()`` of first-order gradients,
tests/test_second_pointwise.py): the generated apply computes the slots in the alphabetical order of
derivatives.yaml's argument names (``self``, ``tensor1``, ``tensor2``), and C++ evaluates the right
operand of a binary operator first (addcdiv's ``(value * tensor1) / (tensor2 * tensor2)`` records
the denominator's ``MulBackward0`` before the numerator's ``MulBackward1``).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.engine.ops.activations import _closed_interval
from adjoint.engine.second_formulas import NotModelled


def _sub_scalar(rt, node, grads, saved, need):
    # SubBackward1 (``tensor - Scalar``): self: grad (no op)
    return [grads[0]]


def _sign(rt, node, grads, saved, need):
    # SignBackward0: zeros_like(grad), a defined gradient of zeros without graph (an input buffer that holds
    # another gradient sums it with a recorded AddBackward0)
    g = grads[0]
    return [rt.tensor(rt.B.zeros(tuple(g.shape)), dtype=g.dtype)]


def _abs(rt, node, grads, saved, need):
    # AbsBackward0: grad * self.sgn(): SgnBackward0 (saving self and result), then MulBackward0
    s = rt.apply("sgn", [saved["self"]], None, node.loc)
    return [rt.apply("mul", [grads[0], s], None, node.loc)]


def _sgn(rt, node, grads, saved, need):
    # SgnBackward0: sgn_backward(self, grad, result); of a real self _efficientzerotensor(sgn.sizes()), no graph
    # (the engine marks it a ZeroTensor: adjoint.engine.zerotensor)
    x = saved["self"]
    if str(x.dtype).startswith("complex"):
        raise NotModelled("SgnBackward0 of a complex tensor")
    return [rt.tensor(rt.B.zeros(tuple(x.shape)), dtype=x.dtype)]


def _bool(rt, B, mask, shape):
    """A comparison's bool tensor (no node: comparisons are not differentiable), of the gradient's shape."""
    return rt.tensor(B.broadcast_to(mask, shape), dtype="bool")


def _clamp_tensor(rt, node, grads, saved, need):
    # ClampBackward0 (clamp with tensor bounds): the generated apply computes min and max first,
    # clamp_backward_min_max(grad, self, min, max, mask): min's where((self < min).logical_and_(min < max), grad,
    # zero), then max's where((self > max).logical_or_(max < min), grad, zero) (one bound: self < min, self > max);
    # then self's clamp_backward: where((self >= min).logical_and_(self <= max), grad, zero). ``zero`` is
    # at::scalar_tensor(0., grad.options()), the masks bool tensors without nodes: one WhereBackward0 each
    # (torch 2.13's sequence numbers); validate_outputs sums each back to its input's shape
    has_lo, has_hi = node.params
    g, x, loc, B = grads[0], saved["self"], node.loc, rt.B
    lo, hi = saved.get("min"), saved.get("max")
    shape = tuple(g.shape)
    one, zero_v = B.full(shape, 1), B.zeros(shape)

    def where(mask):
        return rt.apply("where", [g, rt.tensor(B.zeros(()), dtype=g.dtype), _bool(rt, B, mask, shape)], None, loc)

    out = [None, None, None]
    if need[1] and has_lo:
        below = B.choose(B.sub(x.value, lo.value), "<", one, zero_v)
        if has_hi:
            below = B.choose(B.sub(lo.value, hi.value), "<", below, zero_v)
        out[1] = where(below)
    if need[2] and has_hi:
        above = B.choose(B.sub(x.value, hi.value), ">", one, zero_v)
        if has_lo:
            above = B.choose(B.sub(hi.value, lo.value), "<", one, above)
        out[2] = where(above)
    if need[0]:
        out[0] = where(_closed_interval(B, x.value, one, lo.value if has_lo else None, hi.value if has_hi else None))
    return out


def _addcmul(rt, node, grads, saved, need):
    # AddcmulBackward0: self: grad; tensor1: grad * (tensor2 * value) (MulBackward1, MulBackward0);
    # tensor2: grad * (tensor1 * value); validate_outputs sums a broadcast operand's back
    g, value, loc = grads[0], Fraction(node.params), node.loc
    t1 = t2 = None
    if need[1]:
        t1 = rt.apply("mul", [g, rt.apply("mul_scalar", [saved["tensor2"]], value, loc)], None, loc)
    if need[2]:
        t2 = rt.apply("mul", [g, rt.apply("mul_scalar", [saved["tensor1"]], value, loc)], None, loc)
    return [g if need[0] else None, t1, t2]


def _addcdiv(rt, node, grads, saved, need):
    # AddcdivBackward0: self: grad; tensor1: grad * (value / tensor2) (``Scalar / Tensor`` divides a new tensor of
    # tensor2's sizes filled with value, without grad, in place: DivBackward0, saving it; then MulBackward0); tensor2: -grad * ((value * tensor1) / (tensor2 * tensor2)):
    # the right operand first (MulBackward0 of tensor2 * tensor2, MulBackward1 of tensor1 * value, DivBackward0),
    # then NegBackward0, then MulBackward0
    g, value, loc = grads[0], Fraction(node.params), node.loc
    t1 = t2 = None
    if need[1]:
        t2_ = saved["tensor2"]   # C++'s ``Scalar / Tensor``: empty_like(tensor2).fill_(value).div_(tensor2)
        filled = rt.tensor(rt.B.full(tuple(t2_.shape), value), dtype=t2_.dtype)
        t1 = rt.apply("mul", [g, rt.apply("div", [filled, t2_], None, loc)], None, loc)
    if need[2]:
        square = rt.apply("mul", [saved["tensor2"], saved["tensor2"]], None, loc)
        scaled = rt.apply("mul_scalar", [saved["tensor1"]], value, loc)
        q = rt.apply("div", [scaled, square], None, loc)
        t2 = rt.apply("mul", [rt.apply("neg", [g], None, loc), q], None, loc)
    return [g if need[0] else None, t1, t2]


def _unsqueeze_multiple(rt, t, dims, ndim: int, loc):
    """unsqueeze_multiple(t, dims, ndim): t.unsqueeze(d) for each reduced dim in increasing order."""
    for d in sorted({d % ndim for d in dims}):
        t = rt.apply("unsqueeze", [t], d, loc)
    return t


def _logsumexp(rt, node, grads, saved, need):
    # logsumexp_backward(grad, self, result, dim, keepdim): without keepdim (and a self of at least one dim)
    # grad, then result, unsqueezed at the reduced dims (UnsqueezeBackward0 each); then
    # grad * (self - result).exp(): SubBackward0, ExpBackward0, MulBackward0
    dims, keepdim = node.params
    x, result, g, loc = saved["self"], saved["result"], grads[0], node.loc
    ndim = len(tuple(x.shape))
    if not dims:
        raise NotModelled("LogsumexpBackward0 over an empty dim list")
    if not keepdim and ndim:
        g = _unsqueeze_multiple(rt, g, dims, ndim, loc)
        result = _unsqueeze_multiple(rt, result, dims, ndim, loc)
    e = rt.apply("exp", [rt.apply("sub", [x, result], None, loc)], None, loc)
    return [rt.apply("mul", [g, e], None, loc)]


POINTWISE = {"sub_scalar": _sub_scalar, "sign": _sign, "abs": _abs, "sgn": _sgn, "clamp_tensor": _clamp_tensor, "addcmul": _addcmul, "addcdiv": _addcdiv, "logsumexp": _logsumexp}
