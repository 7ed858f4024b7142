"""Activations and elementwise selections: leaky_relu, gelu, silu, elu, softplus, hardtanh,
clamp, softmax, log_softmax, maximum, minimum, where (relu, tanh and sigmoid are in
:mod:`adjoint.engine.ops.elementwise`).

Each derivative is the one ``tools/autograd/derivatives.yaml`` and ``FunctionsManual.cpp``
give, with PyTorch's conventions at kinks (probed on 2.13 CPU):

* leaky_relu'(0) = negative_slope (``x > 0 ? g : g * slope``); elu'(0) = alpha (the
  ``x <= 0`` branch); the in-place forms (``LeakyReluBackward1``, ``EluBackward1``) save the
  result instead and refuse a negative slope / alpha in backward, with PyTorch's message;
* hardtanh passes the gradient strictly inside (min, max): 0 at the bounds; clamp passes it
  on the closed interval [min, max]: g at the bounds (and 0 everywhere when min > max);
* softplus is linear where ``x * beta > threshold`` (strictly);
* maximum / minimum split the gradient in halves between equal elements (two equal
  infinities too); they propagate nan, and a nan operand gives both sides all of it;
* where's condition is a bool tensor; it is the node's only saved tensor and has no edge.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from adjoint.values.mathtree.sympy_names import SymPyName
from adjoint.values.mathtree import Fn, TFn, applied, dims_text, elementwise_named, generic_vjp, no_gradient, number_text
from adjoint.engine.ops.record import Check, Math, Op, Save, if_needed
from adjoint.engine.torch_errors import TorchError
from adjoint.engine.ops.arith import binary_shape, broadcast_shapes, same_shape


def _q(B, v):
    return B.scalar(Fraction(v))


def _torch_error(message: str):
    return TorchError("RuntimeError", message)


# ----------------------------------------------------------------------------- leaky_relu

def leaky_relu_forward(B, ins, p):
    x = ins[0]
    return B.choose(x, ">", x, B.mul(x, _q(B, p)))


def leaky_relu_vjp(B, gs, ins, outs, p, need):
    # leaky_relu_backward(grad, self, negative_slope, is_result=false): self > 0 ? grad : grad * slope
    return [B.choose(ins[0], ">", gs[0], B.mul(gs[0], _q(B, p)))]


_LEAKY_INPLACE_NEGATIVE = (
    "In-place leakyReLu backward calculation is triggered with a negative slope which is not supported. This is "
    "caused by calling in-place forward function with a negative slope, please call out-of-place version instead. "
    "File an issue at https://github.com/pytorch/pytorch if you do require supporting in-place leakRelu backward "
    "calculation with negative slope")


def leaky_relu_result_vjp(B, gs, ins, outs, p, need):
    # is_result=true: the saved result decides the branch; a negative slope is refused here
    if p < 0:
        raise _torch_error(_LEAKY_INPLACE_NEGATIVE)
    return [B.choose(outs[0], ">", gs[0], B.mul(gs[0], _q(B, p)))]


def leaky_kink(B, ins, p):
    if B.any_zero(ins[0]):
        return f"leaky_relu'(0) = negative_slope ({p}) in PyTorch (self > 0 ? grad : grad * negative_slope)"
    return None


# ----------------------------------------------------------------------------- gelu, silu

_KAPPA = Fraction(44715, 1000000)


def _gelu_tanh_inner(B, x):
    beta = B.sqrt(B.div(_q(B, 2), B.pi()))            # sqrt(2 / pi)
    return B.mul(beta, B.add(x, B.mul(_q(B, _KAPPA), B.mul(x, B.mul(x, x)))))


def gelu_forward(B, ins, p):
    x = ins[0]
    half_x = B.div(x, _q(B, 2))
    if p == "tanh":
        return B.mul(half_x, B.add(_q(B, 1), B.tanh(_gelu_tanh_inner(B, x))))
    return B.mul(half_x, B.add(_q(B, 1), B.erf(B.div(x, B.sqrt(_q(B, 2))))))


def gelu_vjp(B, gs, ins, outs, p, need):
    x, g = ins[0], gs[0]
    if p == "tanh":  # GeluBackward for approximate='tanh'
        beta = B.sqrt(B.div(_q(B, 2), B.pi()))
        t = B.tanh(_gelu_tanh_inner(B, x))
        left = B.div(x, _q(B, 2))
        right = B.add(_q(B, 1), t)
        left_derivative = B.div(right, _q(B, 2))
        inner_derivative = B.mul(beta, B.add(_q(B, 1), B.mul(_q(B, 3 * _KAPPA), B.mul(x, x))))
        right_derivative = B.mul(left, B.mul(B.sub(_q(B, 1), B.mul(t, t)), inner_derivative))
        return [B.mul(g, B.add(left_derivative, right_derivative))]
    # cdf + x * pdf, with cdf = (1 + erf(x / sqrt 2)) / 2 and pdf = exp(-x^2 / 2) / sqrt(2 pi)
    cdf = B.div(B.add(_q(B, 1), B.erf(B.div(x, B.sqrt(_q(B, 2))))), _q(B, 2))
    pdf = B.div(B.exp(B.neg(B.div(B.mul(x, x), _q(B, 2)))), B.sqrt(B.mul(_q(B, 2), B.pi())))
    return [B.mul(g, B.add(cdf, B.mul(x, pdf)))]


def silu_forward(B, ins, p):
    return B.mul(ins[0], B.sigmoid(ins[0]))


def silu_vjp(B, gs, ins, outs, p, need):
    # grad * sigmoid(x) * (1 + x * (1 - sigmoid(x)))
    x = ins[0]
    s = B.sigmoid(x)
    return [B.mul(gs[0], B.mul(s, B.add(_q(B, 1), B.mul(x, B.sub(_q(B, 1), s)))))]


# ----------------------------------------------------------------------------- elu, softplus

def elu_forward(B, ins, p):
    alpha, scale, input_scale = (_q(B, v) for v in p)
    x = ins[0]
    negative = B.mul(B.sub(B.exp(B.mul(x, input_scale)), _q(B, 1)), B.mul(alpha, scale))
    return B.choose(x, ">", B.mul(x, scale), negative)


def elu_vjp(B, gs, ins, outs, p, need):
    # elu_backward(is_result=false): self <= 0 ? grad * input_scale * alpha * scale * exp(self * input_scale)
    #                                           : grad * scale
    alpha, scale, input_scale = (_q(B, v) for v in p)
    x, g = ins[0], gs[0]
    negative = B.mul(g, B.mul(input_scale, B.mul(B.mul(alpha, scale), B.exp(B.mul(x, input_scale)))))
    return [B.choose(x, "<=", negative, B.mul(g, scale))]


_ELU_INPLACE_NEGATIVE = (
    "In-place elu backward calculation is triggered with a negative slope which is not supported. This is caused "
    "by calling in-place forward function with a negative slope, please call out-of-place version instead.")


def elu_result_vjp(B, gs, ins, outs, p, need):
    # elu_backward(is_result=true): result <= 0 ? grad * input_scale * (result + alpha * scale) : grad * scale
    if p[0] < 0:
        raise _torch_error(_ELU_INPLACE_NEGATIVE)
    alpha, scale, input_scale = (_q(B, v) for v in p)
    out, g = outs[0], gs[0]
    negative = B.mul(g, B.mul(input_scale, B.add(out, B.mul(alpha, scale))))
    return [B.choose(out, "<=", negative, B.mul(g, scale))]


def elu_kink(B, ins, p):
    if B.any_zero(ins[0]):
        if tuple(p[1:]) != (1, 1):   # selu: alpha * scale
            return f"elu'(0) = alpha * scale * input_scale ({float(p[0] * p[1] * p[2])!r}) in PyTorch (the self <= 0 branch " \
                   "of elu_backward)"
        return f"elu'(0) = alpha ({p[0]}) in PyTorch (the self <= 0 branch of elu_backward)"
    return None


def softplus_forward(B, ins, p):
    beta, threshold = (_q(B, v) for v in p)
    x = ins[0]
    bx = B.mul(x, beta)
    smooth = B.div(B.log(B.add(_q(B, 1), B.exp(bx))), beta)
    return B.choose(B.sub(bx, threshold), ">", x, smooth)


def softplus_vjp(B, gs, ins, outs, p, need):
    # softplus_backward: z = exp(x * beta); x * beta > threshold ? grad : grad * z / (z + 1)
    beta, threshold = (_q(B, v) for v in p)
    x, g = ins[0], gs[0]
    bx = B.mul(x, beta)
    z = B.exp(bx)
    return [B.choose(B.sub(bx, threshold), ">", g, B.div(B.mul(g, z), B.add(z, _q(B, 1))))]


def softplus_kink(B, ins, p):
    beta, threshold = p
    if B.any_zero(B.sub(B.mul(ins[0], _q(B, beta)), _q(B, threshold))):
        return f"softplus at x * beta = threshold ({threshold}) takes the smooth branch (linear only where > threshold)"
    return None


# ----------------------------------------------------------------------------- logsigmoid, celu

def log_sigmoid_forward(B, ins, p):
    # log_sigmoid_forward(self) -> (output, buffer): min(x, 0) - log1p(exp(-|x|)), and buffer = exp(-|x|)
    # (the kernel's form, not -log(1 + exp(-x)): where exp(-x) is tiny its ball stays tight, so a value
    # PyTorch's float holds as 0 (x above 745 in float64) is 0 here too, not a ball around 0)
    x = ins[0]
    buffer = B.exp(B.neg(B.abs(x)))
    return B.sub(B.choose(x, "<", x, _q(B, 0)), B.log1p(buffer)), buffer


def log_sigmoid_vjp(B, gs, ins, outs, p, need):
    # log_sigmoid_backward(grad, self, buffer), the CPU kernel: (x < 0 ? 1 - b / (1 + b) : b / (1 + b)) * grad
    # with the saved (unpacked) self and buffer; b = exp(-|x|) makes it sigmoid(-x) * grad on both sides
    x, b, g = ins[0], outs[1], gs[0]
    share = B.div(b, B.add(_q(B, 1), b))
    return [B.choose(x, "<", B.mul(B.sub(_q(B, 1), share), g), B.mul(share, g))]


def celu_params(p):
    """celu's (alpha, forward input_scale, backward input_scale) as elu's (alpha, scale, input_scale):
    its forward is ``at::elu(self, alpha, 1, 1. / alpha.to<double>())``, its derivatives.yaml entry
    ``elu_backward(grad, alpha, 1, 1.0/alpha.toFloat(), ...)`` (alpha rounded to float first)."""
    alpha, forward_scale, backward_scale = p
    return (alpha, Fraction(1), forward_scale), (alpha, Fraction(1), backward_scale)


def celu_forward(B, ins, p):
    return elu_forward(B, ins, celu_params(p)[0])


def celu_vjp(B, gs, ins, outs, p, need):
    return elu_vjp(B, gs, ins, outs, celu_params(p)[1], need)


def celu_result_vjp(B, gs, ins, outs, p, need):
    # CeluBackward1: elu_backward(..., is_result=true, result): a negative alpha raises elu's in-place message
    return elu_result_vjp(B, gs, ins, outs, celu_params(p)[1], need)


def celu_zero_alpha(dtypes, p):
    """celu's kernel refuses alpha = 0 (after CeluBackward0 packed self)."""
    return "ZeroDivisionError: alpha cannot be 0 for CELU" if p[0] == 0 else None


