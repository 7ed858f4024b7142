"""Reductions: sum and mean (every element, or over dims), var, max / min (every element, or
along a dim with indices), amax / amin, and the vector norm (``torch.linalg.vector_norm``).

Conventions between equal elements, as PyTorch 2.13 CPU computes them (probed):

* ``max(x)`` / ``min(x)`` (MaxBackward1, evenly_distribute_backward) and ``amax`` / ``amin``
  (scale_grad_by_count) split the gradient evenly among the elements equal to the result;
  ``max(x)`` among the nan elements when the result is nan, and as a select (masked_fill_), so
  the other elements get 0 whatever the gradient, where amax's product gives nan for an
  infinite one;
* ``max(x, dim)`` / ``min(x, dim)`` (MaxBackward0) send it all to the saved index, the first
  one among ties (value_selecting_reduction_backward);
* the norm's gradient is 0 at the zero vector for every order (masked_fill where norm == 0;
  for the 2-norm the mask is on ``self / norm``, before the product with the incoming gradient,
  so a nan or infinite gradient there gives nan, as it does for orders 1, inf and below 1),
  0 at zero elements for an order below 1, and split evenly among ties for the inf-norm.

``dims`` in the params are non-negative and sorted (the lowering normalises them); an empty
tuple means every dim, as ``sum(dim=())`` does. var, std and var_mean keep PyTorch's optional
dim: None where the call gives none (every dim), () where it gives an empty list, which also
reduces every dim but which their backward counts apart (``var_backward``, below).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from adjoint.values.mathtree.sympy_names import SymPyName
from adjoint.values.mathtree import (Fn, TBin, TConst, TFn, TOnes, applied, dims_text, generic_vjp, no_gradient,
                                   number_text, numel,
                                   shape_text)
from adjoint.engine.ops.record import Check, Math, Op, Save
from adjoint.engine.ops.activations import _nan, compare_forward, no_vjp
from adjoint.engine.ops.views import EXPAND


def _q(B, v):
    return B.scalar(Fraction(v))


def scalar_shape(shapes, p, loc):
    return ()


def _all(dims, ndim: int) -> tuple[int, ...]:
    return tuple(dims) if dims else tuple(range(ndim))


def reduced_shape(shape, dims, keepdim: bool) -> tuple[int, ...]:
    dims = _all(dims, len(shape))
    if keepdim:
        return tuple(1 if d in dims else n for d, n in enumerate(shape))
    return tuple(n for d, n in enumerate(shape) if d not in dims)


def dims_shape(shapes, p, loc):
    dims, keepdim = p[0], p[-1]
    return reduced_shape(shapes[0], dims, keepdim)


def _count(shape, dims) -> int:
    n = 1
    for d in _all(dims, len(shape)):
        n *= shape[d]
    return n


def restore(B, g, shape, dims, keepdim: bool):
    """``g`` (the reduced shape) with the reduced dims back as size 1 (unsqueeze_multiple)."""
    return B.reshape(g, reduced_shape(shape, dims, True))


# ----------------------------------------------------------------------------- sum, mean (every element)

def sum_forward(B, ins, p):
    return B.total(ins[0])


def sum_vjp(B, gs, ins, outs, p, need):
    return [B.broadcast_to(gs[0], B.shape(ins[0]))]


def mean_forward(B, ins, p):
    return B.div(B.total(ins[0]), B.scalar(B.numel(ins[0])))


def mean_vjp(B, gs, ins, outs, p, need):
    return [B.broadcast_to(B.div(gs[0], B.scalar(B.numel(ins[0]))), B.shape(ins[0]))]


# ----------------------------------------------------------------------------- sum, mean, var over dims

def sum_dim_forward(B, ins, p):
    dims, keepdim = p
    return B.sum_dims(ins[0], dims, keepdim)


def sum_dim_vjp(B, gs, ins, outs, p, need):
    dims, keepdim = p
    shape = B.shape(ins[0])
    return [B.broadcast_to(restore(B, gs[0], shape, dims, keepdim), shape)]


def mean_dim_forward(B, ins, p):
    dims, keepdim = p
    return B.div(B.sum_dims(ins[0], dims, keepdim), B.scalar(_count(B.shape(ins[0]), dims)))


def mean_dim_vjp(B, gs, ins, outs, p, need):
    dims, keepdim = p
    shape = B.shape(ins[0])
    return [B.broadcast_to(B.div(restore(B, gs[0], shape, dims, keepdim), B.scalar(_count(shape, dims))), shape)]


def var_forward(B, ins, p):
    dims, correction, keepdim = p
    dims = dims or ()
    x = ins[0]
    n = _count(B.shape(x), dims)
    dev = B.sub(x, B.div(B.sum_dims(x, dims, True), B.scalar(n)))
    return B.div(B.sum_dims(B.mul(dev, dev), dims, keepdim), B.scalar(max(0, n - correction)))


def var_vjp(B, gs, ins, outs, p, need):
    """var_backward: ``(2 / (N - correction)) * grad * (self - self.mean(dim, true))``, where N is
    the product of the sizes of the dims the call gave (``_safe_size``: 1 for ``dim=()``, though
    the forward reduces every dim); with no dim (or a 0-d self) N is numel, and where
    ``numel - correction <= 0`` the gradient is ``grad * where(self == mean, nan, inf)``."""
    given, correction, keepdim = p
    dims = given or ()
    x = ins[0]
    shape = B.shape(x)
    dev = B.sub(x, B.div(B.sum_dims(x, dims, True), B.scalar(_count(shape, dims))))
    g = restore(B, gs[0], shape, dims, keepdim)
    if given is None or not shape:
        dof = B.numel(x) - correction
        if dof <= 0:
            inf, nan = B.div(_q(B, 1), _q(B, 0)), B.div(_q(B, 0), _q(B, 0))
            at_mean = B.mask(dev, lambda s: s == 0)
            return [B.mul(g, B.where(at_mean, B.broadcast_to(nan, shape), B.broadcast_to(inf, shape)))]
    else:
        dof = _prod_of(shape, dims) - correction
    return [B.mul(B.mul(B.div(_q(B, 2), B.scalar(dof)), g), dev)]


def _prod_of(shape, dims) -> int:
    """The product of the sizes of ``dims`` (1 for none)."""
    n = 1
    for d in dims:
        n *= shape[d]
    return n


# ----------------------------------------------------------------------------- max, min, amax, amin

def _ties(B, x, value):
    """1 where x equals the (broadcast) extreme value, else 0 -- as ``==`` decides it, so two equal
    infinities tie (an all -inf row: their difference is nan, which no tie test on it would find)."""
    from adjoint.engine.ops.activations import compare_forward
    return B.broadcast_to(compare_forward(B, [x, value], "eq"), B.shape(x))


def _extreme_all(largest: bool):
    def forward(B, ins, p):
        return B.amax(ins[0], (), False, largest)

    def vjp(B, gs, ins, outs, p, need):
        # evenly_distribute_backward (CPU): the mask is ``input.isnan()`` when the result is nan,
        # else ``input == result``; ``new_zeros(input).masked_fill_(mask, grad / mask.sum())``: a
        # select, not a product, so the other elements stay 0 whatever the gradient (inf, nan)
        x = ins[0]
        shape = B.shape(x)
        value_nan = B.broadcast_to(_nan(B, outs[0]), shape)
        mask = B.choose(value_nan, "!=", _nan(B, x), _ties(B, x, outs[0]))
        share = B.broadcast_to(B.div(gs[0], B.total(mask)), shape)
        return [B.choose(mask, "!=", share, B.zeros(shape))]
    return forward, vjp


def _extreme_dims(largest: bool):
    def forward(B, ins, p):
        dims, keepdim = p
        return B.amax(ins[0], dims, keepdim, largest)

    def vjp(B, gs, ins, outs, p, need):
        # scale_grad_by_count(restore(grad), restore(result) == self, dim): grad / count where tied
        dims, keepdim = p
        x = ins[0]
        shape = B.shape(x)
        mask = _ties(B, x, restore(B, outs[0], shape, dims, keepdim))
        count = B.sum_dims(mask, dims, True)
        return [B.mul(B.div(restore(B, gs[0], shape, dims, keepdim), count), mask)]
    return forward, vjp


def _flags_reduced(every: bool):
    """``torch.any`` / ``torch.all``: ``input != 0`` (a nan element counts: it is not 0), the
    largest (any) or smallest (all) of those flags over ``dims`` (() every dim)."""
    def forward(B, ins, p):
        dims, keepdim = p
        flags = compare_forward(B, [ins[0], B.zeros(())], "ne")
        return B.amax(flags, dims, keepdim, not every)
    return forward


def _select_dim(largest: bool):
    """max.dim / min.dim: inputs (self, indices), the indices computed by the lowering and
    saved by the node (its only saved tensor); only the values are this op's output."""
    def forward(B, ins, p):
        dim, keepdim = p
        return B.amax(ins[0], (dim,), keepdim, largest)

    def vjp(B, gs, ins, outs, p, need):
        # value_selecting_reduction_backward: grad placed at the saved indices
        dim, keepdim = p
        x = ins[0]
        indices = ins[1] if len(ins) > 1 else B.argmax(x, dim, keepdim, largest)[1]
        grad = B.place_along(B.shape(x), dim, indices, gs[0], keepdim)
        return [B.max_routing_dim(grad, gs[0], x, dim, indices, keepdim)]
    return forward, vjp


