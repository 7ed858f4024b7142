"""Advanced indexing and gathers: ``index`` (``x[idx]``, ``x[mask]``: IndexBackward0),
``index_select``, ``gather``, ``scatter`` (a tensor or a number), ``scatter_add``,
``index_add``, and ``argmax`` / ``argmin`` (no node: int64 results).

Every index operand is an int64 tensor (a bool mask for ``index``); it is never
differentiable, so it comes last in each op's operands (the node's edges are the float
operands, in ATen's order), and each node saves what PyTorch 2.13 saves, in pack order
(probed with ``saved_tensors_hooks``):

* ``IndexBackward0``: the index tensors (a bool mask as the mask itself); its gradient is
  ``zeros(self).index_put_(indices, grad, accumulate=True)`` (repeated indices add up);
* ``IndexPutBackward0`` (``x[indices] = values``, edges self, values): the index tensors (a
  bool mask as the mask itself); self: ``grad`` with 0 at the indices, values:
  ``grad.index(indices)`` (the indexing result's shape: the engine sums it to a broadcast
  value's shape); no position written twice (refused by the lowering unless every write is
  one value);
* ``IndexSelectBackward0``: index; ``zeros(self).index_add_(dim, index, grad)``;
* ``GatherBackward0``: index, then self; ``zeros(self).scatter_add_(dim, index, grad)``;
* ``ScatterBackward0`` (edges self, src): index; self: ``grad.scatter(dim, index, 0)``, src:
  ``grad.gather(dim, index)`` (the index's shape: a src larger than the index makes PyTorch's
  backward fail with "invalid gradient", predicted as such); ``ScatterBackward1`` (a number): index, self's part only;
* ``ScatterAddBackward0`` (edges self, src): index; self: ``grad``, src:
  ``grad.gather(dim, index)``;
* ``IndexAddBackward0`` (edges self, source): index, then source; self: ``grad``, source:
  ``alpha * grad.index_select(dim, index)``.

Index arrays are numpy int64 arrays from the backend (``B.as_indices``), read from the operands
the node unpacks, so a saved-tensor hook that rewrites an index changes the backward as in
PyTorch.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from adjoint.values.mathtree import Fn, TFn, generic_vjp, no_gradient
from adjoint.engine.ops.record import Check
from adjoint.engine.ops.record import Math
from adjoint.engine.ops.record import Op
from adjoint.engine.ops.record import Save
def _probe(shape):
    return np.broadcast_to(np.zeros((), dtype=np.int8), tuple(shape))


# ----------------------------------------------------------------------------- x[indices]

@dataclass(frozen=True)
class IndexSpec:
    """Where each index tensor of ``x[...]`` stands: ``dims[k]`` is the dim of ``self`` the k-th
    index starts at, ``kinds[k]`` is ``"int"`` or ``"bool"`` (a mask covering ``mask.ndim``
    dims), ``counts[k]`` a mask's number of True elements (None for ints)."""

    dims: tuple[int, ...]
    kinds: tuple[str, ...]
    counts: tuple


def index_key(ndim: int, p: IndexSpec, arrays) -> tuple:
    """numpy's key for ``self[indices]`` (numpy's advanced indexing is PyTorch's: indices
    separated by a full slice put their broadcast dims first)."""
    key = []
    d = 0
    at = dict(zip(p.dims, range(len(p.dims))))
    while d < ndim:
        if d in at:
            k = at[d]
            a = arrays[k]
            key.append(a)
            d += a.ndim if p.kinds[k] == "bool" else 1
        else:
            key.append(slice(None))
            d += 1
    return tuple(key)


def _arrays(B, idxs, p: IndexSpec):
    return [B.as_indices(t).astype(bool) if kind == "bool" else B.as_indices(t) for t, kind in zip(idxs, p.kinds)]


def index_shape(shapes, p: IndexSpec, loc):
    dummies = []
    for s, kind, count in zip(shapes[1:], p.kinds, p.counts):
        if kind == "bool":
            m = np.zeros(int(np.prod(s)) if s else 1, dtype=bool)
            m[:count] = True
            dummies.append(m.reshape(s))
        else:
            dummies.append(np.zeros(s, dtype=np.int64))
    return tuple(_probe(shapes[0])[index_key(len(shapes[0]), p, dummies)].shape)