def celu_kink(B, ins, p):
    if B.any_zero(ins[0]):
        return "celu'(0) = alpha * input_scale in PyTorch (the self <= 0 branch of elu_backward; input_scale is " \
               "1.0 / alpha rounded to float32 first)"
    return None


# ----------------------------------------------------------------------------- hardsigmoid, threshold, shrinks

#: the CPU kernels' ``1.0f / 6.0f``: hardsigmoid's slope is float32's 1/6, in float64 too
ONE_SIXTH_F32 = Fraction(11184811, 67108864)


def hardsigmoid_forward(B, ins, p):
    # min(max(x + 3, 0), 6) / 6
    return B.div(clamp_values(B, B.add(ins[0], _q(B, 3)), _q(B, 0), _q(B, 6)), _q(B, 6))


def hardsigmoid_vjp(B, gs, ins, outs, p, need):
    # hardsigmoid_backward: (self > -3 && self < 3) ? grad * one_sixth : 0, one_sixth = 1.0f / 6.0f
    x, g = ins[0], gs[0]
    zero = B.zeros(B.shape(x))
    inner = B.choose(B.sub(x, _q(B, 3)), "<", B.mul(g, _q(B, ONE_SIXTH_F32)), zero)
    return [B.choose(B.add(x, _q(B, 3)), ">", inner, zero)]


