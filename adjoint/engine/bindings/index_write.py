"""``index_fill``, ``index_copy`` and ``masked_scatter``, out of place and in place: what PyTorch
2.13 runs for each (checked in real torch; the nodes in :mod:`adjoint.engine.ops.index_write`).

* ``torch.index_fill(input, dim, index, value)`` / ``x.index_fill(...)``: a number value
  (``float("inf")`` too) is ``IndexFillBackward0``, a 0-d tensor ``IndexFillBackward1`` (edges
  input, value; a tensor with dims is PyTorch's RuntimeError); the kernel's checks after the
  node packed the index: the value's dims, the index's dtype (int64 only), the dim, a vector or
  0-d index, the bounds (a negative index counts from the end);
* ``torch.index_copy(input, dim, index, source)``: ``IndexCopyBackward0``, the meta function's
  checks in its order (dim, the index's rank, a 0-d source's one index, the ranks, the index's
  dtype, the dtypes, the slice shapes, the number of indices), then the kernel's bounds; a
  slice named twice is refused (PyTorch documents the result as nondeterministic: whichever
  copy lands last);
* ``torch.masked_scatter(input, mask, source)``: ``MaskedScatterBackward0``, input and mask
  broadcast against each other (the mask tensor a of the size error); then the dtypes, the
  mask's dtype (bool), and the kernel's count of source elements;
* ``torch.scatter_reduce(input, dim, index, src, reduce, *, include_self=True)`` with ``sum``,
  ``prod``, ``mean``, ``amax`` or ``amin``: ``ScatterReduceBackward0`` (the checks scatter's;
  prod, amax, amin with a src larger than the index refused);
* ``x.index_fill_``, ``x.index_copy_``, ``x.masked_scatter_``, ``x.scatter_reduce_``: the same nodes in place (check_inplace,
  the node, the checks, one version bump, rebase_history; unrecorded: the value written with
  one bump), as :func:`adjoint.engine.bindings.indexing._in_place` runs scatter_; masked_scatter_
  expands the mask to the written tensor (expand's errors).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.torch_errors import TorchError, TYPE_NAMES
from adjoint.engine.bindings.signature import Function, Param, dim_index, describe
from adjoint.engine.bindings.indexing import _in_place, _nonempty_size, _out_of_bounds, _out_of_place
from adjoint.engine.infinity import Infinite


def _float_input(x: Tensor, what: str, loc: Loc) -> None:
    if x.dtype in ("int64", "bool"):
        raise ProblemError(loc, f"{what} into {'an' if x.dtype == 'int64' else 'a'} {x.dtype} tensor is not modelled "
                                "(PyTorch converts the values to the tensor's dtype); write into a float tensor")


# ----------------------------------------------------------------------------- index_fill

def _fill_number(value, loc: Loc):
    if isinstance(value, Infinite):
        return value.text
    if isinstance(value, bool):   # a Python bool is a Scalar: True fills 1
        return Fraction(int(value))
    if isinstance(value, Fraction):
        return value
    raise ProblemError(loc, f"index_fill(): argument 'value' must be a number or a 0-d Tensor, not {describe(value)}: "
                            "not modelled (PyTorch's TypeError lists index_fill's signatures)")


def _index_fill_call(rt, a, loc):
    """index_fill's primitive, operands and checks: ``index_fill_(Tensor)`` checks the value's
    dims, then ``index_fill_(Scalar)`` (TensorAdvancedIndexing.cpp): the index's dtype, the dim
    (a 0-d input counts as 1-d), a vector or 0-d index, then the kernel's bounds."""
    x, idx, value = a["input"], a["index"], a["value"]
    _float_input(x, "index_fill", loc)
    tensor = isinstance(value, Tensor)
    number = None if tensor else _fill_number(value, loc)

    def checks():
        if tensor and value.shape:
            raise TorchError("RuntimeError", "index_fill_ only supports a 0-dimensional value tensor, but got tensor "
                                             f"with {len(value.shape)} dimension(s).")
        if idx.dtype != "int64":
            raise TorchError("IndexError", "index_fill_(): Expected dtype int64 for index.")
        d = dim_index(a["dim"], len(x.shape), loc)
        if len(idx.shape) > 1:
            raise TorchError("RuntimeError", "Index has to be a vector/scalar")
        n = _nonempty_size(x, d)
        bad = _out_of_bounds(rt, idx, -n, n, loc)
        if bad is not None:
            raise TorchError("IndexError", f"index {bad} is out of bounds for dimension {d} with size {n}")
        return d if tensor else (d, number)

    if tensor:
        return "index_fill_tensor", [x, value, idx], checks
    return "index_fill", [x, idx], checks


# ----------------------------------------------------------------------------- index_copy

