"""The backward kernel a create_graph backward records for the batch norm (adjoint.engine.second_nn
calls it; F.batch_norm, nn.BatchNorm*d in training and eval, and so F.instance_norm), with its own
derivative, as torch 2.13 records them:

``native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean,
save_invstd, train, eps, output_mask)``: ``NativeBatchNormBackwardBackward0``, three outputs
(grad_input, grad_weight, grad_bias), edges to grad_out, input, weight, save_mean and save_invstd
(the statistics, outputs without gradients: None), none to the running statistics; it saves
``grad_out``, ``input``, ``running_mean``, ``running_var``, ``save_invstd``, ``save_mean``,
``weight`` in that order, absent ones skipped (probed with saved_tensors_hooks; in eval mode the
two saved statistics are the forward's empty tensors). Its derivative is ``batchnorm_double_backward``
with ``ggI``, ``ggW``, ``ggB`` the gradients reaching the three outputs, per channel, xhat the
normalized input, P(v) = v - mean(v) - xhat mean(xhat v) (means over the batch and positions):

* training: grad_out = w rstd P(ggI) + ggW xhat + ggB; input = -(rstd / n) sum(ggI gI) xhat -
  rstd^2 (mean(gw xhat) P(ggI) + mean(ggI xhat) P(gw)) + rstd P(ggW go) with gw = go w, gI =
  rstd P(gw) (the statistics are the input's own: the saved ones are them); weight = sum(go rstd P(ggI));
* eval (running statistics): grad_out = ggI w rstd + ggW xhat + ggB; input = ggW go rstd; weight =
  sum(ggI go rstd).

An output is undefined (no gradient, not zeros) where PyTorch's is: the input's without ``ggI`` in
training or ``ggW``; the weight's without a weight or ``ggI``; grad_out's without any of the three.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.values.mathtree import Fn, generic_vjp, layer
from adjoint.engine.ops.norm import (BatchNormSpec, _bn_stats, _bn_sub, _channel_shape, _count, _mean_over,
                                     _normalized_grad)
from adjoint.engine.ops.record import Check, Math, Op, Save


def _project(B, v, xhat, keep):
    """v - mean(v) - xhat * mean(xhat * v), means over what ``keep`` reduces."""
    return B.sub(B.sub(v, _mean_over(B, v, keep)), B.mul(xhat, _mean_over(B, B.mul(xhat, v), keep)))


def bn_backward_shape(shapes, p: BatchNormSpec, loc):
    x = tuple(shapes[1])
    return (x, (x[1],), (x[1],))


def bn_backward_forward(B, ins, p: BatchNormSpec):
    """The batch norm's VJP (batchnorm_backward): grad_input, grad_weight, grad_bias (zeros for an
    absent weight: that output is never handed on). Training computes the batch's statistics from the
    input (the saved ones are them: the function whose derivative batchnorm_double_backward is); eval
    reads the running ones."""
    go, x, w, _, _, rm, rv = ins
    shape = tuple(B.shape(x))
    cs = _channel_shape(shape)
    c = shape[1]
    mean, rstd = _bn_stats(B, x, rm, rv, p)   # training: the saved statistics are the input's own
    xhat = B.mul(B.sub(x, mean), rstd)
    gwt = B.mul(go, B.reshape(w, cs)) if w is not None else go
    gx = _normalized_grad(B, gwt, xhat, rstd, cs) if p.training else B.mul(gwt, rstd)
    gw = B.reshape(B.sum_to(B.mul(go, xhat), cs), (c,)) if w is not None else B.zeros((c,))
    gb = B.reshape(B.sum_to(go, cs), (c,))
    return gx, gw, gb


def bn_backward_vjp(B, gs, ins, outs, p: BatchNormSpec, need):
    """batchnorm_double_backward (see the module's docstring): grad_out, input, weight."""
    ggi, ggw, ggb = (list(gs) + [None, None, None])[:3]
    go, x, w, _, _, rm, rv = ins
    shape = tuple(B.shape(x))
    cs = _channel_shape(shape)
    c = shape[1]
    ggw = B.reshape(ggw, cs) if ggw is not None and w is not None else None
    ggb = B.reshape(ggb, cs) if ggb is not None else None
    wc = B.reshape(w, cs) if w is not None else None
    mean, rstd = _bn_stats(B, x, rm, rv, p)   # training: the batch's, as functions of the input
    xhat = B.mul(B.sub(x, mean), rstd)
    gw = B.mul(go, wc) if wc is not None else go
    d_go = d_x = d_w = None
    if p.training:
        pu = B.mul(rstd, _project(B, ggi, xhat, cs)) if ggi is not None else None
        scaled_ggi = pu
        local_w = pu
    else:
        scaled_ggi = B.mul(ggi, rstd) if ggi is not None else None
        local_w = B.mul(ggi, rstd) if ggi is not None else None
    if need[0]:
        parts = ([B.mul(scaled_ggi, wc) if wc is not None else scaled_ggi] if scaled_ggi is not None else []) + \
            ([B.mul(ggw, xhat)] if ggw is not None else []) + ([B.broadcast_to(ggb, shape)] if ggb is not None else [])
        for part in parts:
            d_go = part if d_go is None else B.add(d_go, part)
    if need[1] and ((ggi is not None and p.training) or ggw is not None):
        d_x = B.zeros(shape)
        if ggi is not None and p.training:
            gi = B.mul(rstd, _project(B, gw, xhat, cs))
            n = _count(shape, cs)
            total = B.sum_to(B.mul(ggi, gi), cs)
            first = B.mul(B.div(B.mul(rstd, total), B.scalar(n)), xhat)
            mixed = B.add(B.mul(_mean_over(B, B.mul(gw, xhat), cs), _project(B, ggi, xhat, cs)),
                          B.mul(_mean_over(B, B.mul(ggi, xhat), cs), _project(B, gw, xhat, cs)))
            d_x = B.sub(B.sub(d_x, first), B.mul(B.mul(rstd, rstd), mixed))
        if ggw is not None:
            d_x = B.add(d_x, B.mul(rstd, _project(B, B.mul(ggw, go), xhat, cs)) if p.training
                        else B.mul(B.mul(ggw, go), rstd))
    if need[2] and w is not None and local_w is not None:
        d_w = B.reshape(B.sum_to(B.mul(go, local_w), cs), (c,))
    # the saved statistics never require grad (PyTorch's formula for them is not_implemented); the kernel as a
    # function reads the input's own statistics, so it does not depend on them
    stats = [B.zeros(tuple(B.shape(ins[k]))) if need[k] and ins[k] is not None else None for k in (3, 4)]
    return [d_go, d_x, d_w] + stats + [None, None]


BN_BACKWARD = tuple(Fn(f"batch_norm_backward_{k}", f"\\operatorname{{BN}}'_{{{k}}}\\left(#*\\right)", generic_vjp)
                    for k in ("input", "weight", "bias"))

_EPS = Fraction(1, 100000)

OPS = (
    Op("native_batch_norm_backward", "NativeBatchNormBackwardBackward0", bn_backward_forward, bn_backward_vjp,
       bn_backward_shape,
       (Save("grad_out", "in", 0), Save("input", "in", 1), Save("running_mean", "in", 5), Save("running_var", "in", 6),
        Save("save_invstd", "in", 4), Save("save_mean", "in", 3), Save("weight", "in", 2)),
       "the batch norm's VJP (grad_input, grad_weight, grad_bias); batchnorm_double_backward: training w rstd "
       "P(ggI) + ggW xhat + ggB, -(rstd/n) sum(ggI gI) xhat - rstd^2 (mean(gw xhat) P(ggI) + mean(ggI xhat) "
       "P(gw)) + rstd P(ggW go), sum(go rstd P(ggI)); eval ggI w rstd + ggW xhat + ggB, ggW go rstd, sum(ggI go rstd)",
       outputs=3, differentiable=(True, True, True, True, True, False, False),
       nonfinite="a variance plus eps that is not positive",
       checks=(Check(((3, 2), (3, 2), (2,), (2,), (2,), None, None), BatchNormSpec(True, _EPS),
                     given=((3, (0, 0)), (4, (1, 1)))),
               Check(((2, 2, 2), (2, 2, 2), (2,), (0,), (0,), (2,), (2,)), BatchNormSpec(False, Fraction(1, 4)),
                     given=((5, (Fraction(1, 2), -1)), (6, (Fraction(3, 4), 2)))),
               Check(((3, 2), (3, 2), None, (2,), (2,), (2,), (2,)), BatchNormSpec(True, Fraction(1, 2)),
                     given=((3, (0, 0)), (4, (1, 1)), (5, (0, 0)), (6, (1, 1))))),
       math=Math(layer(BN_BACKWARD, _bn_sub)), integers="refused"),
)