def hardsigmoid_kink(B, ins, p):
    x = ins[0]
    if B.any_zero(B.add(x, _q(B, 3))) or B.any_zero(B.sub(x, _q(B, 3))):
        return "hardsigmoid'(x) = 0 at x = -3 and x = 3 in PyTorch (grad * (1.0f / 6.0f) strictly inside)"
    return None


def threshold_forward(B, ins, p):
    # threshold(self, threshold, value): self <= threshold ? value : self
    t, value = p
    x = ins[0]
    return B.choose(B.sub(x, _q(B, t)), "<=", B.full(B.shape(x), Fraction(value)), x)


def threshold_vjp(B, gs, ins, outs, p, need):
    # threshold_backward(grad, self, threshold): self <= threshold ? 0 : grad (nan: grad)
    x, g = ins[0], gs[0]
    return [B.choose(B.sub(x, _q(B, p[0])), "<=", B.zeros(B.shape(x)), g)]


def threshold_kink(B, ins, p):
    if B.any_zero(B.sub(ins[0], _q(B, p[0]))):
        return f"threshold'(x) = 0 at x = threshold ({p[0]}) in PyTorch (self <= threshold ? 0 : grad)"
    return None


def _inside(B, x, lambd, inside, outside):
    """``(x >= -lambd && x <= lambd) ? inside : outside``."""
    return B.choose(B.add(x, _q(B, lambd)), ">=", B.choose(B.sub(x, _q(B, lambd)), "<=", inside, outside), outside)


def shrink_vjp(B, gs, ins, outs, p, need):
    # softshrink_backward and hardshrink_backward: (self >= -lambd && self <= lambd) ? 0 : grad
    x, g = ins[0], gs[0]
    return [_inside(B, x, p, B.zeros(B.shape(x)), g)]


def softshrink_forward(B, ins, p):
    # x > lambd ? x - lambd : (x < -lambd ? x + lambd : x * 0) (a zero takes x's sign)
    x = ins[0]
    lam = _q(B, p)
    below = B.choose(B.add(x, lam), "<", B.add(x, lam), B.mul(x, _q(B, 0)))
    return B.choose(B.sub(x, lam), ">", B.sub(x, lam), below)


def softshrink_lambda(dtypes, p):
    """softshrink's check (its meta function, after the node packed self): 0 <= lambd <= the dtype's max."""
    if p < 0:
        top, name = ("3.40282e+38", "Float") if dtypes[0] == "float32" else ("1.79769e+308", "Double")
        return f"lambda must be in range [0, {top}] for input dtype {name}, but found {float(p):g}"
    return None


def softshrink_kink(B, ins, p):
    x = ins[0]
    notes = [n for n in (shrink_kink(B, ins, p),) if n]
    one, zero = _q(B, 1), _q(B, 0)
    # 0 where -lambd <= x <= 0 (lambd >= 0: inside the interval, not positive)
    if B.any_zero(B.choose(B.add(x, _q(B, p)), ">=", B.choose(x, "<=", zero, one), one)):
        notes.append("softshrink of a negative x inside [-lambd, lambd] is x * 0 = -0.0 in PyTorch's scalar kernel "
                     "path (taken here), +0.0 in its vectorized one (docs/not-modelled.md)")
    return "; ".join(notes) or None


def hardshrink_forward(B, ins, p):
    # (x >= -lambd && x <= lambd) ? 0 : x
    x = ins[0]
    return _inside(B, x, p, B.zeros(B.shape(x)), x)


def shrink_kink(B, ins, p):
    x = ins[0]
    if B.any_zero(B.add(x, _q(B, p))) or B.any_zero(B.sub(x, _q(B, p))):
        return f"shrink'(x) = 0 at x = -lambd and x = lambd ({p}) in PyTorch (grad only where |x| > lambd)"
    return None


# ----------------------------------------------------------------------------- hardtanh, clamp

def clamp_values(B, x, lo, hi):
    """min(max(x, lo), hi) as ATen's clamp: hi wins when lo > hi; nan stays nan."""
    if lo is not None:
        x = B.choose(B.sub(x, lo), "<", lo, x)
    if hi is not None:
        x = B.choose(B.sub(x, hi), ">", hi, x)
    return x


def _bounds(B, p):
    lo, hi = p
    return (None if lo is None else _q(B, lo)), (None if hi is None else _q(B, hi))


