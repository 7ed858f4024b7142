"""Advanced indexing and gathers: what PyTorch 2.13 runs for each (checked in real torch).

* ``x[idx]``, ``x[:, idx]``, ``x[mask]``, ``x[i, j]`` with int64 tensors, bool masks or lists of
  ints: ``THPVariable_getitem`` applies the ints, slices, ``None`` and ``...`` first (views:
  :func:`adjoint.engine.bindings.views.getitem`), then one ``index`` (``IndexBackward0``, saving the
  index tensors) with the tensors at the dims they stand at; a list of ints is an int64
  tensor; indices separated by a slice put their broadcast dims first (numpy's rule);
  out-of-range indices, float indices, masks of the wrong shape and indices that do not
  broadcast are PyTorch's IndexError (answers, after IndexBackward0 packed the indices);
* ``torch.index_select(input, dim, index)``: ``IndexSelectBackward0`` (a 1-d or 0-d int64
  index);
* ``torch.gather(input, dim, index)``: ``GatherBackward0`` (the index has input's number of
  dims, no larger than input apart from ``dim``);
* ``torch.scatter(input, dim, index, src)`` / ``value=``: ``ScatterBackward0`` /
  ``ScatterBackward1``; a target written twice is refused (PyTorch's result is then
  unspecified); ``torch.scatter_add``: ``ScatterAddBackward0``; ``torch.index_add(input, dim,
  index, source, *, alpha=1)``: ``IndexAddBackward0``; ``x.scatter_``, ``x.scatter_add_``,
  ``x.index_add_``: the same nodes in place (recorded or not: :func:`_in_place`);
* ``torch.argmax`` / ``argmin(input, dim=None, keepdim=False)``: no node, an int64 tensor (the
  first index among ties).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from adjoint.engine.pyfloat import is_int
from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.torch_errors import TorchError, TYPE_NAMES
from adjoint.engine.bindings.signature import Function
from adjoint.engine.bindings.signature import Param
from adjoint.engine.ops.indexing import IndexSpec, along_key, index_shape
from adjoint.engine.bindings.signature import PARSER_TYPE_ERROR, dim_index, after_packs


def as_index_tensor(rt, item, loc: Loc) -> Tensor:
    """A list index as the tensor PyTorch makes of it (a list of ints is an int64 tensor; a tensor
    index is taken as it is, and at::index checks its dtype after the packs)."""
    if isinstance(item, tuple) and item and all(is_int(v) for v in item):
        return rt.tensor(rt.B.integers([int(v) for v in item], (len(item),)), dtype="int64")
    raise ProblemError(loc, "an index list must be a flat list of integers, as in x[[2, 0]]; use an int64 tensor "
                            "for more dimensions")


def zero_d_indices(rt, items: list, loc: Loc) -> list:
    """A 0-d int64 tensor index is an int to applySlicing (a ``select``, no IndexBackward0)."""
    out = []
    for i in items:
        if isinstance(i, Tensor) and not i.shape:
            if i.dtype != "int64":
                raise ProblemError(loc, f"indexing with a 0-d {i.dtype} tensor is not modelled yet; index with an "
                                        "int64 tensor, a list or a bool mask with dimensions")
            i = int(rt.B.as_indices(i.value).reshape(-1)[0])
        out.append(i)
    return out


def _index_operands(rt, advanced: list, loc: Loc):
    """The dims, index tensors (a list of ints made one), their kinds ("bool" or "int") and each
    mask's count of True elements, of ``advanced`` ((dim of x, item) pairs)."""
    dims = [d for d, _ in advanced]
    tensors = [item if isinstance(item, Tensor) else as_index_tensor(rt, item, loc) for _, item in advanced]
    kinds = [t.dtype if t.dtype == "bool" else "int" for t in tensors]
    counts = [int(np.count_nonzero(rt.B.as_indices(t.value))) if t.dtype == "bool" else None for t in tensors]
    return dims, tensors, kinds, counts


def _broadcast_error(tensors: list, kinds: list, counts: list) -> TorchError | None:
    """at::index / index_put_'s IndexError when the indices (a mask as its count of True
    elements) do not broadcast together."""
    shapes = [tuple(t.shape) if kind == "int" else (c,) for t, kind, c in zip(tensors, kinds, counts)]
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        return TorchError("IndexError", "shape mismatch: indexing tensors could not be broadcast together with "
                                        "shapes " + ", ".join(str(list(s)) for s in shapes))
    return None