def _slice_sizes(t: Tensor, d: int) -> str:
    """A shape without dim ``d`` as the meta function prints a ``std::vector``: space-separated."""
    sizes = list(t.shape)
    if sizes:
        del sizes[d]
    return " ".join(str(n) for n in sizes)


def _index_copy_call(rt, a, loc):
    """index_copy's meta function's checks, in its order (after the node packed the index and
    the source), the kernel's bounds, then the refusal of a slice named twice."""
    x, idx, source = a["input"], a["index"], a["source"]
    _float_input(x, "index_copy", loc)

    def checks():
        d = dim_index(a["dim"], len(x.shape), loc)
        if len(idx.shape) >= 2:
            raise TorchError("IndexError", f"index_copy_(): Index should have dimension 1 or 0 (got {len(idx.shape)})")
        count = int(np.prod(idx.shape)) if idx.shape else 1
        if not source.shape and count != 1:
            raise TorchError("IndexError", f"index_copy_(): When source is scalar, index should have one element (got "
                                           f"{count})")
        if source.shape and x.shape and len(source.shape) != len(x.shape):
            raise TorchError("IndexError", "index_copy_(): When source and destination are not scalars, their "
                                           f"dimensionality must match. Source dimensionality ({len(source.shape)}), "
                                           f"destination dimensionality ({len(x.shape)})")
        if idx.dtype != "int64":
            raise TorchError("RuntimeError", f"index_copy_(): Expected a long tensor for index, but got "
                                             f"{TYPE_NAMES[idx.dtype]}")
        if x.dtype != source.dtype:
            raise TorchError("RuntimeError", f"index_copy_(): self and source expected to have the same dtype, but got "
                                             f"(self) {TYPE_NAMES[x.dtype]} and (source) {TYPE_NAMES[source.dtype]}")
        if _slice_sizes(x, d).split() != _slice_sizes(source, d).split():
            raise TorchError("RuntimeError", "index_copy_(): Source/destination tensor must have same slice shapes. "
                                             f"Destination slice shape: {_slice_sizes(x, d)} at dimension {d} and source "
                                             f"slice shape: {_slice_sizes(source, d)} at dimension 0.")
        if source.shape and count != source.shape[d]:
            raise TorchError("IndexError", f"index_copy_(): Number of indices ({count}) should be equal to "
                                           f"source.size(dim) ({source.shape[d]})")
        n = _nonempty_size(x, d)
        bad = _out_of_bounds(rt, idx, 0, n, loc)
        if bad is not None:
            raise TorchError("IndexError", f"index_copy_(): index {bad} is out of bounds for dimension {d} with size "
                                           f"{n}")
        values = rt.B.as_indices(idx.value).reshape(-1)
        if len(np.unique(values)) != values.size:
            raise ProblemError(loc, "index_copy names one slice twice: PyTorch documents the result as "
                                    "nondeterministic (whichever copy lands last); use distinct indices")
        return d

    return "index_copy", [x, source, idx], checks


# ----------------------------------------------------------------------------- masked_scatter

def _expand_mask(mask: Tensor, x: Tensor) -> None:
    """``expand_inplace(self, mask)``: ``mask.expand(self.sizes())``'s errors."""
    if len(mask.shape) > len(x.shape):
        raise TorchError("RuntimeError", f"expand(CPUBoolType{{{list(mask.shape)}}}, size={list(x.shape)}): the number "
                                         f"of sizes provided ({len(x.shape)}) must be greater or equal to the number "
                                         f"of dimensions in the tensor ({len(mask.shape)})")
    from adjoint.engine.ops.views import expand_shape
    expand_shape([mask.shape], tuple(x.shape), None)


def _masked_scatter_call(inplace: bool):
    def call(rt, a, loc):
        """masked_scatter's checks in PyTorch's order, after the node packed the mask: out of place
        ``expand_outplace(mask, self)`` first; then masked_scatter__cpu's dtypes, the mask's
        dtype, (in place) ``expand_inplace``, and the kernel's count of source elements."""
        from adjoint.engine.ops.arith import broadcast_shapes
        x, mask, source = a["input"], a["mask"], a["source"]
        _float_input(x, "masked_scatter", loc)

        def checks():
            shape = tuple(x.shape) if inplace else tuple(broadcast_shapes(mask.shape, x.shape, loc))
            if x.dtype != source.dtype:
                raise TorchError("RuntimeError", "masked_scatter: expected self and source to have same dtypes but got"
                                                 f"{TYPE_NAMES[x.dtype]} and {TYPE_NAMES[source.dtype]}")
            if mask.dtype != "bool":
                raise TorchError("RuntimeError", "masked_scatter_ only supports boolean masks, but got mask with dtype "
                                                 f"{TYPE_NAMES[mask.dtype]}")
            if inplace:
                _expand_mask(mask, x)
            ones = int(np.count_nonzero(np.broadcast_to(rt.B.as_indices(mask.value).astype(bool), shape)))
            if ones > (int(np.prod(source.shape)) if source.shape else 1):
                raise TorchError("RuntimeError", "Number of elements of source < number of ones in mask")
            return None

        return "masked_scatter", [x, source, mask], checks
    call.__name__ = "_masked_scatter_call"
    return call


