"""Backward formulas recorded as ops: what a node computes under ``create_graph=True``.

With ``create_graph`` PyTorch's engine runs every node with grad mode on, so the node's backward
formula (derivatives.yaml, torch/csrc/autograd/FunctionsManual.cpp) is itself a sequence of
ordinary ATen calls: each one whose operands require grad makes a node, with the next
``sequence_nr``. One function per primitive here replays those calls through
:meth:`adjoint.engine.runtime.Runtime.apply`, in PyTorch's order (checked in real torch 2.13 by printing
``grad_fn`` chains and ``_sequence_nr()`` of first-order gradients; tests/test_second_order.py).

The generated ``apply`` of a node computes its inputs' gradients in the alphabetical order of
the argument names in derivatives.yaml (``MulBackward0``: ``other`` before ``self``;
``MmBackward0``: ``mat2`` before ``self``; ``AddmmBackward0``: ``mat1``, ``mat2``, ``self``),
so the formulas below make their nodes in that order.

A formula is ``f(rt, node, grads, saved, need)``: ``grads`` the incoming gradient tensors (one per
output), ``saved`` the node's saved tensors by name (inputs as the tensors themselves, outputs
rebuilt with the node as grad_fn, as ``SavedVariable::unpack`` does), ``need[i]`` whether input
slot ``i``'s gradient is wanted; it returns one Tensor or None per input slot. A primitive
without an entry is refused (``create_graph through OP is not modelled yet``), never computed
another way.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.engine.ops.activations import _bounds, _closed_interval, compare_forward
from adjoint.engine.ops.views import split_sizes
from adjoint.values.strides import is_contiguous, view_strides


def _mul(rt, node, grads, saved, need):
    # MulBackward0: the generated apply computes ``other`` (grad * self) before ``self`` (grad * other)
    g = grads[0]
    other = rt.apply("mul", [g, saved["self"]], None, node.loc) if need[1] else None
    this = rt.apply("mul", [g, saved["other"]], None, node.loc) if need[0] else None
    return [this, other]


def _add(rt, node, grads, saved, need):
    # AddBackward0 (alpha 1): the gradient itself to both slots (no op)
    return [grads[0] if need[0] else None, grads[0] if len(need) > 1 and need[1] else None]


def _add_scalar(rt, node, grads, saved, need):
    # AddBackward1 (``x + number``): the gradient itself (no op)
    return [grads[0]]


def _sub(rt, node, grads, saved, need):
    # SubBackward0 (alpha 1): other is -grad (NegBackward0), computed before self (grad itself)
    other = rt.apply("neg", [grads[0]], None, node.loc) if len(need) > 1 and need[1] else None
    return [grads[0] if need[0] else None, other]


def _neg(rt, node, grads, saved, need):
    return [rt.apply("neg", [grads[0]], None, node.loc)]


def _mul_scalar(rt, node, grads, saved, need):
    # MulBackward1: grad * other (a Scalar): mul.Scalar again
    return [rt.apply("mul_scalar", [grads[0]], node.params, node.loc)]


def _div_scalar(rt, node, grads, saved, need):
    return [rt.apply("div_scalar", [grads[0]], node.params, node.loc)]


def _pow_scalar(rt, node, grads, saved, need):
    # pow_backward: grad * (exponent * self.pow(exponent - 1)); exponent 0: zeros_like(self)
    p = node.params
    x = saved["self"]
    if p == 0:
        return [rt.tensor(rt.B.zeros(x.shape))]
    local = rt.apply("mul_scalar", [rt.apply("pow_scalar", [x], p - 1, node.loc)], p, node.loc)
    return [rt.apply("mul", [grads[0], local], None, node.loc)]


def _tanh(rt, node, grads, saved, need):
    # tanh_backward(grad, result): TanhBackwardBackward0
    return [rt.apply("tanh_backward", [grads[0], saved["result"]], None, node.loc)]


def _sigmoid(rt, node, grads, saved, need):
    # sigmoid_backward(grad, result): SigmoidBackwardBackward0
    return [rt.apply("sigmoid_backward", [grads[0], saved["result"]], None, node.loc)]


def _silu(rt, node, grads, saved, need):
    # SiluBackward0 under grad mode: infinitely_differentiable_silu_backward(grad, self), that is
    # ``sigmoid = self.sigmoid(); grad * sigmoid * (1.0 + self * (1.0 - sigmoid))``, the right operand
    # first: SigmoidBackward0, SubBackward0 (``1.0 - t`` in C++ is ``empty_like(t).fill_(1.0).sub_(t)``,
    # not rsub), MulBackward0, AddBackward1, then ``grad * sigmoid`` (MulBackward0) and the product
    # (MulBackward0): sequence numbers in torch 2.13
    x = saved["self"]
    s = rt.apply("sigmoid", [x], None, node.loc)
    ones = rt.tensor(rt.B.full(tuple(s.shape), 1), dtype=s.dtype)
    right = rt.apply("add_scalar", [rt.apply("mul", [x, rt.apply("sub", [ones, s], None, node.loc)], None, node.loc)],
                     Fraction(1), node.loc)
    return [rt.apply("mul", [rt.apply("mul", [grads[0], s], None, node.loc), right], None, node.loc)]


def _elu(rt, node, grads, saved, need):
    # EluBackward0: elu_backward(grad, alpha, scale, input_scale, /* is_result */ false, self): EluBackwardBackward0
    return [rt.apply("elu_backward", [grads[0], saved["self"]], node.params, node.loc)]


def _softplus(rt, node, grads, saved, need):
    # SoftplusBackward0: softplus_backward(grad, self, beta, threshold): SoftplusBackwardBackward0
    return [rt.apply("softplus_backward", [grads[0], saved["self"]], node.params, node.loc)]


def _gelu(rt, node, grads, saved, need):
    # GeluBackward0: gelu_backward(grad, self, approximate): GeluBackwardBackward0 (its own create_graph formula,
    # gelu_double_backward's ops, is not built: a third backward through it is refused)
    return [rt.apply("gelu_backward", [grads[0], saved["self"]], node.params, node.loc)]


def _exp(rt, node, grads, saved, need):
    # grad * result
    return [rt.apply("mul", [grads[0], saved["result"]], None, node.loc)]


def _log(rt, node, grads, saved, need):
    # grad.div(self)
    return [rt.apply("div", [grads[0], saved["self"]], None, node.loc)]


def _sqrt(rt, node, grads, saved, need):
    # grad / (2 * result): MulBackward1, then DivBackward0
    twice = rt.apply("mul_scalar", [saved["result"]], Fraction(2), node.loc)
    return [rt.apply("div", [grads[0], twice], None, node.loc)]


def _sin(rt, node, grads, saved, need):
    # grad * self.cos()
    return [rt.apply("mul", [grads[0], rt.apply("cos", [saved["self"]], None, node.loc)], None, node.loc)]


def _cos(rt, node, grads, saved, need):
    # grad * -self.sin()
    minus = rt.apply("neg", [rt.apply("sin", [saved["self"]], None, node.loc)], None, node.loc)
    return [rt.apply("mul", [grads[0], minus], None, node.loc)]


def _sinh(rt, node, grads, saved, need):
    # grad * self.cosh()
    return [rt.apply("mul", [grads[0], rt.apply("cosh", [saved["self"]], None, node.loc)], None, node.loc)]


def _cosh(rt, node, grads, saved, need):
    # grad * self.sinh()
    return [rt.apply("mul", [grads[0], rt.apply("sinh", [saved["self"]], None, node.loc)], None, node.loc)]


def _atan(rt, node, grads, saved, need):
    # grad / (self * self + 1): MulBackward0, AddBackward1, DivBackward0
    x = saved["self"]
    denom = rt.apply("add_scalar", [rt.apply("mul", [x, x], None, node.loc)], Fraction(1), node.loc)
    return [rt.apply("div", [grads[0], denom], None, node.loc)]


def _log1p(rt, node, grads, saved, need):
    # log1p_backward: grad / (self + 1): AddBackward1, DivBackward0
    return [rt.apply("div", [grads[0], rt.apply("add_scalar", [saved["self"]], Fraction(1), node.loc)], None, node.loc)]


def _expm1(rt, node, grads, saved, need):
    # grad * (result + 1): AddBackward1, MulBackward0
    return [rt.apply("mul", [grads[0], rt.apply("add_scalar", [saved["result"]], Fraction(1), node.loc)], None, node.loc)]


def _tan(rt, node, grads, saved, need):
    # grad * (1 + result.pow(2)): PowBackward0, AddBackward1, MulBackward0
    square = rt.apply("pow_scalar", [saved["result"]], Fraction(2), node.loc)
    return [rt.apply("mul", [grads[0], rt.apply("add_scalar", [square], Fraction(1), node.loc)], None, node.loc)]


def _rsqrt(rt, node, grads, saved, need):
    # -0.5 * grad * result.pow(3): the right operand first (PowBackward0, then MulBackward1, then
    # MulBackward0: sequence numbers in torch 2.13 with a gradient that requires grad)
    cube = rt.apply("pow_scalar", [saved["result"]], Fraction(3), node.loc)
    half = rt.apply("mul_scalar", [grads[0]], Fraction(-1, 2), node.loc)
    return [rt.apply("mul", [half, cube], None, node.loc)]


def _div(rt, node, grads, saved, need):
    # DivBackward0: other first, -grad * ((self / other) / other) (the right operand, then -grad), then self: grad / other
    g = grads[0]
    other = None
    if need[1]:
        q = rt.apply("div", [rt.apply("div", [saved["self"], saved["other"]], None, node.loc), saved["other"]], None,
                     node.loc)
        other = rt.apply("mul", [rt.apply("neg", [g], None, node.loc), q], None, node.loc)
    this = rt.apply("div", [g, saved["other"]], None, node.loc) if need[0] else None
    return [this, other]


def _threshold(rt, node, grads, saved, need):
    # ThresholdBackward0 / ThresholdBackward1: threshold_backward(grad, self, threshold): ThresholdBackwardBackward0
    return [rt.apply("threshold_backward", [grads[0], saved["self"]], node.params[0], node.loc)]


def _shrink(prim: str):
    """SoftshrinkBackward0 / HardshrinkBackward0: X_backward(grad, self, lambd): XBackwardBackward0."""
    def formula(rt, node, grads, saved, need):
        return [rt.apply(prim, [grads[0], saved["self"]], node.params, node.loc)]
    return formula


def _shrink_backward(rt, node, grads, saved, need):
    # SoftshrinkBackwardBackward0 / HardshrinkBackwardBackward0: grad_output: X_backward(grad, self, lambd);
    # self: zeros_like(grad)
    g = grads[0]
    a = rt.apply(node.op.name, [g, saved["self"]], node.params, node.loc) if need[0] else None
    return [a, _zeros_like(rt, g) if len(need) > 1 and need[1] else None]


def _celu(rt, node, grads, saved, need):
    # CeluBackward0: elu_backward(grad, alpha, 1, 1.0 / alpha.toFloat(), false, self): EluBackwardBackward0
    alpha, _, backward_scale = node.params
    return [rt.apply("elu_backward", [grads[0], saved["self"]], (alpha, Fraction(1), backward_scale), node.loc)]


def _leaky_relu(rt, node, grads, saved, need):
    # leaky_relu_backward(grad, self, negative_slope, false): LeakyReluBackwardBackward0
    return [rt.apply("leaky_relu_backward", [grads[0], saved["self"]], node.params, node.loc)]


def _rsub(rt, node, grads, saved, need):
    # RsubBackward1 (``number - x``, alpha 1): -grad (NegBackward0)
    return [rt.apply("neg", [grads[0]], None, node.loc)]


def _reciprocal(rt, node, grads, saved, need):
    # -grad * (result * result): the right operand first (MulBackward0), then NegBackward0, then MulBackward0
    square = rt.apply("mul", [saved["result"], saved["result"]], None, node.loc)
    return [rt.apply("mul", [rt.apply("neg", [grads[0]], None, node.loc), square], None, node.loc)]


def _where(rt, node, grads, saved, need):
    # WhereBackward0: other (where(condition, 0, grad)) before self (where(condition, grad, 0)); the
    # 0 is a wrapped number (no edge), the condition a bool tensor (no edge)
    g, cond = grads[0], saved["condition"]
    other = rt.apply("where", [Fraction(0), g, cond], None, node.loc) if len(need) > 1 and need[1] else None
    this = rt.apply("where", [g, Fraction(0), cond], None, node.loc) if need[0] else None
    return [this, other]


def _masked_where(rt, node, g, x, lo, hi):
    """clamp_backward's ``where(mask, grad, zero)``: the mask (``self >= min``, ``self <= max``,
    both with logical_and_) is computed without a node, ``zero`` a 0-d tensor of the gradient's
    options; one WhereBackward0."""
    B = rt.B
    mask = rt.tensor(_closed_interval(B, x.value, B.full(tuple(x.shape), 1), lo, hi), dtype="bool")
    zero = rt.tensor(B.zeros(()), dtype=g.dtype)
    return rt.apply("where", [g, zero, mask], None, node.loc)


def _clamp(rt, node, grads, saved, need):
    # ClampBackward1: clamp_backward(grad, self, min, max)
    lo, hi = _bounds(rt.B, node.params)
    return [_masked_where(rt, node, grads[0], saved["self"], lo, hi)]


def _clamp_min(rt, node, grads, saved, need):
    # ClampMinBackward0: where(self >= min, grad, at::scalar_tensor(0., grad.options()))
    return [_masked_where(rt, node, grads[0], saved["self"], rt.B.scalar(Fraction(node.params)), None)]


def _clamp_max(rt, node, grads, saved, need):
    # ClampMaxBackward0: where(self <= max, grad, at::scalar_tensor(0., grad.options()))
    return [_masked_where(rt, node, grads[0], saved["self"], None, rt.B.scalar(Fraction(node.params)))]


def _squeeze_one(rt, node, grads, saved, need):
    # SqueezeBackward4 (squeeze_(dim), matmul's 1-D path): unsqueeze_to(grad, dim, sizes): grad.unsqueeze(dim)
    # (UnsqueezeBackward0) when that size is 1
    shape = tuple(node.inputs[0].shape)
    d = node.params % len(shape)
    return [rt.apply("unsqueeze", [grads[0]], d, node.loc) if shape[d] == 1 else grads[0]]


def _clone(rt, node, grads, saved, need):
    # CloneBackward0, AliasBackward0 (``x[:, :n]`` over a whole dim): the gradient itself (no op)
    return [grads[0]]


def _copy(rt, node, grads, saved, need):
    # CopyBackwards::apply: zeros_like(grad) for the overwritten tensor (no node), grad.to(src's options)
    # for the source: the gradient itself when the dtypes agree (validate_outputs sums a broadcast one)
    g = grads[0]
    src = node.inputs[1] if len(node.inputs) > 1 else None
    if len(need) > 1 and need[1] and src is not None and src.dtype != g.dtype:
        raise NotModelled("CopyBackwards from another dtype")
    this = rt.tensor(rt.B.zeros(tuple(g.shape)), dtype=g.dtype) if need[0] else None
    return [this, g if len(need) > 1 and need[1] else None]


def _bmm(rt, node, grads, saved, need):
    # BmmBackward0: mat2 (self.transpose(1, 2).bmm(grad)) before self (grad.bmm(mat2.transpose(1, 2))),
    # each transpose evaluated before its bmm
    g = grads[0]
    b = None
    if len(need) > 1 and need[1]:
        b = rt.apply("bmm", [rt.apply("transpose", [saved["self"]], (1, 2), node.loc), g], None, node.loc)
    a = None
    if need[0]:
        a = rt.apply("bmm", [g, rt.apply("transpose", [saved["mat2"]], (1, 2), node.loc)], None, node.loc)
    return [a, b]


def _select(rt, node, grads, saved, need):
    # SelectBackward0: select_backward(grad, self.sizes(), dim, index): SelectBackwardBackward0
    return [rt.apply("select_backward", [grads[0]], (tuple(node.inputs[0].shape),) + tuple(node.params), node.loc)]


def _slice(rt, node, grads, saved, need):
    # SliceBackward0: slice_backward(grad, self.sizes(), dim, start, end, step): SliceBackwardBackward0
    return [rt.apply("slice_backward", [grads[0]], (tuple(node.inputs[0].shape),) + tuple(node.params), node.loc)]


def _select_backward_again(rt, node, grads, saved, need):
    # SelectBackwardBackward0: grad.select(dim, index) (SelectBackward0)
    return [rt.apply("select", [grads[0]], tuple(node.params[1:]), node.loc)]


def _slice_backward_again(rt, node, grads, saved, need):
    # SliceBackwardBackward0: grad.slice(dim, start, end, step) (SliceBackward0)
    return [rt.apply("slice", [grads[0]], tuple(node.params[1:]), node.loc)]


def _softmax(rt, node, grads, saved, need):
    # SoftmaxBackward0: _softmax_backward_data(grad, result, dim, self.scalar_type()): SoftmaxBackwardDataBackward0
    return [rt.apply("softmax_backward_data", [grads[0], saved["result"]], node.params, node.loc)]


def _log_softmax(rt, node, grads, saved, need):
    # LogSoftmaxBackward0: _log_softmax_backward_data(grad, result, dim, self.scalar_type()):
    # LogSoftmaxBackwardDataBackward0
    return [rt.apply("log_softmax_backward_data", [grads[0], saved["result"]], node.params, node.loc)]


def _nll_loss(rt, node, grads, saved, need):
    # NllLossBackward0: nll_loss_backward(grad, self, target, weight, reduction, ignore_index, total_weight):
    # NllLossBackwardBackward0 (its edges: grad and self)
    weighted = node.op.name == "nll_loss_w"
    ins = [grads[0], saved["self"], saved["target"]] + ([saved["weight"]] if weighted else []) + [saved["total_weight"]]
    out = rt.apply("nll_loss_backward_w" if weighted else "nll_loss_backward", ins, node.params, node.loc)
    return [out] + [None] * (len(need) - 1)


def _tanh_backward(rt, node, grads, saved, need):
    # TanhBackwardBackward0: grad_output (tanh_backward(grad, output)) before output
    # (grad * (-2 * output * grad_output): the right operand first, MulBackward1, MulBackward0, MulBackward0)
    g, out = grads[0], saved["output"]
    a = rt.apply("tanh_backward", [g, out], None, node.loc) if need[0] else None
    b = None
    if len(need) > 1 and need[1]:
        twice = rt.apply("mul_scalar", [out], Fraction(-2), node.loc)
        b = rt.apply("mul", [g, rt.apply("mul", [twice, saved["grad_output"]], None, node.loc)], None, node.loc)
    return [a, b]


def _sigmoid_backward(rt, node, grads, saved, need):
    # SigmoidBackwardBackward0: grad_output (sigmoid_backward(grad, output)) before output
    # (grad * grad_output * (-2 * output + 1): the right operand first, MulBackward1, AddBackward1, then
    # grad * grad_output, then their product)
    g, out = grads[0], saved["output"]
    a = rt.apply("sigmoid_backward", [g, out], None, node.loc) if need[0] else None
    b = None
    if len(need) > 1 and need[1]:
        right = rt.apply("add_scalar", [rt.apply("mul_scalar", [out], Fraction(-2), node.loc)], Fraction(1), node.loc)
        left = rt.apply("mul", [g, saved["grad_output"]], None, node.loc)
        b = rt.apply("mul", [left, right], None, node.loc)
    return [a, b]


def _elu_backward(rt, node, grads, saved, need):
    # EluBackwardBackward0: grad_output (elu_backward(grad, ..., self)) before self_or_result
    # (elu_double_backward: elu_backward(grad * grad_output * input_scale, ..., self) * (self < 0).type_as(grad):
    # the mask without a node, then MulBackward0, MulBackward1, EluBackwardBackward0, MulBackward0)
    g, x = grads[0], saved["self_or_result"]
    a = rt.apply("elu_backward", [g, x], node.params, node.loc) if need[0] else None
    b = None
    if len(need) > 1 and need[1]:
        B = rt.B
        mask = rt.tensor(B.choose(x.value, "<", B.full(tuple(x.shape), 1), B.zeros(tuple(x.shape))), dtype=g.dtype)
        scaled = rt.apply("mul_scalar", [rt.apply("mul", [g, saved["grad_output"]], None, node.loc)],
                          Fraction(node.params[2]), node.loc)
        b = rt.apply("mul", [rt.apply("elu_backward", [scaled, x], node.params, node.loc), mask], None, node.loc)
    return [a, b]


def _softplus_backward(rt, node, grads, saved, need):
    # SoftplusBackwardBackward0: grad_output (softplus_backward(grad, self, beta, threshold)) before self
    # (softplus_double_backward(grad * grad_output, self, beta, threshold): MulBackward0 of the argument, then
    # x = self * beta (MulBackward1), x.sigmoid() (SigmoidBackward0), sigmoid_backward (SigmoidBackwardBackward0),
    # times the mask x < threshold (no node; MulBackward0), times beta (MulBackward1))
    g, x = grads[0], saved["self"]
    a = rt.apply("softplus_backward", [g, x], node.params, node.loc) if need[0] else None
    b = None
    if len(need) > 1 and need[1]:
        B = rt.B
        beta, threshold = (Fraction(v) for v in node.params)
        arg = rt.apply("mul", [g, saved["grad_output"]], None, node.loc)
        bx = rt.apply("mul_scalar", [x], beta, node.loc)
        slope = rt.apply("sigmoid_backward", [arg, rt.apply("sigmoid", [bx], None, node.loc)], None, node.loc)
        below = rt.tensor(B.choose(B.sub(bx.value, B.scalar(threshold)), "<", B.full(tuple(x.shape), 1),
                                   B.zeros(tuple(x.shape))), dtype=g.dtype)
        b = rt.apply("mul_scalar", [rt.apply("mul", [slope, below], None, node.loc)], beta, node.loc)
    return [a, b]


def _zeros_like(rt, g):
    """zeros_like(grad): a gradient of zeros with no graph (the derivative is 0, not undefined)."""
    return rt.tensor(rt.B.zeros(tuple(g.shape)), dtype=g.dtype)


def _threshold_backward(rt, node, grads, saved, need):
    # ThresholdBackwardBackward0: grad_output: threshold_backward(grad, self, 0); self: zeros_like(grad)
    g = grads[0]
    a = rt.apply("threshold_backward", [g, saved["self"]], node.params, node.loc) if need[0] else None
    return [a, _zeros_like(rt, g) if len(need) > 1 and need[1] else None]


def _leaky_relu_backward(rt, node, grads, saved, need):
    # LeakyReluBackwardBackward0: grad_output: leaky_relu_backward(grad, self, negative_slope, false);
    # self: zeros_like(grad)
    g = grads[0]
    a = rt.apply("leaky_relu_backward", [g, saved["self"]], node.params, node.loc) if need[0] else None
    return [a, _zeros_like(rt, g) if len(need) > 1 and need[1] else None]


def _bool_mask(rt, a, b, rel: str):
    """``self REL other`` as the backward formula computes it (no node): a bool tensor."""
    return rt.tensor(compare_forward(rt.B, [a.value, b.value], rel), dtype="bool")


def _extremum(largest: bool):
    """MaximumBackward0 / MinimumBackward0: other, then self, each
    ``at::where(self == other, grad / 2, grad).masked_fill_(self LOSES other, 0)`` (DivBackward1,
    WhereBackward0, MaskedFillBackward0 on the fresh where result); maximum's self loses where
    self < other, its other where self > other (minimum: swapped)."""
    def formula(rt, node, grads, saved, need):
        g, a, b = grads[0], saved["self"], saved["other"]
        equal = _bool_mask(rt, a, b, "eq")

        def part(rel):
            half = rt.apply("div_scalar", [g], Fraction(2), node.loc)
            shared = rt.apply("where", [half, g, equal], None, node.loc)
            return rt.apply("masked_fill", [shared, _bool_mask(rt, a, b, rel)], 0, node.loc)
        other = part("gt" if largest else "lt") if len(need) > 1 and need[1] else None
        this = part("lt" if largest else "gt") if need[0] else None
        return [this, other]
    return formula


def _extreme_all(rt, node, grads, saved, need):
    # MaxBackward1 / MinBackward1: evenly_distribute_backward(grad, self, result) on the CPU:
    # grad.new_zeros(sizes).masked_fill_(mask, grad / mask.sum()), mask = self == result (self.isnan()
    # when the result is nan): DivBackward0 (the count an int64 tensor without grad), MaskedFillBackward1
    g, x, result = grads[0], saved["self"], saved["result"]
    B = rt.B
    nan = B.mask(result.value, lambda s: s == "nan")
    if any(B.ints(nan)):
        mask = B.mask(x.value, lambda s: s == "nan")
    else:
        mask = B.broadcast_to(compare_forward(B, [x.value, result.value], "eq"), tuple(x.shape))
    count = rt.tensor(B.total(mask), dtype="int64")
    share = rt.apply("div", [g, count], None, node.loc)
    zeros = rt.tensor(B.zeros(tuple(x.shape)), dtype=g.dtype)
    return [rt.apply("masked_fill_tensor", [zeros, share, rt.tensor(mask, dtype="bool")], None, node.loc)]


def _masked_fill(rt, node, grads, saved, need):
    # MaskedFillBackward0: grad.masked_fill(mask, 0) (validate_outputs sums a broadcast one back)
    return [rt.apply("masked_fill", [grads[0], saved["mask"]], 0, node.loc), None]


def _masked_fill_tensor(rt, node, grads, saved, need):
    # MaskedFillBackward1: self: grad.masked_fill(mask, 0); value: masked_fill_backward (masked_select, not
    # modelled: refused)
    if len(need) > 1 and need[1]:
        raise NotModelled("MaskedFillBackward1 (its value's gradient)")
    return [rt.apply("masked_fill", [grads[0], saved["mask"]], 0, node.loc) if need[0] else None, None, None]


def _cat(rt, node, grads, saved, need):
    # CatBackward0: cat_tensors_backward fills every slot once one is needed (one TensorList argument):
    # grad.narrow(dim, offset, size) per input in order (SliceBackward0 each); an empty 1-D input: empty
    if not any(need):
        return [None] * len(need)
    g, dim, start, out = grads[0], node.params, 0, []
    for x in node.inputs:
        if tuple(x.shape) == (0,):
            out.append(rt.tensor(rt.B.zeros((0,)), dtype=g.dtype))
            continue
        n = x.shape[dim]
        out.append(rt.apply("slice", [g], (dim, start, start + n, 1), node.loc))
        start += n
    return out


def _stack(rt, node, grads, saved, need):
    # StackBackward0: stack_tensors_backward: grad.select(dim, i) per input in order (SelectBackward0 each)
    if not any(need):
        return [None] * len(need)
    return [rt.apply("select", [grads[0]], (node.params, i), node.loc) for i in range(len(node.inputs))]


def _pieces(rt, node, grads):
    """split_backward / unbind_backward: the pieces' gradients, zeros (no node) where none came."""
    return [g if g is not None else rt.tensor(rt.B.zeros(tuple(shape)), dtype=dtype)
            for g, (shape, dtype) in zip(grads, node.outputs)]


