"""The primitives a create_graph backward records that no forward makes: the backward kernels
(``tanh_backward``, ``sigmoid_backward``, ``threshold_backward``, ``mse_loss_backward``,
``select_backward``, ``slice_backward``, ``_softmax_backward_data``, ``_log_softmax_backward_data``,
``nll_loss_backward``) whose nodes are ``TanhBackwardBackward0``, ``SigmoidBackwardBackward0``,
``ThresholdBackwardBackward0``, ``MseLossBackwardBackward0``, ``SelectBackwardBackward0``,
``SliceBackwardBackward0``, ``SoftmaxBackwardDataBackward0``, ``LogSoftmaxBackwardDataBackward0``
and ``NllLossBackwardBackward0`` (derivatives.yaml's entries for them). adjoint.engine.second_formulas
calls them; their VJPs run in the backward after it (grad of grad).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.values.mathtree import Fn, TBin, TConst, TFn, TPlace, dims_text, generic_vjp
from adjoint.engine.ops.activations import (_KAPPA, _gelu_tanh_inner, elu_vjp, gelu_vjp, hardsigmoid_vjp, hardtanh_vjp,
                                             log_sigmoid_forward, log_sigmoid_vjp, shrink_vjp, softplus_vjp)
from adjoint.engine.ops.record import Check
from adjoint.engine.ops.record import Math
from adjoint.engine.ops.record import Op
from adjoint.engine.ops.record import Save
from adjoint.engine.ops.arith import binary_shape
from adjoint.engine.ops.elementwise import STEP
from adjoint.engine.ops.losses import Nll, Pointwise, nll_forward, nll_vjp
from adjoint.engine.ops.swish import hardswish_vjp
from adjoint.engine.ops.views import diagonal_forward, diagonal_vjp, select_key, slice_key


def tanh_backward_forward(B, ins, p):
    g, out = ins
    return B.mul(g, B.sub(B.scalar(1), B.mul(out, out)))


def tanh_backward_vjp(B, gs, ins, outs, p, need):
    # grad_output: tanh_backward(grad, output); output: grad * (-2 * output * grad_output)
    g = gs[0]
    go, out = ins
    a = B.mul(g, B.sub(B.scalar(1), B.mul(out, out))) if need[0] else None
    b = B.mul(g, B.mul(B.mul(B.scalar(-2), out), go)) if need[1] else None
    return [a, b]


def sigmoid_backward_forward(B, ins, p):
    g, out = ins
    return B.mul(g, B.mul(B.sub(B.scalar(1), out), out))


def sigmoid_backward_vjp(B, gs, ins, outs, p, need):
    # grad_output: sigmoid_backward(grad, output); output: grad * grad_output * (-2 * output + 1)
    g = gs[0]
    go, out = ins
    a = B.mul(g, B.mul(B.sub(B.scalar(1), out), out)) if need[0] else None
    b = B.mul(B.mul(g, go), B.add(B.mul(B.scalar(-2), out), B.scalar(1))) if need[1] else None
    return [a, b]


def _sigmoid_backward_math(a, p, shape, k):
    one_minus = TBin("sub", TConst(Fraction(1)), a[1], a[1].shape)
    return TBin("mul", a[0], TBin("mul", one_minus, a[1], a[1].shape), shape)


def elu_backward_forward(B, ins, p):
    # elu_backward(grad_output, alpha, scale, input_scale, is_result=false, self): EluBackward0's formula
    g, x = ins
    return elu_vjp(B, [g], [x], None, p, [True])[0]


def elu_backward_vjp(B, gs, ins, outs, p, need):
    # grad_output: elu_backward(grad, alpha, scale, input_scale, false, self); self_or_result:
    # elu_double_backward: elu_backward(grad * grad_output * input_scale, ..., self) * (self < 0).type_as(grad)
    # (0 where self >= 0, a signed zero of the product)
    g = gs[0]
    go, x = ins
    a = elu_vjp(B, [g], [x], None, p, [True])[0] if need[0] else None
    b = None
    if need[1]:
        inner = elu_vjp(B, [B.mul(B.mul(g, go), B.scalar(Fraction(p[2])))], [x], None, p, [True])[0]
        b = B.mul(inner, B.choose(x, "<", B.scalar(Fraction(1)), B.scalar(Fraction(0))))
    return [a, b]


def softplus_backward_forward(B, ins, p):
    # softplus_backward(grad_output, self, beta, threshold): SoftplusBackward0's formula
    g, x = ins
    return softplus_vjp(B, [g], [x], None, p, [True])[0]


def softplus_backward_vjp(B, gs, ins, outs, p, need):
    # grad_output: softplus_backward(grad, self, beta, threshold); self: softplus_double_backward(grad *
    # grad_output, self, beta, threshold) = sigmoid_backward(g, (self * beta).sigmoid()) * (self * beta <
    # threshold) * beta (0 at and above the threshold, where the first derivative is the constant 1)
    g = gs[0]
    go, x = ins
    a = softplus_vjp(B, [g], [x], None, p, [True])[0] if need[0] else None
    b = None
    if need[1]:
        beta, threshold = (B.scalar(Fraction(v)) for v in p)
        bx = B.mul(x, beta)
        s = B.sigmoid(bx)
        slope = B.mul(B.mul(g, go), B.mul(B.sub(B.scalar(1), s), s))
        below = B.choose(B.sub(bx, threshold), "<", B.scalar(Fraction(1)), B.scalar(Fraction(0)))
        b = B.mul(B.mul(slope, below), beta)
    return [a, b]


def gelu_backward_forward(B, ins, p):
    # gelu_backward(grad_output, self, approximate): GeluBackward0's formula
    g, x = ins
    return gelu_vjp(B, [g], [x], None, p, [True])[0]


def _gelu_second_derivative(B, x, approximate):
    """gelu_double_backward's ``dgrad_dInput`` (FunctionsManual.cpp): for ``none``, 2 pdf - x^2 pdf with
    pdf = exp(-x^2 / 2) / sqrt(2 pi); for ``tanh``, the second derivative of x / 2 * (1 + tanh(inner)):
    2 f' g h + f g' h + f g h' with f = x / 2, g = 1 - tanh(inner)^2, h = inner' = sqrt(2 / pi) (1 + 3 kappa x^2),
    g' = -2 tanh g h (torch 2.13's values, checked against its double backward at float64)."""
    one, two = B.scalar(Fraction(1)), B.scalar(Fraction(2))
    square = B.mul(x, x)
    if approximate == "tanh":
        beta = B.sqrt(B.div(two, B.pi()))
        t = B.tanh(_gelu_tanh_inner(B, x))
        f = B.div(x, two)
        g = B.sub(one, B.mul(t, t))
        h = B.mul(beta, B.add(one, B.mul(B.scalar(3 * _KAPPA), square)))
        f_prime_gh = B.mul(g, h)     # twice f' g h: d/dx of f' (1 + tanh) and of f g h each give one
        g_prime_fh = B.mul(B.mul(f, h), B.mul(B.mul(B.scalar(Fraction(-2)), g), B.mul(t, h)))
        h_prime_fg = B.mul(B.mul(f, g), B.mul(B.scalar(6 * _KAPPA), B.mul(x, beta)))
        return B.add(B.add(f_prime_gh, g_prime_fh), h_prime_fg)
    pdf = B.div(B.exp(B.neg(B.div(square, two))), B.sqrt(B.mul(two, B.pi())))
    return B.sub(B.mul(two, pdf), B.mul(square, pdf))


def gelu_backward_vjp(B, gs, ins, outs, p, need):
    # grad_output: gelu_backward(grad, self, approximate); self: gelu_double_backward(grad, grad_output, self,
    # approximate) = grad * grad_output * gelu''(self)
    g = gs[0]
    go, x = ins
    a = gelu_vjp(B, [g], [x], None, p, [True])[0] if need[0] else None
    b = B.mul(B.mul(g, go), _gelu_second_derivative(B, x, p)) if need[1] else None
    return [a, b]


def leaky_relu_backward_forward(B, ins, p):
    g, x = ins
    return B.choose(x, ">", g, B.mul(g, B.scalar(p)))


def leaky_relu_backward_vjp(B, gs, ins, outs, p, need):
    # grad_output: leaky_relu_backward(grad, self, negative_slope); self: zeros_like(grad)
    g = gs[0]
    _, x = ins
    return [B.choose(x, ">", g, B.mul(g, B.scalar(p))) if need[0] else None, B.zeros(B.shape(x)) if need[1] else None]


def _leaky_relu_backward_math(a, p, shape, k):
    step = TFn(STEP, (a[1],), a[1].shape)
    slope = TBin("mul", TConst(Fraction(p)), TBin("sub", TConst(Fraction(1)), step, a[1].shape), a[1].shape)
    return TBin("mul", a[0], TBin("add", step, slope, a[1].shape), shape)


def _threshold_select(B, x, g, threshold):
    """threshold_backward(g, self, threshold): self <= threshold ? 0 : g (a nan self: g); ``None``:
    relu's threshold 0."""
    if threshold is None:
        return B.select_positive(x, g)
    return B.choose(B.sub(x, B.scalar(Fraction(threshold))), "<=", B.zeros(B.shape(x)), g)