# ----------------------------------------------------------------------------- scatter_reduce

def _scatter_reduce_call(rt, a, loc):
    """scatter_reduce's checks, after ScatterReduceBackward0 packed the index, self and src
    (scatter_meta's: the dim, the index's dtype, self's and src's dtypes, the index's rank and
    sizes, then the kernel's bounds). prod, amax and amin with a src larger than the index are
    refused (PyTorch's backward compares src with index-shaped values)."""
    from adjoint.engine.bindings.indexing import _int_index, _scatter_checks
    x, idx, src, reduce = a["input"], a["index"], a["src"], a["reduce"]
    if reduce not in ("sum", "mean", "amax", "amin", "prod"):
        raise ProblemError(loc, f"scatter_reduce(reduce={reduce!r}) is not modelled; reduce='sum', 'prod', 'mean', "
                                "'amax' and 'amin' are")
    if reduce in ("amax", "amin", "prod") and src.shape != idx.shape:
        raise ProblemError(loc, f"scatter_reduce(reduce={reduce!r}) with a src larger than the index is not modelled "
                                "(PyTorch's backward compares src with the gathered result); cut src to the index's "
                                "shape")
    _float_input(x, "scatter_reduce", loc)
    if len(src.shape) != len(x.shape):
        raise ProblemError(loc, "scatter_reduce with a src of another rank than the input is not modelled; give src "
                                "the input's dims")

    def checks():
        d = dim_index(a["dim"], len(x.shape), loc)
        _int_index(idx, "scatter")
        if x.dtype != src.dtype:
            raise TorchError("RuntimeError", "scatter(): Expected self.dtype to be equal to src.dtype")
        _scatter_checks(rt, x, d, idx, loc, src)
        return d, reduce, bool(a["include_self"])

    return "scatter_reduce", [x, src, idx], checks


# ----------------------------------------------------------------------------- the names

_IN = Param("input", "tensor")
_SELF = Param("self", "tensor")
_DIM = Param("dim", "int")
_INDEX = Param("index", "tensor")
_VALUE = Param("value", "any")   # a number, float("inf"), or a 0-d tensor
_SOURCE = Param("source", "tensor")
_MASK = Param("mask", "tensor")

_REDUCE_ARGS = (_DIM, _INDEX, Param("src", "tensor"), Param("reduce", "str"),
                Param("include_self", "bool", True, keyword_only=True))

FUNCTIONS = (
    Function("scatter_reduce", (_IN,) + _REDUCE_ARGS, _out_of_place(_scatter_reduce_call),
             doc="ScatterReduceBackward0 (edges input, src; saves index, self, src, result): reduce 'sum' or 'mean'"),
    Function("scatter_reduce_", (_SELF,) + _REDUCE_ARGS, _in_place("scatter_reduce_", _scatter_reduce_call),
             where="method", doc="ScatterReduceBackward0 in place (rebases self; a view's base: CopySlices)"),
    Function("index_fill", (_IN, _DIM, _INDEX, _VALUE), _out_of_place(_index_fill_call),
             doc="IndexFillBackward0 (a number value; saves index) or IndexFillBackward1 (a 0-d tensor value; edges "
                 "input, value; saves index)"),
    Function("index_fill_", (_SELF, _DIM, _INDEX, _VALUE), _in_place("index_fill_", _index_fill_call), where="method",
             doc="IndexFillBackward0 / IndexFillBackward1 in place (rebases self; a view's base: CopySlices)"),
    Function("index_copy", (_IN, _DIM, _INDEX, _SOURCE), _out_of_place(_index_copy_call),
             doc="IndexCopyBackward0 (edges input, source; saves index, then source where its gradient may be "
                 "needed)"),
    Function("index_copy_", (_SELF, _DIM, _INDEX, _SOURCE), _in_place("index_copy_", _index_copy_call),
             where="method", doc="IndexCopyBackward0 in place (rebases self; a view's base: CopySlices)"),
    Function("masked_scatter", (_IN, _MASK, _SOURCE), _out_of_place(_masked_scatter_call(False)),
             doc="MaskedScatterBackward0 (edges input, source; saves mask): input and mask broadcast together"),
    Function("masked_scatter_", (_SELF, _MASK, _SOURCE), _in_place("masked_scatter_", _masked_scatter_call(True)),
             where="method", doc="MaskedScatterBackward0 in place (the mask expanded to self)"),
)