def _split(rt, node, grads, saved, need):
    # SplitBackward0 / SplitWithSizesBackward0: at::cat of the pieces' gradients (CatBackward0)
    dim = split_sizes(tuple(node.inputs[0].shape), node.params)[1]
    return [rt.apply("cat", _pieces(rt, node, grads), dim, node.loc)]


def _unbind(rt, node, grads, saved, need):
    # UnbindBackward0: at::stack of the pieces' gradients (StackBackward0)
    return [rt.apply("stack", _pieces(rt, node, grads), node.params, node.loc)]


def _dims(dims, ndim: int) -> list:
    return sorted({d % ndim for d in dims}) if dims else list(range(ndim))


def _sum_backward(rt, node, g, loc):
    """sum_backward(grad, sizes, dims, keepdim): without keepdim, grad.unsqueeze(d) for each
    reduced dim in increasing order (one UnsqueezeBackward0 each), then expand (ExpandBackward0)."""
    shape = tuple(node.inputs[0].shape)
    dims, keepdim = node.params
    if not keepdim and shape:
        for d in _dims(dims, len(shape)):
            g = rt.apply("unsqueeze", [g], d, loc)
    return rt.apply("expand", [g], shape, loc)


def _sum_dim(rt, node, grads, saved, need):
    return [_sum_backward(rt, node, grads[0], node.loc)]