def threshold_backward_forward(B, ins, p):
    g, x = ins
    return _threshold_select(B, x, g, p)


def threshold_backward_vjp(B, gs, ins, outs, p, need):
    # grad_output: threshold_backward(grad, self, threshold); self: zeros_like(grad)
    g = gs[0]
    _, x = ins
    return [_threshold_select(B, x, g, p) if need[0] else None, B.zeros(B.shape(x)) if need[1] else None]


def shrink_backward_forward(B, ins, p):
    # softshrink_backward / hardshrink_backward(grad_output, self, lambd): 0 where -lambd <= self <= lambd
    g, x = ins
    return shrink_vjp(B, [g], [x], None, p, [True])[0]


def shrink_backward_vjp(B, gs, ins, outs, p, need):
    # grad_output: X_backward(grad, self, lambd); self: zeros_like(grad)
    g = gs[0]
    _, x = ins
    return [shrink_vjp(B, [g], [x], None, p, [True])[0] if need[0] else None,
            B.zeros(B.shape(x)) if need[1] else None]


def hardtanh_backward_forward(B, ins, p):
    # hardtanh_backward(grad_output, self, min_val, max_val): grad_output where min_val < self < max_val, else 0
    g, x = ins
    return hardtanh_vjp(B, [g], [x], None, p, [True])[0]