def advanced_index(rt, x: Tensor, advanced: list, loc: Loc) -> Tensor:
    """``x[...]``'s tensor indices, after the basic ones were applied: ``advanced`` is a list of
    (dim of ``x``, item)."""
    if len(advanced) > 3:
        raise ProblemError(loc, "indexing with more than three index tensors is not modelled yet")
    dims, tensors, kinds, counts = _index_operands(rt, advanced, loc)

    def checks():
        """at::index's own checks, in its order (types, masks, broadcast, bounds), PyTorch's
        IndexError: the kernel runs them after IndexBackward0 packed the indices."""
        for t in tensors:
            if t.dtype not in ("int64", "bool"):
                raise TorchError("IndexError", "tensors used as indices must be long, int, byte or bool tensors")
        check_masks(x, dims, tensors)
        error = _broadcast_error(tensors, kinds, counts)
        if error is not None:
            raise error
        check_bounds(rt, x, dims, tensors, kinds, loc)

    after_packs(rt, f"index_{len(tensors)}", [x] + tensors, loc, checks)
    spec = IndexSpec(tuple(dims), tuple(kinds), tuple(counts))
    return rt.apply(f"index_{len(tensors)}", [x] + tensors, spec, loc)


def index_put(rt, x: Tensor, advanced: list, value: Tensor, loc: Loc, accumulate: bool = False,
              inplace: bool = True, direct: bool = False):
    """``x[...] = value`` with tensor (or list) indices, after applySlicing applied the basic ones
    (``x`` is the view it made, or the tensor itself) and the value was viewed without its
    leading size-1 dims: ``index_put_(x, indices, value)``, as THPVariable_setitem dispatches it;
    also ``x.index_put_(indices, values, accumulate)`` and ``torch.index_put`` (``direct``:
    the indices stand at the first dims; ``inplace`` False: a new tensor).
    The checks are ``_index_put_impl_``'s, in its order, after IndexPutBackward0 packed the
    indices: (a direct call's) the number of indices, index dtypes, masks, the indices'
    broadcast, the value's shape, its dtype, the bounds; one bool mask and a one-element value
    without ``accumulate`` is ``masked_fill_`` (no shape or dtype check).
    Refused: more than three index tensors, a written tensor with internal overlap, a position
    written twice without ``accumulate`` with values that may differ (PyTorch's result is
    unspecified)."""
    from adjoint.engine.inplace import apply_inplace, check_inplace_allowed, has_internal_overlap
    from adjoint.engine.ops.indexing import index_key
    if len(advanced) > 3:
        raise ProblemError(loc, "assigning through more than three index tensors is not modelled yet")
    B = rt.B
    dims, tensors, kinds, counts = _index_operands(rt, advanced, loc)
    numel = int(np.prod(value.shape)) if value.shape else 1
    # canDispatchToMaskedFill
    as_fill = not accumulate and len(tensors) == 1 and tensors[0].dtype == "bool" and numel == 1
    prim = f"index_put_acc_{len(tensors)}" if accumulate else f"index_put_{len(tensors)}"

    def kernel_error():
        if direct and len(tensors) > len(x.shape):
            return TorchError("IndexError", f"too many indices for tensor of dimension {len(x.shape)} (got "
                                            f"{len(tensors)})")
        if not as_fill:
            for t in tensors:
                if t.dtype not in ("int64", "bool"):
                    return TorchError("IndexError", "tensors used as indices must be long, int, byte or bool tensors")
        try:
            check_masks(x, dims, tensors)
        except TorchError as e:
            return e
        if as_fill:
            return None
        error = _broadcast_error(tensors, kinds, counts)
        if error is not None:
            return error
        spec = IndexSpec(tuple(dims), tuple(kinds), tuple(counts))
        indexed = index_shape([x.shape] + [t.shape for t in tensors], spec, loc)
        try:
            if tuple(np.broadcast_shapes(tuple(value.shape), indexed)) != tuple(indexed):
                raise ValueError
        except ValueError:
            return TorchError("RuntimeError", f"shape mismatch: value tensor of shape {list(value.shape)} cannot be "
                                              f"broadcast to indexing result of shape {list(indexed)}")
        if value.dtype != x.dtype:
            return TorchError("RuntimeError", f"Index put requires the source and destination dtypes match, got "
                                              f"{TYPE_NAMES[x.dtype]} for the destination and "
                                              f"{TYPE_NAMES[value.dtype]} for the source.")
        try:
            check_bounds(rt, x, dims, tensors, kinds, loc)
        except TorchError as e:
            return e
        return None

    if has_internal_overlap(x):
        raise ProblemError(loc, "assigning through an index into a tensor whose elements share memory (an expanded "
                                "tensor, sum()'s gradient) is not modelled: PyTorch warns and writes the shared "
                                "locations; clone() it first")
    error = kernel_error()
    operands = [x, value] + tensors
    if error is not None:
        if inplace and rt.grad_enabled and (x.needs_grad or value.needs_grad
                                            or (x.is_view and x.grad_base.requires_grad)):
            check_inplace_allowed(x)   # check_inplace, before the node packs the indices
        rt.raise_after_packs(prim, operands, error, loc)
    spec = IndexSpec(tuple(dims), tuple(kinds), tuple(counts))
    if numel != 1 and not as_fill and not accumulate:
        key = index_key(len(x.shape), spec, [B.as_indices(t.value).astype(bool) if k == "bool" else B.as_indices(t.value)
                                             for t, k in zip(tensors, kinds)])
        written = np.arange(int(np.prod(x.shape)) if x.shape else 1).reshape(x.shape)[key].reshape(-1)
        if len(np.unique(written)) != written.size:
            raise ProblemError(loc, "an index names one position twice in an assignment (accumulate=False): "
                                    "PyTorch's result is then unspecified (whichever write lands last); use distinct "
                                    "indices, one value, or index_put_(..., accumulate=True)")
    if not inplace:   # index_put: self.clone(memory_format=preserve).index_put_(...), one node
        return rt.apply(prim, [x, value] + tensors, spec, loc)
    return apply_inplace(rt, prim, x, [value] + tensors, spec, loc)