def _mean_dim(rt, node, grads, saved, need):
    # mean_backward: sum_backward(...) / the number of elements reduced (DivBackward1)
    shape = tuple(node.inputs[0].shape)
    n = 1
    for d in _dims(node.params[0], len(shape)):
        n *= shape[d]
    return [rt.apply("div_scalar", [_sum_backward(rt, node, grads[0], node.loc)], Fraction(n), node.loc)]


def _unsqueeze(rt, node, grads, saved, need):
    # UnsqueezeBackward0: grad.squeeze(dim) (SqueezeBackward1)
    return [rt.apply("squeeze_dim", [grads[0]], (node.params,), node.loc)]


def _squeeze(rt, node, grads, saved, need):
    # SqueezeBackward0/1/2: unsqueeze_to(grad, dims, sizes): grad.unsqueeze(d) for each squeezed size-1 dim
    shape = tuple(node.inputs[0].shape)
    p = node.params
    dims = [i for i, d in enumerate(shape) if d == 1] if p is None else sorted(d % len(shape) for d in p
                                                                              if shape[d % len(shape)] == 1)
    g = grads[0]
    for d in dims:
        g = rt.apply("unsqueeze", [g], d, node.loc)
    return [g]


def _transpose(rt, node, grads, saved, need):
    # TransposeBackward0 / TransposeBackward1 (transpose_): grad.transpose(dim0, dim1) (TransposeBackward0)
    return [rt.apply("transpose", [grads[0]], node.params, node.loc)]