def hardtanh_backward_vjp(B, gs, ins, outs, p, need):
    # grad_output: hardtanh_backward(grad, self, min_val, max_val); self: zeros_like(grad)
    _, x = ins
    return [hardtanh_backward_forward(B, [gs[0], x], p) if need[0] else None, B.zeros(B.shape(x)) if need[1] else None]


def hardswish_backward_forward(B, ins, p):
    # hardswish_backward(grad_output, self): HardswishBackward0's formula
    g, x = ins
    return hardswish_vjp(B, [g], [x], None, p, [True])[0]


def hardswish_backward_vjp(B, gs, ins, outs, p, need):
    # grad_output: hardswish_backward(grad, self); self: where(-3 < self < 3, grad * grad_output / 3, 0)
    go, x = ins
    g = gs[0]
    a = hardswish_backward_forward(B, [g, x], p) if need[0] else None
    b = None
    if need[1]:
        three = B.scalar(Fraction(3))
        inside = B.div(B.mul(g, go), three)
        zeros = B.zeros(B.shape(inside))
        b = B.choose(B.add(x, three), "<=", zeros, B.choose(B.sub(x, three), "<", inside, zeros))
    return [a, b]


def log_sigmoid_backward_forward(B, ins, p):
    # log_sigmoid_backward(grad_output, self, buffer), the CPU kernel; the buffer is exp(-|self|), the forward's
    # second output, and is read here from self (the same value), so the kernel is a function of its two
    # differentiable inputs (buffer has no edge)
    g, x = ins[0], ins[1]
    buffer = log_sigmoid_forward(B, [x], None)[1]
    return log_sigmoid_vjp(B, [g], [x], [None, buffer], None, [True])[0]


def log_sigmoid_backward_vjp(B, gs, ins, outs, p, need):
    # grad_output: log_sigmoid_backward(grad, self, buffer); self: log_sigmoid_double_backward(grad * grad_output,
    # self) = grad * grad_output * (z - 1) * z, z = sigmoid(self)
    g = gs[0]
    go, x = ins[0], ins[1]
    a = log_sigmoid_backward_forward(B, [g, x], p) if need[0] else None
    b = None
    if need[1]:
        z = B.sigmoid(x)
        b = B.mul(B.mul(B.mul(g, go), B.sub(z, B.scalar(1))), z)
    return [a, b, None]