def _index_put_call(rt, a, loc, inplace: bool):
    """``x.index_put_(indices, values, accumulate=False)``, ``torch.index_put`` and
    ``x.index_put``: the indices a tuple or list of index tensors standing at the first dims
    (a mask covering as many as it has)."""
    x, indices, values, accumulate = a["self" if "self" in a else "input"], a["indices"], a["values"], a["accumulate"]
    advanced, d = [], 0
    for t in indices:
        advanced.append((d, t))
        d += len(t.shape) if t.dtype == "bool" else 1
    if len(indices) == 0:
        raise ProblemError(loc, "index_put with no index tensors is not modelled")
    return index_put(rt, x, advanced, values, loc, accumulate=bool(accumulate), inplace=inplace, direct=True)


def lower_index_put_(rt, a, loc):
    return _index_put_call(rt, a, loc, True)


def lower_index_put(rt, a, loc):
    return _index_put_call(rt, a, loc, False)


def check_bounds(rt, x: Tensor, dims: list, tensors: list, kinds: list, loc: Loc) -> None:
    """The index kernel's bounds check, last, element by element in its iteration order: one
    vector index names its first bad value; several different bad values elsewhere are refused."""
    bad = []
    for k, (t, d, kind) in enumerate(zip(tensors, dims, kinds)):
        n = x.shape[d]
        bad += [(k, v, n) for v in ([] if kind == "bool" else rt.B.as_indices(t.value).reshape(-1).tolist())
                if not -n <= v < n]
    if len(tensors) == 1 and len(tensors[0].shape) == 1:
        bad = bad[:1]   # one vector index: the kernel meets its values in order (checked in torch)
    if len(set(bad)) > 1:
        values = ", ".join(str(v) for _, v, _ in sorted(set(bad)))
        raise ProblemError(loc, f"several index values are out of bounds ({values}): PyTorch names the one its "
                                "kernel meets first, not modelled; keep one bad value")
    for k, v, n in bad[:1]:
        raise TorchError("IndexError", f"index {v} is out of bounds for dimension {k} with size {n}")