def hardtanh_forward(B, ins, p):
    lo, hi = _bounds(B, p)
    return clamp_values(B, ins[0], lo, hi)


def hardtanh_vjp(B, gs, ins, outs, p, need):
    # hardtanh_backward: grad where min < self < max (strictly), else 0
    lo, hi = _bounds(B, p)
    x, g = ins[0], gs[0]
    zero = B.zeros(B.shape(x))
    return [B.choose(B.sub(x, lo), ">", B.choose(B.sub(x, hi), "<", g, zero), zero)]


def _at_bounds(B, x, p) -> bool:
    return any(b is not None and B.any_zero(B.sub(x, _q(B, b))) for b in p)


def hardtanh_kink(B, ins, p):
    if _at_bounds(B, ins[0], p):
        return "hardtanh'(x) = 0 at x = min_val or max_val in PyTorch (grad passes strictly inside)"
    return None


def clamp_forward(B, ins, p):
    lo, hi = _bounds(B, p)
    return clamp_values(B, ins[0], lo, hi)


def _closed_interval(B, x, g, lo, hi):
    """clamp_backward: grad where min <= self <= max (the bounds given), else 0."""
    zero = B.zeros(broadcast_shapes(B.shape(x), B.shape(g), None))
    out = g
    if hi is not None:
        out = B.choose(B.sub(x, hi), "<=", out, zero)
    if lo is not None:
        out = B.choose(B.sub(x, lo), ">=", out, zero)
    return out


def clamp_vjp(B, gs, ins, outs, p, need):
    lo, hi = _bounds(B, p)
    return [_closed_interval(B, ins[0], gs[0], lo, hi)]


def clamp_kink(B, ins, p):
    if _at_bounds(B, ins[0], p):
        return "clamp'(x) = 1 at x = min or max in PyTorch (grad passes on the closed interval)"
    return None


def clamp_tensor_shape(shapes, p, loc):
    """The TensorIterator's shape over (self, min, max), the bounds given; bounds that do not
    broadcast are its RuntimeError, raised in the kernel once ClampBackward0 packed max, min, self."""
    out = tuple(shapes[0])
    for s, given in zip(shapes[1:], p):
        if given:
            out = broadcast_shapes(out, s, loc)
    return out


def clamp_tensor_forward(B, ins, p):
    """ATen's clamp.Tensor: both bounds ``clamp_stub`` (``min != min || max != max ? nan :
    min(max(a, min), max)``), one bound ``maximum_stub`` / ``minimum_stub``: a nan bound makes
    the element nan, whichever bound it is (a number bound compares instead: nan never wins)."""
    x, lo, hi = ins
    has_lo, has_hi = p
    shape = clamp_tensor_shape([B.shape(v) for v in ins], p, None)
    out = B.broadcast_to(clamp_values(B, x, lo if has_lo else None, hi if has_hi else None), shape)
    for bound, given in ((lo, has_lo), (hi, has_hi)):
        if given:   # the bound's own nan where it is nan
            bound = B.broadcast_to(bound, shape)
            out = B.choose(_nan(B, bound), "!=", bound, out)
    return out


def clamp_tensor_vjp(B, gs, ins, outs, p, need):
    # clamp_backward (self) and clamp_backward_min_max (min, max), as FunctionsManual.cpp has them;
    # each of the output's shape, summed back to the input's by autograd's validate_outputs
    x, lo, hi = ins
    has_lo, has_hi = p
    g = gs[0]
    zero = B.zeros(B.shape(g))
    grad_self = _closed_interval(B, x, g, lo if has_lo else None, hi if has_hi else None)

    def grad_min():
        below = B.choose(B.sub(x, lo), "<", g, zero)
        return below if not has_hi else B.choose(B.sub(lo, hi), "<", below, zero)   # self < min and min < max

    def grad_max():
        above = B.choose(B.sub(x, hi), ">", g, zero)
        if not has_lo:
            return above
        return B.choose(B.sub(hi, lo), "<", g, above)                              # self > max or max < min

    return [if_needed(need, 0, lambda: B.sum_to(grad_self, B.shape(x))),
            if_needed(need, 1, lambda: B.sum_to(grad_min(), B.shape(lo))) if has_lo else None,
            if_needed(need, 2, lambda: B.sum_to(grad_max(), B.shape(hi))) if has_hi else None]


# ----------------------------------------------------------------------------- softmax, log_softmax

def softmax_parts(B, x, dim: int):
    """(x - max, sum of exp(x - max)) along ``dim``: the softmax family's shifted exponent (the
    same exact value as unshifted; with free symbols, whose max is open, it is left unshifted, and
    along a dim of size 0, which has no max, there is nothing to shift: the result is empty)."""
    shape = B.shape(x)
    empty = dim < len(shape) and shape[dim] == 0
    shifted = x if B.is_symbolic(x) or empty else B.sub(x, B.amax(x, (dim,), True))
    return shifted, B.sum_dims(B.exp(shifted), (dim,), True)


def finite_max(B, x, dim: int):
    """The max along ``dim`` (kept), 0 where it is -inf: a slice of only -inf (every key a mask
    removes) is left unshifted, as PyTorch's kernels leave it (its exps are all 0 either way)."""
    top = B.amax(x, (dim,), True)
    return B.choose(B.sub(top, top), "==", top, B.zeros(B.shape(top)))


def softmax_forward(B, ins, p):
    shifted, total = softmax_parts(B, ins[0], p)
    return B.div(B.exp(shifted), total)


def softmax_vjp(B, gs, ins, outs, p, need):
    # _softmax_backward_data: out * (g - sum(g * out, dim, keepdim))
    out, g = outs[0], gs[0]
    return [B.mul(out, B.sub(g, B.sum_dims(B.mul(g, out), (p,), True)))]


