"""Index assignment, ``x[items] = value``, as ``THPVariable_setitem`` runs it: ``copy_`` (or
``fill_``) into the view indexing gives, and a lone full slice writes into ``x`` itself; with
tensor or list indices, ``index_put_`` (IndexPutBackward0) on the view the other items give."""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine import warns
from adjoint.engine.inplace import apply_inplace, has_internal_overlap
from adjoint.engine.ops.views import expand_shape
from adjoint.engine.torch_errors import TorchError
from adjoint.engine.pylist import PyList, sequence_name
from adjoint.engine.bindings.views import _EXPAND_TYPE_NAMES
from adjoint.engine.bindings.views import basic_items, getitem, view


def _whole(shape: tuple, items: list) -> bool:
    """Do ``items`` (slices and ``...`` only) cover every element of a tensor of ``shape``?"""
    if any(not (isinstance(i, slice) or i is Ellipsis) for i in items) or sum(i is Ellipsis for i in items) > 1:
        return False
    dims = [i for i in items if i is not Ellipsis]
    if len(dims) > len(shape):
        return False
    at = 0
    for i in items:
        if i is Ellipsis:
            at += len(shape) - len(dims)
            continue
        # as applySlice tests it: the start as written (a negative one is not normalized first)
        if i.step not in (None, 1) or (i.start or 0) != 0 or (i.stop is not None and i.stop < shape[at]):
            return False
        at += 1
    return True


def setitem(rt, x, items: list, value, loc: Loc) -> None:
    """``x[items] = value``: copy_ into the view indexing gives (x itself for a lone full slice);
    ``kwargs["key"] = value`` stores into the dict. A tuple (a hook's ``grad_input``), a ``torch.return_types`` value or None has no item
    assignment: Python's TypeError."""
    if (isinstance(x, tuple) and not isinstance(x, PyList)) or x is None:
        raise TorchError("TypeError", f"'{sequence_name(x) if x is not None else 'NoneType'}' object does not support "
                                      "item assignment", "python")
    if isinstance(x, dict):
        # a with_kwargs hook's kwargs: Python's dict store. _call_impl hands the hook the dict it
        # then calls forward(**kwargs) with, so a forward_pre hook's kwargs["bias"] = v reaches the
        # forward even when the hook returns None
        if len(items) != 1 or not isinstance(items[0], str):
            raise ProblemError(loc, "a dict takes one string key here, as in kwargs[\"bias\"] = 2 * kwargs[\"bias\"]")
        x[items[0]] = value
        return
    if not isinstance(x, Tensor):
        raise ProblemError(loc, "only tensors and a hook's kwargs support index assignment here")
    if isinstance(value, Fraction):
        value = rt.tensor(rt.B.scalar(value), dtype=x.dtype)
    if not isinstance(value, Tensor):
        raise ProblemError(loc, "index assignment needs a tensor or a number on the right")
    if len(items) == 1 and _filled_by_mask(rt, x, items[0], value):
        # x[mask] = v with a bool mask of x's shape and one value, where no node is recorded (a hook
        # body in the backward, under no_grad): index_put_ writes what masked_fill_ writes, with one
        # version bump and the same overlap check
        from adjoint.engine.bindings.masking import masked_fill
        if has_internal_overlap(x):   # index_put_ warns, then hands a bool mask to masked_fill_ (which warns too)
            warns.warn(rt, "UserWarning", warns.INDEX_PUT_EXPANDED)
        masked_fill(rt, x, items[0], value, loc, inplace=True)
        return
    if any(isinstance(i, (Tensor, tuple)) for i in items):
        if any(isinstance(i, Tensor) and not i.shape for i in items):
            from adjoint.engine.bindings.indexing import zero_d_indices
            items = zero_d_indices(rt, items, loc)   # a 0-d int64 tensor is an int to applySlicing
    if any(isinstance(i, (Tensor, tuple)) for i in items):
        # applySlicing's views, then index_put_ on what they give (x itself when none applies)
        from adjoint.engine.bindings.indexing import index_put
        sliced, advanced = basic_items(rt, x, items, loc)
        if sliced is not x:
            sliced.temporary = True
        kept = list(value.shape)
        while kept and kept[0] == 1:   # slicePrefix1sSize: a ViewBackward0 only when a dim is dropped
            kept.pop(0)
        if len(kept) != len(value.shape):
            value = view(rt, value, tuple(kept), loc)
        index_put(rt, sliced, advanced, value, loc)
        return
    if not x.shape and len(items) == 1 and (isinstance(items[0], slice) or type(items[0]) is int):
        # set_item's lone int (applySelect) or slice (slice()) on a 0-d tensor: THPVariable_getitem's
        # IndexError, which getitem raises for a lone item
        getitem(rt, x, items, loc, lone=True)
    # set_item's applySlicing skips a slice over a whole dimension (applySlice's optimization,
    # not disabled for assignment): when every item is one (or ...), the write goes into x itself
    target = x if _whole(x.shape, items) else getitem(rt, x, items, loc, lone=False)
    apply_inplace(rt, *_copy_to(rt, target, value, loc), loc)


def _filled_by_mask(rt, x: Tensor, item, value: Tensor) -> bool:
    """``x[item] = value`` is a masked fill: grad mode off (no IndexPutBackward0 to record), ``item``
    a bool tensor of ``x``'s shape, ``value`` a 0-d tensor that needs no gradient."""
    return (not rt.grad_enabled and isinstance(item, Tensor) and item.dtype == "bool"
            and tuple(item.shape) == tuple(x.shape) and not value.shape and not value.requires_grad)


def _copy_to(rt, dst: Tensor, src: Tensor, loc: Loc) -> tuple:
    """set_item's ``copy_to`` (torch/csrc/autograd/python_variable_indexing.cpp): the same sizes
    are a plain ``copy_``; else a value without dimensions (a number, a 0-d tensor) is ``fill_``
    (FillBackward3); else the value is first viewed without its leading size-1 dimensions
    (``slicePrefix1sSize``: a ViewBackward0, even when nothing is dropped) and expanded to the
    destination's sizes when they still differ (``expand_inplace``: an ExpandBackward0). Returns
    the in-place primitive, its target and its operands."""
    if src.shape == dst.shape:
        return "copy_", dst, [src], None
    if not src.shape:
        return "fill_", dst, [src], None
    kept = list(src.shape)
    while kept and kept[0] == 1:
        kept.pop(0)
    src = view(rt, src, tuple(kept), loc)
    if src.shape != dst.shape:
        # expand_inplace: PyTorch's RuntimeError, an answer, where the value does not expand to the destination
        if len(dst.shape) < len(src.shape):
            if src.dtype not in _EXPAND_TYPE_NAMES:
                raise ProblemError(loc, f"a value of shape {list(src.shape)} does not fit the indexed part, of shape "
                                        f"{list(dst.shape)}: PyTorch's message names a {src.dtype} tensor's type, "
                                        "not modelled")
            raise TorchError("RuntimeError", f"expand({_EXPAND_TYPE_NAMES[src.dtype]}{{{list(src.shape)}}}, "
                                             f"size={list(dst.shape)}): the number of sizes provided "
                                             f"({len(dst.shape)}) must be greater or equal to the number of "
                                             f"dimensions in the tensor ({len(src.shape)})")
        src = rt.apply("expand", [src], expand_shape([src.shape], dst.shape, loc), loc)
    return "copy_", dst, [src], None