def check_masks(x: Tensor, dims: list, tensors: list) -> None:
    """expandTensors' check of each bool mask against the dims it covers: PyTorch names the
    first mismatched dim of the mask (``at index j``) and the dim of ``x`` it stands for."""
    for d, t in zip(dims, tensors):
        if t.dtype != "bool":
            continue
        for j, n in enumerate(t.shape):
            if d + j >= len(x.shape) or x.shape[d + j] != n:
                raise TorchError("IndexError", f"The shape of the mask {list(t.shape)} at index {j} does not match "
                                               f"the shape of the indexed tensor {list(x.shape)} at index {d + j}")


def _int_index(idx: Tensor, what: str) -> None:
    """scatter_gather_dtype_check: an index that is not int64, after the node packed its inputs."""
    if idx.dtype != "int64":
        raise TorchError("RuntimeError", f"{what}(): Expected dtype int32/int64 for index")


def lower_index_select(rt, a, loc):
    x, idx = a["input"], a["index"]

    def checks():
        """index_select_out_cpu_'s, after IndexSelectBackward0 packed the index: the dim, a
        vector index, one value for a 0-d input, its dtype, the bounds."""
        d = dim_index(a["dim"], len(x.shape), loc)
        if len(idx.shape) > 1:
            raise TorchError("IndexError", "index_select(): Index is supposed to be a vector")
        numel = idx.shape[0] if idx.shape else 1
        if not x.shape and numel != 1:
            raise TorchError("RuntimeError", f"index_select(): Index to scalar can have only 1 value, got {numel} "
                                             "value(s)")
        if idx.dtype != "int64":
            raise TorchError("RuntimeError", "index_select(): Expected dtype int32 or int64 for index")
        n = _nonempty_size(x, d)
        if len(x.shape) > 1 and d == 1:   # index_select_out_cpu_dim1_'s own loop names the value
            bad = _out_of_bounds(rt, idx, 0, n, loc)
            if bad is not None:
                raise TorchError("RuntimeError", f"INDICES element is out of DATA bounds, id={bad} axis_dim={n}")
        elif any(not 0 <= v < n for v in rt.B.as_indices(idx.value).reshape(-1).tolist()):
            raise TorchError("IndexError", "index out of range in self")   # every other dim's loop (checked in torch)
        return d

    d = after_packs(rt, "index_select", [x, idx], loc, checks)
    return rt.apply("index_select", [x, idx], d, loc)


def _out_of_bounds(rt, idx: Tensor, low: int, n: int, loc: Loc):
    """The index value out of [low, n) the kernel names, None if every one is in; where several
    different values are out, which one the kernel meets first is its iteration's order: refused."""
    bad = [v for v in rt.B.as_indices(idx.value).reshape(-1).tolist() if not low <= v < n]
    if len(set(bad)) > 1:
        raise ProblemError(loc, f"indices {sorted(set(bad))} are out of bounds for a dim of size {n}: PyTorch "
                                "raises naming the one its kernel meets first, not modelled; keep one bad value")
    return bad[0] if bad else None


def _nonempty_size(t: Tensor, d: int) -> int:
    return t.shape[d] if t.shape else 1


def _scatter_checks(rt, x: Tensor, d: int, idx: Tensor, loc: Loc, src: Tensor | None) -> None:
    """scatter_meta's and scatter_add's, after the node packed the index: its dtype, then
    scatter_shape_check (rank, no larger than self apart from dim, no larger than src), then the
    kernel's bounds along dim."""
    _int_index(idx, "scatter")
    if max(len(x.shape), 1) != max(len(idx.shape), 1):
        raise TorchError("RuntimeError", "Index tensor must have the same number of dimensions as self tensor")
    if src is not None and len(src.shape) != len(x.shape):
        raise ProblemError(loc, f"scatter with a src of {len(src.shape)} dims into a tensor of {len(x.shape)} is not "
                                "modelled (PyTorch checks src's rank in an order adjoint does not follow); give src "
                                "the input's dims")
    wrong = any(k != d and _nonempty_size(idx, k) > _nonempty_size(x, k) for k in range(max(len(x.shape), 1)))
    if src is not None:
        wrong = wrong or any(_nonempty_size(idx, k) > _nonempty_size(src, k) for k in range(max(len(x.shape), 1)))
    if wrong:
        raise TorchError("RuntimeError", f"Expected index {list(idx.shape)} to be no larger than self {list(x.shape)} "
                                         f"apart from dimension {d}" + ("" if src is None else " and to be no larger "
                                         f"size than src {list(src.shape)}"))
    _check_dim_bounds(rt, idx, x, d, loc)


