"""Primitives of the losses family: the loss kernels PyTorch 2.13 differentiates as one node.

``MseLossBackward0``, ``SmoothL1LossBackward0``, ``HuberLossBackward0``,
``BinaryCrossEntropyBackward0``, ``BinaryCrossEntropyWithLogitsBackward0``,
``NllLossBackward0`` and ``NllLoss2DBackward0``, with the derivatives of
``tools/autograd/derivatives.yaml`` and the CPU kernels' conventions at kinks:

* smooth_l1 / huber: the derivative is clamp((x - y) / beta, -1, 1) (huber: clamp(x - y,
  -delta, delta)); at |x - y| = beta both branches agree, at x = y it is 0;
* binary_cross_entropy clamps each log at -100 (a probability 0 or 1 gives a finite loss,
  100 per element) and divides its gradient by max(x (1 - x), 1e-12), 1e-12 as a float32
  holds it whatever the dtype (probed), so x = 0 or 1 gives a finite, huge gradient;
  d/dtarget is -logit(x), +-inf there;
* nll_loss: rows whose target is ``ignore_index`` give 0 and get gradient 0; the mean divides
  by the total weight of the other rows (no row left: 0/0, nan, refused in the forward).

A tensor PyTorch saves but does not differentiate (the class indices, ``weight``,
``pos_weight``, nll's ``total_weight``: the kernel's second output, computed by the lowering)
is a non-differentiable input, last: it is no edge of the node but it is packed like any
saved tensor (in the order the node packs them, probed with ``saved_tensors_hooks``). An optional one that is absent is a separate
primitive (``nll_loss`` / ``nll_loss_w``), since what the node saves differs.

Also here, clearly apart at the end: the few general primitives the composite losses
(``cross_entropy``, ``kl_div``) are built from and that no other family had yet
(``LogSoftmaxBackward0``, ``SumBackward1``, ``MulBackward1``, ``AddBackward1``, ``DivBackward1``,
``MaskedFillBackward0``, ``XlogyBackward0``): drop each when its own family defines it.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from adjoint.values.mathtree import Fn, TBin, TConst, TFn, applied, generic_vjp, number, number_text
from adjoint.engine.ops.record import Check, Math, Op, Save, if_needed
from adjoint.engine.ops.arith import SUB_TWO_BOOL, binary_shape, same_shape
from adjoint.engine.torch_errors import TYPE_NAMES
from adjoint.engine.ops.masking import mask_error, masked_fill_forward, masked_fill_shape, masked_fill_vjp

#: ``binary_cross_entropy_backward``'s EPSILON: 1e-12 as a float32 holds it, in float64 too
#: (torch 2.13 float64: d/dx at x = 0, target 1 is -1000000003995.8029 = -1 / float32(1e-12)).
BCE_EPSILON = Fraction(float(np.float32(1e-12)))


@dataclass(frozen=True)
class Pointwise:
    """A pointwise loss's arguments: the reduction and ``beta`` (smooth_l1) / ``delta`` (huber)."""

    reduction: str
    beta: Fraction = Fraction(1)


@dataclass(frozen=True)
class BCE:
    """binary_cross_entropy's reduction and the gradient's denominator floor."""

    reduction: str
    eps: Fraction = BCE_EPSILON


@dataclass(frozen=True)
class BCELogits:
    """binary_cross_entropy_with_logits's reduction, and which optional tensors follow self, target."""

    reduction: str
    weight: bool = False
    pos_weight: bool = False


@dataclass(frozen=True)
class Nll:
    """nll_loss's reduction and ignore_index; ``refused``: PyTorch's (type, message) when its
    kernel refuses the call once the node has packed self, target and weight (the binding
    decides it, in ATen's order: the op's ``value_error``, nothing is computed)."""

    reduction: str
    ignore_index: int = -100
    refused: tuple | None = None


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def reduce(B, x, reduction: str):
    """``apply_loss_reduction``: mean / sum over every element, or the elementwise loss."""
    if reduction == "none":
        return x
    s = B.total(x)
    return B.div(s, B.scalar(_numel(B.shape(x)))) if reduction == "mean" else s