def _permute(rt, node, grads, saved, need):
    # PermuteBackward0: permute_backwards: grad.permute(the inverse permutation)
    perm = [d % len(node.params) for d in node.params]
    inverse = [0] * len(perm)
    for i, d in enumerate(perm):
        inverse[d] = i
    return [rt.apply("permute", [grads[0]], tuple(inverse), node.loc)]


def _relu(rt, node, grads, saved, need):
    # threshold_backward(grad, result, 0): ThresholdBackwardBackward0
    return [rt.apply("threshold_backward", [grads[0], saved["result"]], None, node.loc)]


def _sum(rt, node, grads, saved, need):
    # SumBackward0: grad.expand(self.sizes())
    return [rt.apply("expand", [grads[0]], tuple(node.inputs[0].shape), node.loc)]


def _mean(rt, node, grads, saved, need):
    # MeanBackward0: mean_backward = sum_backward(grad, sizes).div(numel): ExpandBackward0, DivBackward1
    shape = tuple(node.inputs[0].shape)
    n = 1
    for d in shape:
        n *= d
    expanded = rt.apply("expand", [grads[0]], shape, node.loc)
    return [rt.apply("div_scalar", [expanded], Fraction(n), node.loc)]


def _t(rt, node, grads, saved, need):
    # TBackward0 / TBackward1 (t_): grad.t() (TBackward0)
    return [rt.apply("t", [grads[0]], None, node.loc)]