def _check_dim_bounds(rt, idx: Tensor, x: Tensor, d: int, loc: Loc) -> None:
    """gather's and scatter's kernel check of the index values along dim ``d`` of ``x``."""
    n = _nonempty_size(x, d)
    bad = _out_of_bounds(rt, idx, 0, n, loc)
    if bad is not None:
        raise TorchError("RuntimeError", f"index {bad} is out of bounds for dimension {d} with size {n}")


def lower_gather(rt, a, loc):
    x, idx = a["input"], a["index"]

    def checks():
        """gather's, in the kernel after GatherBackward0 packed index and self: the dim, the
        index's dtype, its rank, its sizes (the first dim too large named), its bounds."""
        d = dim_index(a["dim"], len(x.shape), loc)
        _int_index(idx, "gather")
        if len(idx.shape) != len(x.shape):
            raise TorchError("RuntimeError", "Index tensor must have the same number of dimensions as input tensor")
        for k, (i, s) in enumerate(zip(idx.shape, x.shape)):
            if k != d and i > s:
                raise TorchError("RuntimeError", f"Size does not match at dimension {k} expected index "
                                                 f"{list(idx.shape)} to be no larger than self {list(x.shape)} apart "
                                                 f"from dimension {d}")
        _check_dim_bounds(rt, idx, x, d, loc)
        return d

    d = after_packs(rt, "gather", [x, idx], loc, checks)
    return rt.apply("gather", [x, idx], d, loc)


def _no_repeats(rt, idx: Tensor, d: int, loc: Loc) -> None:
    ii = rt.B.as_indices(idx.value)
    cols = [np.broadcast_to(k, ii.shape).reshape(-1).tolist() for k in along_key(ii, d)]
    if len(set(zip(*cols))) != ii.size:
        raise ProblemError(loc, "scatter writes one position twice: PyTorch's result is then unspecified (whichever "
                                "write lands last); use scatter_add or distinct indices")


def _scatter_call(rt, a, loc):
    """scatter's primitive, operands and checks (the kernel's, then the refusal of a position
    written twice), for ``torch.scatter`` and ``x.scatter_``."""
    x, idx, src, value = a["input"], a["index"], a["src"], a["value"]
    if src is None and value is None:
        raise ProblemError(loc, "scatter() needs src (a tensor) or value (a number), as PyTorch does")
    if isinstance(src, Fraction):
        src, value = None, src
    if src is not None and not isinstance(src, Tensor):
        raise ProblemError(loc, f"scatter(): argument 'src' must be a Tensor: {PARSER_TYPE_ERROR}")

    if a["reduce"] is not None:
        return _scatter_legacy_reduce_call(rt, x, idx, src, value, a["reduce"], a["dim"], "self" in a, loc)

    def checks():
        d = dim_index(a["dim"], len(x.shape), loc)
        _scatter_checks(rt, x, d, idx, loc, src)
        _no_repeats(rt, idx, d, loc)
        return d if src is not None else (d, value)

    if src is not None:
        return "scatter", [x, src, idx], checks
    return "scatter_value", [x, idx], checks