def spread(B, g, shape, reduction: str):
    """The incoming gradient of a reduced loss, per element (mean: divided by the count)."""
    if reduction == "none":
        return g
    g = B.broadcast_to(B.reshape(g, ()), shape)
    return B.div(g, B.scalar(_numel(shape))) if reduction == "mean" else g


def reduced_shape(shapes, p, loc):
    return tuple(shapes[0]) if p.reduction == "none" else ()


# ----------------------------------------------------------------------------- mse, smooth_l1, huber

def mse_forward(B, ins, p):
    d = B.sub(ins[0], ins[1])
    return reduce(B, B.mul(d, d), p.reduction)


def mse_vjp(B, gs, ins, outs, p, need):
    x, y = ins[0], ins[1]
    g = spread(B, gs[0], B.shape(x), p.reduction)
    local = B.mul(B.mul(B.scalar(2), B.sub(x, y)), g)
    return [if_needed(need, 0, lambda: local), if_needed(need, 1, lambda: B.neg(local))]


def _smooth(B, d, beta):
    """|c| (|d| - |c| / 2) with c = clamp(d, -beta, beta): d^2 / 2 inside, beta (|d| - beta / 2) outside."""
    c = B.abs(B.clamp(d, -beta, beta))
    return B.mul(c, B.sub(B.abs(d), B.div(c, B.scalar(2))))


def smooth_l1_forward(B, ins, p):
    d = B.sub(ins[0], ins[1])
    return reduce(B, B.div(_smooth(B, d, p.beta), B.scalar(p.beta)), p.reduction)


def smooth_l1_vjp(B, gs, ins, outs, p, need):
    x, y = ins[0], ins[1]
    g = spread(B, gs[0], B.shape(x), p.reduction)
    local = B.mul(B.clamp(B.div(B.sub(x, y), B.scalar(p.beta)), -1, 1), g)
    return [if_needed(need, 0, lambda: local), if_needed(need, 1, lambda: B.neg(local))]


def huber_forward(B, ins, p):
    return reduce(B, _smooth(B, B.sub(ins[0], ins[1]), p.beta), p.reduction)


def huber_vjp(B, gs, ins, outs, p, need):
    x, y = ins[0], ins[1]
    g = spread(B, gs[0], B.shape(x), p.reduction)
    local = B.mul(B.clamp(B.sub(x, y), -p.beta, p.beta), g)
    return [if_needed(need, 0, lambda: local), if_needed(need, 1, lambda: B.neg(local))]


def beta_kink(B, ins, p):
    d = B.sub(ins[0], ins[1])
    if B.any_zero(B.sub(B.abs(d), B.scalar(p.beta))):
        return f"|input - target| = {p.beta} (the quadratic and linear pieces meet): both give the same derivative"
    return None


# ----------------------------------------------------------------------------- binary_cross_entropy

def bce_forward(B, ins, p):
    x, y = ins[0], ins[1]
    one = B.scalar(1)
    loss = B.sub(B.mul(B.sub(y, one), B.clamped_log(B.sub(one, x))), B.mul(y, B.clamped_log(x)))
    if len(ins) > 2:
        loss = B.mul(loss, ins[2])
    return reduce(B, loss, p.reduction)


def bce_vjp(B, gs, ins, outs, p, need):
    x, y = ins[0], ins[1]
    g = spread(B, gs[0], B.shape(x), p.reduction)
    if len(ins) > 2:
        g = B.mul(g, ins[2])
    one = B.scalar(1)

    def grad_input():  # grad * (x - y) / max((1 - x) x, EPSILON)
        return B.div(B.mul(g, B.sub(x, y)), B.clamp(B.mul(B.sub(one, x), x), p.eps, None))

    def grad_target():  # -logit(x) * grad
        return B.mul(B.sub(B.log(B.sub(one, x)), B.log(x)), g)

    return [if_needed(need, 0, grad_input), if_needed(need, 1, grad_target)]