def _column_major(t) -> bool:
    """mm_mat1_backward / mm_mat2_backward's test: strides[0] == 1 and strides[1] == sizes[0]."""
    return len(t.strides) == 2 and t.strides[0] == 1 and t.strides[1] == t.shape[0]


def _mat1_grad(rt, node, g, mat1, mat2):
    if _column_major(mat1):   # maybe_multiply(mat2.conj().mm(grad.t()).t(), alpha)
        inner = rt.apply("mm", [mat2, rt.apply("t", [g], None, node.loc)], None, node.loc)
        return rt.apply("t", [inner], None, node.loc)
    return rt.apply("mm", [g, rt.apply("t", [mat2], None, node.loc)], None, node.loc)


def _mat2_grad(rt, node, g, mat1, mat2):
    if _column_major(mat2):   # maybe_multiply(grad.t().mm(mat1.conj()).t(), alpha)
        inner = rt.apply("mm", [rt.apply("t", [g], None, node.loc), mat1], None, node.loc)
        return rt.apply("t", [inner], None, node.loc)
    return rt.apply("mm", [rt.apply("t", [mat1], None, node.loc), g], None, node.loc)


def _mm(rt, node, grads, saved, need):
    # MmBackward0: mat2 (mm_mat2_backward), then self (mm_mat1_backward): alphabetical, as the generated apply
    g = grads[0]
    mat1, mat2 = node.inputs
    b = _mat2_grad(rt, node, g, saved["self"], mat2) if need[1] else None
    a = _mat1_grad(rt, node, g, mat1, saved["mat2"]) if need[0] else None
    return [a, b]


