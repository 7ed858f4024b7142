"""``torch.std_mean`` (the standard deviation and the mean over the same dims, one node) and
``nansum`` (the sum of the elements that are not nan).

NansumBackward0 saves self; its backward ``nansum_backward``: ``grad`` unsqueezed at the reduced
dims, expanded to self's shape, 0 where self is nan. The params are ``(dims, keepdim)`` (``()``:
every dim). ``nanmean`` is ATen's composite ``nansum(x, dim, keepdim) / (~isnan(x)).sum(dim,
keepdim)`` (a DivBackward0 by an int64 count: :mod:`adjoint.engine.bindings.pointwise3`).

StdMeanBackward0 (PyTorch 2.13) has two outputs (std output 0, mean output 1) and saves self, then
result0 (the std). Its backward is ``std_mean_backward``: ``std_backward(result0, gstd, ...)``
(``gstd / (2 * std)`` masked to 0 where the std is 0, then var's backward) when the std's gradient
is defined, plus ``mean_backward(gmean, ...)`` when the mean's is. The params are var's
``(dims | None, correction, keepdim)``.
"""

from __future__ import annotations

from adjoint.values.mathtree import TFn, dims_text
from adjoint.engine.ops.record import Check, Math, Op, Save
from adjoint.engine.ops.basics import STD, std_forward, std_kink, std_vjp
from adjoint.engine.ops.reductions import (VAR_MEAN_MEAN, dims_shape, mean_dim_forward, mean_dim_vjp, restore,
                                           var_mean_shape)
from adjoint.values.mathtree import Fn, generic_vjp


def std_mean_forward(B, ins, p):
    dims, correction, keepdim = p
    return (std_forward(B, ins, p), mean_dim_forward(B, ins, (dims or (), keepdim)))


def std_mean_vjp(B, gs, ins, outs, p, need):
    g_std, g_mean = (list(gs) + [None, None])[:2]
    dims, correction, keepdim = p
    total = None
    if g_std is not None:
        total = std_vjp(B, [g_std], ins, outs, p, need)[0]
    if g_mean is not None:
        part = mean_dim_vjp(B, [g_mean], ins, outs, (dims or (), keepdim), need)[0]
        total = part if total is None else B.add(total, part)
    return [total]


def _sub(p, with_correction: bool) -> str:
    parts = [dims_text(p[0] or (), p[2])] + ([f"\\mathrm{{correction}}={p[1]}"] if with_correction else [])
    return ",\\,".join(x for x in parts if x)


def _not_nan(B, x):
    return B.mask(x, lambda s: s == "nan")


def nansum_forward(B, ins, p):
    dims, keepdim = p
    x = ins[0]
    return B.sum_dims(B.where(_not_nan(B, x), B.zeros(B.shape(x)), x), dims, keepdim)


def nansum_vjp(B, gs, ins, outs, p, need):
    dims, keepdim = p
    x = ins[0]
    shape = B.shape(x)
    g = B.broadcast_to(restore(B, gs[0], shape, dims, keepdim), shape)
    return [B.where(_not_nan(B, x), B.zeros(shape), g)]


NANSUM = Fn("nansum", "\\operatorname{nansum}_{#s}\\left(#0\\right)", generic_vjp)

_STD_MEAN = Math(lambda a, p, shape, k: TFn(STD, (a[0],), tuple(shape), _sub(p, True)) if k == 0
                 else TFn(VAR_MEAN_MEAN, (a[0],), tuple(shape), _sub(p, False)))

OPS = (
    Op("std_mean", "StdMeanBackward0", std_mean_forward, std_mean_vjp, var_mean_shape,
       (Save("self", "in", 0), Save("result0", "out", 0)),
       "g_std / (2 * std) (0 where std = 0) * 2 / (N - correction) * (a - mean(a, dims)) + g_mean / N (each only "
       "when its gradient is defined)", nonfinite="a standard deviation over N <= correction elements", outputs=2,
       kink=std_kink, kink_doc="0 where the standard deviation is 0", math=_STD_MEAN,
       checks=(Check(((2, 3),), ((1,), 1, False)), Check(((2, 3),), (None, 0, False))), integers="refused"),
    Op("nansum", "NansumBackward0", nansum_forward, nansum_vjp, dims_shape, (Save("self", "in", 0),),
       "g unsqueezed at the reduced dims, expanded to a's shape, 0 where a is nan", integers="refused",
       math=Math(lambda a, p, shape, k: TFn(NANSUM, (a[0],), tuple(shape), dims_text(p[0], p[1]))),
       checks=(Check(((2, 3),), ((1,), False)), Check(((2, 3),), ((), False)), Check(((2, 3),), ((0,), True)))),
)