def log_softmax_forward(B, ins, p):
    shifted, total = softmax_parts(B, ins[0], p)
    return B.sub(shifted, B.log(total))


def log_softmax_vjp(B, gs, ins, outs, p, need):
    # _log_softmax_backward_data: g - exp(out) * sum(g, dim, keepdim)
    out, g = outs[0], gs[0]
    return [B.sub(g, B.mul(B.exp(out), B.sum_dims(g, (p,), True)))]


# ----------------------------------------------------------------------------- maximum, minimum, where

def _nan(B, x):
    """1 where x is nan, else 0."""
    return B.mask(x, lambda s: s == "nan")


def _extremum_forward(largest: bool):
    # maximum / minimum propagate nan (either operand); otherwise the larger (smaller) one
    def forward(B, ins, p):
        a, b = ins
        out = B.choose(B.sub(a, b), ">=" if largest else "<=", a, b)
        return B.choose(_nan(B, a), "!=", a, B.choose(_nan(B, b), "!=", b, out))
    return forward


def _extremum_vjp(largest: bool):
    # derivatives.yaml, maximum: self: where(self == other, g / 2, g).masked_fill_(self < other, 0);
    # other: the same masked where self > other (minimum: the comparisons swapped). A nan operand
    # makes every comparison false: both get all of g. self == other also holds for two equal
    # infinities, whose difference is nan.
    win = ">" if largest else "<"
    lose = "<" if largest else ">"

    def vjp(B, gs, ins, outs, p, need):
        a, b = ins
        d = B.sub(a, b)
        shape = broadcast_shapes(B.shape(a), B.shape(b), None)
        g = B.broadcast_to(gs[0], shape)
        zero, one = B.zeros(shape), _q(B, 1)
        same_inf = B.choose(_nan(B, d), "!=", B.choose(_nan(B, a), "!=", zero, B.choose(_nan(B, b), "!=", zero, one)), zero)
        share = B.choose(B.choose(d, "==", one, same_inf), "!=", B.div(g, _q(B, 2)), g)
        return [if_needed(need, 0, lambda: B.sum_to(B.choose(d, lose, zero, share), B.shape(a))),
                if_needed(need, 1, lambda: B.sum_to(B.choose(d, win, zero, share), B.shape(b)))]
    return vjp


def extremum_kink(B, ins, p):
    if B.any_zero(B.sub(ins[0], ins[1])):
        return "maximum / minimum of equal elements: each side gets half the gradient in PyTorch"
    return None


def where_shape(shapes, p, loc):
    return broadcast_shapes(broadcast_shapes(shapes[2], shapes[0], loc), shapes[1], loc)


def where_forward(B, ins, p):
    a, b, cond = ins
    shape = where_shape([B.shape(v) for v in ins], p, None)
    return B.broadcast_to(B.choose(cond, "!=", a, b), shape)


def where_vjp(B, gs, ins, outs, p, need):
    # self: where(condition, grad, 0); other: where(condition, 0, grad), each summed to its shape
    a, b, cond = ins
    g = gs[0]
    zero = B.zeros(B.shape(g))
    return [if_needed(need, 0, lambda: B.sum_to(B.broadcast_to(B.where(cond, g, zero), B.shape(g)), B.shape(a))),
            if_needed(need, 1, lambda: B.sum_to(B.broadcast_to(B.where(cond, zero, g), B.shape(g)), B.shape(b)))]


# ----------------------------------------------------------------------------- comparisons

#: torch.gt and its kin by name: (the relation ``a - b REL 0`` tests, its LaTeX)
RELATIONS = {"gt": (">", ">"), "ge": (">=", "\\geq"), "lt": ("<", "<"), "le": ("<=", "\\leq"), "eq": ("==", "="),
             "ne": ("!=", "\\neq")}
_COMPARE_FN = {name: Fn(name, f"\\left[#0 {tex} #1\\right]", no_gradient) for name, (_, tex) in RELATIONS.items()}
ISFINITE = Fn("isfinite", "\\operatorname{isfinite}\\left(#0\\right)", no_gradient)
NAN_TO_NUM = Fn("nan_to_num", "\\operatorname{nan\\_to\\_num}\\left(#0\\right)", generic_vjp)


def compare_forward(B, ins, p):
    """1 (True) where ``a REL b``, else 0: decided on ``a - b`` (IEEE: nan compares false, != true),
    except where two equal infinities make that difference nan (they are equal)."""
    a, b = ins
    rel = RELATIONS[p][0]
    d = B.sub(a, b)
    shape = broadcast_shapes(B.shape(a), B.shape(b), None)
    zero, one = B.zeros(shape), _q(B, 1)
    plain = B.choose(d, rel, one, zero)
    equal_infinities = B.choose(_nan(B, d), "!=", B.choose(_nan(B, a), "!=", zero, B.choose(_nan(B, b), "!=", zero, one)),
                                zero)
    tie = one if rel in ("==", ">=", "<=") else zero
    return B.broadcast_to(B.choose(equal_infinities, "!=", tie, plain), shape)


def finite_mask(B, x):
    """1 where x is finite, else 0: ``x - x`` is 0 exactly there, nan at an infinity or a nan."""
    return B.mask(B.sub(x, x), lambda s: s == 0)


def isfinite_forward(B, ins, p):
    """``torch.isfinite``: a bool tensor (no node)."""
    return finite_mask(B, ins[0])


def nan_to_num_forward(B, ins, p):
    """nan, +inf and -inf replaced by ``p``'s three numbers (PyTorch's defaults: 0 and the dtype's
    largest and lowest finite values, filled in by the binding), every other element kept."""
    x = ins[0]
    shape = B.shape(x)
    nan, posinf, neginf = (B.broadcast_to(B.scalar(v), shape) for v in p)
    infinite = B.choose(B.mask(x, lambda s: s == 1), "!=", posinf, neginf)
    return B.choose(finite_mask(B, x), "!=", x, B.choose(_nan(B, x), "!=", nan, infinite))