def _addmm(rt, node, grads, saved, need):
    # AddmmBackward0 (beta = alpha = 1): self is grad itself; mat1, then mat2, as mm
    if node.params not in (None, (1, 1), (Fraction(1), Fraction(1))):
        raise NotModelled("AddmmBackward0 with beta or alpha")
    g = grads[0]
    _, mat1, mat2 = node.inputs
    a = _mat1_grad(rt, node, g, mat1, saved["mat2"]) if need[1] else None
    b = _mat2_grad(rt, node, g, saved["mat1"], mat2) if need[2] else None
    return [g if need[0] else None, a, b]


def _mse_loss(rt, node, grads, saved, need):
    # MseLossBackward0: self: mse_loss_backward(grad, self, target), then target: mse_loss_backward(grad, target, self)
    g = grads[0]
    x, y = saved["self"], saved["target"]
    a = rt.apply("mse_loss_backward", [g, x, y], node.params, node.loc) if need[0] else None
    b = rt.apply("mse_loss_backward", [g, y, x], node.params, node.loc) if need[1] else None
    return [a, b]


def reshape(rt, t, shape: tuple, loc):
    """at::reshape as a backward formula calls it (``grad.reshape(self.sizes())``): the node it records
    depends on the tensor's strides, as ATen decides -- ``view`` (ViewBackward0) of a contiguous tensor,
    a new one even when the sizes are its own; ``_reshape_alias`` (ReshapeAliasBackward0) when
    computeStride finds strides for the new shape; else ``clone`` (contiguous) then ``_unsafe_view``
    (CloneBackward0, UnsafeViewBackward0). Every formula that reshapes calls this one."""
    if is_contiguous(t.shape, t.strides):
        return rt.apply("view", [t], tuple(shape), loc)
    if view_strides(tuple(t.shape), tuple(t.strides), tuple(shape)) is not None:
        return rt.apply("reshape_alias", [t], tuple(shape), loc)
    return rt.apply("unsafe_view", [rt.apply("clone", [t], None, loc)], tuple(shape), loc)


def _view(rt, node, grads, saved, need):
    # ViewBackward0 / UnsafeViewBackward0 / ReshapeAliasBackward0: grad.reshape(self.sizes()) (a ViewBackward0
    # even when the sizes are the gradient's own: x.view(x.shape), instance_norm's views)
    return [reshape(rt, grads[0], tuple(node.inputs[0].shape), node.loc)]


def _expand(rt, node, grads, saved, need):
    # ExpandBackward0: at::sum_to(grad, self.sizes())
    return [sum_to(rt, grads[0], tuple(node.inputs[0].shape), node.loc)]


def sum_to(rt, g, shape: tuple, loc):
    """at::sum_to (validate_outputs, ExpandBackward0): to a 0-d shape ``tensor.sum()`` (SumBackward0);
    else a sum over the leading and the broadcast dimensions with keepdim (SumBackward1), then a
    view when leading dimensions went away."""
    sizes = tuple(g.shape)
    if sizes == shape:
        return g
    if not shape:   # _sum_to: a 0-d shape is tensor.sum() (SumBackward0)
        return rt.apply("sum", [g], None, loc)
    lead = len(sizes) - len(shape)
    dims = list(range(lead)) + [i for i in range(lead, len(sizes)) if shape[i - lead] == 1 and sizes[i] != 1]
    out = g
    if dims:
        out = rt.apply("sum_dim", [g], (tuple(dims), True), loc)
    if lead > 0:
        out = rt.apply("view", [out], shape, loc)
    return out


def _layer_norm(rt, node, grads, saved, need):
    # NativeLayerNormBackward0: native_layer_norm_backward(grad, input, normalized_shape, result1, result2, weight,
    # bias, grad_input_mask): NativeLayerNormBackwardBackward0 (edges grad_out, input, mean, rstd, weight, bias; the
    # statistics are outputs without gradients: no graph)
    if saved.get("weight") is None and saved.get("bias") is not None:
        # torch 2.13's layer_norm_double_backward then raises "Expected a proper Tensor but got None" once a
        # gradient reaches grad_bias with one reaching grad_input, and hands grad_out none without: not built
        raise NotModelled("NativeLayerNormBackward0 with a bias and no weight")
    ins = [grads[0], saved["input"], saved["result1"], saved["result2"], saved.get("weight"), saved.get("bias")]
    return list(rt.apply("native_layer_norm_backward", ins, node.params, node.loc))


def _indices(node, saved) -> list:
    """The index tensors a node saved (``indices[0]``, ...), in order."""
    return [saved[s.name] for s in node.op.saves if s.name.startswith("indices[")]


def _index(rt, node, grads, saved, need):
    # IndexBackward0: index_backward(grad.new_zeros(self.sizes()), indices, grad):
    # at::_index_put_impl_(zeros, indices, grad, accumulate=true, unsafe=true) -- IndexPutImplBackward0 (the zeros
    # need no grad: no edge)
    idx = _indices(node, saved)
    g = grads[0]
    zeros = rt.tensor(rt.B.zeros(tuple(node.inputs[0].shape)), dtype=g.dtype)
    out = rt.apply(f"index_put_impl_acc_{len(idx)}", [zeros, g] + idx, node.params, node.loc)
    return [out] + [None] * len(idx)