def _scatter_legacy_reduce_call(rt, x: Tensor, idx: Tensor, src, value, reduce: str, dim: int, inplace: bool,
                                loc: Loc):
    """``scatter(dim, index, src | value, reduce='add' | 'multiply')`` (scatter.reduce,
    scatter.value_reduce; adjoint.engine.ops.index_write): derivatives.yaml has no formula, so a
    ``NotImplemented`` node (no saved tensor) whose backward raises, naming ``aten::scatter_`` in
    place. The src overload warns (TORCH_WARN_ONCE) in its meta function, before the checks:
    scatter's, then the reduce's name."""
    from adjoint.engine import warns
    if x.dtype in ("int64", "bool"):
        raise ProblemError(loc, f"scatter(..., reduce=) into a {x.dtype} tensor is not modelled; scatter into a "
                                "float tensor")
    if src is not None and len(src.shape) != len(x.shape):
        raise ProblemError(loc, "scatter(..., reduce=) with a src of another rank than the input is not modelled; "
                                "give src the input's dims")
    name = "scatter_" if inplace else "scatter"

    def checks():
        if src is not None:
            warns.warn_once(rt, "UserWarning", warns.SCATTER_REDUCE_DEPRECATED)
        d = dim_index(dim, len(x.shape), loc)
        _scatter_checks(rt, x, d, idx, loc, src)
        if reduce not in ("add", "multiply"):
            raise TorchError("RuntimeError", "reduce argument must be either add or multiply.")
        return (d, reduce, name) if src is not None else (d, reduce, value, name)

    if src is not None:
        return "scatter_legacy", [x, src, idx], checks
    return "scatter_legacy_value", [x, idx], checks


def _scatter_add_call(rt, a, loc):
    x, idx, src = a["input"], a["index"], a["src"]

    def checks():
        d = dim_index(a["dim"], len(x.shape), loc)
        _scatter_checks(rt, x, d, idx, loc, src)
        return d

    return "scatter_add", [x, src, idx], checks


def _index_add_checks(rt, x: Tensor, d: int, idx: Tensor, source: Tensor, alpha, loc: Loc) -> None:
    """index_func_meta_impl's, in its order, then index_add_cpu_out's bounds: an input of more
    than one dim added along its first or last dim with alpha 1 goes to scatter_add_ (its
    RuntimeError, the first value out in the index's order); any other, its own loop's
    IndexError "index out of range in self"."""
    if len(idx.shape) > 1:
        raise TorchError("IndexError", f"index_add_(): Index is supposed to be a vector, but got dim: "
                                       f"{len(idx.shape)} with type: {TYPE_NAMES[idx.dtype]} and size: "
                                       f"{list(idx.shape)}")
    if idx.dtype != "int64":
        raise TorchError("RuntimeError", f"index_add_(): Expected dtype int32/int64 for index but got: "
                                         f"{TYPE_NAMES[idx.dtype]}")
    if x.dtype != source.dtype:
        raise TorchError("RuntimeError", f"index_add_(): self ({TYPE_NAMES[x.dtype]}) and source "
                                         f"({TYPE_NAMES[source.dtype]}) must have the same scalar type")
    if not (d == 0 or d < len(source.shape)):
        raise TorchError("RuntimeError", f"index_add_(): Indexing dim {d} is out of bounds of the source tensor with "
                                         f"dim {len(source.shape)}")
    numel = idx.shape[0] if idx.shape else 1
    if not source.shape and numel != 1:
        raise ProblemError(loc, "index_add_ of a 0-d source with several indices is not modelled (PyTorch's message "
                                "itself fails); give the source the input's dims")
    if numel != _nonempty_size(source, d):
        raise TorchError("RuntimeError", f"index_add_(): Number of indices ({numel}) should be equal to "
                                         f"source.size(dim): ({source.shape[d]}), for dim: {d}")
    rest = (lambda t: [n for k, n in enumerate(t.shape) if k != d]) if x.shape and source.shape else \
        (lambda t: list(t.shape))
    if rest(x) != rest(source):
        raise TorchError("RuntimeError", "source tensor shape must match self tensor shape, excluding the specified "
                                         f"dimension. Got self.shape = {list(x.shape)} source.shape = "
                                         f"{list(source.shape)}")
    n = _nonempty_size(x, d)
    bad = [v for v in rt.B.as_indices(idx.value).reshape(-1).tolist() if not 0 <= v < n]
    if bad and len(x.shape) > 1 and d in (0, len(x.shape) - 1) and alpha == 1:
        raise TorchError("RuntimeError", f"index {bad[0]} is out of bounds for dimension {d} with size {n}")
    if bad:
        raise TorchError("IndexError", "index out of range in self")


def _index_add_call(rt, a, loc):
    x, idx, source, alpha = a["input"], a["index"], a["source"], a["alpha"]

    def checks():
        d = dim_index(a["dim"], len(x.shape), loc)
        _index_add_checks(rt, x, d, idx, source, alpha, loc)
        return d, alpha

    return "index_add", [x, source, idx], checks


