"""Normalization: ``native_batch_norm`` (``NativeBatchNormBackward0``), ``native_layer_norm``
(``NativeLayerNormBackward0``), ``native_group_norm`` (``NativeGroupNormBackward0``).

Each normalizes ``x`` over a set of elements (a channel across the batch; the trailing
``normalized_shape`` of one sample; a group of channels of one sample) with the biased
variance: ``xhat = (x - mean) * rstd``, ``rstd = 1 / sqrt(var + eps)`` (a closed form through
the backend's ``sqrt``), then the affine ``xhat * weight + bias``. The VJPs are ATen's
(``batchnorm_backward``, ``layer_norm_backward``, ``group_norm_backward``):
``grad_x = rstd * (gw - mean(gw) - xhat * mean(gw * xhat))`` with ``gw = g * weight``,
``grad_weight = sum(g * xhat)``, ``grad_bias = sum(g)``, each sum over what the weight is
shared across. Over a single element ``xhat`` is exactly 0, so ``grad_weight`` is exactly 0
(floats give ~1e-11 there: pytorch#188375).

What the nodes save, in pack order (probed on 2.13): batch norm ``input, running_mean,
running_var, weight, save_mean, save_invstd`` (absent ones skipped; in eval mode the
two statistics are empty tensors); layer norm ``bias, input, weight, mean, rstd``; group norm
``input, weight, mean, rstd``. Batch and layer norm's statistics are outputs without
gradients; group norm's ``mean`` and ``rstd`` are differentiable outputs of the node (a
legacy hook sees three grad_outputs), unused by ``F.group_norm``.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from adjoint.engine.torch_errors import TorchError
from adjoint.values.mathtree import Fn, generic_vjp, layer, no_gradient, number_text
from adjoint.engine.bn_layout import grad_as_read
from adjoint.engine.ops.record import Check, Math, Op, Save


def _prod(xs) -> int:
    out = 1
    for v in xs:
        out *= v
    return out


def _count(shape, keep_shape) -> int:
    """How many elements each mean over ``keep_shape``'s reduced dims (its 1s) takes: counted from
    those dims, so that an empty batch (a kept dim of size 0: x[mask] selecting no rows) has
    empty means, not a division by its zero."""
    return _prod(n for n, k in zip(shape, keep_shape) if k == 1)


def _mean_over(B, x, keep_shape):
    """Mean of ``x`` reduced (keepdim) to ``keep_shape``."""
    count = _count(B.shape(x), keep_shape)
    return B.div(B.sum_to(x, keep_shape), B.scalar(count))


def _rstd(B, var, eps):
    return B.div(B.scalar(1), B.sqrt(B.add(var, B.scalar(eps))))


def _normalized_grad(B, gw, xhat, rstd, keep_shape):
    """rstd * (gw - mean(gw) - xhat * mean(gw * xhat)), means over what ``keep_shape`` reduces."""
    a = _mean_over(B, gw, keep_shape)
    b = _mean_over(B, B.mul(gw, xhat), keep_shape)
    return B.mul(rstd, B.sub(B.sub(gw, a), B.mul(xhat, b)))


# ----------------------------------------------------------------------------- batch norm

@dataclass(frozen=True)
class BatchNormSpec:
    """The parameters of a batch norm: training mode and eps."""

    training: bool
    eps: Fraction


def _channel_shape(shape) -> tuple[int, ...]:
    return (1, shape[1]) + (1,) * (len(shape) - 2)


def batch_norm_shape(shapes, p: BatchNormSpec, loc):
    """(at::batch_norm refuses statistics, weight and bias that do not fit before any node: the
    binding checks them, bindings/norm.py _batch_norm_refusal.)"""
    x = shapes[0]
    stats = (x[1],) if p.training else (0,)
    return (tuple(x), stats, stats)


def _bn_stats(B, x, rm, rv, p: BatchNormSpec):
    """(mean, rstd) broadcastable to x: the batch's in training, the running ones in eval."""
    cs = _channel_shape(B.shape(x))
    if p.training:
        mean = _mean_over(B, x, cs)
        centered = B.sub(x, mean)
        var = _mean_over(B, B.mul(centered, centered), cs)
        return mean, _rstd(B, var, p.eps)
    return B.reshape(rm, cs), _rstd(B, B.reshape(rv, cs), p.eps)


def _affine(B, y, w, b, cs):
    if w is not None:
        y = B.mul(y, B.reshape(w, cs))
    if b is not None:
        y = B.add(y, B.reshape(b, cs))
    return y


