"""Writes along a dim or under a mask: ``index_fill`` (a number: ``IndexFillBackward0``; a 0-d
tensor: ``IndexFillBackward1``), ``index_copy`` (``IndexCopyBackward0``),
``masked_scatter`` (``MaskedScatterBackward0``), ``scatter_reduce`` (``ScatterReduceBackward0``)
and ``scatter(..., reduce=)`` (no derivative: ``NotImplemented``).

What PyTorch 2.13 does (``derivatives.yaml``, ``TensorAdvancedIndexing.cpp``), probed on CPU with
``saved_tensors_hooks``:

* ``IndexFillBackward0`` (edge self) and ``IndexFillBackward1`` (edges self, value) save the
  index only (and the dim, as given: not wrapped); self's gradient is
  ``grad.index_fill(dim, index, 0)``, the value's ``grad.index_select(dim,
  unique(index)).sum()``: every filled slice counted once, however often the index names it.
  That ``index_select`` refuses a negative index (the forward accepts it): PyTorch's backward
  then fails (``INDICES element is out of DATA bounds`` along dim 1 of a tensor of two or
  more dims, else ``index out of range in self``), predicted as such;
* ``IndexCopyBackward0`` (edges self, source) saves the index, then the source only where
  the source's gradient may be needed; self: ``grad.index_fill(dim, index, 0)``, source:
  ``grad.index_select(dim, index)`` in the source's shape;
* ``MaskedScatterBackward0`` (edges self, source) saves the mask (and the source's sizes, no
  tensor); self: ``grad.masked_fill(mask, 0)`` summed to self's shape, source: the gradient's
  elements where the mask is set, in row-major order, then zeros, in the source's shape
  (``masked_scatter_backward``);
* ``ScatterReduceBackward0`` (edges self, src) saves the index, self, src, then the result, whatever
  needs a gradient; ``sum``: self ``grad``, src ``grad.gather(dim, index)``; ``mean``: both divided
  by each position's count (``include_self`` counts self; 0 made 1); ``amax`` / ``amin``: ``grad``
  shared evenly among the values equal to the result (self counted even without
  ``include_self``, as the formula reads); ``prod``: self ``grad * prod(self's zeros made 1) /
  (that self)``, src ``grad * result / src``, a src zero alone at its position ``grad`` times the
  others' product, two zeros 0; without ``include_self``,
  self's gradient is 0 where the index writes (``grad_self.scatter(dim, index, 0)``).

The index (int64) or the mask (bool) is never differentiable, so it is the last operand of each
op here (the node's edges are the float operands, in ATen's order); its values are read from
the operands the node unpacks, so a saved-tensor hook that rewrites them changes the backward
as in PyTorch.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from adjoint.values.mathtree import Fn, TFn, generic_vjp
from adjoint.engine.ops.record import Check
from adjoint.engine.ops.record import Math
from adjoint.engine.ops.record import Op
from adjoint.engine.ops.record import Save
from adjoint.engine.ops.arith import broadcast_shapes
from adjoint.engine.ops.masking import fill_value, self_grad
from adjoint.engine.torch_errors import TorchError


def _along(B, x, idx, dim: int):
    """``x`` made at least 1-d (a 0-d tensor is one element along dim 0) and numpy's key for the
    slices the index names along ``dim``."""
    x1 = B.reshape(x, (1,)) if not B.shape(x) else x
    return x1, (slice(None),) * dim + (B.as_indices(idx).reshape(-1),)


def _back(B, value, shape):
    return B.reshape(value, ()) if not shape else value


def self_shape(shapes, p, loc):
    return tuple(shapes[0])


# ----------------------------------------------------------------------------- index_fill

def index_fill_forward(B, ins, p):
    x, idx = ins
    dim, value = p
    x1, key = _along(B, x, idx, dim)
    return _back(B, B.assign(x1, key, fill_value(B, value)), B.shape(x))


def _zero_along(B, g, idx, dim):
    """``grad.index_fill(dim, index, 0)``."""
    g1, key = _along(B, g, idx, dim)
    return _back(B, B.assign(g1, key, B.zeros(())), B.shape(g))


def index_fill_vjp(B, gs, ins, outs, p, need):
    x, idx = ins
    return [_zero_along(B, gs[0], idx, p[0]), None]


def index_fill_tensor_forward(B, ins, p):
    x, value, idx = ins
    x1, key = _along(B, x, idx, p)
    return _back(B, B.assign(x1, key, value), B.shape(x))


def index_fill_tensor_vjp(B, gs, ins, outs, p, need):
    # self: grad.index_fill(dim, index, 0); value: grad.index_select(dim, unique(index)).sum()
    x, value, idx = ins
    g = gs[0]

    def value_grad():
        n = B.shape(g)[p] if B.shape(g) else 1
        unique = np.unique(B.as_indices(idx).reshape(-1))
        bad = sorted(int(v) for v in unique if not 0 <= v < n)
        if bad:   # index_select_out_cpu_'s checks (the forward's index_fill_ wraps a negative index): dim 1
            # of a tensor of 2 or more dims has its own loop; unique's values come sorted on CPU
            if len(B.shape(g)) > 1 and p == 1:
                raise TorchError("RuntimeError", f"INDICES element is out of DATA bounds, id={bad[0]} axis_dim={n}")
            raise TorchError("IndexError", "index out of range in self")
        g1 = B.reshape(g, (1,)) if not B.shape(g) else g
        picked = B.index(g1, (slice(None),) * p + (unique,))
        return B.sum_dims(picked, (), False)
    return [_zero_along(B, g, idx, p) if need[0] else None, value_grad() if need[1] else None, None]


def index_fill_tensor_shape(shapes, p, loc):
    """The operands in the node's order: (self, value, index)."""
    if len(shapes[1]) != 0:   # the kernel's error (raised after the node's packs)
        raise TorchError("RuntimeError", "index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                                         f"{len(shapes[1])} dimension(s).")
    return tuple(shapes[0])


# ----------------------------------------------------------------------------- index_copy

def index_copy_forward(B, ins, p):
    # positions named twice are refused by the lowering (PyTorch: whichever copy lands last)
    x, source, idx = ins
    x1, key = _along(B, x, idx, p)
    shape = tuple(np.zeros(B.shape(x1), dtype=np.int8)[key].shape)
    return _back(B, B.assign(x1, key, B.reshape(source, shape)), B.shape(x))


def index_copy_vjp(B, gs, ins, outs, p, need):
    # self: grad.index_fill(dim, index, 0); source: grad.index_select(dim, index) in source's shape
    x, source, idx = ins
    g = gs[0]

    def source_grad():
        g1, key = _along(B, g, idx, p)
        return B.reshape(B.index(g1, key), B.shape(source))
    return [_zero_along(B, g, idx, p) if need[0] else None, source_grad() if need[1] else None, None]


# ----------------------------------------------------------------------------- masked_scatter

def masked_scatter_shape(shapes, p, loc):
    """Operands (self, source, mask): ``expand_outplace(mask, self)``, the mask tensor a."""
    return broadcast_shapes(shapes[2], shapes[0], loc)


def _mask_key(B, mask, shape):
    return (np.broadcast_to(B.as_indices(mask).astype(bool), tuple(shape)),)


def masked_scatter_forward(B, ins, p):
    # the mask's set elements, in row-major order, take the source's first elements (the
    # lowering checked there are enough)
    x, source, mask = ins
    shape = broadcast_shapes(B.shape(mask), B.shape(x), None)
    key = _mask_key(B, mask, shape)
    count = int(np.count_nonzero(key[0]))
    flat = B.reshape(source, (B.numel(source),))
    return B.assign(B.broadcast_to(x, shape), key, B.index(flat, (slice(0, count),)))


def masked_scatter_vjp(B, gs, ins, outs, p, need):
    # self: grad.masked_fill(mask, 0) (summed to self); source: masked_scatter_backward
    x, source, mask = ins
    g = gs[0]

    def source_grad():
        key = _mask_key(B, mask, B.shape(g))
        count = int(np.count_nonzero(key[0]))
        picked = B.index(g, key)
        n = B.numel(source)
        return B.reshape(B.place_add((n,), (np.arange(count),), picked), B.shape(source))
    return [self_grad(B, g, x, mask) if need[0] else None, source_grad() if need[1] else None, None]


# ----------------------------------------------------------------------------- scatter_reduce (sum, mean)

def _reduce_parts(B, x, src, idx, p):
    """The positions ``index`` names along dim (numpy's key), src cut to the index's shape, and
    each position's count of values averaged (``include_self`` counts self; at least 1)."""
    from adjoint.engine.ops.indexing import along_key
    dim, reduce, include_self = p
    ii = B.as_indices(idx)
    key = along_key(ii, dim)
    part = B.index(src, tuple(slice(0, n) for n in ii.shape))
    counts = np.full(tuple(B.shape(x)), 1 if include_self else 0, dtype=np.int64)
    np.add.at(counts, key, 1)
    counts[counts == 0] = 1
    return key, part, counts


def _count_tensor(B, counts):
    return B.integers(counts.reshape(-1).tolist(), counts.shape)


def _layers(key):
    """The index's entries split by how often their position was named before them: layer k holds
    each position's (k+1)-th contribution (numpy keys into the result and into src's part)."""
    full = np.broadcast_shapes(*(k.shape for k in key))
    cols = np.stack([np.broadcast_to(k, full).reshape(-1) for k in key])
    src_pos = np.indices(full).reshape(len(full), -1)
    seen: dict = {}
    rank = np.empty(cols.shape[1], dtype=np.int64)
    for j, pos in enumerate(map(tuple, cols.T.tolist())):
        rank[j] = seen.get(pos, 0)
        seen[pos] = rank[j] + 1
    return [(tuple(c[rank == r] for c in cols), tuple(c[rank == r] for c in src_pos))
            for r in range(int(rank.max()) + 1 if rank.size else 0)]


def _extreme(B, x, part, key, p):
    """amax / amin: each position's largest (smallest) of self (with include_self) and the src
    values the index sends there, layer by layer."""
    dim, reduce, include_self = p
    rel = ">" if reduce == "amax" else "<"
    acc = x
    for k, (at, src_at) in enumerate(_layers(key)):
        vals = B.index(part, src_at)
        if k == 0 and not include_self:
            acc = B.assign(acc, at, vals)
            continue
        cur = B.index(acc, at)
        acc = B.assign(acc, at, B.choose(B.sub(vals, cur), rel, vals, cur))
    return acc


def _product(B, x, part, key, include_self):
    """prod: each position's self (with include_self) times the src values sent there, in order."""
    acc = x
    for k, (at, src_at) in enumerate(_layers(key)):
        vals = B.index(part, src_at)
        acc = B.assign(acc, at, vals if k == 0 and not include_self else B.mul(B.index(acc, at), vals))
    return acc


def _prod_vjp(B, g, x, part, key, result, include_self):
    """scatter_reduce_backward's prod: zeros in self and src handled as PyTorch does (a src zero
    alone at its position gets the product of the others; two or more zeros: 0)."""
    def ones_where_zero(t):
        shape = B.shape(t)
        return B.choose(t, "==", B.full(shape, 1), B.zeros(shape))

    one = B.full((), 1)
    masked_self = B.choose(x, "==", B.broadcast_to(one, B.shape(x)), x)
    self_grad_ = B.div(B.mul(g, _product(B, masked_self, part, key, include_self)), masked_self)
    src_zero = ones_where_zero(part)
    zeros_at = B.index(B.place_add(B.shape(x), key, src_zero), key)
    single = B.mul(src_zero, ones_where_zero(B.sub(zeros_at, one)))
    masked_src = B.choose(single, "!=", B.broadcast_to(one, B.shape(part)), part)
    masked_src_result = _product(B, x, masked_src, key, include_self)
    plain = B.div(B.index(B.mul(g, result), key), B.choose(src_zero, "!=", B.broadcast_to(one, B.shape(part)), part))
    src_grad = B.choose(single, "!=", B.index(B.mul(g, masked_src_result), key), plain)
    return self_grad_, src_grad


def _is(B, a, b):
    """``(a == b)`` as 1 and 0."""
    shape = B.shape(B.sub(a, b))
    return B.choose(B.sub(a, b), "==", B.full(shape, 1), B.zeros(shape))


def scatter_reduce_forward(B, ins, p):
    x, src, idx = ins
    dim, reduce, include_self = p
    key, part, counts = _reduce_parts(B, x, src, idx, p)
    if reduce in ("amax", "amin"):
        return _extreme(B, x, part, key, p)
    if reduce == "prod":
        return _product(B, x, part, key, include_self)
    base = x if include_self else B.assign(x, key, B.zeros(()))
    total = B.add(base, B.place_add(B.shape(x), key, part))
    return total if reduce == "sum" else B.div(total, _count_tensor(B, counts))


def scatter_reduce_vjp(B, gs, ins, outs, p, need):
    # scatter_reduce_backward: sum: self g, src g.gather(dim, index); mean: N = (include_self ? 1 : 0)
    # + the count of src values at each position (0 made 1), self g / N, src g.gather / N.gather;
    # without include_self, self's gradient is 0 where the index writes
    x, src, idx = ins[0], ins[1], ins[2]
    dim, reduce, include_self = p
    g = gs[0]
    key, part, counts = _reduce_parts(B, x, src, idx, p)
    if reduce == "prod":
        self_grad_, src_grad = _prod_vjp(B, g, x, part, key, outs[0], include_self)
    elif reduce in ("amax", "amin"):
        # evenly shared among the values equal to the result (self counted whatever include_self)
        result = outs[0]
        self_is = _is(B, x, result)
        src_is = _is(B, part, B.index(result, key))
        spread = B.div(g, B.add(self_is, B.place_add(B.shape(x), key, src_is)))
        self_grad_ = B.mul(self_is, spread)
        src_grad = B.mul(src_is, B.index(spread, key))
    elif reduce == "mean":
        n = _count_tensor(B, counts)
        self_grad_ = B.div(g, n)
        src_grad = B.div(B.index(g, key), B.index(n, key))
    else:
        self_grad_ = g
        src_grad = B.index(g, key)
    if not include_self:
        self_grad_ = B.assign(self_grad_, key, B.zeros(()))
    return [self_grad_ if need[0] else None, src_grad if need[1] else None, None]


# ----------------------------------------------------------------------------- scatter(..., reduce=) (no derivative)

def _legacy_product(B, acc, key, vals_at):
    """``acc`` with each position multiplied by the values the index sends there, layer by layer
    (``vals_at(src_at)``: the values of one layer)."""
    for at, src_at in _layers(key):
        acc = B.assign(acc, at, B.mul(B.index(acc, at), vals_at(src_at)))
    return acc


def scatter_legacy_forward(B, ins, p):
    """``scatter(dim, index, src, reduce='add' | 'multiply')``: src's values (cut to the index's
    shape) added into, or multiplying, the positions the index names (repeats apply each)."""
    from adjoint.engine.ops.indexing import along_key
    x, src, idx = ins
    dim, reduce = p[:2]
    ii = B.as_indices(idx)
    key = along_key(ii, dim)
    part = B.index(src, tuple(slice(0, n) for n in ii.shape))
    if reduce == "add":
        return B.add(x, B.place_add(B.shape(x), key, part))
    return _legacy_product(B, x, key, lambda at: B.index(part, at))


def scatter_legacy_vjp(B, gs, ins, outs, p, need):
    # never run: the NotImplemented node raises first ("derivative for aten::scatter is not
    # implemented"); what it would be: add: g, g.gather(dim, index); multiply: g times the factors
    # each position met, g * result / src at the positions
    from adjoint.engine.ops.indexing import along_key
    x, src, idx = ins
    dim, reduce = p[:2]
    g = gs[0]
    ii = B.as_indices(idx)
    key = along_key(ii, dim)
    part = B.index(src, tuple(slice(0, n) for n in ii.shape))
    if reduce == "add":
        return [g, B.index(g, key), None]
    factors = _legacy_product(B, B.full(B.shape(x), 1), key, lambda at: B.index(part, at))
    result = B.mul(x, factors)
    return [B.mul(g, factors), B.div(B.index(B.mul(g, result), key), part), None]


def scatter_legacy_value_forward(B, ins, p):
    from adjoint.engine.ops.indexing import along_key
    x, idx = ins
    dim, reduce, value = p[:3]
    ii = B.as_indices(idx)
    key = along_key(ii, dim)
    v = B.broadcast_to(B.scalar(Fraction(value)), ii.shape)
    if reduce == "add":
        return B.add(x, B.place_add(B.shape(x), key, v))
    return _legacy_product(B, x, key, lambda at: B.index(v, at))


def scatter_legacy_value_vjp(B, gs, ins, outs, p, need):
    # never run (the NotImplemented node raises); what it would be: g times the factors met
    from adjoint.engine.ops.indexing import along_key
    x, idx = ins
    dim, reduce, value = p[:3]
    if reduce == "add":
        return [gs[0], None]
    ii = B.as_indices(idx)
    key = along_key(ii, dim)
    v = B.broadcast_to(B.scalar(Fraction(value)), ii.shape)
    return [B.mul(gs[0], _legacy_product(B, B.full(B.shape(x), 1), key, lambda at: B.index(v, at))), None]


def scatter_legacy_error(dtypes, p, need):
    """derivatives.yaml has no formula for scatter.reduce / scatter.value_reduce: the generated code
    records a ``NotImplemented("aten::scatter")`` node (``aten::scatter_`` in place: ``p``'s last
    item), whose apply raises (Error::apply)."""
    return ("RuntimeError", f"derivative for aten::{p[-1]} is not implemented", "not_implemented")


# ----------------------------------------------------------------------------- how they read

INDEX_FILL = Fn("index_fill", "\\operatorname{index\\_fill}_{#s}\\left(#0,\\ #1\\right)", generic_vjp)
INDEX_FILL_T = Fn("index_fill_t", "\\operatorname{index\\_fill}_{#s}\\left(#0,\\ #2,\\ #1\\right)", generic_vjp)
INDEX_COPY = Fn("index_copy", "\\operatorname{index\\_copy}_{#s}\\left(#0,\\ #2,\\ #1\\right)", generic_vjp)
SCATTER_REDUCE = Fn("scatter_reduce", "\\operatorname{scatter\\_reduce}_{#s}\\left(#0,\\ #2,\\ #1\\right)", generic_vjp)
SCATTER_LEGACY = Fn("scatter_legacy", "\\operatorname{scatter}_{#s}\\left(#0,\\ #2,\\ #1\\right)", generic_vjp)
SCATTER_LEGACY_VALUE = Fn("scatter_legacy_value", "\\operatorname{scatter}_{#s}\\left(#0,\\ #1\\right)", generic_vjp)
MASKED_SCATTER = Fn("masked_scatter", "\\operatorname{masked\\_scatter}\\left(#0,\\ #2,\\ #1\\right)", generic_vjp)


def _math(fn, dim_of):
    return Math(lambda a, p, shape, k: TFn(fn, tuple(x for x in a if x is not None), tuple(shape),
                                           "" if dim_of is None else f"\\mathrm{{dim}}={dim_of(p)}", p))


OPS = (
    Op("index_fill", "IndexFillBackward0", index_fill_forward, index_fill_vjp, self_shape, (Save("index", "in", 1),),
       "g, 0 in the filled slices (index_fill(dim, index, 0))", negzero="structural", grows=False, fills=True,
       differentiable=(True, False), kink_doc="index (int64) has no edge; a negative index counts from the end",
       math=_math(INDEX_FILL, lambda p: p[0]),
       checks=(Check(((2, 3), (2,)), (1, Fraction(1, 2)), given=((1, (2, 0)),)),
               Check(((3, 2), (3,)), (0, Fraction(-3)), given=((1, (1, 1, -1)),)))),
    Op("index_fill_tensor", "IndexFillBackward1", index_fill_tensor_forward, index_fill_tensor_vjp,
       index_fill_tensor_shape, (Save("index", "in", 2),),
       "self: g, 0 in the filled slices; value: the sum of g over the filled slices, each counted once "
       "(index_select(dim, unique(index)).sum())", negzero="structural", grows=False, fills=True,
       differentiable=(True, True, False),
       kink_doc="index (int64) has no edge; a negative index makes the value's backward fail, as in PyTorch",
       math=_math(INDEX_FILL_T, lambda p: p),
       checks=(Check(((2, 3), (), (3,)), 1, given=((2, (2, 0, 2)),)),)),
    Op("index_copy", "IndexCopyBackward0", index_copy_forward, index_copy_vjp, self_shape,
       (Save("index", "in", 2), Save("source", "in", 1, if_need=1)),
       "self: g, 0 in the copied slices; source: g's slices at the index (index_select)", negzero="structural",
       grows=False, differentiable=(True, True, False),
       kink_doc="index (int64) has no edge; a slice named twice is refused (PyTorch: whichever copy lands last)",
       math=_math(INDEX_COPY, lambda p: p),
       checks=(Check(((3, 2), (2, 2), (2,)), 0, given=((2, (2, 0)),)),
               Check(((2, 3), (2, 1), (1,)), 1, given=((2, (1,)),)))),
    Op("masked_scatter", "MaskedScatterBackward0", masked_scatter_forward, masked_scatter_vjp, masked_scatter_shape,
       (Save("mask", "in", 2),),
       "self: g, 0 where the mask is set (summed to self's shape); source: g where the mask is set, in "
       "row-major order, then zeros, in source's shape", negzero="structural", grows=False,
       differentiable=(True, True, False),
       kink_doc="the mask (bool) has no edge; the source's elements past the mask's count are unused (gradient 0)",
       math=Math(lambda a, p, shape, k: TFn(MASKED_SCATTER, (a[0], a[1], a[2]), tuple(shape))),
       checks=(Check(((2, 3), (2, 2), (2, 3)), None, given=((2, (1, 0, 1, 0, 1, 1)),)),
               Check(((3,), (5,), (2, 3)), None, given=((2, (0, 1, 1, 1, 0, 0)),)))),
    Op("scatter_reduce", "ScatterReduceBackward0", scatter_reduce_forward, scatter_reduce_vjp, self_shape,
       (Save("index", "in", 2), Save("self", "in", 0), Save("src", "in", 1), Save("result", "out", 0)),
       "sum: self g, src g at the positions written (gather); mean: both divided by each position's count; "
       "without include_self, self's gradient 0 where the index writes", negzero="never",
       differentiable=(True, True, False),
       kink_doc="index (int64) has no edge; amax / amin share the gradient evenly among ties (self counted even "
                "without include_self, as PyTorch does); prod's zeros as PyTorch's formula treats them",
       math=_math(SCATTER_REDUCE, lambda p: f"{p[0]},\\,\\mathrm{{{p[1]}}}" + ("" if p[2] else ",\\,\\neg\\mathrm{self}")),
       checks=tuple(Check(((2, 3), (2, 2), (2, 2)), (1, reduce, inc), given=((2, (0, 0, 2, 1)),))
                    for reduce in ("sum", "mean", "amax", "amin", "prod") for inc in (True, False))),
    Op("scatter_legacy", "torch::autograd::NotImplemented", scatter_legacy_forward, scatter_legacy_vjp, self_shape, (),
       "raises: derivative for aten::scatter is not implemented", grows=True, differentiable=(True, True, False),
       kink_doc="index (int64) has no edge; the node saves nothing and its backward raises",
       math=_math(SCATTER_LEGACY, lambda p: f"{p[0]},\\,\\mathrm{{{p[1]}}}"),
       # multiply's would-be VJP reads self and src, which the node (saving nothing) has not: checked add alone
       checks=(Check(((2, 3), (2, 2), (2, 2)), (1, "add", "scatter"), given=((2, (0, 0, 2, 1)),)),),
       backward_error=scatter_legacy_error, sequence_nr_max=True, takes_sequence_nr=False),
    Op("scatter_legacy_value", "torch::autograd::NotImplemented", scatter_legacy_value_forward,
       scatter_legacy_value_vjp, self_shape, (), "raises: derivative for aten::scatter is not implemented",
       grows=True, differentiable=(True, False),
       kink_doc="index (int64) has no edge; the node saves nothing and its backward raises",
       math=_math(SCATTER_LEGACY_VALUE, lambda p: f"{p[0]},\\,\\mathrm{{{p[1]}}},\\,{p[2]}"),
       checks=tuple(Check(((2, 3), (2, 2)), (1, reduce, Fraction(3, 2), "scatter"), given=((1, (0, 0, 2, 1)),))
                    for reduce in ("add", "multiply")),
       backward_error=scatter_legacy_error, sequence_nr_max=True, takes_sequence_nr=False),
)