def _out_of_place(call):
    """``torch.scatter``, ``scatter_add``, ``index_add``: one node (the kernel's checks raise
    after it packed what it saves), the result a new tensor."""

    def lower(rt, a, loc):
        prim, ins, checks = call(rt, a, loc)
        params = after_packs(rt, prim, ins, loc, checks)
        return rt.apply(prim, ins, params, loc)
    lower.__name__ = "lower_" + call.__name__[1:-5]
    return lower


lower_scatter = _out_of_place(_scatter_call)
lower_scatter_add = _out_of_place(_scatter_add_call)
lower_index_add = _out_of_place(_index_add_call)


def _in_place(name: str, call):
    """``x.scatter_(...)``, ``x.scatter_add_(...)``, ``x.index_add_(...)``.

    Where autograd records them (grad mode on, ``x`` or an operand requiring grad), as PyTorch's
    VariableType runs an in-place op: check_inplace (a leaf requiring grad, a view of one: its
    error, first), the out-of-place op's node (ScatterBackward0 / ScatterBackward1 /
    ScatterAddBackward0 / IndexAddBackward0: the same edges, the same saved tensors packed), the
    kernel's checks (their error after the packs), the write, one version bump and
    rebase_history (``x``'s grad_fn is the node; a view's base gets CopySlices).
    Where no node records them (grad mode off, as in a hook body, or nothing requiring grad):
    the out-of-place kernel's value (``self.clone().NAME(...)``: the same kernel, the same
    roundings, the same checks in their order) written into ``x`` with one version bump, as the
    in-place kernel bumps it once; ``x`` itself is returned.
    Into a tensor with internal overlap (sum's expanded gradient) or with an operand on ``x``'s
    memory (PyTorch's overlap checks), it is refused."""

    def lower(rt, a, loc):
        from adjoint.engine.inplace import apply_inplace, check_inplace_allowed, has_internal_overlap
        x = a["self"]
        prim, ins, checks = call(rt, dict(a, input=x), loc)
        records = rt.grad_enabled and any(t.needs_grad for t in ins)
        if records:
            check_inplace_allowed(x)
        root = x.base if x.base is not None else x
        if has_internal_overlap(x) or any((t.base if t.base is not None else t) is root for t in ins[1:]):
            raise ProblemError(loc, f"Tensor.{name}() into a tensor whose elements share memory, or from an operand on "
                                    "its memory: PyTorch's overlap checks are not modelled here; write into a clone")
        params = after_packs(rt, prim, ins, loc, checks)
        if records:
            return apply_inplace(rt, prim, x, ins[1:], params, loc)
        out = rt.apply(prim, [x] + ins[1:], params, loc)
        return apply_inplace(rt, "copy_", x, [out], None, loc)
    return lower


def lower_one_hot(rt, a, loc):
    """at::one_hot (Onehot.cpp): the index must be int64; then its smallest value at least 0;
    ``num_classes=-1`` is the largest value plus one, any other must exceed the largest value;
    the result is ``zeros(shape + (num_classes,), int64).scatter_(-1, self.unsqueeze(-1), 1)``:
    a new contiguous int64 tensor, no node (an index never requires grad)."""
    x, n = a["input"], a["num_classes"]
    if x.dtype != "int64":
        raise TorchError("RuntimeError", "one_hot is only applicable to index tensor of type LongTensor.")
    if 0 in x.shape:
        raise ProblemError(loc, "one_hot of an empty index tensor is not modelled (zero-size tensors are not)")
    values = rt.B.as_indices(x.value).reshape(-1)
    if int(values.min()) < 0:
        raise TorchError("RuntimeError", "Class values must be non-negative.")
    top = int(values.max())
    if n == -1:
        n = top + 1
    elif not n > top:
        raise TorchError("RuntimeError", "Class values must be smaller than num_classes.")
    n = int(n)
    out = np.zeros((values.size, n), dtype=np.int64)
    out[np.arange(values.size), values] = 1
    shape = tuple(x.shape) + (n,)
    return rt.tensor(rt.B.integers(out.reshape(-1).tolist(), shape), dtype="int64")


