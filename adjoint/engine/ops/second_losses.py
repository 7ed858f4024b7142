"""The loss backward kernels a create_graph backward records (adjoint.engine.second_losses calls them), with
their own derivatives (derivatives.yaml, FunctionsManual.cpp), as torch 2.13 records them:

* ``binary_cross_entropy_backward(grad_output, self, target, weight, reduction)``:
  ``BinaryCrossEntropyBackwardBackward0``, edges grad_output, self, target (weight has none), saves
  grad_output (when self or target needs a gradient), self, target, weight; its derivative:
  grad_output ``binary_cross_entropy_double_backward_grad_output`` (summed back to grad_output's
  sizes), self ``binary_cross_entropy_double_backward``, target
  ``binary_cross_entropy_double_backward_target``. Those formulas use ``1e-12`` as a C++ double:
  ``(x + eps)`` and ``(1 - x + eps)`` squared in the denominators (not the kernel's floor), which
  the dtype rounds (float32(1e-12) in a float32 run); the kernel's floor of ``x (1 - x)`` is
  float32(1e-12) in either dtype (adjoint.engine.ops.losses.BCE_EPSILON);
* ``smooth_l1_loss_backward(grad_output, self, target, reduction, beta)``: ``SmoothL1LossBackwardBackward0``,
  saves grad_output (when self or target needs a gradient), self, target; its derivative: grad_output
  ``smooth_l1_loss_backward(grad, self, target)`` (self's sizes, summed back to grad_output's), self
  ``grad * grad_output * (|self - target| < beta) / beta`` (/ numel for mean), target its negative;
* ``huber_loss_backward(grad_output, self, target, reduction, delta)``: ``HuberLossBackwardBackward0``,
  saves grad_output, self, target; its derivative: grad_output
  ``huber_loss_double_backward_grad_output`` (reduced: ``(huber_loss_backward(ones, ...) * grad).sum()``),
  self ``grad * grad_output * (|self - target| < delta)`` (/ numel), target its negative;
* ``logit(self)`` (``LogitBackward0``, saves self), which binary_cross_entropy's target formula calls:
  ``log(x / (1 - x))``; its backward without grad mode is ``logit_backward``: ``grad / (x (1 - x))``.

binary_cross_entropy_backward's derivative is PyTorch's, not the exact derivative of its kernel (the
``+ eps`` terms): its gradient check takes both epsilons 0, where the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from adjoint.values.mathtree import Fn, TFn, generic_vjp, number_text
from adjoint.engine.ops.arith import same_shape
from adjoint.engine.ops.losses import BCE, BCE_EPSILON, Pointwise, bce_vjp, same_dtype_target_error
from adjoint.engine.ops.record import Check, Math, Op, Save

#: the double backward formulas' ``1e-12`` (a C++ double) in a float64 run
DOUBLE_EPSILON = Fraction(1e-12)


@dataclass(frozen=True)
class BCEBackward:
    """binary_cross_entropy_backward's reduction; ``eps`` the kernel's floor of x (1 - x), ``eps2`` the
    double backward formulas' 1e-12 as the run's dtype holds it."""

    reduction: str
    eps: Fraction = BCE_EPSILON
    eps2: Fraction = DOUBLE_EPSILON


def _numel(B, x) -> int:
    n = 1
    for d in B.shape(x):
        n *= d
    return n


def _mean(B, v, x, reduction: str):
    """``/ input.numel()`` for the mean reduction (the formulas' last step)."""
    return B.div(v, B.scalar(_numel(B, x))) if reduction == "mean" else v


def _summed_to(B, v, go):
    """validate_outputs' sum_to: a gradient of self's sizes handed to a 0-d grad_output (mean, sum)."""
    shape = tuple(B.shape(go))
    return v if tuple(B.shape(v)) == shape else B.reshape(B.total(v), shape)


def _self_shape(shapes, p, loc):
    return tuple(shapes[1])


# ----------------------------------------------------------------------------- binary_cross_entropy_backward

def bce_backward_forward(B, ins, p: BCEBackward):
    # the kernel: grad_output (/ numel) * weight * (x - y) / max((1 - x) x, EPSILON)
    go, x, y = ins[0], ins[1], ins[2]
    return bce_vjp(B, [go], [x, y] + list(ins[3:]), None, BCE(p.reduction, p.eps), [True, False])[0]


def _weighted(B, v, ins):
    return B.mul(v, ins[3]) if len(ins) > 3 else v


def bce_backward_vjp(B, gs, ins, outs, p: BCEBackward, need):
    gg = gs[0]
    go, x, y = ins[0], ins[1], ins[2]
    one, eps = B.scalar(1), B.scalar(p.eps2)

    def grad_output():   # (x - y) / ((x + eps) (1 - x + eps)) * grad * weight (/ numel)
        r = B.div(B.sub(x, y), B.mul(B.add(x, eps), B.add(B.sub(one, x), eps)))
        return _summed_to(B, _mean(B, _weighted(B, B.mul(r, gg), ins), x, p.reduction), go)

    def grad_self():     # (x^2 - 2 x y + y) / ((x + eps)^2 (1 - x + eps)^2) * (grad * grad_output) * weight (/ numel)
        a, b = B.add(x, eps), B.add(B.sub(one, x), eps)
        num = B.add(B.sub(B.mul(x, x), B.mul(B.mul(B.scalar(2), x), y)), y)
        r = B.div(num, B.mul(B.mul(a, a), B.mul(b, b)))
        return _mean(B, _weighted(B, B.mul(r, B.mul(gg, go)), ins), x, p.reduction)

    def grad_target():   # -grad * grad_output * weight / max((1 - x) x, eps) (/ numel)
        r = _weighted(B, B.mul(B.neg(gg), go), ins)
        r = B.div(r, B.clamp(B.mul(B.sub(one, x), x), p.eps2, None))
        return _mean(B, r, y, p.reduction)

    return [grad_output() if need[0] else None, grad_self() if need[1] else None,
            grad_target() if len(need) > 2 and need[2] else None] + [None] * (len(ins) - 3)


# ----------------------------------------------------------------------------- smooth_l1 / huber backward

def _scale(p, smooth: bool):
    return p.beta if smooth else Fraction(1)


def _slope(B, gs, go, x, y, p, smooth: bool):
    """grad * grad_output * (|x - y| < beta) [/ beta for smooth_l1] (/ numel): the self formula."""
    d = B.abs(B.sub(x, y))
    prod = B.mul(gs[0], go)
    inside = B.choose(B.sub(d, B.scalar(p.beta)), "<", prod, B.zeros(B.shape(prod)))
    if smooth:
        inside = B.div(inside, B.scalar(p.beta))
    return _mean(B, inside, x, p.reduction)


def _pointwise_backward(smooth: bool):
    def forward(B, ins, p: Pointwise):
        # norm * clamp((x - y) / beta, -1, 1) * grad_output (smooth_l1); norm * clamp(x - y, -delta, delta) * grad_output
        go, x, y = ins
        d = B.sub(x, y)
        c = B.clamp(B.div(d, B.scalar(p.beta)), -1, 1) if smooth else B.clamp(d, -p.beta, p.beta)
        n = _numel(B, x)
        norm = B.scalar(Fraction(1, n)) if p.reduction == "mean" else B.scalar(1)
        return B.mul(B.mul(norm, c), go)

    def vjp(B, gs, ins, outs, p: Pointwise, need):
        go, x, y = ins
        a = None
        if need[0]:   # the kernel again on grad (huber's reduced form sums (kernel(ones) * grad): the same values)
            a = _summed_to(B, forward(B, [gs[0], x, y], p), go)
        both = _slope(B, gs, go, x, y, p, smooth) if need[1] or need[2] else None
        return [a, both if need[1] else None, B.neg(both) if need[2] else None]

    return forward, vjp


def beta_kink_backward(B, ins, p):
    d = B.abs(B.sub(ins[1], ins[2]))
    if B.any_zero(B.sub(d, B.scalar(p.beta))):
        return (f"|self - target| = {p.beta}: the derivative's indicator (|self - target| < {p.beta}) is 0 there "
                "(PyTorch's double backward)")
    return None


def huber_backward_error(dtypes, p, need=None):
    """huber_loss_backward's check_all_same_dtype, on (self, target) after grad_output."""
    return same_dtype_target_error(dtypes[1:], p, need)


# ----------------------------------------------------------------------------- logit

def logit_forward(B, ins, p):
    x = ins[0]
    return B.log(B.div(x, B.sub(B.scalar(1), x)))


def logit_vjp(B, gs, ins, outs, p, need):
    # logit_backward (eps None): grad / (x (1 - x)) inside [0, 1] (the formula refuses x = 0, 1 and outside)
    x = ins[0]
    return [B.div(gs[0], B.mul(x, B.sub(B.scalar(1), x)))]


def logit_kink(B, ins, p):
    x = ins[0]
    if B.any_zero(x) or B.any_zero(B.sub(B.scalar(1), x)):
        return "logit at 0 or 1 is -inf or inf; its derivative there is grad * inf"
    return None


# ----------------------------------------------------------------------------- how they read

BCE_BACKWARD = Fn("binary_cross_entropy_backward", "\\operatorname{bce}'_{#s}\\left(#*\\right)", generic_vjp)
SMOOTH_L1_BACKWARD = Fn("smooth_l1_loss_backward", "\\operatorname{smooth\\_l1}'_{#s}\\left(#*\\right)", generic_vjp)
HUBER_BACKWARD = Fn("huber_loss_backward", "\\operatorname{huber}'_{#s}\\left(#*\\right)", generic_vjp)
LOGIT = Fn("logit", "\\operatorname{logit}\\left(#0\\right)", generic_vjp)


def _reduction(p) -> str:
    beta = getattr(p, "beta", Fraction(1))
    return f"\\mathrm{{{p.reduction}}}" + (f",\\,{number_text(beta)}" if beta != 1 else "")


def _math(fn: Fn) -> Math:
    return Math(lambda a, p, shape, k: TFn(fn, tuple(a[:3]), tuple(shape), _reduction(p), p))


_RED = ("mean", "sum", "none")
_W = (Fraction(1, 2), Fraction(2), Fraction(3, 2))


def _go_shape(r: str) -> tuple:
    return (3,) if r == "none" else ()


def _bce_backward(weighted: bool) -> Op:
    name = "binary_cross_entropy_backward_w" if weighted else "binary_cross_entropy_backward"
    saves = (Save("grad_output", "in", 0, if_need=(1, 2)), Save("self", "in", 1), Save("target", "in", 2)) + \
        ((Save("weight", "in", 3),) if weighted else ())
    fixed = (_W,) if weighted else ()
    return Op(name, "BinaryCrossEntropyBackwardBackward0", bce_backward_forward, bce_backward_vjp, _self_shape, saves,
              "go w (x - y) / max(x (1 - x), 1e-12); grad_output: g w (x - y) / ((x + e)(1 - x + e)); self: "
              "g go w (x^2 - 2 x y + y) / ((x + e)^2 (1 - x + e)^2); target: -g go w / max(x (1 - x), e) "
              "(e = 1e-12; / numel for mean)",
              differentiable=(True, True, True) + ((False,) if weighted else ()), math=_math(BCE_BACKWARD),
              checks=tuple(Check((_go_shape(r), (3,), (3,)), BCEBackward(r, Fraction(0), Fraction(0)), positive="unit",
                                 fixed=fixed) for r in _RED))


def _pointwise_op(smooth: bool) -> Op:
    forward, vjp = _pointwise_backward(smooth)
    name, node = ("smooth_l1_loss_backward", "SmoothL1LossBackwardBackward0") if smooth else \
        ("huber_loss_backward", "HuberLossBackwardBackward0")
    beta = Fraction(3, 2) if smooth else Fraction(5, 4)
    go_save = Save("grad_output", "in", 0, if_need=(1, 2)) if smooth else Save("grad_output", "in", 0)
    return Op(name, node, forward, vjp, _self_shape, (go_save, Save("self", "in", 1), Save("target", "in", 2)),
              ("norm clamp((x - y) / beta, -1, 1) go; grad_output: the same of g; self: g go (|x - y| < beta) / beta "
               "(/ numel); target: the negative") if smooth else
              ("norm clamp(x - y, -delta, delta) go; grad_output: the same of g; self: g go (|x - y| < delta) "
               "(/ numel); target: the negative"),
              kink=beta_kink_backward, kink_doc="|x - y| = beta: the indicator is 0 (strictly inside)",
              forward_error=None if smooth else huber_backward_error,
              math=_math(SMOOTH_L1_BACKWARD if smooth else HUBER_BACKWARD),
              checks=tuple(Check((_go_shape(r), (3,), (3,)), Pointwise(r, beta)) for r in _RED))


OPS = (
    _bce_backward(False),
    _bce_backward(True),
    _pointwise_op(True),
    _pointwise_op(False),
    Op("logit", "LogitBackward0", logit_forward, logit_vjp, same_shape, (Save("self", "in", 0),),
       "g / (x (1 - x))", kink=logit_kink, kink_doc="x = 0 or 1: logit is -inf / inf", underflows=True,
       nonfinite="logit of 0 or 1", math=Math(lambda a, p, shape, k: TFn(LOGIT, (a[0],), tuple(shape), "", p)),
       checks=(Check(((3,),), positive="unit"),)),
)