def bce_kink(B, ins, p):
    x = ins[0]
    if B.any_zero(x) or B.any_zero(B.sub(B.scalar(1), x)):
        return ("an input of 0 or 1: PyTorch clamps each log at -100 and divides the gradient by "
                "max(x (1 - x), 1e-12)")
    return None


# ----------------------------------------------------------------------------- binary_cross_entropy_with_logits

def _softplus_neg(B, x):
    """log(1 + exp(-x)) = -log_sigmoid(x)."""
    return B.log(B.add(B.scalar(1), B.exp(B.neg(x))))


def _bcel_parts(ins, p):
    """(weight, pos_weight) from the inputs after self and target (``p`` says which are given)."""
    rest = list(ins[2:])
    weight = rest.pop(0) if p.weight else None
    pos_weight = rest.pop(0) if p.pos_weight else None
    return weight, pos_weight


def bcel_forward(B, ins, p):
    x, y = ins[0], ins[1]
    weight, pos_weight = _bcel_parts(ins, p)
    one = B.scalar(1)
    sp = _softplus_neg(B, x)
    if pos_weight is not None:  # log_weight = (pos_weight - 1) * target + 1
        sp = B.mul(B.add(B.mul(B.sub(pos_weight, one), y), one), sp)
    loss = B.add(B.mul(B.sub(one, y), x), sp)
    if weight is not None:
        loss = B.mul(loss, weight)
    return reduce(B, loss, p.reduction)


def bcel_vjp(B, gs, ins, outs, p, need):
    x, y = ins[0], ins[1]
    weight, pos_weight = _bcel_parts(ins, p)
    g = spread(B, gs[0], B.shape(x), p.reduction)
    if weight is not None:
        g = B.mul(g, weight)
    one = B.scalar(1)

    def grad_input():
        if pos_weight is None:
            return B.mul(B.sub(B.sigmoid(x), y), g)
        t = B.mul(pos_weight, y)  # (t + 1 - target) * sigmoid(x) - t
        return B.mul(B.sub(B.mul(B.sub(B.add(t, one), y), B.sigmoid(x)), t), g)

    def grad_target():
        if pos_weight is None:
            return B.mul(B.neg(x), g)
        # log_sigmoid(-x) - log_sigmoid(x) * pos_weight
        return B.mul(B.sub(B.mul(_softplus_neg(B, x), pos_weight), _softplus_neg(B, B.neg(x))), g)

    return [if_needed(need, 0, grad_input), if_needed(need, 1, grad_target)]


# ----------------------------------------------------------------------------- nll_loss, nll_loss2d

def _nll_keys(B, x_shape, target, ignore_index):
    """numpy index tuples for the positions whose class is not ignored: ``x_key`` picks
    input[n, t, h, w], ``t_key`` the same position in the target, ``cls`` the class of each. The
    input is (C,) with a 0-d target, (N, C) with (N,), or (N, C, H, W) with (N, H, W)."""
    classes = np.array(B.ints(target), dtype=np.int64).reshape(B.shape(target))
    keep = classes != ignore_index
    if len(x_shape) == 1:
        if not keep:
            empty = np.zeros(0, dtype=np.int64)
            return (empty,), (), empty
        c = classes.reshape(1)
        return (c,), (), c
    pos = np.nonzero(keep)          # positions in the target: (n,) or (n, h, w)
    cls = classes[pos]
    x_key = (pos[0], cls) + tuple(pos[1:])
    return x_key, pos, cls


def _class_weights(B, ins, cls):
    return B.index(ins[2], (cls,)) if len(ins) > 3 else None


def nll_forward(B, ins, p):
    x, target, total_weight = ins[0], ins[1], ins[-1]
    x_key, t_key, cls = _nll_keys(B, B.shape(x), target, p.ignore_index)
    picked = B.neg(B.index(x, x_key))
    w = _class_weights(B, ins, cls)
    if w is not None:
        picked = B.mul(picked, w)
    if p.reduction == "none" and len(B.shape(x)) > 1:
        return B.place(B.shape(target), t_key, picked)
    s = B.total(picked)
    return B.div(s, total_weight) if p.reduction == "mean" else s