def index_forward(B, ins, p: IndexSpec):
    x, idxs = ins[0], ins[1:]
    return B.index(x, index_key(len(B.shape(x)), p, _arrays(B, idxs, p)))


def index_vjp(B, gs, ins, outs, p: IndexSpec, need):
    x, idxs = ins[0], ins[1:]
    key = index_key(len(B.shape(x)), p, _arrays(B, idxs, p))
    return [B.place_add(B.shape(x), key, gs[0])] + [None] * len(idxs)


# ----------------------------------------------------------------------------- x[indices] = values

def index_put_shape(shapes, p: IndexSpec, loc):
    return tuple(shapes[0])


def index_put_forward(B, ins, p: IndexSpec):
    # index_put_(self, indices, values, accumulate=False): values broadcast to the indexing
    # result; no position written twice with different values (checked by the lowering)
    x, values, idxs = ins[0], ins[1], ins[2:]
    return B.assign(x, index_key(len(B.shape(x)), p, _arrays(B, idxs, p)), values)


def index_put_vjp(B, gs, ins, outs, p: IndexSpec, need):
    # self: grad.index_put(indices, zeros_like(values), false); values: grad.index(indices)
    x, idxs = ins[0], ins[2:]
    g = gs[0]
    key = index_key(len(B.shape(x)), p, _arrays(B, idxs, p))
    return ([B.assign(g, key, B.zeros(())) if need[0] else None, B.index(g, key) if need[1] else None]
            + [None] * len(idxs))


def index_put_acc_forward(B, ins, p: IndexSpec):
    # index_put_(self, indices, values, accumulate=True): values broadcast to the indexing
    # result, added at the indices (repeated ones add up)
    x, values, idxs = ins[0], ins[1], ins[2:]
    key = index_key(len(B.shape(x)), p, _arrays(B, idxs, p))
    shape = tuple(_probe(B.shape(x))[key].shape)
    return B.add(x, B.place_add(B.shape(x), key, B.broadcast_to(values, shape)))


def index_put_acc_vjp(B, gs, ins, outs, p: IndexSpec, need):
    # self: grad; values: grad.index(indices)
    x, idxs = ins[0], ins[2:]
    g = gs[0]
    key = index_key(len(B.shape(x)), p, _arrays(B, idxs, p))
    return [g if need[0] else None, B.index(g, key) if need[1] else None] + [None] * len(idxs)


# ----------------------------------------------------------------------------- index_select, gather

def index_select_shape(shapes, p, loc):
    x, idx = shapes
    out = list(x)
    if out:
        out[p] = idx[0] if idx else 1
    return tuple(out)


def _dim_key(B, idx, dim):
    return (slice(None),) * dim + (B.as_indices(idx).reshape(-1),)


def index_select_forward(B, ins, p):
    x, idx = ins
    if not B.shape(x):
        return B.reshape(B.index(B.reshape(x, (1,)), (B.as_indices(idx).reshape(-1),)), ())
    return B.index(x, _dim_key(B, idx, p))


def index_select_vjp(B, gs, ins, outs, p, need):
    x, idx = ins
    if not B.shape(x):
        return [B.reshape(B.place_add((1,), (B.as_indices(idx).reshape(-1),), B.reshape(gs[0], (1,))), ()), None]
    return [B.place_add(B.shape(x), _dim_key(B, idx, p), gs[0]), None]


def along_key(ii: np.ndarray, dim: int) -> tuple:
    """numpy's key for the positions ``index`` names along ``dim`` (gather, scatter)."""
    grids = np.indices(ii.shape, sparse=True)
    return tuple(ii if d == dim else grids[d] for d in range(ii.ndim))


def gather_shape(shapes, p, loc):
    return tuple(shapes[1])


def gather_forward(B, ins, p):
    x, idx = ins
    ii = B.as_indices(idx)
    if not B.shape(x):
        return B.reshape(x, B.shape(idx))
    return B.index(x, along_key(ii, p))


def gather_vjp(B, gs, ins, outs, p, need):
    x, idx = ins
    if not B.shape(x):
        return [B.reshape(gs[0], ()), None]
    return [B.place_add(B.shape(x), along_key(B.as_indices(idx), p), gs[0]), None]


# ----------------------------------------------------------------------------- scatter, scatter_add, index_add

