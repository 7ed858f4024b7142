"""Backward formulas recorded as ops (see adjoint.engine.second_formulas) for the pointwise losses:
binary_cross_entropy, binary_cross_entropy_with_logits, smooth_l1_loss and huber_loss, as torch 2.13
records them under create_graph (derivatives.yaml; FunctionsManual.cpp), probed node for node:

* ``BinaryCrossEntropyBackward0``: self ``binary_cross_entropy_backward(grad, self, target, weight,
  reduction)`` (one ``BinaryCrossEntropyBackwardBackward0``), then target
  ``binary_cross_entropy_target_backward``: ``at::logit(self).neg_()`` (LogitBackward0, NegBackward0),
  ``.mul_(grad)`` (MulBackward0; in place, so a grad that requires grad makes it save a clone of
  self: one more sequence_nr), ``.mul_(weight)``, ``.div_(numel)`` for mean (DivBackward1);
* ``BinaryCrossEntropyWithLogitsBackward0``: self ``binary_cross_entropy_with_logits_backward``, out of
  place under grad mode: ``sigmoid(self) - target`` (with pos_weight ``t = pos_weight * target;
  (t + 1 - target) * sigmoid(self) - t``), ``* grad``, ``* weight``, then ``.div_(numel)`` in place;
  target ``binary_cross_entropy_with_logits_target_backward``: ``-self * grad`` (with pos_weight
  ``log_sigmoid(-self).sub_(log_sigmoid(self).mul_(pos_weight)).mul_(grad)``, in place), ``.mul_(weight)``,
  ``.div_(numel)``;
* ``SmoothL1LossBackward0`` / ``HuberLossBackward0``: self ``smooth_l1_loss_backward(grad, self, target)``,
  then target ``smooth_l1_loss_backward(grad, target, self)`` (``SmoothL1LossBackwardBackward0`` each;
  huber's the same with ``HuberLossBackwardBackward0``).

The backward kernels are ops of adjoint.engine.ops.second_losses, with PyTorch's derivatives; a further
create_graph backward through them (or through LogitBackward0) is refused.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.engine.inplace import apply_inplace
from adjoint.engine.second_formulas import NotModelled


def _numel(t) -> int:
    n = 1
    for d in t.shape:
        n *= d
    return n


def _mean(rt, t, reduction: str, loc):
    # grad_*.div_(input.sym_numel()): DivBackward1, in place
    return apply_inplace(rt, "div_scalar", t, [], Fraction(_numel(t)), loc) if reduction == "mean" else t


def _bce(rt, node, grads, saved, need):
    from adjoint.engine.ops.second_losses import DOUBLE_EPSILON, BCEBackward   # the family, loaded when used
    from adjoint.engine.ops.losses import BCE_EPSILON
    g, loc, p = grads[0], node.loc, node.params
    x, y, w = saved["self"], saved["target"], saved.get("weight")
    a = b = None
    if need[0]:
        eps2 = BCE_EPSILON if x.dtype == "float32" else DOUBLE_EPSILON   # the C++ double 1e-12 in the dtype
        ins = [g, x, y] + ([w] if w is not None else [])
        name = "binary_cross_entropy_backward_w" if w is not None else "binary_cross_entropy_backward"
        a = rt.apply(name, ins, BCEBackward(p.reduction, p.eps, eps2), loc)
    if len(need) > 1 and need[1]:
        B = rt.B
        if B.any_zero(x.value) or B.any_zero(B.sub(B.scalar(1), x.value)):
            raise NotModelled("BinaryCrossEntropyBackward0's target gradient at an input of 0 or 1")
        t = apply_inplace(rt, "neg", rt.apply("logit", [x], None, loc), [], None, loc)
        t = apply_inplace(rt, "mul", t, [g], None, loc)
        if w is not None:
            t = apply_inplace(rt, "mul", t, [w], None, loc)
        b = _mean(rt, t, p.reduction, loc)
    return [a, b] + [None] * (len(need) - 2)


def _bce_logits(rt, node, grads, saved, need):
    g, loc, p = grads[0], node.loc, node.params
    x, y, w, pw = saved["self"], saved["target"], saved.get("weight"), saved.get("pos_weight")
    a = b = None
    if need[0]:
        if pw is not None:
            t = rt.apply("mul", [pw, y], None, loc)
            r = rt.apply("sub", [rt.apply("add_scalar", [t], Fraction(1), loc), y], None, loc)
            r = rt.apply("sub", [rt.apply("mul", [r, rt.apply("sigmoid", [x], None, loc)], None, loc), t], None, loc)
        else:
            r = rt.apply("sub", [rt.apply("sigmoid", [x], None, loc), y], None, loc)
        r = rt.apply("mul", [r, g], None, loc)
        if w is not None:
            r = rt.apply("mul", [r, w], None, loc)
        a = _mean(rt, r, p.reduction, loc)
    if len(need) > 1 and need[1]:
        if pw is not None:
            r = rt.apply("log_sigmoid", [rt.apply("neg", [x], None, loc)], None, loc)[0]
            s = apply_inplace(rt, "mul", rt.apply("log_sigmoid", [x], None, loc)[0], [pw], None, loc)
            r = apply_inplace(rt, "mul", apply_inplace(rt, "sub", r, [s], None, loc), [g], None, loc)
        else:
            r = rt.apply("mul", [rt.apply("neg", [x], None, loc), g], None, loc)
        if w is not None:
            r = apply_inplace(rt, "mul", r, [w], None, loc)
        b = _mean(rt, r, p.reduction, loc)
    return [a, b] + [None] * (len(need) - 2)


def _pointwise(kernel: str, node_name: str):
    def formula(rt, node, grads, saved, need):
        g, loc = grads[0], node.loc
        if node.params.beta == 0:
            raise NotModelled(f"{node_name} with beta 0")   # smooth_l1_loss_double_backward's zeros: not probed
        x, y = saved["self"], saved["target"]
        a = rt.apply(kernel, [g, x, y], node.params, loc) if need[0] else None
        b = rt.apply(kernel, [g, y, x], node.params, loc) if len(need) > 1 and need[1] else None
        return [a, b]
    return formula


LOSSES = {"binary_cross_entropy": _bce, "binary_cross_entropy_w": _bce,
          **{name: _bce_logits for name in ("bce_with_logits", "bce_with_logits_w", "bce_with_logits_pw",
                                            "bce_with_logits_w_pw")},
          "smooth_l1_loss": _pointwise("smooth_l1_loss_backward", "SmoothL1LossBackward0"),
          "huber_loss": _pointwise("huber_loss_backward", "HuberLossBackward0")}