def nll_vjp(B, gs, ins, outs, p, need):
    x, target, total_weight = ins[0], ins[1], ins[-1]
    x_key, t_key, cls = _nll_keys(B, B.shape(x), target, p.ignore_index)
    g = gs[0]
    if p.reduction == "none" and len(B.shape(x)) > 1:
        per = B.neg(B.index(g, t_key))
    else:
        scale = B.div(g, total_weight) if p.reduction == "mean" else g
        per = B.broadcast_to(B.neg(B.reshape(scale, ())), (len(cls),))
    w = _class_weights(B, ins, cls)
    if w is not None:
        per = B.mul(w, per)
    return [B.place(B.shape(x), x_key, per)]


def nll_shape(shapes, p, loc):
    x = shapes[0]
    if p.refused is not None:
        return ()
    if p.reduction == "none" and len(x) > 1:
        return tuple(shapes[1])
    return ()


def nll_refused(B, values, p):
    return p.refused


def nll_kink(B, ins, p):
    classes = B.ints(ins[1])
    if p.ignore_index in classes:
        return f"rows whose target is ignore_index ({p.ignore_index}) add 0 to the loss and get gradient 0"
    return None


# ----------------------------------------------------------------------------- primitives the composite losses need
# (log_softmax and sum_dim live with the activations and reductions)

def mul_scalar_forward(B, ins, p):
    return B.mul(ins[0], B.scalar(p))


def mul_scalar_vjp(B, gs, ins, outs, p, need):
    return [B.mul(gs[0], B.scalar(p))]


def add_scalar_forward(B, ins, p):
    return B.add(ins[0], B.scalar(p))


def add_scalar_vjp(B, gs, ins, outs, p, need):
    return [gs[0]]


def div_scalar_forward(B, ins, p):
    return B.div(ins[0], B.scalar(p))


def div_scalar_vjp(B, gs, ins, outs, p, need):
    return [B.div(gs[0], B.scalar(p))]


def xlogy_forward(B, ins, p):
    """x * log(y), 0 where x == 0 (unless y is nan)."""
    x, y = ins
    shape = B.shape(B.add(x, y))
    zero = B.mask(B.broadcast_to(x, shape), lambda s: s == 0)
    return B.where(zero, B.zeros(shape), B.mul(x, B.log(y)))


def xlogy_vjp(B, gs, ins, outs, p, need):
    x, y = ins
    g = gs[0]
    shape = B.shape(g)

    def grad_self():  # xlogy(grad, y), masked to 0 where x == 0 and y <= 0
        xb, yb = B.broadcast_to(x, shape), B.broadcast_to(y, shape)
        both = B.mul(B.mask(xb, lambda s: s == 0), B.mask(yb, lambda s: s in (0, -1)))
        return B.sum_to(B.where(both, B.zeros(shape), xlogy_forward(B, [g, yb], None)), B.shape(x))

    return [if_needed(need, 0, grad_self), if_needed(need, 1, lambda: B.sum_to(B.div(B.mul(g, x), y), B.shape(y)))]


# ----------------------------------------------------------------------------- the records

_SELF_TARGET = (Save("self", "in", 0), Save("target", "in", 1))


def _integral_target(dtypes) -> str | None:
    """The target's dtype where it is int64 or bool (a class-label target handed to a pointwise loss)."""
    return dtypes[1] if dtypes[1] in ("int64", "bool") else None


def same_dtype_target_error(dtypes, p, need=None):
    """TensorIterator's check_all_same_dtype in binary_cross_entropy's kernel (forward) and
    huber_loss_backward's (the forward promotes): "Found dtype Long but expected Float"."""
    t = _integral_target(dtypes)
    return f"Found dtype {TYPE_NAMES[t]} but expected {TYPE_NAMES[dtypes[0]]}" if t else None