def hardsigmoid_backward_forward(B, ins, p):
    # hardsigmoid_backward(grad_output, self): grad_output * (1.0f / 6.0f) where -3 < self < 3, else 0
    g, x = ins
    return hardsigmoid_vjp(B, [g], [x], None, p, [True])[0]


def hardsigmoid_backward_vjp(B, gs, ins, outs, p, need):
    # never run: the generated NotImplemented node raises first (hardsigmoid_backward_error); what it would
    # be (grad_output: the same kernel of grad; self: 0, the function being piecewise constant in self)
    _, x = ins
    return [hardsigmoid_backward_forward(B, [gs[0], x], p) if need[0] else None,
            B.zeros(B.shape(x)) if need[1] else None]


def hardsigmoid_backward_error(dtypes, p, need):
    """derivatives.yaml has no formula for hardsigmoid_backward: the generated code records a
    ``NotImplemented("aten::hardsigmoid_backward")`` node, whose apply raises (Error::apply)."""
    return ("RuntimeError", "derivative for aten::hardsigmoid_backward is not implemented", "not_implemented")


def _mse_norm(B, shape, reduction):
    n = 1
    for d in shape:
        n *= d
    return Fraction(2, n) if reduction == "mean" else Fraction(2)


def mse_loss_backward_shape(shapes, p, loc):
    return tuple(shapes[1])


def mse_loss_backward_forward(B, ins, p):
    # mse_loss_backward(grad_output, self, target, reduction): norm * (self - target) * grad_output
    g, x, y = ins
    return B.mul(B.mul(B.scalar(_mse_norm(B, B.shape(x), p.reduction)), B.sub(x, y)), g)


def mse_loss_backward_vjp(B, gs, ins, outs, p, need):
    # grad_output: mse_loss_double_backward_grad_output (summed unless reduction none);
    # self: mse_loss_double_backward(grad * grad_output) = 2 grad grad_output (/ numel for mean);
    # target: its negative
    g = gs[0]
    go, x, y = ins
    norm = B.scalar(_mse_norm(B, B.shape(x), p.reduction))
    a = None
    if need[0]:
        r = B.mul(B.mul(norm, B.sub(x, y)), g)
        a = r if p.reduction == "none" else B.reshape(B.total(r), tuple(B.shape(go)))
    both = B.mul(norm, B.mul(g, go)) if need[1] or need[2] else None
    return [a, both if need[1] else None, B.neg(both) if need[2] else None]


def _mse_loss_backward_math(a, p, shape, k):
    n = 1
    for d in a[1].shape:
        n *= d
    norm = Fraction(2, n) if p.reduction == "mean" else Fraction(2)
    diff = TBin("sub", a[1], a[2], a[1].shape)
    return TBin("mul", TBin("mul", TConst(norm), diff, a[1].shape), a[0], shape)


def _tanh_backward_math(a, p, shape, k):
    one_minus = TBin("sub", TConst(Fraction(1)), TBin("pow", a[1], TConst(Fraction(2)), a[1].shape), a[1].shape)
    return TBin("mul", a[0], one_minus, shape)


def _threshold_backward_math(a, p, shape, k):
    x = a[1] if p is None else TBin("sub", a[1], TConst(Fraction(p)), a[1].shape)
    return TBin("mul", a[0], TFn(STEP, (x,), a[1].shape), shape)


def _placed_key(p) -> tuple:
    """select_backward's params (sizes, dim, index), slice_backward's (sizes, dim, start, end,
    step): the index of the input's place in a tensor of ``sizes``."""
    sizes, rest = p[0], p[1:]
    return select_key(len(sizes), rest) if len(rest) == 2 else slice_key(len(sizes), rest)


def place_backward_forward(B, ins, p):
    # select_backward / slice_backward: zeros of the input's sizes, the gradient put at its place
    return B.place(tuple(p[0]), _placed_key(p), ins[0])


def place_backward_vjp(B, gs, ins, outs, p, need):
    # grad_output: grad.select(dim, index) / grad.slice(dim, start, end, step)
    return [B.index(gs[0], _placed_key(p))]