def nan_to_num_vjp(B, gs, ins, outs, p, need):
    """derivatives.yaml: ``grad * at::isfinite(self)``."""
    return [B.mul(gs[0], finite_mask(B, ins[0]))]


def no_vjp(B, gs, ins, outs, p, need):
    """A comparison makes no node (both inputs are non-differentiable), so nothing asks this."""
    return [None for _ in ins]


# ----------------------------------------------------------------------------- the records

_SELF = (Save("self", "in", 0),)
_RESULT = (Save("result", "out", 0),)
_X = (Check(((2, 3),)),)


def clamp_no_bound(dtypes, p):
    """clamp's structured kernel refuses no bound at all (after the node packed self)."""
    if p[0] is None and p[1] is None:
        return "torch.clamp: At least one of 'min' or 'max' must not be None"
    return None


def _unary(name, node, forward, vjp, saves, formula, **kw):
    return Op(name, node, forward, vjp, same_shape, saves, formula, **kw)



# ----------------------------------------------------------------------------- how they read (adjoint.mathtree)
# Elementwise activations read by name, their VJP as lambda (.) f'(x) with f' named too; softmax
# and log_softmax as module-level functions of the whole tensor with a declared J^T lambda.

LEAKY, LEAKY_PRIME = elementwise_named("leaky_relu", "\\operatorname{leaky\\_relu}")
GELU, GELU_PRIME = elementwise_named("gelu", "\\operatorname{gelu}")
SILU, SILU_PRIME = elementwise_named("silu", "\\operatorname{silu}")
ELU, ELU_PRIME = elementwise_named("elu", "\\operatorname{elu}")
SOFTPLUS, SOFTPLUS_PRIME = elementwise_named("softplus", "\\operatorname{softplus}")
HARDTANH, HARDTANH_PRIME = elementwise_named("hardtanh", "\\operatorname{hardtanh}")
CLAMP, CLAMP_PRIME = elementwise_named("clamp", "\\operatorname{clamp}")
LOGSIGMOID, LOGSIGMOID_PRIME = elementwise_named("log_sigmoid", "\\log\\operatorname{sigmoid}")
LOGSIGMOID_BUFFER = Fn("log_sigmoid_buffer", "e^{-\\left|#0\\right|}", no_gradient)
CELU, CELU_PRIME = elementwise_named("celu", "\\operatorname{celu}")
HARDSIGMOID, HARDSIGMOID_PRIME = elementwise_named("hardsigmoid", "\\operatorname{hardsigmoid}")
THRESHOLD, THRESHOLD_PRIME = elementwise_named("threshold", "\\operatorname{threshold}")
SOFTSHRINK, SOFTSHRINK_PRIME = elementwise_named("softshrink", "\\operatorname{softshrink}")
HARDSHRINK, HARDSHRINK_PRIME = elementwise_named("hardshrink", "\\operatorname{hardshrink}")
CLAMP_T = Fn("clamp_t", "\\operatorname{clamp}\\left(#0,\\ #1,\\ #2\\right)", generic_vjp)
SOFTMAX = Fn("softmax", "\\operatorname{softmax}_{#s}\\left(#0\\right)", generic_vjp)
LOG_SOFTMAX = Fn("log_softmax", "\\log\\operatorname{softmax}_{#s}\\left(#0\\right)", generic_vjp)
MAXIMUM = Fn("maximum", "\\max\\left(#0,\\ #1\\right)", generic_vjp, SymPyName("Max"))
MINIMUM = Fn("minimum", "\\min\\left(#0,\\ #1\\right)", generic_vjp, SymPyName("Min"))
WHERE = Fn("where", "\\operatorname{where}\\left(#2,\\ #0,\\ #1\\right)", generic_vjp)


def _named(fn: Fn, sub) -> Math:
    """fn(x) with its parameters (from the op's params) in the subscript."""
    return Math(lambda a, p, shape, k: TFn(fn, (a[0],), tuple(shape), sub(p), p))


def _bounds_text(p) -> str:
    lo, hi = p
    return "[" + (number_text(lo) if lo is not None else "-\\infty") + "," + \
        (number_text(hi) if hi is not None else "\\infty") + "]"


_LEAKY = _named(LEAKY, number_text)
_GELU = _named(GELU, lambda p: "\\tanh" if p == "tanh" else "")
_SILU = _named(SILU, lambda p: "")
_ELU = _named(ELU, lambda p: f"\\alpha={number_text(p[0])}" + ("" if p[1:] == (1, 1) else
                                                               f",{number_text(p[1])},{number_text(p[2])}"))
_SOFTPLUS = _named(SOFTPLUS, lambda p: f"\\beta={number_text(p[0])}")
_HARDTANH = _named(HARDTANH, _bounds_text)
_CLAMP = _named(CLAMP, _bounds_text)
_SOFTMAX = _named(SOFTMAX, lambda p: dims_text((p,)))
_LOG_SOFTMAX = _named(LOG_SOFTMAX, lambda p: dims_text((p,)))
_LOGSIGMOID = Math(lambda a, p, shape, k: TFn(LOGSIGMOID if k == 0 else LOGSIGMOID_BUFFER, (a[0],), tuple(shape), "", p))
_CELU = _named(CELU, lambda p: f"\\alpha={number_text(p[0])}")
_HARDSIGMOID = _named(HARDSIGMOID, lambda p: "")
_THRESHOLD = _named(THRESHOLD, lambda p: f"{number_text(p[0])},{number_text(p[1])}")
_SOFTSHRINK = _named(SOFTSHRINK, lambda p: f"\\lambda={number_text(p)}")
_HARDSHRINK = _named(HARDSHRINK, lambda p: f"\\lambda={number_text(p)}")