def _arg(largest: bool):
    def lower(rt, a, loc):
        x = a["input"]
        dim = a["dim"]
        d = None if dim is None else dim_index(dim, len(x.shape), loc)
        if x.shape and (x.shape[d] if d is not None else np.prod(x.shape)) == 0:
            raise ProblemError(loc, "argmax(): Expected reduction dim to be specified for input.numel() == 0")
        for t in (x,):
            if rt.B.is_symbolic(t.value):
                raise ProblemError(loc, f"{'argmax' if largest else 'argmin'} of values with free symbols: which "
                                        "element is selected depends on them; bind them under symbols:")
        return rt.apply("argmax", [x], (d, bool(a["keepdim"]), largest), loc)
    lower.__name__ = "lower_argmax" if largest else "lower_argmin"
    return lower


_IN = Param("input", "tensor")
_DIM = Param("dim", "int")
_INDEX = Param("index", "tensor")
_SELF = Param("self", "tensor")

FUNCTIONS = (
    Function("index_select", (_IN, _DIM, _INDEX), lower_index_select,
             doc="IndexSelectBackward0 (saves index)"),
    Function("gather", (_IN, _DIM, _INDEX, Param("sparse_grad", "bool", False, keyword_only=True)), lower_gather,
             doc="GatherBackward0 (saves index, self)"),
    Function("scatter", (_IN, _DIM, _INDEX, Param("src", "any", None), Param("value", "number", None, keyword_only=True),
                         Param("reduce", "str", None, keyword_only=True)), lower_scatter,
             doc="ScatterBackward0 (src; edges input, src), ScatterBackward1 (value); saves index"),
    Function("scatter_add", (_IN, _DIM, _INDEX, Param("src", "tensor")), lower_scatter_add,
             doc="ScatterAddBackward0 (edges input, src; saves index)"),
    Function("index_add", (_IN, _DIM, _INDEX, Param("source", "tensor"),
                           Param("alpha", "number", Fraction(1), keyword_only=True)), lower_index_add,
             doc="IndexAddBackward0 (edges input, source; saves index, source)"),
    Function("scatter_", (_SELF, _DIM, _INDEX, Param("src", "any", None), Param("value", "number", None, keyword_only=True),
                          Param("reduce", "str", None, keyword_only=True)),
             _in_place("scatter_", _scatter_call), where="method",
             doc="ScatterBackward0 / ScatterBackward1 in place (rebases self; a view's base: CopySlices); "
                 "unrecorded: scatter's value written in place, one version bump"),
    Function("scatter_add_", (_SELF, _DIM, _INDEX, Param("src", "tensor")),
             _in_place("scatter_add_", _scatter_add_call), where="method",
             doc="ScatterAddBackward0 in place (rebases self; a view's base: CopySlices); unrecorded: "
                 "scatter_add's value written in place, one version bump"),
    Function("index_add_", (_SELF, _DIM, _INDEX, Param("source", "tensor"),
                            Param("alpha", "number", Fraction(1), keyword_only=True)),
             _in_place("index_add_", _index_add_call), where="method",
             doc="IndexAddBackward0 in place (rebases self; a view's base: CopySlices); unrecorded: "
                 "index_add's value written in place, one version bump"),
    Function("index_put_", (Param("self", "tensor"), Param("indices", "tensors"), Param("values", "tensor"),
                            Param("accumulate", "bool", False)), lower_index_put_, where="method",
             doc="IndexPutBackward0 in place (edges self, values; saves the indices)"),
    Function("index_put", (_IN, Param("indices", "tensors"), Param("values", "tensor"),
                           Param("accumulate", "bool", False)), lower_index_put,
             doc="IndexPutBackward0 (edges input, values; saves the indices)"),
    Function("one_hot", (_IN, Param("num_classes", "int", -1)), lower_one_hot, where="function",
             doc="no node: a new int64 tensor, zeros(shape + (num_classes,)).scatter_(-1, input.unsqueeze(-1), 1)"),
    Function("argmax", (_IN, Param("dim", "int", None), Param("keepdim", "bool", False)), _arg(True),
             doc="no node: an int64 tensor (ties: the first index)"),
    Function("argmin", (_IN, Param("dim", "int", None), Param("keepdim", "bool", False)), _arg(False),
             doc="no node: an int64 tensor (ties: the first index)"),
)