def bcel_target_error(dtypes, p):
    """binary_cross_entropy_with_logits's ``(1 - target).mul_(input)``: an int64 ``1 - target``
    cannot hold the float product (the in-place result's cast check), a bool one is sub's error
    (``1`` wrapped as a bool scalar: two bool operands)."""
    t = _integral_target(dtypes)
    if t == "int64":
        return f"result type {TYPE_NAMES[dtypes[0]]} can't be cast to the desired output type Long"
    return SUB_TWO_BOOL if t == "bool" else None
_RED = ("mean", "sum", "none")


def _pointwise_checks(p_of):
    return tuple(Check(((3,), (3,)), p_of(r)) for r in _RED)


def _nll(name: str, node: str, weighted: bool) -> Op:
    saves = _SELF_TARGET + ((Save("weight", "in", 2),) if weighted else ()) + \
        (Save("total_weight", "in", 3 if weighted else 2),)
    if node == "NllLossBackward0":
        x, target, classes = (2, 3), (2, 0), (2, 0)
    else:
        x, target, classes = (2, 3, 1, 2), (((2, 0),), ((1, 1),)), (2, 0, 1, 1)
    w = (Fraction(1, 2), Fraction(2), Fraction(3, 2))
    total = sum(w[c] for c in classes) if weighted else Fraction(len(classes))
    checks = tuple(Check((x,), Nll(r), fixed=(target,) + ((w,) if weighted else ()) +
                         (Fraction(0) if r == "none" else total,)) for r in _RED)
    return Op(name, node, nll_forward, nll_vjp, nll_shape, saves,
              "-w[t] g (/ total weight for mean) at each row's target class, 0 elsewhere", kink=nll_kink,
              math=Math(_nll_formula),
              kink_doc="ignore_index rows: 0 and gradient 0; mean over total weight 0 is nan (exact mode refuses it)",
              differentiable=(True, False, False) + ((False,) if weighted else ()), checks=checks,
              nonfinite="a mean over a total weight of 0 (every target ignored, or weighted 0)",
              value_error=nll_refused)


def _bcel(name: str, weighted: bool, pos: bool) -> Op:
    saves = ((Save("pos_weight", "in", 3 if weighted else 2),) if pos else ()) + _SELF_TARGET + \
        ((Save("weight", "in", 2),) if weighted else ())
    extra = ((Fraction(1, 2), Fraction(2), Fraction(3, 2)),) * (int(weighted) + int(pos))
    checks = tuple(Check(((2, 3), (2, 3)), BCELogits(r, weighted, pos), positive="unit", fixed=extra) for r in _RED[:1]) + \
        tuple(Check(((3,), (3,)), BCELogits(r, weighted, pos), positive="unit", fixed=extra) for r in _RED[1:])
    return Op(name, "BinaryCrossEntropyWithLogitsBackward0", bcel_forward, bcel_vjp, reduced_shape, saves,
              "g (sigmoid(x) - y) [pos_weight: g ((pw y + 1 - y) sigmoid(x) - pw y)]; target: -g x "
              "[pos_weight: g (log_sigmoid(-x) - pw log_sigmoid(x))]",
              differentiable=(True, True) + (False,) * (int(weighted) + int(pos)), math=Math(_bcel_formula),
              checks=checks, forward_error=bcel_target_error)


def bce_value_error(B, values, p):
    """binary_cross_entropy's CPU kernel checks each element in turn, its input then its target, to
    be in [0, 1]: the first element with either outside names which (``[0.5, 2]`` with target
    ``[-1, 0.5]``: the target's). Past one thread's grain (32,768 elements) the chunks run in
    parallel and the first to fail is not fixed; adjoint still takes the first in order."""
    bad_input = B.first_outside(values[0], 0, 1)
    bad_target = B.first_outside(values[1], 0, 1)
    if bad_input is None and bad_target is None:
        return None
    if bad_target is None or (bad_input is not None and bad_input <= bad_target):
        return ("RuntimeError", "all elements of input should be between 0 and 1")
    return ("RuntimeError", "all elements of target should be between 0 and 1")