def self_shape(shapes, p, loc):
    return tuple(shapes[0])


def _scatter_into(B, x, key, values):
    """``x`` with ``x[key] = values`` (no two positions of ``key`` the same: checked by the lowering)."""
    return B.assign(x, key, values)


def _src_part(B, src, ii):
    """``src`` cut to the index's shape (scatter reads src only where the index has elements)."""
    return B.index(src, tuple(slice(0, n) for n in ii.shape))


def scatter_forward(B, ins, p):
    x, src, idx = ins
    ii = B.as_indices(idx)
    return _scatter_into(B, x, along_key(ii, p), _src_part(B, src, ii))


def scatter_vjp(B, gs, ins, outs, p, need):
    # self: grad.scatter(dim, index, 0); src: grad.gather(dim, index)
    x, src, idx = ins
    g = gs[0]
    key = along_key(B.as_indices(idx), p)

    # grad.gather(dim, index) has the index's shape: a src larger than the index gets PyTorch's
    # "invalid gradient" error from validate_outputs, as in torch
    return [_scatter_into(B, g, key, B.zeros(())) if need[0] else None, B.index(g, key) if need[1] else None, None]


def scatter_value_forward(B, ins, p):
    x, idx = ins
    dim, value = p
    return _scatter_into(B, x, along_key(B.as_indices(idx), dim), B.scalar(Fraction(value)))


def scatter_value_vjp(B, gs, ins, outs, p, need):
    x, idx = ins
    return [_scatter_into(B, gs[0], along_key(B.as_indices(idx), p[0]), B.zeros(())), None]


def scatter_add_forward(B, ins, p):
    x, src, idx = ins
    ii = B.as_indices(idx)
    return B.add(x, B.place_add(B.shape(x), along_key(ii, p), _src_part(B, src, ii)))


def scatter_add_vjp(B, gs, ins, outs, p, need):
    x, src, idx = ins
    g = gs[0]

    picked = (lambda: B.index(g, along_key(B.as_indices(idx), p)))   # the index's shape, as for scatter
    return [g if need[0] else None, picked() if need[1] else None, None]


def index_add_forward(B, ins, p):
    x, source, idx = ins
    dim, alpha = p
    added = B.mul(source, B.scalar(Fraction(alpha))) if alpha != 1 else source
    if not B.shape(x):
        return B.add(x, B.reshape(B.place_add((1,), (B.as_indices(idx).reshape(-1),), B.reshape(added, (1,))), ()))
    return B.add(x, B.place_add(B.shape(x), _dim_key(B, idx, dim), added))


def index_add_vjp(B, gs, ins, outs, p, need):
    # self: grad; source: maybe_multiply(grad.index_select(dim, index), alpha)
    x, source, idx = ins
    dim, alpha = p
    g = gs[0]

    def source_grad():
        if not B.shape(g):
            picked = g
        else:
            picked = B.index(g, _dim_key(B, idx, dim))
        picked = B.reshape(picked, B.shape(source))
        return B.mul(picked, B.scalar(Fraction(alpha))) if alpha != 1 else picked
    return [g if need[0] else None, source_grad() if need[1] else None, None]


# ----------------------------------------------------------------------------- argmax, argmin

def argmax_shape(shapes, p, loc):
    dim, keepdim, largest = p
    x = tuple(shapes[0])
    if dim is None:
        return (1,) * len(x) if keepdim else ()
    return tuple(1 if d == dim else n for d, n in enumerate(x)) if keepdim else x[:dim] + x[dim + 1:]


def argmax_forward(B, ins, p):
    dim, keepdim, largest = p
    x = ins[0]
    if dim is None:
        flat = B.reshape(x, (B.numel(x),))
        _, idx = B.argmax(flat, 0, False, largest)
        return B.reshape(idx, (1,) * len(B.shape(x))) if keepdim else idx
    _, idx = B.argmax(x, dim, keepdim, largest)
    return idx


def no_vjp(B, gs, ins, outs, p, need):
    """argmax makes no node (its output is an int64 tensor), so nothing asks this."""
    return [None for _ in ins]


# ----------------------------------------------------------------------------- sort, topk

def selected_forward(B, ins, p):
    """sort / topk's values: ``self`` gathered at the indices the lowering computed (``p[0]`` the dim)."""
    return gather_forward(B, ins, p[0])