def batch_norm_forward(B, ins, p: BatchNormSpec):
    x, w, b, rm, rv = ins
    cs = _channel_shape(B.shape(x))
    mean, rstd = _bn_stats(B, x, rm, rv, p)
    y = _affine(B, B.normalize(x, mean, rstd), w, b, cs)
    c = cs[1]
    if p.training:
        return y, B.reshape(mean, (c,)), B.reshape(rstd, (c,))
    return y, B.zeros((0,)), B.zeros((0,))


def _bn_unread(p) -> tuple[int, ...]:
    """In training the backward reads the batch's statistics (outputs 1, 2), not the running ones."""
    return (3, 4) if getattr(p, "training", False) else ()


def batch_norm_vjp(B, gs, ins, outs, p: BatchNormSpec, need):
    g = gs[0]
    x, w, b, rm, rv = ins
    cs = _channel_shape(B.shape(x))
    if p.training:
        mean, rstd = B.reshape(outs[1], cs), B.reshape(outs[2], cs)
    else:
        mean, rstd = _bn_stats(B, x, rm, rv, p)
    xhat = B.mul(B.sub(x, mean), rstd)
    gx = gw = gb = None
    if need[0]:
        gwt = B.mul(g, B.reshape(w, cs)) if w is not None else g
        gx = _normalized_grad(B, gwt, xhat, rstd, cs) if p.training else B.mul(gwt, rstd)
    if need[1] and w is not None:
        gw = B.reshape(B.sum_to(B.mul(g, xhat), cs), (cs[1],))
    if need[2] and b is not None:
        gb = B.reshape(B.sum_to(g, cs), (cs[1],))
    return [gx, gw, gb, None, None]


# ----------------------------------------------------------------------------- layer norm

@dataclass(frozen=True)
class LayerNormSpec:
    """The parameters of a layer norm: the normalized shape and eps."""

    normalized_shape: tuple[int, ...]
    eps: Fraction


def layer_norm_shape(shapes, p: LayerNormSpec, loc):
    """_check_layer_norm_inputs, in its order (normalized_shape's rank, weight, bias, the input):
    PyTorch's RuntimeError from the kernel, after NativeLayerNormBackward0 packed its inputs."""
    x, w, b = shapes
    ns = list(p.normalized_shape)
    if not ns:
        raise TorchError("RuntimeError", "Expected normalized_shape to be at least 1-dimensional, i.e., containing at "
                                         "least one element, but got normalized_shape = []")
    for name, s in (("weight", w), ("bias", b)):
        if s is not None and list(s) != ns:
            raise TorchError("RuntimeError", f"Expected {name} to be of same shape as normalized_shape, but got {name} "
                                             f"of shape {list(s)} and normalized_shape = {ns}")
    k = len(ns)
    if len(x) < k or list(x[len(x) - k:]) != ns:
        raise TorchError("RuntimeError", f"Given normalized_shape={ns}, expected input with shape "
                                         f"[*, {', '.join(map(str, ns))}], but got input of size{list(x)}")
    stats = tuple(x[:len(x) - k]) + (1,) * k
    return (tuple(x), stats, stats)


def _ln_stats(B, x, p: LayerNormSpec):
    shape = B.shape(x)
    keep = tuple(shape[:len(shape) - len(p.normalized_shape)]) + (1,) * len(p.normalized_shape)
    mean = _mean_over(B, x, keep)
    centered = B.sub(x, mean)
    return mean, _rstd(B, _mean_over(B, B.mul(centered, centered), keep), p.eps), keep


def layer_norm_forward(B, ins, p: LayerNormSpec):
    x, w, b = ins
    mean, rstd, _ = _ln_stats(B, x, p)
    y = B.normalize(x, mean, rstd)
    if w is not None:
        y = B.mul(y, w)
    if b is not None:
        y = B.add(y, b)
    return y, mean, rstd


def layer_norm_vjp(B, gs, ins, outs, p: LayerNormSpec, need):
    g = gs[0]
    x, w, b = ins
    mean, rstd = outs[1], outs[2]
    keep = B.shape(mean)
    xhat = B.mul(B.sub(x, mean), rstd)
    gx = gw = gb = None
    if need[0]:
        gx = _normalized_grad(B, B.mul(g, w) if w is not None else g, xhat, rstd, keep)
    if need[1] and w is not None:
        gw = B.sum_to(B.mul(g, xhat), tuple(p.normalized_shape))
    if need[2] and b is not None:
        gb = B.sum_to(g, tuple(p.normalized_shape))
    return [gx, gw, gb]