def _index_put(rt, node, grads, saved, need):
    # IndexPutBackward0 (accumulate=False): self (grad.index_put(indices, zeros_like(values), false):
    # IndexPutBackward0, the zeros without grad) before values (grad.index(indices): IndexBackward0;
    # validate_outputs sums it to a broadcast value's shape)
    idx = _indices(node, saved)
    g = grads[0]
    this = other = None
    if need[0]:
        zeros = rt.tensor(rt.B.zeros(tuple(node.inputs[1].shape)), dtype=g.dtype)
        this = rt.apply(f"index_put_{len(idx)}", [g, zeros] + idx, node.params, node.loc)
    if need[1]:
        other = rt.apply(f"index_{len(idx)}", [g] + idx, node.params, node.loc)
    return [this, other] + [None] * len(idx)


def _index_put_acc(rt, node, grads, saved, need):
    # IndexPutBackward0 (accumulate=True) / IndexPutImplBackward0: self is grad itself, values grad.index(indices)
    idx = _indices(node, saved)
    g = grads[0]
    other = rt.apply(f"index_{len(idx)}", [g] + idx, node.params, node.loc) if need[1] else None
    return [g if need[0] else None, other] + [None] * len(idx)


def _log_sigmoid(rt, node, grads, saved, need):
    # LogSigmoidBackward0: log_sigmoid_backward(grad, self, buffer): LogSigmoidBackwardBackward0 (the buffer,
    # the forward's second output, has no edge)
    return [rt.apply("log_sigmoid_backward", [grads[0], saved["self"], saved["buffer"]], None, node.loc)]


def _diagonal(rt, node, grads, saved, need):
    # DiagonalBackward0: diagonal_backward(grad, self.sizes(), offset, dim1, dim2): DiagonalBackwardBackward0
    return [rt.apply("diagonal_backward", [grads[0]], (tuple(node.inputs[0].shape),) + tuple(node.params), node.loc)]


def _diagonal_backward_again(rt, node, grads, saved, need):
    # DiagonalBackwardBackward0: grad.diagonal(offset, dim1, dim2) (DiagonalBackward0)
    return [rt.apply("diagonal", [grads[0]], tuple(node.params[1:]), node.loc)]


def _hardtanh(rt, node, grads, saved, need):
    # HardtanhBackward0 (hardtanh, relu6): hardtanh_backward(grad, self, min_val, max_val): HardtanhBackwardBackward0
    return [rt.apply("hardtanh_backward", [grads[0], saved["self"]], node.params, node.loc)]


def _hardtanh_backward(rt, node, grads, saved, need):
    # HardtanhBackwardBackward0: grad_output: hardtanh_backward(grad, self, min_val, max_val); self: zeros_like(grad)
    g = grads[0]
    a = rt.apply("hardtanh_backward", [g, saved["self"]], node.params, node.loc) if need[0] else None
    return [a, _zeros_like(rt, g) if len(need) > 1 and need[1] else None]


def _hardsigmoid(rt, node, grads, saved, need):
    # HardsigmoidBackward0: hardsigmoid_backward(grad, self), which derivatives.yaml does not differentiate:
    # a NotImplemented node (UINT64_MAX, no sequence number drawn), raising once a backward runs it
    return [rt.apply("hardsigmoid_backward", [grads[0], saved["self"]], None, node.loc)]


def _flip(rt, node, grads, saved, need):
    # FlipBackward0: grad.flip(dims) (FlipBackward0)
    return [rt.apply("flip", [grads[0]], node.params, node.loc)]


def _roll(rt, node, grads, saved, need):
    # RollBackward0: grad.roll(-reversed shifts, reversed dims) (RollBackward0)
    shifts, dims = node.params
    back = (tuple(-s for s in reversed(shifts)), tuple(reversed(dims)))
    return [rt.apply("roll", [grads[0]], back, node.loc)]


def _cumsum(rt, node, grads, saved, need):
    # cumsum_backward: the gradient itself when it has at most one element or dim has size 1, else
    # grad.flip(dim).cumsum(dim).flip(dim) (FlipBackward0, CumsumBackward0, FlipBackward0)
    g, dim = grads[0], node.params
    shape = tuple(g.shape)
    n = 1
    for d in shape:
        n *= d
    if n <= 1 or shape[dim] == 1:
        return [g]
    flipped = rt.apply("flip", [g], (dim,), node.loc)
    return [rt.apply("flip", [rt.apply("cumsum", [flipped], dim, node.loc)], (dim,), node.loc)]


def _cumprod(rt, node, grads, saved, need):
    # cumprod_backward: the gradient itself when the input has at most one element or dim has size 1; else, without
    # a zero in the input, reversed_cumsum(output * grad, dim).div(input): MulBackward0, FlipBackward0,
    # CumsumBackward0, FlipBackward0, DivBackward0 (conj() of a real tensor is the tensor). With a zero, the
    # O(n^2) path grad mode takes there is not built
    g, x, out, dim = grads[0], saved["self"], saved["result"], node.params
    shape = tuple(x.shape)
    n = 1
    for d in shape:
        n *= d
    if n <= 1 or shape[dim] == 1:
        return [g]
    if rt.B.any_zero(x.value):
        raise NotModelled("CumprodBackward0 of an input with a zero")
    w = rt.apply("mul", [out, g], None, node.loc)
    flipped = rt.apply("flip", [w], (dim,), node.loc)
    reversed_sum = rt.apply("flip", [rt.apply("cumsum", [flipped], dim, node.loc)], (dim,), node.loc)
    return [rt.apply("div", [reversed_sum, x], None, node.loc)]


def _value_selecting(rt, node, g, indices, dim: int, keepdim: bool):
    """value_selecting_reduction_backward(grad, dim, indices, self.sizes(), keepdim):
    ``zeros(sizes).scatter_(dim, indices, grad)`` (ScatterBackward0; the zeros need no grad), the
    gradient (UnsqueezeBackward0), then the indices unsqueezed at ``dim`` first without keepdim."""
    shape = tuple(node.inputs[0].shape)
    if not shape:
        raise NotModelled(f"{node.name} of a 0-d tensor")
    if not keepdim:
        g = rt.apply("unsqueeze", [g], dim, node.loc)
        indices = rt.apply("unsqueeze", [indices], dim, node.loc)
    zeros = rt.tensor(rt.B.zeros(shape), dtype=g.dtype)
    return rt.apply("scatter", [zeros, g, indices], dim, node.loc)