def selected_vjp(B, gs, ins, outs, p, need):
    # value_selecting_reduction_backward(grad, dim, indices, self.sizes(), keepdim=true):
    # zeros(self.sizes()).scatter(dim, indices, grad) (the indices of a sort or a topk do not repeat)
    x, idx = ins
    return [B.assign(B.zeros(B.shape(x)), along_key(B.as_indices(idx), p[0]), gs[0]), None]


def sort_ties_kink(B, ins, p):
    x = ins[0]
    if not B.shape(x) or not B.sort_order(x, p[0], p[1])[1].any():
        return None
    return ("equal elements: sorted in index order, as PyTorch's CPU sort keeps exact float ties (values equal "
            "here but computed along different paths may differ in PyTorch's last bit and sort otherwise)")


def topk_shape(shapes, p, loc):
    out = list(shapes[0])
    out[p[0]] = p[1]
    return tuple(out)


# ----------------------------------------------------------------------------- how they read

INDEX = Fn("index", "#0\\left[#1\\right]", generic_vjp)
INDEX_PUT = Fn("index_put", "\\operatorname{index\\_put}\\left(#0,\\ #2,\\ #1\\right)", generic_vjp)
INDEX_PUT_ACC = Fn("index_put_acc", "\\operatorname{index\\_put}^{+}\\left(#0,\\ #2,\\ #1\\right)", generic_vjp)
INDEX_SELECT = Fn("index_select", "\\operatorname{index\\_select}_{#s}\\left(#0,\\ #1\\right)", generic_vjp)
GATHER = Fn("gather", "\\operatorname{gather}_{#s}\\left(#0,\\ #1\\right)", generic_vjp)
SCATTER = Fn("scatter", "\\operatorname{scatter}_{#s}\\left(#0,\\ #2,\\ #1\\right)", generic_vjp)
SCATTER_VALUE = Fn("scatter_value", "\\operatorname{scatter}_{#s}\\left(#0,\\ #1\\right)", generic_vjp)
SCATTER_ADD = Fn("scatter_add", "\\operatorname{scatter\\_add}_{#s}\\left(#0,\\ #2,\\ #1\\right)", generic_vjp)
INDEX_ADD = Fn("index_add", "\\operatorname{index\\_add}_{#s}\\left(#0,\\ #2,\\ #1\\right)", generic_vjp)
SORT = Fn("sort", "\\operatorname{sort}_{#s}\\left(#0\\right)", generic_vjp)
TOPK = Fn("topk", "\\operatorname{topk}_{#s}\\left(#0\\right)", generic_vjp)
ARGMAX = Fn("argmax", "\\operatorname{argmax}_{#s}\\left(#0\\right)", no_gradient)
ARGMIN = Fn("argmin", "\\operatorname{argmin}_{#s}\\left(#0\\right)", no_gradient)


def _dim_sub(p) -> str:
    return f"\\mathrm{{dim}}={p}"


def _math(fn, sub=_dim_sub):
    return Math(lambda a, p, shape, k: TFn(fn, tuple(x for x in a if x is not None), tuple(shape), sub(p), p))


def _index_math(a, p, shape, k):
    return TFn(INDEX, (a[0], a[1]) if len(a) == 2 else (a[0],) + tuple(a[1:]), tuple(shape), "", p)


def _index_op(n: int) -> Op:
    """IndexBackward0 with ``n`` index tensors (operands ``self, index_0, ..., index_{n-1}``)."""
    spec = IndexSpec(tuple(range(n)), ("int",) * n, (None,) * n)
    given = tuple((1 + k, (1, 0)) for k in range(n))
    return Op(f"index_{n}", "IndexBackward0", index_forward, index_vjp, index_shape,
              tuple(Save(f"indices[{k}]", "in", 1 + k) for k in range(n)),
              "zeros(self) with g added at the indices (index_put_ accumulate: repeated indices add up)",
              negzero="structural", grows=False, differentiable=(True,) + (False,) * n,
              kink_doc="the indices (int64, or a bool mask) have no edge; a mask is saved as the mask",
              math=Math(_index_math),
              checks=(Check(((2, 2) + (1,) * 0,) + ((2,),) * n, spec, given=given),))


_INDEX_OPS = tuple(_index_op(n) for n in (1, 2, 3))