def _project(B, v, xhat, keep):
    """v - mean(v) - xhat * mean(xhat * v), means over the normalized dims: xhat's Jacobian over
    rstd (symmetric)."""
    return B.sub(B.sub(v, _mean_over(B, v, keep)), B.mul(xhat, _mean_over(B, B.mul(xhat, v), keep)))


def layer_norm_backward_forward(B, ins, p: LayerNormSpec):
    """native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, mask): the
    layer norm's VJP (grad_input, grad_weight, grad_bias; zeros for an absent weight or bias, never
    handed on). The statistics are the input's own (the saved ones are them): the function whose
    derivative layer_norm_double_backward is."""
    go, x, _, _, w, b = ins
    mean, rstd, _ = _ln_stats(B, x, p)
    gx, gw, gb = layer_norm_vjp(B, [go], [x, w, b], (None, mean, rstd), p, [True, True, True])
    zeros = B.zeros(tuple(p.normalized_shape))
    return gx, gw if gw is not None else zeros, gb if gb is not None else zeros


def layer_norm_backward_vjp(B, gs, ins, outs, p: LayerNormSpec, need):
    """layer_norm_double_backward: grad_out, input and weight (bias, mean, rstd: none). Per normalized
    row, with gI = rstd * P(go * w), P(v) = v - mean(v) - xhat mean(xhat v), n the row's size:
    grad_out = w rstd P(ggI) + ggW xhat + ggB; weight = sum(go rstd P(ggI)); input =
    -(rstd / n) sum(ggI gI) xhat - rstd^2 (mean(gw xhat) P(ggI) + mean(ggI xhat) P(gw)) + rstd P(ggW go)."""
    ggi, ggw, ggb = (list(gs) + [None, None])[:3]
    go, x, _, _, w, b = ins
    ggw = ggw if w is not None else None   # an absent weight's or bias's output is never handed on
    ggb = ggb if b is not None else None
    mean, rstd, keep = _ln_stats(B, x, p)   # the saved statistics' values, as functions of the input
    ns = tuple(p.normalized_shape)
    xhat = B.mul(B.sub(x, mean), rstd)
    gw = B.mul(go, w) if w is not None else go
    pu = B.mul(rstd, _project(B, ggi, xhat, keep)) if ggi is not None else None
    shape = tuple(B.shape(x))
    d_go = d_x = d_w = None
    if need[0]:
        parts = ([B.mul(pu, w) if w is not None else pu] if pu is not None else []) + \
            ([B.mul(ggw, xhat)] if ggw is not None else []) + ([B.broadcast_to(ggb, shape)] if ggb is not None else [])
        d_go = B.zeros(shape)
        for part in parts:
            d_go = B.add(d_go, part)
    if need[1]:
        d_x = B.zeros(shape)
        if ggi is not None:
            gi = B.mul(rstd, _project(B, gw, xhat, keep))
            n = _count(shape, keep)
            total = B.sum_to(B.mul(ggi, gi), keep)
            first = B.mul(B.div(B.mul(rstd, total), B.scalar(n)), xhat)
            mixed = B.add(B.mul(_mean_over(B, B.mul(gw, xhat), keep), _project(B, ggi, xhat, keep)),
                          B.mul(_mean_over(B, B.mul(ggi, xhat), keep), _project(B, gw, xhat, keep)))
            d_x = B.sub(B.sub(d_x, first), B.mul(B.mul(rstd, rstd), mixed))
        if ggw is not None:
            d_x = B.add(d_x, B.mul(rstd, _project(B, B.mul(ggw, go), xhat, keep)))
    if len(need) > 4 and need[4] and w is not None:
        d_w = B.sum_to(B.mul(go, pu), ns) if pu is not None else B.zeros(ns)
    return [d_go, d_x, None, None, d_w, None]


def layer_norm_backward_shape(shapes, p: LayerNormSpec, loc):
    ns = tuple(p.normalized_shape)
    return (tuple(shapes[1]), ns, ns)


# ----------------------------------------------------------------------------- group norm

@dataclass(frozen=True)
class GroupNormSpec:
    """The parameters of a group norm: the number of groups and eps."""

    groups: int
    eps: Fraction


def group_norm_shape(shapes, p: GroupNormSpec, loc):
    """(F.group_norm and at::group_norm refuse the input's rank, the groups, weight and bias before
    any node: the binding checks them, bindings/norm.py _group_norm_refusal.)"""
    x = shapes[0]
    return (tuple(x), (x[0], p.groups), (x[0], p.groups))