def place_backward_shape(shapes, p, loc):
    return tuple(p[0])


def diagonal_backward_forward(B, ins, p):
    # diagonal_backward(grad, input_sizes, offset, dim1, dim2): zeros of the input's sizes, the gradient on the
    # diagonal
    return diagonal_vjp(B, ins, [B.zeros(tuple(p[0]))], None, tuple(p[1:]), [True])[0]


def diagonal_backward_vjp(B, gs, ins, outs, p, need):
    # grad_output: grad.diagonal(offset, dim1, dim2)
    return [diagonal_forward(B, [gs[0]], tuple(p[1:]))]


_PLACED = Math(lambda a, p, shape, k: TPlace(a[0], _placed_key(p), tuple(shape)))


def softmax_backward_data_forward(B, ins, p):
    # _softmax_backward_data(grad_output, output, dim): output * (grad_output - sum(grad_output * output, dim))
    g, out = ins
    return B.mul(out, B.sub(g, B.sum_dims(B.mul(g, out), (p,), True)))


def softmax_backward_data_vjp(B, gs, ins, outs, p, need):
    # grad_output: _softmax_backward_data(grad, output, dim); output: softmax_double_backward:
    # grad * grad_output - grad * sum(output * grad_output, dim) - grad_output * sum(grad * output, dim)
    gg = gs[0]
    go, out = ins
    a = softmax_backward_data_forward(B, [gg, out], p) if need[0] else None
    b = None
    if need[1]:
        b = B.sub(B.sub(B.mul(gg, go), B.mul(gg, B.sum_dims(B.mul(out, go), (p,), True))),
                  B.mul(go, B.sum_dims(B.mul(gg, out), (p,), True)))
    return [a, b]


def log_softmax_backward_data_forward(B, ins, p):
    # _log_softmax_backward_data(grad_output, output, dim): grad_output - exp(output) * sum(grad_output, dim)
    g, out = ins
    return B.sub(g, B.mul(B.exp(out), B.sum_dims(g, (p,), True)))


def log_softmax_backward_data_vjp(B, gs, ins, outs, p, need):
    # grad_output: grad - sum(grad * exp(output), dim); output: -sum(grad_output, dim) * exp(output) * grad
    gg = gs[0]
    go, out = ins
    a = B.sub(gg, B.sum_dims(B.mul(gg, B.exp(out)), (p,), True)) if need[0] else None
    b = B.mul(B.mul(B.neg(B.sum_dims(go, (p,), True)), B.exp(out)), gg) if need[1] else None
    return [a, b]


def nll_loss_backward_forward(B, ins, p):
    # nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    # NllLossBackward0's gradient
    return nll_vjp(B, [ins[0]], ins[1:], None, p, [True])[0]


def nll_loss_backward_vjp(B, gs, ins, outs, p, need):
    # grad_output: nll_loss(grad, target, weight, reduction, ignore_index); self: zeros_like(grad)
    a = None
    if need[0]:
        a = B.reshape(nll_forward(B, [gs[0]] + list(ins[2:]), p), tuple(B.shape(ins[0])))
    return [a, B.zeros(B.shape(ins[1])) if need[1] else None] + [None] * (len(ins) - 2)


def nll_loss_backward_shape(shapes, p, loc):
    return tuple(shapes[1])


ELU_BACKWARD = Fn("elu_backward", "\\operatorname{elu\\_backward}_{#s}\\left(#0,\\ #1\\right)", generic_vjp)
SOFTPLUS_BACKWARD = Fn("softplus_backward", "\\operatorname{softplus\\_backward}_{#s}\\left(#0,\\ #1\\right)",
                      generic_vjp)
SOFTSHRINK_BACKWARD = Fn("softshrink_backward", "\\operatorname{softshrink\\_backward}_{#s}\\left(#0,\\ #1\\right)",
                        generic_vjp)
HARDSHRINK_BACKWARD = Fn("hardshrink_backward", "\\operatorname{hardshrink\\_backward}_{#s}\\left(#0,\\ #1\\right)",
                        generic_vjp)
LOG_SIGMOID_BACKWARD = Fn("log_sigmoid_backward", "\\operatorname{log\\_sigmoid\\_backward}\\left(#0,\\ #1\\right)",
                         generic_vjp)