def _index_put_op(n: int) -> Op:
    """IndexPutBackward0 with ``n`` index tensors (operands ``self, values, index_0, ...``): what
    ``x[indices] = values`` runs (index_put_, accumulate=False), in place."""
    spec = IndexSpec(tuple(range(n)), ("int",) * n, (None,) * n)
    picks = ((1, 0), (0, 1), (1, 1))
    given = tuple((2 + k, picks[k]) for k in range(n))
    shapes = ((2, 3), (2, 3), (2,)) if n == 1 else ((2,) * n, (2,)) + ((2,),) * n
    return Op(f"index_put_{n}", "IndexPutBackward0", index_put_forward, index_put_vjp, index_put_shape,
              tuple(Save(f"indices[{k}]", "in", 2 + k) for k in range(n)),
              "self: g, 0 at the indices; values: g at the indices (summed to a broadcast value's shape)",
              negzero="structural", grows=False, differentiable=(True, True) + (False,) * n, fills=True,
              checks_internal_overlap=False,   # index_put_ warns on an expanded self (refused by the lowering)
              kink_doc="the indices (int64, or a bool mask) have no edge; a mask is saved as the mask; a position "
                       "written twice is refused unless every write is one value",
              math=Math(lambda a, p, shape, k: TFn(INDEX_PUT, tuple(a), tuple(shape), "", p)),
              checks=(Check(shapes, spec, given=given),))


def _index_put_acc_op(n: int, name: str = "index_put_acc", node: str = "IndexPutBackward0") -> Op:
    """IndexPutBackward0 of ``index_put_(indices, values, accumulate=True)`` with ``n`` index
    tensors (operands ``self, values, index_0, ...``); ``index_put_impl_acc``: the
    ``_index_put_impl_(zeros, indices, grad, accumulate=True, unsafe=True)`` IndexBackward0's
    formula records under create_graph (index_backward), IndexPutImplBackward0, the same
    formulas."""
    spec = IndexSpec(tuple(range(n)), ("int",) * n, (None,) * n)
    picks = ((1, 1), (0, 0), (1, 1))
    given = tuple((2 + k, picks[k]) for k in range(n))
    shapes = ((2, 3), (2, 3), (2,)) if n == 1 else ((2,) * n, (2,)) + ((2,),) * n
    return Op(f"{name}_{n}", node, index_put_acc_forward, index_put_acc_vjp, index_put_shape,
              tuple(Save(f"indices[{k}]", "in", 2 + k) for k in range(n)),
              "self: g; values: g at the indices (summed to a broadcast value's shape)",
              negzero="never", differentiable=(True, True) + (False,) * n,
              checks_internal_overlap=False,   # index_put_ warns on an expanded self (refused by the lowering)
              kink_doc="the indices (int64, or a bool mask) have no edge; a mask is saved as the mask; repeated "
                       "indices add up",
              math=Math(lambda a, p, shape, k: TFn(INDEX_PUT_ACC, tuple(a), tuple(shape), "", p)),
              checks=(Check(shapes, spec, given=given),))


_INDEX_PUT_OPS = tuple(_index_put_op(n) for n in (1, 2, 3)) + tuple(_index_put_acc_op(n) for n in (1, 2, 3)) + \
    tuple(_index_put_acc_op(n, "index_put_impl_acc", "IndexPutImplBackward0") for n in (1, 2, 3))