def _grouped(B, x, groups):
    """(N, C, *S) -> (N, G, C/G * prod(S))."""
    shape = B.shape(x)
    return B.reshape(x, (shape[0], groups, _prod(shape[1:]) // groups))


def group_norm_forward(B, ins, p: GroupNormSpec):
    x, w, b = ins
    shape = B.shape(x)
    xg = _grouped(B, x, p.groups)
    keep = (shape[0], p.groups, 1)
    mean = _mean_over(B, xg, keep)
    centered = B.sub(xg, mean)
    rstd = _rstd(B, _mean_over(B, B.mul(centered, centered), keep), p.eps)
    y = B.reshape(B.normalize(xg, mean, rstd), shape)
    y = _affine(B, y, w, b, _channel_shape(shape))
    return y, B.reshape(mean, keep[:2]), B.reshape(rstd, keep[:2])


def group_norm_vjp(B, gs, ins, outs, p: GroupNormSpec, need):
    g, g_mean, g_rstd = (list(gs) + [None, None])[:3]
    x, w, b = ins
    shape = B.shape(x)
    cs = _channel_shape(shape)
    keep = (shape[0], p.groups, 1)
    mean, rstd = B.reshape(outs[1], keep), B.reshape(outs[2], keep)
    xg = _grouped(B, x, p.groups)
    xhat = B.mul(B.sub(xg, mean), rstd)
    xhat_full = B.reshape(xhat, shape)
    gx = gw = gb = None
    if need[0]:
        parts = []
        if g is not None:
            gwt = B.mul(g, B.reshape(w, cs)) if w is not None else g
            parts.append(_normalized_grad(B, _grouped(B, gwt, p.groups), xhat, rstd, keep))
        count = B.scalar(_count(B.shape(xg), keep))
        if g_mean is not None:   # d mean / dx = 1 / count
            parts.append(B.broadcast_to(B.div(B.reshape(g_mean, keep), count), B.shape(xg)))
        if g_rstd is not None:   # d rstd / dx = -rstd^3 (x - mean) / count = -rstd^2 xhat / count
            scale = B.div(B.mul(B.reshape(g_rstd, keep), B.mul(rstd, rstd)), count)
            parts.append(B.neg(B.mul(scale, xhat)))
        total = parts[0] if parts else B.zeros(B.shape(xg))
        for extra in parts[1:]:
            total = B.add(total, extra)
        gx = B.reshape(total, shape)
    if g is not None and need[1] and w is not None:
        gw = B.reshape(B.sum_to(B.mul(g, xhat_full), cs), (shape[1],))
    if g is not None and need[2] and b is not None:
        gb = B.reshape(B.sum_to(g, cs), (shape[1],))
    return [gx, gw, gb]


def group_norm_backward_error(dtypes, p: GroupNormSpec, need):
    """native_group_norm_backward on the CPU makes the bias gradient like the weight (``gamma``):
    with no weight, a bias that needs its gradient is c10's "tensor does not have a device", raised
    in the node (after its pre-hooks), whatever the input needs (F.group_norm(x, G, None, b))."""
    if dtypes[1] is None and dtypes[2] is not None and need[2]:
        return ("RuntimeError", "tensor does not have a device", "other")
    return None


# ----------------------------------------------------------------------------- how they read (adjoint.mathtree)
# Each normalization reads as one function of (input, weight, bias[, running stats]), its mode or groups and
# eps as a subscript; the mean and 1/std it also returns (saved for the backward) have no gradient. J^T lambda
# is declared generic (the formulas above and in docs/ops.md).

BATCH_NORM = Fn("batch_norm", "\\operatorname{BN}_{#s}\\left(#*\\right)", generic_vjp)
LAYER_NORM = Fn("layer_norm", "\\operatorname{LN}_{#s}\\left(#*\\right)", generic_vjp)
GROUP_NORM = Fn("group_norm", "\\operatorname{GN}_{#s}\\left(#*\\right)", generic_vjp)
LN_BACKWARD = tuple(Fn(f"layer_norm_backward_{k}", f"\\operatorname{{LN}}'_{{{k}}}\\left(#*\\right)", generic_vjp)
                    for k in ("input", "weight", "bias"))
STAT_MEAN = Fn("norm_mean", "\\mu_{#s}\\left(#0\\right)", no_gradient)
STAT_RSTD = Fn("norm_rstd", "\\sigma^{-1}_{#s}\\left(#0\\right)", no_gradient)


def _eps(eps) -> str:
    return "" if eps == Fraction(1, 100000) else f",\\,\\epsilon={number_text(eps)}"


def _bn_sub(p: BatchNormSpec) -> str:
    return ("\\mathrm{train}" if p.training else "\\mathrm{eval}") + _eps(p.eps)


def _ln_sub(p: LayerNormSpec) -> str:
    return "\\times ".join(str(d) for d in p.normalized_shape) + _eps(p.eps)


def _gn_sub(p: GroupNormSpec) -> str:
    return f"{p.groups}" + _eps(p.eps)


_EPS = Fraction(1, 100000)

OPS = (
    Op("native_batch_norm", "NativeBatchNormBackward0", batch_norm_forward, batch_norm_vjp, batch_norm_shape,
       (Save("input", "in", 0), Save("running_mean", "in", 3), Save("running_var", "in", 4), Save("weight", "in", 1),
        Save("result1", "out", 1), Save("result2", "out", 2)),
       "training: w*rstd*(g - mean(g) - xhat*mean(g*xhat)), sum(g*xhat), sum(g) over batch and positions; eval: "
       "g*w*rstd(running_var), sum(g*xhat), sum(g)", grows=True, outputs=3, diff_outputs=1,
       differentiable=(True, True, True, False, False), nonfinite="a variance plus eps that is not positive",
       reads_grad=grad_as_read,
       checks=(Check(((3, 2), (2,), (2,), (2,), (2,)), BatchNormSpec(True, _EPS), given=((3, (0, 0)), (4, (1, 1)))),
               Check(((2, 2, 2), (2,), None, (2,), (2,)), BatchNormSpec(False, Fraction(1, 4)),
                     given=((3, (Fraction(1, 2), -1)), (4, (Fraction(3, 4), 2))))),
       math=Math(layer((BATCH_NORM, STAT_MEAN, STAT_RSTD), _bn_sub)), vjp_unread=_bn_unread, integers="refused"),
    Op("native_layer_norm", "NativeLayerNormBackward0", layer_norm_forward, layer_norm_vjp, layer_norm_shape,
       (Save("bias", "in", 2), Save("input", "in", 0), Save("weight", "in", 1), Save("result1", "out", 1),
        Save("result2", "out", 2)),
       "rstd*(gw - mean(gw) - xhat*mean(gw*xhat)) with gw = g*w; sum(g*xhat), sum(g) over the leading dims",
       grows=True, outputs=3, diff_outputs=1, nonfinite="a variance plus eps that is not positive",
       checks=(Check(((2, 3), (3,), (3,)), LayerNormSpec((3,), _EPS)),
               Check(((2, 2, 2), None, None), LayerNormSpec((2, 2), Fraction(1, 2)))),
       math=Math(layer((LAYER_NORM, STAT_MEAN, STAT_RSTD), _ln_sub)), integers="refused"),
    Op("native_layer_norm_backward", "NativeLayerNormBackwardBackward0", layer_norm_backward_forward,
       layer_norm_backward_vjp, layer_norm_backward_shape,
       (Save("grad_out", "in", 0), Save("input", "in", 1), Save("mean", "in", 2), Save("rstd", "in", 3),
        Save("weight", "in", 4)),
       "layer_norm_double_backward: w rstd P(ggI) + ggW xhat + ggB; -(rstd/n) sum(ggI gI) xhat - rstd^2 "
       "(mean(gw xhat) P(ggI) + mean(ggI xhat) P(gw)) + rstd P(ggW go); sum(go rstd P(ggI))",
       outputs=3, nonfinite="a variance plus eps that is not positive",
       checks=(Check(((2, 3), (2, 3), (2, 1), (2, 1), (3,), (3,)), LayerNormSpec((3,), _EPS),
                     given=((2, (0, 0)), (3, (1, 1)), (5, (0, 1, 2)))),
               Check(((2, 2, 2), (2, 2, 2), (2, 1, 1), (2, 1, 1), None, None), LayerNormSpec((2, 2), Fraction(1, 2)),
                     given=((2, (0, 0)), (3, (1, 1))))),
       math=Math(layer(LN_BACKWARD, _ln_sub)), integers="refused"),
    Op("native_group_norm", "NativeGroupNormBackward0", group_norm_forward, group_norm_vjp, group_norm_shape,
       (Save("input", "in", 0), Save("weight", "in", 1), Save("result1", "out", 1), Save("result2", "out", 2)),
       "rstd*(gw - mean(gw) - xhat*mean(gw*xhat)) per group, gw = g*w per channel; sum(g*xhat), sum(g) per channel",
       grows=True, outputs=3, nonfinite="a variance plus eps that is not positive",
       math=Math(layer((GROUP_NORM, STAT_MEAN, STAT_RSTD), _gn_sub)), backward_error=group_norm_backward_error,
       checks=(Check(((2, 4, 2), (4,), (4,)), GroupNormSpec(2, _EPS)),), integers="refused"),
)