DIAGONAL_BACKWARD = Fn("diagonal_backward", "\\operatorname{diagonal\\_backward}_{#s}\\left(#0\\right)", generic_vjp)
HARDTANH_BACKWARD = Fn("hardtanh_backward", "\\operatorname{hardtanh\\_backward}_{#s}\\left(#0,\\ #1\\right)", generic_vjp)
HARDSWISH_BACKWARD = Fn("hardswish_backward", "\\operatorname{hardswish\\_backward}\\left(#0,\\ #1\\right)",
                        generic_vjp)
HARDSIGMOID_BACKWARD = Fn("hardsigmoid_backward", "\\operatorname{hardsigmoid\\_backward}\\left(#0,\\ #1\\right)",
                         generic_vjp)
GELU_BACKWARD = Fn("gelu_backward", "\\operatorname{gelu\\_backward}_{#s}\\left(#0,\\ #1\\right)", generic_vjp)
SOFTMAX_BACKWARD = Fn("softmax_backward_data", "\\operatorname{softmax\\_backward}_{#s}\\left(#0,\\ #1\\right)",
                      generic_vjp)
LOG_SOFTMAX_BACKWARD = Fn("log_softmax_backward_data",
                          "\\operatorname{log\\_softmax\\_backward}_{#s}\\left(#0,\\ #1\\right)", generic_vjp)
NLL_BACKWARD = Fn("nll_loss_backward", "\\operatorname{nll\\_backward}_{#s}\\left(#0,\\ #1,\\ #2\\right)",
                  generic_vjp)


def _along(fn: Fn) -> Math:
    return Math(lambda a, p, shape, k: TFn(fn, tuple(a), tuple(shape), dims_text((p,)), p))


def _nll_backward_formula(a, p, shape, k):
    return TFn(NLL_BACKWARD, tuple(a[:3]), tuple(shape), f"\\mathrm{{{p.reduction}}}", p)


def _nll_backward(weighted: bool) -> Op:
    name = "nll_loss_backward_w" if weighted else "nll_loss_backward"
    saves = (Save("target", "in", 2),) + ((Save("weight", "in", 3),) if weighted else ())
    w = (Fraction(1, 2), Fraction(2), Fraction(3, 2))
    fixed = ((2, 0),) + ((w,) if weighted else ()) + (Fraction(5, 2) if weighted else Fraction(2),)
    return Op(name, "NllLossBackwardBackward0", nll_loss_backward_forward, nll_loss_backward_vjp,
              nll_loss_backward_shape, saves, "NllLossBackward0's gradient of g; nll_loss(g, target); 0",
              differentiable=(True, True, False) + ((False,) if weighted else ()) + (False,),
              negzero="structural", math=Math(_nll_backward_formula),
              checks=(Check(((), (2, 3)), Nll("mean"), fixed=fixed),))