def _sort(rt, node, grads, saved, need):
    # SortBackward0 / SortBackward1 / TopkBackward0: value_selecting_reduction_backward(..., keepdim=true)
    return [_value_selecting(rt, node, grads[0], saved["indices"], node.params[0], True), None]


def _select_dim(rt, node, grads, saved, need):
    # MaxBackward0 / MinBackward0 / KthvalueBackward0 / MedianBackward1:
    # value_selecting_reduction_backward(grad, dim, indices, self.sizes(), keepdim)
    dim, keepdim = node.params
    return [_value_selecting(rt, node, grads[0], saved["indices"], dim, keepdim), None]


def _gather(rt, node, grads, saved, need):
    # GatherBackward0: gather_backward: grad.new_zeros(self.sizes()).scatter_add_(dim, index, grad)
    # (ScatterAddBackward0; the zeros need no grad)
    shape = tuple(node.inputs[0].shape)
    if not shape:
        raise NotModelled("GatherBackward0 of a 0-d tensor")
    g = grads[0]
    zeros = rt.tensor(rt.B.zeros(shape), dtype=g.dtype)
    return [rt.apply("scatter_add", [zeros, g, saved["index"]], node.params, node.loc), None]


def _repeat(rt, node, grads, saved, need):
    # RepeatBackward0: repeat_backward(grad, repeats, input_shape): zeros (no node) for a zero repeat;
    # grad.sum(0) per leading dim repeat added (SumBackward1 each); then, where a repeat is not 1,
    # grad.reshape(repeat, size, ...) (at::reshape: by the gradient's strides) and one
    # grad.sum(those dims) (SumBackward1)
    reps, g = tuple(node.params), grads[0]
    shape = tuple(node.inputs[0].shape)
    if 0 in reps:
        return [rt.tensor(rt.B.zeros(shape), dtype=g.dtype)]
    lead = len(g.shape) - len(shape)
    for _ in range(lead):
        g = rt.apply("sum_dim", [g], ((0,), False), node.loc)
    sizes, dims = [], []
    for d, n in enumerate(shape):
        if reps[d + lead] != 1:
            sizes.append(reps[d + lead])
            dims.append(len(sizes) - 1)
        sizes.append(n)
    if not dims:
        return [g]
    g = reshape(rt, g, tuple(sizes), node.loc)
    return [rt.apply("sum_dim", [g], (tuple(dims), False), node.loc)]


def _contiguous(t) -> bool:
    expected, step = [], 1
    for n in reversed(tuple(t.shape)):
        expected.append(step)
        step *= n
    return all(n == 1 or s == e for n, s, e in zip(reversed(tuple(t.shape)), reversed(tuple(t.strides)), expected))


class NotModelled(Exception):
    """The double-backward recording of this primitive is not built: refused, never guessed."""

    def __init__(self, prim: str):
        super().__init__(prim)
        self.prim = prim


FORMULAS = {
    "mul": _mul, "add": _add, "add_scalar": _add_scalar, "sub": _sub, "neg": _neg, "mul_scalar": _mul_scalar, "div_scalar": _div_scalar,
    "pow_scalar": _pow_scalar, "tanh": _tanh, "relu": _relu, "sum": _sum, "mean": _mean, "t": _t, "mm": _mm,
    "addmm": _addmm, "view": _view, "expand": _expand, "mse_loss": _mse_loss, "sigmoid": _sigmoid, "silu": _silu, "elu": _elu, "elu_backward": _elu_backward, "softplus": _softplus, "gelu": _gelu,
    "softplus_backward": _softplus_backward, "exp": _exp,
    "log": _log, "sqrt": _sqrt, "sin": _sin, "cos": _cos, "div": _div, "leaky_relu": _leaky_relu, "threshold": _threshold, "threshold_": _threshold, "celu": _celu,
    "softshrink": _shrink("softshrink_backward"), "hardshrink": _shrink("hardshrink_backward"),
    "softshrink_backward": _shrink_backward, "hardshrink_backward": _shrink_backward,
    "sum_dim": _sum_dim, "mean_dim": _mean_dim, "unsqueeze": _unsqueeze, "squeeze_all": _squeeze,
    "squeeze_dim": _squeeze, "squeeze_dims": _squeeze, "transpose": _transpose, "permute": _permute,
    "transpose_": _transpose, "t_": _t,
    "sinh": _sinh, "cosh": _cosh, "atan": _atan, "log1p": _log1p, "expm1": _expm1, "tan": _tan, "rsqrt": _rsqrt,
    "rsub": _rsub, "reciprocal": _reciprocal, "where": _where, "clamp": _clamp, "clamp_min": _clamp_min,
    "clamp_max": _clamp_max, "squeeze_": _squeeze_one, "unsafe_view": _view, "reshape_alias": _view, "clone": _clone, "alias": _clone, "copy_": _copy,
    "bmm": _bmm, "select": _select, "slice": _slice, "select_backward": _select_backward_again,
    "slice_backward": _slice_backward_again, "softmax": _softmax, "log_softmax": _log_softmax, "nll_loss": _nll_loss,
    "nll_loss_w": _nll_loss, "tanh_backward": _tanh_backward, "sigmoid_backward": _sigmoid_backward,
    "threshold_backward": _threshold_backward, "leaky_relu_backward": _leaky_relu_backward,
    "maximum": _extremum(True), "minimum": _extremum(False), "max_all": _extreme_all, "min_all": _extreme_all,
    "masked_fill": _masked_fill, "masked_fill_tensor": _masked_fill_tensor, "cat": _cat, "stack": _stack,
    "split": _split, "split_with_sizes": _split, "unsafe_split": _split, "unbind": _unbind,
    "flip": _flip, "roll": _roll, "cumsum": _cumsum, "sort": _sort, "sort_stable": _sort, "topk": _sort,
    "max_dim": _select_dim, "min_dim": _select_dim, "kthvalue": _select_dim, "median_dim": _select_dim,
    **{f"index_{n}": _index for n in (1, 2, 3)}, **{f"index_put_{n}": _index_put for n in (1, 2, 3)},
    **{f"{k}_{n}": _index_put_acc for k in ("index_put_acc", "index_put_impl_acc") for n in (1, 2, 3)},
    "native_layer_norm": _layer_norm, "gather": _gather, "repeat": _repeat, "hardsigmoid": _hardsigmoid,
    "hardtanh": _hardtanh, "hardtanh_backward": _hardtanh_backward,
    "log_sigmoid": _log_sigmoid, "cumprod": _cumprod, "diagonal": _diagonal, "diagonal_backward": _diagonal_backward_again,
}