def kth_forward(B, ins, p):
    """kthvalue / median along a dim: ``self`` at the indices the lowering computed (the output's
    shape, ``keepdim`` or not)."""
    dim, keepdim = p
    x, idx = ins
    shape = B.shape(x)
    kept = tuple(1 if d == dim else n for d, n in enumerate(shape))
    key = np.indices(kept, sparse=True)
    pos = B.as_indices(B.reshape(idx, kept))
    value = B.index(x, tuple(pos if d == dim else key[d] for d in range(len(shape))))
    return value if keepdim else B.reshape(value, reduced_shape(shape, (dim,), False))


def kth_vjp(B, gs, ins, outs, p, need):
    # value_selecting_reduction_backward(grad, dim, indices, self.sizes(), keepdim)
    dim, keepdim = p
    return [B.place_along(B.shape(ins[0]), dim, ins[1], gs[0], keepdim), None]


def median_all_forward(B, ins, p):
    """The lower median of every element: the ((n - 1) // 2)-th smallest; nan when an element is
    nan (the CPU kernel's, as max's)."""
    x = ins[0]
    if not B.all_zero(_nan(B, x)):
        return B.amax(x, (), False)
    n = B.numel(x)
    flat = B.reshape(x, (n,))
    idx, _ = B.sort_order(flat, 0, False)
    pos = B.as_indices(idx)[(n - 1) // 2]
    return B.reshape(B.index(flat, (slice(int(pos), int(pos) + 1),)), ())


def select_dim_shape(shapes, p, loc):
    dim, keepdim = p
    return reduced_shape(shapes[0], (dim,), keepdim) if shapes[0] else ()


def ties_kink(B, ins, p):
    x = ins[0]
    if p is None:
        dims = ()
    else:
        dims = p[0] if isinstance(p[0], tuple) else (p[0],)
    if B.numel(x) == 0 or not B.shape(x):
        return None
    counts = B.sum_dims(_ties(B, x, B.amax(x, dims, True)), dims, True)
    if not B.all_zero(B.sub(counts, _q(B, 1))):
        return ("equal extreme elements: max(x), min(x), amax and amin split the gradient evenly among them, "
                "max(x, dim) and min(x, dim) give all of it to the first")
    return None


# ----------------------------------------------------------------------------- the vector norm

def norm_params(p):
    """(ord, dims, keepdim); None is the v1 norm: the 2-norm of every element."""
    return (Fraction(2), (), False) if p is None else p


def norm_shape(shapes, p, loc):
    _, dims, keepdim = norm_params(p)
    return reduced_shape(shapes[0], dims, keepdim)


def norm_forward(B, ins, p):
    order, dims, keepdim = norm_params(p)
    x = ins[0]
    if order == 2:
        return B.sqrt(B.sum_dims(B.mul(x, x), dims, keepdim))
    if order == 1:
        return B.sum_dims(B.abs(x), dims, keepdim)
    if order == 0:
        return B.sum_dims(B.choose(x, "!=", _q(B, 1), B.zeros(B.shape(x))), dims, keepdim)
    if order in ("inf", "-inf"):
        return B.amax(B.abs(x), dims, keepdim, order == "inf")
    return B.pow(B.sum_dims(B.pow(B.abs(x), _q(B, order)), dims, keepdim), _q(B, 1 / order))


def norm_vjp(B, gs, ins, outs, p, need):
    # linalg_vector_norm_backward -> norm_backward (FunctionsManual.cpp), case by case
    order, dims, keepdim = norm_params(p)
    x = ins[0]
    shape = B.shape(x)
    g = restore(B, gs[0], shape, dims, keepdim)
    out = restore(B, outs[0], shape, dims, keepdim)
    zeros = B.zeros(shape)
    if order == 0:
        return [None]
    if order == 1:
        return [B.mul(B.sgn(x), g)]
    if order == 2:
        # grad * (self / norm).masked_fill_(norm == 0, 0): the mask comes before the product, so a nan
        # or infinite incoming gradient at the zero vector gives nan (nan * 0, inf * 0)
        return [B.mul(g, B.direction(x, out))]
    if order in ("inf", "-inf"):
        # mask = self.abs().eq(norm).logical_or(self.abs().isnan()): a nan element is an argmax too
        mask = B.choose(_nan(B, x), "!=", B.broadcast_to(_q(B, 1), shape), _ties(B, B.abs(x), out))
        return [B.mul(B.sgn(x), B.mul(B.div(g, B.sum_dims(mask, dims, True)), mask))]
    if order < 1:
        scaled = B.choose(x, "==", zeros, B.mul(B.sgn(x), B.pow_number(B.abs(x), _q(B, order - 1))))
        return [B.mul(B.mul(scaled, g), B.pow_number(out, _q(B, 1 - order)))]
    if order < 2:
        scaled = B.mul(B.sgn(x), B.pow_number(B.abs(x), _q(B, order - 1)))
    else:
        scaled = B.mul(x, B.pow_number(B.abs(x), _q(B, order - 2)))
    scale = B.choose(out, "==", B.zeros(B.shape(out)), B.div(g, B.pow_number(out, _q(B, order - 1))))
    return [B.mul(scaled, scale)]


def norm_kink(B, ins, p):
    order, dims, keepdim = norm_params(p)
    if B.any_zero(ins[0]):
        return (f"the {order}-norm's gradient is 0 at the zero vector (masked_fill where norm == 0)"
                + (" and at zero elements (order < 1)" if not isinstance(order, str) and order < 1 else "") + " in PyTorch")
    return None


_TORCH_TYPE = {"bool": "Bool", "int64": "Long"}


def mean_error(dtypes, p):
    """mean's dtype check (ReduceOps.cpp): no integer or bool input."""
    if dtypes[0] in _TORCH_TYPE:
        return ("mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
                f"Got: {_TORCH_TYPE[dtypes[0]]}")
    return None


def norm_error(dtypes, p):
    """linalg_vector_norm's check (LinearAlgebra.cpp): a floating point input."""
    if dtypes[0] in _TORCH_TYPE:
        return f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got {_TORCH_TYPE[dtypes[0]]}"
    return None


_SELF_RESULT = (Save("self", "in", 0), Save("result", "out", 0))
_MAX_ALL, _MIN_ALL = _extreme_all(True), _extreme_all(False)
_AMAX, _AMIN = _extreme_dims(True), _extreme_dims(False)
_MAX_DIM, _MIN_DIM = _select_dim(True), _select_dim(False)
_DIM1 = (Check(((2, 3),), ((1,), False)), Check(((2, 3),), ((0, 1), True)))
_SELECT = (Check(((2, 3),), (1, False)), Check(((2, 3),), (0, True)))
_SELECT_GIVEN = (Check(((2, 3), (2,)), (1, False), given=((1, (2, 0)),)),
                 Check(((2, 3), (1, 3)), (0, True), given=((1, (1, 0, 1)),)))


# ----------------------------------------------------------------------------- how they read (adjoint.mathtree)

def _expanded(t, shape, p):
    """A reduced gradient spread back over the reduced dims (``p``: the reduction's (dims, keepdim))."""
    return TFn(EXPAND, (t,), tuple(shape), shape_text(shape), (tuple(p[0]), p[1]))


SUM = Fn("sum", "\\operatorname{sum}\\left(#0\\right)",
         lambda lam, n: (TBin("had", lam, TOnes(n.a.shape), n.a.shape),), lambda x: x)
MEAN = Fn("mean", "\\operatorname{mean}\\left(#0\\right)",
          lambda lam, n: (TBin("had", TBin("div", lam, TConst(Fraction(numel(n.a.shape))), ()), TOnes(n.a.shape),
                               n.a.shape),), lambda x: x)
NORM = Fn("norm", "\\left\\lVert #0\\right\\rVert",
          lambda lam, n: (TBin("had", lam, TBin("div", n.a, n, n.a.shape), n.a.shape),), SymPyName("Abs"), delimited=True)
PNORM = Fn("norm_p", "\\left\\lVert #0\\right\\rVert_{#s}", generic_vjp, delimited=True)
SUM_DIMS = Fn("sum_dim", "\\operatorname{sum}_{#s}\\left(#0\\right)",
              lambda lam, n: (_expanded(lam, n.a.shape, n.params),), lambda x: x)
MEAN_DIMS = Fn("mean_dim", "\\operatorname{mean}_{#s}\\left(#0\\right)",
               lambda lam, n: (_expanded(TBin("div", lam, TConst(Fraction(_count(n.a.shape, n.params[0]))), lam.shape),
                                         n.a.shape, n.params),), lambda x: x)
VAR = Fn("var", "\\operatorname{var}_{#s}\\left(#0\\right)", generic_vjp)
MAX = Fn("max", "\\max_{#s}\\left(#0\\right)", generic_vjp, SymPyName("Max"))
MIN = Fn("min", "\\min_{#s}\\left(#0\\right)", generic_vjp, SymPyName("Min"))
KTHVALUE = Fn("kthvalue", "\\operatorname{kthvalue}_{#s}\\left(#0\\right)", generic_vjp)
MEDIAN = Fn("median", "\\operatorname{median}_{#s}\\left(#0\\right)", generic_vjp)
AMAX = Fn("amax", "\\operatorname{amax}_{#s}\\left(#0\\right)", generic_vjp)
AMIN = Fn("amin", "\\operatorname{amin}_{#s}\\left(#0\\right)", generic_vjp)
ANY = Fn("any", "\\operatorname{any}_{#s}\\left(#0\\right)", no_gradient)
ALL = Fn("all", "\\operatorname{all}_{#s}\\left(#0\\right)", no_gradient)

_SUM_DIM = Math(lambda a, p, shape, k: TFn(SUM_DIMS, (a[0],), tuple(shape), dims_text(p[0], p[1]), p))
_MEAN_DIM = Math(lambda a, p, shape, k: TFn(MEAN_DIMS, (a[0],), tuple(shape), dims_text(p[0], p[1]), p))
_VAR = Math(lambda a, p, shape, k: TFn(VAR, (a[0],), tuple(shape),
                                       ",\\,".join(x for x in (dims_text(p[0] or (), p[2]),
                                                               f"\\mathrm{{correction}}={p[1]}") if x)))


def _over_all(fn: Fn) -> Math:
    return Math(lambda a, p, shape, k: TFn(fn, (a[0],), tuple(shape)))


def _over_dims(fn: Fn) -> Math:
    return Math(lambda a, p, shape, k: TFn(fn, (a[0],), tuple(shape), dims_text(p[0], p[1])))


def _along(fn: Fn) -> Math:
    """max(x, dim) / min(x, dim): the values (the indices input is the lowering's, no gradient)."""
    return Math(lambda a, p, shape, k: TFn(fn, (a[0],), tuple(shape), dims_text((p[0],), p[1])))


def _norm_formula(a, p, shape, k):
    """The 2-norm of every element reads ||x||; any other order or over dims, ||x||_{p, dim}."""
    order, dims, keepdim = norm_params(p)
    if order == 2 and not dims and not keepdim:
        return TFn(NORM, (a[0],), tuple(shape))
    sub = ",\\,".join(x for x in (number_text(order), dims_text(dims, keepdim)) if x)
    return TFn(PNORM, (a[0],), tuple(shape), sub)


# ----------------------------------------------------------------------------- var_mean

def var_mean_shape(shapes, p, loc):
    out = reduced_shape(shapes[0], p[0], p[-1])
    return (out, out)


def var_mean_forward(B, ins, p):
    """torch.var_mean: (var, mean) over ``dims`` -- one VarMeanBackward0 node, two outputs."""
    dims, correction, keepdim = p
    return (var_forward(B, ins, p), mean_dim_forward(B, ins, (dims or (), keepdim)))


def var_mean_vjp(B, gs, ins, outs, p, need):
    # var_mean_backward: var_backward(gvar) if gvar is defined, plus mean_backward(gmean) if gmean is
    g_var, g_mean = (list(gs) + [None, None])[:2]
    dims, correction, keepdim = p
    total = None
    if g_var is not None:
        total = var_vjp(B, [g_var], ins, outs, p, need)[0]
    if g_mean is not None:
        part = mean_dim_vjp(B, [g_mean], ins, outs, (dims or (), keepdim), need)[0]
        total = part if total is None else B.add(total, part)
    return [total]


VAR_MEAN_MEAN = Fn("var_mean_mean", "\\operatorname{mean}_{#s}\\left(#0\\right)", generic_vjp)
_VAR_MEAN = Math(lambda a, p, shape, k: TFn(VAR, (a[0],), tuple(shape),
                                            ",\\,".join(x for x in (dims_text(p[0] or (), p[2]),
                                                                    f"\\mathrm{{correction}}={p[1]}") if x))
                 if k == 0 else TFn(VAR_MEAN_MEAN, (a[0],), tuple(shape), dims_text(p[0] or (), p[2])))

OPS = (
    Op("sum", "SumBackward0", sum_forward, sum_vjp, scalar_shape, (), "g broadcast to a's shape", math=Math(applied(SUM)), checks=(Check(((2, 2),)),)),
    Op("mean", "MeanBackward0", mean_forward, mean_vjp, scalar_shape, (), "g / numel, broadcast", grows=False,
       forward_error=mean_error, math=Math(applied(MEAN)), checks=(Check(((2, 2),)),)),
    Op("sum_dim", "SumBackward1", sum_dim_forward, sum_dim_vjp, dims_shape, (),
       "g unsqueezed at the reduced dims, expanded to a's shape", math=_SUM_DIM, checks=_DIM1),
    Op("mean_dim", "MeanBackward1", mean_dim_forward, mean_dim_vjp, dims_shape, (),
       "g / N unsqueezed at the reduced dims, expanded (N: elements reduced)", grows=False, forward_error=mean_error, math=_MEAN_DIM, checks=_DIM1),
    Op("var", "VarBackward0", var_forward, var_vjp, dims_shape, (Save("self", "in", 0),),
       "2 / (N - correction) * g * (a - mean(a, dims))", nonfinite="a variance over N <= correction elements",
       math=_VAR, checks=(Check(((2, 3),), ((1,), 1, False)), Check(((2, 3),), (None, 0, False))), integers="refused"),
    Op("max_all", "MaxBackward1", _MAX_ALL[0], _MAX_ALL[1], scalar_shape, _SELF_RESULT,
       "g / count at the elements equal to the max", grows=False, kink=ties_kink,
       kink_doc="ties: g split evenly", math=_over_all(MAX), checks=(Check(((2, 2),)),)),
    Op("min_all", "MinBackward1", _MIN_ALL[0], _MIN_ALL[1], scalar_shape, _SELF_RESULT,
       "g / count at the elements equal to the min", grows=False, kink=ties_kink,
       kink_doc="ties: g split evenly", math=_over_all(MIN), checks=(Check(((2, 2),)),)),
    Op("amax", "AmaxBackward0", _AMAX[0], _AMAX[1], dims_shape, _SELF_RESULT,
       "g / count at the elements equal to the max over dims", grows=False, kink=ties_kink,
       kink_doc="ties: g split evenly", math=_over_dims(AMAX), checks=_DIM1),
    Op("amin", "AminBackward0", _AMIN[0], _AMIN[1], dims_shape, _SELF_RESULT,
       "g / count at the elements equal to the min over dims", grows=False, kink=ties_kink,
       kink_doc="ties: g split evenly", math=_over_dims(AMIN), checks=_DIM1),
    Op("max_dim", "MaxBackward0", _MAX_DIM[0], _MAX_DIM[1], select_dim_shape, (Save("indices", "in", 1),),
       "g at the saved index along dim", grows=False, differentiable=(True, False), kink=ties_kink,
       kink_doc="ties: all of g to the first index", math=_along(MAX), checks=_SELECT),
    Op("min_dim", "MinBackward0", _MIN_DIM[0], _MIN_DIM[1], select_dim_shape, (Save("indices", "in", 1),),
       "g at the saved index along dim", grows=False, differentiable=(True, False), kink=ties_kink,
       kink_doc="ties: all of g to the first index", math=_along(MIN), checks=_SELECT),
    *(Op(name, node, kth_forward, kth_vjp, select_dim_shape, (Save("indices", "in", 1),),
         "g at the saved index along dim", grows=False, differentiable=(True, False),
         kink_doc="ties at the selected value refused (the CPU kernel's quickselect picks no documented one)",
         math=_along(fn), checks=_SELECT_GIVEN)
      for name, node, fn in (("kthvalue", "KthvalueBackward0", KTHVALUE), ("median_dim", "MedianBackward1", MEDIAN))),
    Op("median_all", "MedianBackward0", median_all_forward, _MAX_ALL[1], scalar_shape, _SELF_RESULT,
       "g / count at the elements equal to the median", grows=False, kink=ties_kink,
       kink_doc="ties: g split evenly (evenly_distribute_backward)", math=_over_all(MEDIAN),
       checks=(Check(((3,),), differences=True), Check(((2, 2),), differences=True))),
    Op("norm", "LinalgVectorNormBackward0", norm_forward, norm_vjp, norm_shape, _SELF_RESULT,
       "2-norm: g * (a / out) (a / out masked to 0 when out = 0); p-norm: norm_backward", kink=norm_kink,
       forward_error=norm_error,
       kink_doc="0 at the zero vector; order < 1: 0 at zero elements; inf: ties split evenly",
       math=Math(_norm_formula), checks=(Check(((3,),)), Check(((2, 3),), (Fraction(1), (1,), False)), Check(((2, 3),), (Fraction(3), (), True)),
               Check(((2, 3),), (Fraction(1, 2), (0,), False)), Check(((2, 3),), (Fraction(3, 2), (1,), True)),
               Check(((2, 3),), ("inf", (1,), False))), integers="refused"),
    *(Op(name, "(none)", _flags_reduced(name == "all"), no_vjp, dims_shape, (),
         "not differentiable: the result is a bool tensor with no grad_fn", negzero="never", grows=False,
         differentiable=(False,), out_dtypes=("bool",), kink_doc="-- (no node; nan counts as not 0)",
         math=_over_dims(fn)) for name, fn in (("any", ANY), ("all", ALL))),
    Op("var_mean", "VarMeanBackward0", var_mean_forward, var_mean_vjp, var_mean_shape, (Save("self", "in", 0),),
       "2 / (N - correction) * g_var * (a - mean(a, dims)) + g_mean / N (each only when its gradient is defined)",
       nonfinite="a variance over N <= correction elements", outputs=2, math=_VAR_MEAN,
       checks=(Check(((2, 3),), ((1,), 1, False)), Check(((2, 3),), (None, 0, False))), integers="refused"),
)