def _bce(name: str, weighted: bool) -> Op:
    saves = _SELF_TARGET + ((Save("weight", "in", 2),) if weighted else ())
    extra = ((Fraction(1, 2), Fraction(2), Fraction(3, 2)),) if weighted else ()
    checks = tuple(Check(((3,), (3,)), BCE(r), positive="unit", fixed=extra) for r in _RED)
    return Op(name, "BinaryCrossEntropyBackward0", bce_forward, bce_vjp, reduced_shape, saves,
              "g w (x - y) / max(x (1 - x), 1e-12); target: -g w logit(x)", kink=bce_kink,
              kink_doc="log clamped at -100; gradient denominator at least float32(1e-12); d/dy at x = 0, 1 is +-inf",
              differentiable=(True, True) + ((False,) if weighted else ()), math=Math(_bce_formula), checks=checks,
              value_error=bce_value_error, forward_error=same_dtype_target_error)



# ----------------------------------------------------------------------------- how they read (adjoint.mathtree)
# Each loss kernel is one function of its inputs, written by name with its reduction; its J^T lambda
# is declared generic (the kernel's formula is in the op's ``formula`` and docs/ops.md).

MSE = Fn("mse_loss", "\\operatorname{mse}_{#s}\\left(#0,\\ #1\\right)", generic_vjp)
SMOOTH_L1 = Fn("smooth_l1_loss", "\\operatorname{smooth\\_l1}_{#s}\\left(#0,\\ #1\\right)", generic_vjp)
HUBER = Fn("huber_loss", "\\operatorname{huber}_{#s}\\left(#0,\\ #1\\right)", generic_vjp)
BCE_FN = Fn("binary_cross_entropy", "\\operatorname{bce}_{#s}\\left(#*\\right)", generic_vjp)
BCE_LOGITS = Fn("bce_with_logits", "\\operatorname{bce\\_logits}_{#s}\\left(#*\\right)", generic_vjp)
NLL = Fn("nll_loss", "\\operatorname{nll}_{#s}\\left(#0,\\ #1\\right)", generic_vjp)
MASKED_FILL = Fn("masked_fill", "\\operatorname{masked\\_fill}_{#s}\\left(#0,\\ #1\\right)", generic_vjp)
XLOGY = Fn("xlogy", "\\operatorname{xlogy}\\left(#0,\\ #1\\right)", generic_vjp)


def _reduction_text(p) -> str:
    return f"\\mathrm{{{p.reduction}}}"


def _pointwise(fn: Fn) -> Math:
    def formula(a, p, shape, k):
        sub = _reduction_text(p) + (f",\\,{number_text(p.beta)}" if p.beta != 1 else "")
        return TFn(fn, (a[0], a[1]), tuple(shape), sub, p)
    return Math(formula)


def _bce_formula(a, p, shape, k):
    return TFn(BCE_FN, tuple(a), tuple(shape), _reduction_text(p), p)


def _bcel_formula(a, p, shape, k):
    return TFn(BCE_LOGITS, tuple(a), tuple(shape), _reduction_text(p), p)


def _nll_formula(a, p, shape, k):
    """nll over the log-probabilities and the class indices (weight and total weight are the kernel's)."""
    sub = _reduction_text(p) + (f",\\,\\mathrm{{ignore}}={p.ignore_index}" if p.ignore_index != -100 else "")
    return TFn(NLL, tuple(a), tuple(shape), sub, p)


_MUL_SCALAR = Math(lambda a, p, shape, k: TBin("mul", a[0], TConst(number(p)), tuple(shape)))
_ADD_SCALAR = Math(lambda a, p, shape, k: TBin("add", a[0], TConst(number(p)), tuple(shape)))
_DIV_SCALAR = Math(lambda a, p, shape, k: TBin("div", a[0], TConst(number(p)), tuple(shape)))
_MASKED_FILL = Math(lambda a, p, shape, k: TFn(MASKED_FILL, (a[0], a[1]), tuple(shape), number_text(p), p))