OPS = (
    Op("tanh_backward", "TanhBackwardBackward0", tanh_backward_forward, tanh_backward_vjp, binary_shape,
       (Save("grad_output", "in", 0, if_need=1), Save("output", "in", 1)),
       "g * (1 - out^2); g * (-2 * out * grad_output)", math=Math(_tanh_backward_math),
       checks=(Check(((2,), (2,)), positive="unit"),)),
    Op("sigmoid_backward", "SigmoidBackwardBackward0", sigmoid_backward_forward, sigmoid_backward_vjp, binary_shape,
       (Save("grad_output", "in", 0, if_need=1), Save("output", "in", 1)),
       "g * (1 - out) * out; g * grad_output * (1 - 2 out)", math=Math(_sigmoid_backward_math),
       checks=(Check(((2,), (2,)), positive="unit"),)),
    Op("leaky_relu_backward", "LeakyReluBackwardBackward0", leaky_relu_backward_forward, leaky_relu_backward_vjp,
       binary_shape, (Save("self", "in", 1),), "g where self > 0, else g * negative_slope; 0",
       math=Math(_leaky_relu_backward_math), checks=(Check(((2,), (2,)), Fraction(1, 10), positive=True),)),
    Op("elu_backward", "EluBackwardBackward0", elu_backward_forward, elu_backward_vjp, binary_shape,
       (Save("grad_output", "in", 0, if_need=1), Save("self_or_result", "in", 1)),
       "g * elu'(self); elu_backward(g * grad_output * input_scale, self) where self < 0, else 0",
       math=Math(lambda a, p, shape, k: TFn(ELU_BACKWARD, tuple(a), tuple(shape), "", p)),
       checks=(Check(((2, 3), (2, 3)), (Fraction(3, 2), Fraction(1), Fraction(1))),
               Check(((2, 2), (2, 2)), (Fraction(1), Fraction(2), Fraction(1, 2))))),
    Op("softplus_backward", "SoftplusBackwardBackward0", softplus_backward_forward, softplus_backward_vjp,
       binary_shape, (Save("grad_output", "in", 0, if_need=1), Save("self", "in", 1)),
       "g * softplus'(self); g * grad_output * beta * s * (1 - s), s = sigmoid(self * beta), where self * beta < "
       "threshold, else 0",
       math=Math(lambda a, p, shape, k: TFn(SOFTPLUS_BACKWARD, tuple(a), tuple(shape), "", p)),
       checks=(Check(((2, 3), (2, 3)), (Fraction(1), Fraction(20))),
               Check(((2, 2), (2, 2)), (Fraction(2), Fraction(3, 2))))),
    Op("gelu_backward", "GeluBackwardBackward0", gelu_backward_forward, gelu_backward_vjp, binary_shape,
       (Save("grad_output", "in", 0, if_need=1), Save("self", "in", 1)),
       "g * gelu'(self); g * grad_output * gelu''(self)",
       math=Math(lambda a, p, shape, k: TFn(GELU_BACKWARD, tuple(a), tuple(shape), "\\tanh" if p == "tanh" else "", p)),
       checks=(Check(((2, 3), (2, 3)), "none"), Check(((2, 2), (2, 2)), "tanh"))),
    Op("log_sigmoid_backward", "LogSigmoidBackwardBackward0", log_sigmoid_backward_forward, log_sigmoid_backward_vjp,
       lambda shapes, p, loc: tuple(shapes[1]),
       (Save("grad_output", "in", 0, if_need=1), Save("self", "in", 1), Save("buffer", "in", 2)),
       "g * sigmoid(-self); g * grad_output * (sigmoid(self) - 1) * sigmoid(self)",
       differentiable=(True, True, False), underflows="positive",
       math=Math(lambda a, p, shape, k: TFn(LOG_SIGMOID_BACKWARD, tuple(a[:2]), tuple(shape), "", p)),
       checks=(Check(((2, 3), (2, 3), (2, 3))),)),
    Op("hardsigmoid_backward", "torch::autograd::NotImplemented", hardsigmoid_backward_forward,
       hardsigmoid_backward_vjp, binary_shape, (), "raises: derivative for aten::hardsigmoid_backward is not implemented",
       grows=False, math=Math(lambda a, p, shape, k: TFn(HARDSIGMOID_BACKWARD, tuple(a), tuple(shape), "", p)),
       checks=(Check(((2, 3), (2, 3))),), backward_error=hardsigmoid_backward_error, sequence_nr_max=True,
       takes_sequence_nr=False),
    Op("hardswish_backward", "HardswishBackwardBackward0", hardswish_backward_forward, hardswish_backward_vjp,
       binary_shape, (Save("grad_output", "in", 0, if_need=1), Save("self", "in", 1)),
       "0 where self <= -3, g * (self / 3 + 1/2) where -3 < self < 3, else g; g * grad_output / 3 where -3 < self < 3, "
       "else 0", negzero="structural",
       math=Math(lambda a, p, shape, k: TFn(HARDSWISH_BACKWARD, tuple(a), tuple(shape), "", p)),
       checks=(Check(((2, 3), (2, 3))),)),
    Op("hardtanh_backward", "HardtanhBackwardBackward0", hardtanh_backward_forward, hardtanh_backward_vjp,
       binary_shape, (Save("self", "in", 1),), "g where min_val < self < max_val, else 0; 0", negzero="structural",
       math=Math(lambda a, p, shape, k: TFn(HARDTANH_BACKWARD, tuple(a), tuple(shape),
                                            ",".join(str(v) for v in p), p)),
       checks=(Check(((4,), (4,)), (Fraction(-1, 2), Fraction(1))),)),
    Op("threshold_backward", "ThresholdBackwardBackward0", threshold_backward_forward, threshold_backward_vjp,
       binary_shape, (Save("self", "in", 1),), "g where self > threshold (relu: 0), else 0; 0",
       math=Math(_threshold_backward_math),
       checks=(Check(((2,), (2,)), positive=True), Check(((2,), (2,)), Fraction(-1), positive=True))),
    Op("softshrink_backward", "SoftshrinkBackwardBackward0", shrink_backward_forward, shrink_backward_vjp,
       binary_shape, (Save("self", "in", 1),), "g where self < -lambd or self > lambd, else 0; 0",
       math=Math(lambda a, p, shape, k: TFn(SOFTSHRINK_BACKWARD, tuple(a), tuple(shape), f"{p}", p)),
       checks=(Check(((2,), (2,)), Fraction(1, 4)),)),
    Op("hardshrink_backward", "HardshrinkBackwardBackward0", shrink_backward_forward, shrink_backward_vjp,
       binary_shape, (Save("self", "in", 1),), "g where self < -lambd or self > lambd, else 0; 0",
       math=Math(lambda a, p, shape, k: TFn(HARDSHRINK_BACKWARD, tuple(a), tuple(shape), f"{p}", p)),
       checks=(Check(((2,), (2,)), Fraction(1, 4)),)),
    Op("mse_loss_backward", "MseLossBackwardBackward0", mse_loss_backward_forward, mse_loss_backward_vjp,
       mse_loss_backward_shape, (Save("grad_output", "in", 0), Save("self", "in", 1), Save("target", "in", 2)),
       "sum(norm (x - y) g) (elementwise for none); norm g grad_output; its negative",
       math=Math(_mse_loss_backward_math),
       checks=(Check(((), (3,), (3,)), Pointwise("mean")), Check(((), (3,), (3,)), Pointwise("sum")),
               Check(((3,), (3,), (3,)), Pointwise("none")))),
    Op("select_backward", "SelectBackwardBackward0", place_backward_forward, place_backward_vjp,
       place_backward_shape, (), "g put at the index in zeros of the input's sizes; grad.select(dim, index)",
       negzero="structural", grows=False, math=_PLACED, checks=(Check(((3,),), ((2, 3), 0, 1)),)),
    Op("slice_backward", "SliceBackwardBackward0", place_backward_forward, place_backward_vjp,
       place_backward_shape, (), "g put into the slice in zeros of the input's sizes; grad.slice(dim, start, end, step)",
       negzero="structural", grows=False, math=_PLACED, checks=(Check(((2, 2),), ((2, 4), 1, 1, 4, 2)),)),
    Op("diagonal_backward", "DiagonalBackwardBackward0", diagonal_backward_forward, diagonal_backward_vjp,
       place_backward_shape, (), "g put on the diagonal in zeros of the input's sizes; grad.diagonal(offset, dim1, dim2)",
       negzero="structural", grows=False,
       math=Math(lambda a, p, shape, k: TFn(DIAGONAL_BACKWARD, (a[0],), tuple(shape), dims_text(tuple(p[1:])), p)),
       checks=(Check(((2,),), ((2, 3), 0, 0, 1)), Check(((2, 2),), ((2, 3, 2), -1, 1, 2)))),
    Op("softmax_backward_data", "SoftmaxBackwardDataBackward0", softmax_backward_data_forward,
       softmax_backward_data_vjp, binary_shape, (Save("grad_output", "in", 0), Save("output", "in", 1)),
       "out * (g - sum(g * out, dim)); g grad_output - g sum(out grad_output) - grad_output sum(g out)",
       math=_along(SOFTMAX_BACKWARD), checks=(Check(((2, 3), (2, 3)), 1, positive="unit"),)),
    Op("log_softmax_backward_data", "LogSoftmaxBackwardDataBackward0", log_softmax_backward_data_forward,
       log_softmax_backward_data_vjp, binary_shape, (Save("grad_output", "in", 0), Save("output", "in", 1)),
       "g - exp(out) * sum(g, dim); -sum(grad_output, dim) * exp(out) * g",
       math=_along(LOG_SOFTMAX_BACKWARD), checks=(Check(((2, 3), (2, 3)), 1),)),
    _nll_backward(False),
    _nll_backward(True),
)