OPS = _INDEX_OPS + _INDEX_PUT_OPS + (
    Op("index_select", "IndexSelectBackward0", index_select_forward, index_select_vjp, index_select_shape,
       (Save("index", "in", 1),), "zeros(self) with g added along dim at the index (repeated entries add up)",
       negzero="structural", grows=False, differentiable=(True, False),
       kink_doc="index (int64) has no edge", math=_math(INDEX_SELECT),
       checks=(Check(((2, 3), (3,)), 1, given=((1, (2, 0, 2)),)),)),
    Op("gather", "GatherBackward0", gather_forward, gather_vjp, gather_shape,
       (Save("index", "in", 1), Save("self", "in", 0)),
       "zeros(self) with g added at the positions index names along dim (scatter_add)",
       negzero="structural", grows=False, differentiable=(True, False),
       kink_doc="index (int64) has no edge; self is saved though only its shape is read", math=_math(GATHER),
       checks=(Check(((2, 3), (2, 2)), 1, given=((1, (0, 0, 2, 1)),)),)),
    Op("scatter", "ScatterBackward0", scatter_forward, scatter_vjp, self_shape, (Save("index", "in", 2),),
       "self: g, 0 where written; src: g at the positions written (gather)", negzero="structural", grows=False,
       differentiable=(True, True, False), kink_doc="index (int64) has no edge; repeated targets are refused",
       math=_math(SCATTER), checks=(Check(((2, 3), (2, 2), (2, 2)), 1, given=((2, (0, 2, 1, 0)),)),)),
    Op("scatter_value", "ScatterBackward1", scatter_value_forward, scatter_value_vjp, self_shape,
       (Save("index", "in", 1),), "g, 0 where written", negzero="structural", grows=False,
       differentiable=(True, False), kink_doc="index (int64) has no edge",
       math=_math(SCATTER_VALUE, lambda p: f"\\mathrm{{dim}}={p[0]}"),
       checks=(Check(((2, 3), (2, 1)), (1, Fraction(1, 2)), given=((1, (2, 0)),)),)),
    Op("scatter_add", "ScatterAddBackward0", scatter_add_forward, scatter_add_vjp, self_shape,
       (Save("index", "in", 2),), "self: g; src: g at the positions added to (gather)", negzero="never",
       differentiable=(True, True, False), kink_doc="index (int64) has no edge", math=_math(SCATTER_ADD),
       checks=(Check(((2, 3), (2, 2), (2, 2)), 1, given=((2, (0, 0, 2, 1)),)),)),
    Op("index_add", "IndexAddBackward0", index_add_forward, index_add_vjp, self_shape,
       (Save("index", "in", 2), Save("source", "in", 1)), "self: g; source: alpha * g along dim at the index",
       negzero="never", differentiable=(True, True, False), kink_doc="index (int64) has no edge",
       math=_math(INDEX_ADD, lambda p: f"\\mathrm{{dim}}={p[0]}" + ("" if p[1] == 1 else f",\\,\\alpha={p[1]}")),
       checks=(Check(((2, 3), (2, 2), (2,)), (1, Fraction(1)), given=((2, (2, 0)),)),
               Check(((3, 2), (2, 2), (2,)), (0, Fraction(-2)), given=((2, (1, 1)),)))),
    *(Op(name, node, selected_forward, selected_vjp, lambda shapes, p, loc: tuple(shapes[0]),
         (Save("indices", "in", 1),), "zeros(self) with g written at the sorted positions along dim",
         negzero="structural", grows=False, differentiable=(True, False),
         kink=sort_ties_kink, kink_doc="ties: equal elements in index order (a stable sort)",
         math=Math(lambda a, p, shape, k: TFn(SORT, (a[0],), tuple(shape),
                                              _dim_sub(p[0]) + (",\\,\\downarrow" if p[1] else ""), p)),
         checks=(Check(((2, 3), (2, 3)), (1, False), given=((1, (2, 0, 1, 0, 2, 1)),)),))
      for name, node in (("sort", "SortBackward0"), ("sort_stable", "SortBackward1"))),
    Op("topk", "TopkBackward0", selected_forward, selected_vjp, topk_shape, (Save("indices", "in", 1),),
       "zeros(self) with g written at the k selected positions along dim", negzero="structural", grows=False,
       differentiable=(True, False), kink_doc="ties among the selected values are refused (the CPU kernel's "
       "partial sort orders them in no documented way)",
       math=Math(lambda a, p, shape, k: TFn(TOPK, (a[0],), tuple(shape),
                                            _dim_sub(p[0]) + f",\\,k={p[1]}" + ("" if p[2] else ",\\,\\min"), p)),
       checks=(Check(((2, 3), (2, 2)), (1, 2, True), given=((1, (2, 0, 1, 0)),)),)),
    Op("argmax", "(none)", argmax_forward, no_vjp, argmax_shape, (), "not differentiable: an int64 tensor, no grad_fn",
       grows=False, differentiable=(False,), out_dtypes=("int64",), kink_doc="-- (no node; ties: the first index)",
       math=Math(lambda a, p, shape, k: TFn(ARGMAX if p[2] else ARGMIN, (a[0],), tuple(shape),
                                            "" if p[0] is None else _dim_sub(p[0]), p))),
)