OPS = (
    _unary("leaky_relu", "LeakyReluBackward0", leaky_relu_forward, leaky_relu_vjp, _SELF,
           "g where a > 0, else g * negative_slope", negzero="keep", kink=leaky_kink,
           kink_doc="leaky_relu'(0) = negative_slope", math=_LEAKY, checks=(Check(((2, 3),), Fraction(1, 10)),)),
    _unary("leaky_relu_", "LeakyReluBackward1", leaky_relu_forward, leaky_relu_result_vjp, _RESULT,
           "g where out > 0, else g * negative_slope (in place; a negative slope raises in backward)",
           negzero="keep", kink=leaky_kink, kink_doc="leaky_relu'(0) = negative_slope",
           math=_LEAKY, checks=(Check(((2, 3),), Fraction(1, 10)),)),
    _unary("gelu", "GeluBackward0", gelu_forward, gelu_vjp, _SELF,
           "g * (Phi(a) + a * phi(a)); tanh form: its derivative", negzero="keep",
           math=_GELU, checks=(Check(((2, 3),), "none"), Check(((2, 2),), "tanh"))),
    _unary("silu", "SiluBackward0", silu_forward, silu_vjp, _SELF, "g * s * (1 + a * (1 - s)), s = sigmoid(a)",
           negzero="keep", underflows=True, exp_overflow_zero=True, math=_SILU, checks=_X),
    _unary("elu", "EluBackward0", elu_forward, elu_vjp, _SELF,
           "g * scale where a > 0, else g * input_scale * alpha * scale * exp(a * input_scale)", negzero="keep",
           kink=elu_kink,
           kink_doc="elu'(0) = alpha (the a <= 0 branch)",
           math=_ELU, checks=(Check(((2, 3),), (Fraction(3, 2), Fraction(1), Fraction(1))),)),
    _unary("elu_", "EluBackward1", elu_forward, elu_result_vjp, _RESULT,
           "g * scale where out > 0, else g * input_scale * (out + alpha * scale) (in place; alpha < 0 raises)",
           negzero="keep", kink=elu_kink, kink_doc="elu'(0) = alpha (the out <= 0 branch)",
           math=_ELU, checks=(Check(((2, 3),), (Fraction(3, 2), Fraction(1), Fraction(1))),)),
    _unary("softplus", "SoftplusBackward0", softplus_forward, softplus_vjp, _SELF,
           "g where a * beta > threshold, else g * z / (z + 1), z = exp(a * beta)", underflows=True, kink=softplus_kink,
           kink_doc="at a * beta = threshold: the smooth branch",
           math=_SOFTPLUS, checks=(Check(((2, 3),), (Fraction(2), Fraction(3, 2))), Check(((2, 2),), (Fraction(1), Fraction(20))))),
    _unary("hardtanh", "HardtanhBackward0", hardtanh_forward, hardtanh_vjp, _SELF,
           "g where min_val < a < max_val, else 0", negzero="structural", grows=False, kink=hardtanh_kink,
           kink_doc="0 at a = min_val and at a = max_val", math=_HARDTANH, checks=(Check(((4,),), (Fraction(-1, 2), Fraction(1))),)),
    _unary("clamp", "ClampBackward1", clamp_forward, clamp_vjp, _SELF,
           "g where min <= a <= max (the bounds given), else 0", negzero="structural", grows=False, kink=clamp_kink,
           kink_doc="1 at a = min and at a = max (g passes); 0 everywhere when min > max",
           math=_CLAMP, checks=(Check(((4,),), (Fraction(-1, 2), Fraction(1))), Check(((3,),), (None, Fraction(1, 2)))),
           forward_error=clamp_no_bound),
    Op("clamp_tensor", "ClampBackward0", clamp_tensor_forward, clamp_tensor_vjp, clamp_tensor_shape,
       (Save("max", "in", 2), Save("min", "in", 1), Save("self", "in", 0)),
       "self: g where min <= a <= max; min: g where a < min < max; max: g where a > max or max < min",
       negzero="structural", grows=False, kink_doc="self: g at the bounds; min gets nothing when min >= max",
       math=Math(applied(CLAMP_T)), checks=(Check(((2, 2), (2,), (2, 2)), (True, True)),)),
    Op("log_sigmoid", "LogSigmoidBackward0", log_sigmoid_forward, log_sigmoid_vjp,
       lambda shapes, p, loc: (tuple(shapes[0]), tuple(shapes[0])), (Save("self", "in", 0), Save("buffer", "out", 1)),
       "g * sigmoid(-a) (the kernel: from buffer = exp(-|a|))", underflows="positive", outputs=2, diff_outputs=1,
       integers="refused", math=_LOGSIGMOID, checks=_X),
    _unary("celu", "CeluBackward0", celu_forward, celu_vjp, _SELF,
           "g where a > 0, else g * input_scale * alpha * exp(a * input_scale), input_scale = 1 / float32(alpha)",
           negzero="keep", kink=celu_kink, kink_doc="celu'(0) = alpha * input_scale (the a <= 0 branch)",
           forward_error=celu_zero_alpha, integers="refused", math=_CELU,
           checks=(Check(((2, 3),), (Fraction(1, 2), Fraction(2), Fraction(2))),)),
    _unary("celu_", "CeluBackward1", celu_forward, celu_result_vjp, _RESULT,
           "g where out > 0, else g * input_scale * (out + alpha) (in place; alpha < 0 raises in backward)",
           negzero="keep", kink=celu_kink, kink_doc="celu'(0) = alpha * input_scale (the out <= 0 branch)",
           forward_error=celu_zero_alpha, integers="refused", math=_CELU,
           checks=(Check(((2, 3),), (Fraction(1, 2), Fraction(2), Fraction(2))),)),
    _unary("hardsigmoid", "HardsigmoidBackward0", hardsigmoid_forward, hardsigmoid_vjp, _SELF,
           "g * float32(1/6) where -3 < a < 3, else 0", grows=False, kink=hardsigmoid_kink,
           kink_doc="0 at a = -3 and at a = 3; the slope is 1.0f / 6.0f (float32's 1/6) in float64 too",
           integers="refused", math=_HARDSIGMOID,
           checks=(Check(((2, 3),), slope=ONE_SIXTH_F32 * 6),)),
    _unary("threshold", "ThresholdBackward0", threshold_forward, threshold_vjp, _SELF,
           "0 where a <= threshold, else g", negzero="structural", kink=threshold_kink,
           kink_doc="0 at a = threshold", integers="refused", fills=True, math=_THRESHOLD,
           checks=(Check(((4,),), (Fraction(1, 2), Fraction(-2))),)),
    _unary("threshold_", "ThresholdBackward1", threshold_forward, threshold_vjp, _SELF,
           "0 where a <= threshold, else g (in place: self cloned and saved)", negzero="structural",
           kink=threshold_kink, kink_doc="0 at a = threshold", integers="refused", fills=True, math=_THRESHOLD,
           checks=(Check(((4,),), (Fraction(1, 2), Fraction(-2))),)),
    _unary("softshrink", "SoftshrinkBackward0", softshrink_forward, shrink_vjp, _SELF,
           "0 where -lambd <= a <= lambd, else g", negzero="input_sign", grows=False, kink=softshrink_kink,
           kink_doc="0 at a = -lambd and at a = lambd", forward_error=softshrink_lambda, integers="refused",
           math=_SOFTSHRINK, checks=(Check(((2, 3),), Fraction(1, 4)),)),
    _unary("hardshrink", "HardshrinkBackward0", hardshrink_forward, shrink_vjp, _SELF,
           "0 where -lambd <= a <= lambd, else g", negzero="structural", grows=False, kink=shrink_kink,
           kink_doc="0 at a = -lambd and at a = lambd", integers="refused", math=_HARDSHRINK,
           checks=(Check(((2, 3),), Fraction(1, 4)),)),
    Op("softmax", "SoftmaxBackward0", softmax_forward, softmax_vjp, lambda shapes, p, loc: tuple(shapes[0]),
       _RESULT, "out * (g - sum(g * out, dim))", grows=False, underflows=True, math=_SOFTMAX, checks=(Check(((2, 3),), 1), Check(((2, 2),), 0)), integers="refused"),
    Op("log_softmax", "LogSoftmaxBackward0", log_softmax_forward, log_softmax_vjp,
       lambda shapes, p, loc: tuple(shapes[0]), _RESULT, "g - exp(out) * sum(g, dim)",
       math=_LOG_SOFTMAX, checks=(Check(((2, 3),), 1), Check(((2, 2),), 0)), integers="refused"),
    Op("maximum", "MaximumBackward0", _extremum_forward(True), _extremum_vjp(True), binary_shape,
       (Save("other", "in", 1), Save("self", "in", 0)), "0 where a < b, g / 2 where a = b (each side), else g (a nan operand: g)",
       negzero="structural",
       kink=extremum_kink, kink_doc="equal elements: g / 2 to each", math=Math(applied(MAXIMUM)), checks=(Check(((2, 3), (3,))),)),
    Op("minimum", "MinimumBackward0", _extremum_forward(False), _extremum_vjp(False), binary_shape,
       (Save("other", "in", 1), Save("self", "in", 0)), "0 where a > b, g / 2 where a = b (each side), else g (a nan operand: g)",
       negzero="structural",
       kink=extremum_kink, kink_doc="equal elements: g / 2 to each", math=Math(applied(MINIMUM)), checks=(Check(((2, 3), (3,))),)),
    Op("where", "WhereBackward0", where_forward, where_vjp, where_shape, (Save("condition", "in", 2),),
       "g where condition, else 0; other: the rest", negzero="structural", differentiable=(True, True, False),
       kink_doc="condition (bool) has no edge; it is the only saved tensor",
       math=Math(applied(WHERE)), checks=(Check(((2, 3), (3,), (2, 3))),)),
    Op("compare", "(none)", compare_forward, no_vjp, binary_shape, (),
       "not differentiable: the result is a bool tensor with no grad_fn", negzero="never", grows=False,
       differentiable=(False, False), out_dtypes=("bool",),
       kink_doc="-- (no node; nan compares false, except !=)",
       math=Math(lambda a, p, shape, k: TFn(_COMPARE_FN[p], tuple(a), shape))),
    Op("isfinite", "(none)", isfinite_forward, no_vjp, same_shape, (),
       "not differentiable: the result is a bool tensor with no grad_fn", negzero="never", grows=False,
       differentiable=(False,), out_dtypes=("bool",), kink_doc="-- (no node)",
       math=Math(lambda a, p, shape, k: TFn(ISFINITE, tuple(a), shape))),
    Op("nan_to_num", "NanToNumBackward0", nan_to_num_forward, nan_to_num_vjp, same_shape, _SELF,
       "g * isfinite(self)", negzero="structural", integers="refused", fills=True,
       kink_doc="0 where self is nan or infinite", math=Math(applied(NAN_TO_NUM)),
       checks=(Check(((2, 3),), (Fraction(0), Fraction(1), Fraction(-1))),)),
)


# every op of this family but softmax and log_softmax runs as one TensorIterator (an elementwise kernel)
OPS = tuple(replace(op, elementwise=True) if op.name not in ("softmax", "log_softmax") else op for op in OPS)