OPS = (
    Op("mse_loss", "MseLossBackward0", mse_forward, mse_vjp, reduced_shape, _SELF_TARGET,
       "2 (x - y) g (/ n for mean); target: the negative", math=_pointwise(MSE), checks=_pointwise_checks(Pointwise)),
    Op("smooth_l1_loss", "SmoothL1LossBackward0", smooth_l1_forward, smooth_l1_vjp, reduced_shape, _SELF_TARGET,
       "clamp((x - y) / beta, -1, 1) g; target: the negative", kink=beta_kink,
       kink_doc="|x - y| = beta: +-1 from both sides; x = y: 0",
       math=_pointwise(SMOOTH_L1), checks=tuple(Check(((3,), (3,)), Pointwise(r, Fraction(1, 2))) for r in _RED)),
    Op("huber_loss", "HuberLossBackward0", huber_forward, huber_vjp, reduced_shape, _SELF_TARGET,
       "clamp(x - y, -delta, delta) g; target: the negative", kink=beta_kink,
       kink_doc="|x - y| = delta: +-delta from both sides; x = y: 0", backward_error=same_dtype_target_error,
       math=_pointwise(HUBER), checks=tuple(Check(((3,), (3,)), Pointwise(r, Fraction(3, 4))) for r in _RED)),
    _bce("binary_cross_entropy", False),
    _bce("binary_cross_entropy_w", True),
    _bcel("bce_with_logits", False, False),
    _bcel("bce_with_logits_w", True, False),
    _bcel("bce_with_logits_pw", False, True),
    _bcel("bce_with_logits_w_pw", True, True),
    _nll("nll_loss", "NllLossBackward0", False),
    _nll("nll_loss_w", "NllLossBackward0", True),
    _nll("nll_loss2d", "NllLoss2DBackward0", False),
    _nll("nll_loss2d_w", "NllLoss2DBackward0", True),
    # shared primitives the composite losses need (drop each when its own family has it)
    Op("mul_scalar", "MulBackward1", mul_scalar_forward, mul_scalar_vjp, same_shape, (), "g * s", underflows=True,
       math=_MUL_SCALAR, iterator_layout=True, checks=(Check(((2,),), Fraction(9, 10)),)),
    Op("add_scalar", "AddBackward1", add_scalar_forward, add_scalar_vjp, same_shape, (), "g",
       math=_ADD_SCALAR, iterator_layout=True, checks=(Check(((2,),), Fraction(1, 30)),)),
    Op("div_scalar", "DivBackward1", div_scalar_forward, div_scalar_vjp, same_shape, (), "g / s", underflows=True,
       math=_DIV_SCALAR, iterator_layout=True, checks=(Check(((2,),), Fraction(2)),)),
    Op("masked_fill", "MaskedFillBackward0", masked_fill_forward, masked_fill_vjp, masked_fill_shape,
       (Save("mask", "in", 1),), "g, 0 where the mask is set (summed to self's shape)", differentiable=(True, False),
       negzero="structural", grows=False, forward_error=mask_error, fills=True,
       checks_internal_overlap=False,   # masked_fill__cpu warns on an expanded self (bindings/masking.py)
       kink_doc="the mask (bool) has no edge; it is the only saved tensor",
       math=_MASKED_FILL, checks=(Check(((3,),), Fraction(0), fixed=((0, 1, 0),)),
                                  Check(((3,), (2, 3)), Fraction(-1, 2), given=((1, (1, 0, 0, 0, 1, 1)),)))),
    Op("xlogy", "XlogyBackward0", xlogy_forward, xlogy_vjp, binary_shape,
       (Save("other", "in", 1), Save("self", "in", 0)), "g log(y) (0 where x = 0, y <= 0); g x / y",
       kink_doc="x = 0: the value is 0 (not nan), d/dx masked to 0 where also y <= 0",
       nonfinite="xlogy with a nonpositive y", math=Math(applied(XLOGY)), checks=(Check(((2, 3), (2, 3)), positive=True),)),
)


__all__ = ["OPS", "Pointwise", "BCE", "BCELogits", "Nll", "BCE_EPSILON"]
