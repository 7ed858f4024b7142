"""Strides: where PyTorch's dispatch depends on memory layout, the layout is modelled.

``reshape`` is a view when the strides allow it and a copy (``clone`` then ``_unsafe_view``)
when they do not; ``contiguous()`` returns the tensor itself or a ``clone``; ``view`` of a
non-contiguous tensor can fail. Values are kept dense; only strides (and the storage offset
of views, for ``as_strided``) are tracked, computed as PyTorch computes them.
"""

from __future__ import annotations


def contiguous_strides(shape) -> tuple[int, ...]:
    strides = []
    acc = 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= max(d, 1)
    return tuple(reversed(strides))


def _dense_in_order(shape, strides, order) -> bool:
    """Are the dims, taken in ``order`` (fastest first), laid out densely? Size-1 dims do not count."""
    expected = 1
    for d in order:
        if shape[d] == 1:
            continue
        if strides[d] != expected:
            return False
        expected *= shape[d]
    return True


def is_contiguous(shape, strides) -> bool:
    """TensorImpl::compute_contiguous: size-1 dimensions do not count."""
    return _dense_in_order(shape, strides, range(len(shape) - 1, -1, -1))


def view_as_strides(shape, strides) -> tuple[int, ...]:
    """The strides of ``t.view_as(t)``, which a custom Function (BackwardHookFunction too) hands
    back for an input it returns as is (``_wrap_outputs``): ``view`` recomputes them, so a size-1
    dim gets a contiguous tensor's stride -- (1, 3, 2) with strides (2, 2, 1) comes back (6, 2, 1),
    which decides whether a later matmul folds its batch into mm or expands it for bmm."""
    if not strides:
        return strides
    new = view_strides(tuple(shape), tuple(strides), tuple(shape))
    return new if new is not None else strides


def view_strides(shape, strides, new_shape) -> tuple[int, ...] | None:
    """at::detail::computeStride: the strides of ``view(new_shape)``, or None when no view exists."""
    numel = 1
    for d in shape:
        numel *= d
    if numel == 0:
        return contiguous_strides(new_shape)
    if not shape:  # a 0-d tensor views as any shape of one element
        return (1,) * len(new_shape)
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride = strides[-1] if strides else 1
    tensor_numel = 1
    view_numel = 1
    for tensor_d in range(len(shape) - 1, -1, -1):
        tensor_numel *= shape[tensor_d]
        if tensor_d == 0 or (shape[tensor_d - 1] != 1 and strides[tensor_d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = strides[tensor_d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(new_strides)


def permuted(strides, perm) -> tuple[int, ...]:
    return tuple(strides[p] for p in perm)


def unsqueezed(shape, strides, dim: int) -> tuple[int, ...]:
    new = 1 if dim >= len(shape) else shape[dim] * strides[dim]
    return tuple(strides[:dim]) + (new,) + tuple(strides[dim:])


def expanded(shape, strides, new_shape) -> tuple[int, ...]:
    lead = len(new_shape) - len(shape)
    out = []
    for i, n in enumerate(new_shape):
        j = i - lead
        if j < 0 or (shape[j] == 1 and n != 1):
            out.append(0)
        else:
            out.append(strides[j])
    return tuple(out)


def is_non_overlapping_and_dense(shape, strides) -> bool:
    """TensorImpl::compute_non_overlapping_and_dense: some permutation of the dims is contiguous."""
    if len(shape) == 1:
        return shape[0] < 2 or strides[0] == 1
    return _dense_in_order(shape, strides, sorted(range(len(shape)), key=lambda d: (strides[d], shape[d])))


#: the channels-last dim order of a 4-D tensor (N C H W), fastest first; TensorIterator's fast
#: setup asks only for this one (not channels_last_3d)
_CHANNELS_LAST = {4: (1, 3, 2, 0)}


def _channels_last(shape, strides) -> bool:
    """is_contiguous(memory_format=channels_last): size-1 dims do not count."""
    order = _CHANNELS_LAST.get(len(shape))
    return order is not None and _dense_in_order(shape, strides, order)


#: the channels-last orders c10 knows, fastest first: ChannelsLast (4-D), ChannelsLast3d (5-D)
_CHANNELS_LAST_ANY = {4: (1, 3, 2, 0), 5: (1, 4, 3, 2, 0)}


def channels_last_contiguous(shape, strides) -> bool:
    """is_contiguous(ChannelsLast) of a 4-D tensor, or is_contiguous(ChannelsLast3d) of a 5-D one."""
    order = _CHANNELS_LAST_ANY.get(len(shape))
    return order is not None and _dense_in_order(shape, strides, order)


def strides_like_channels_last(shape, strides) -> bool:
    """c10's is_channels_last_strides_2d_s4 / _3d_s5 (what suggest_memory_format asks): the dims in
    channels-last order have non-decreasing strides, each at least the one before times its size;
    ambiguous cases (an N111 tensor, a 1C1W permutation, a trivial C) fall back to NCHW. So a tensor
    can be channels-last contiguous and yet suggest Contiguous (pytorch#63224)."""
    order = _CHANNELS_LAST_ANY.get(len(shape))
    if order is None or strides[1] == 0:
        return False
    low = 0
    for d in order:
        if shape[d] == 0 or strides[d] < low:
            return False
        if d == 0 and low == strides[1]:
            return False
        low = strides[d] * (shape[d] if shape[d] > 1 else 1)
    return True


def suggest_memory_format(shape, strides) -> str:
    """TensorBase::suggest_memory_format of a strided tensor: ``"channels_last"`` or ``"contiguous"``."""
    return "channels_last" if strides_like_channels_last(shape, strides) else "contiguous"


def preserve_format_strides(shape, strides) -> tuple[int, ...]:
    """The strides of ``at::clone(src)`` (``memory_format=torch.preserve_format``): ``src``'s own
    when it is non-overlapping and dense (``empty_strided`` with them), else ``empty_like``'s --
    channels-last when ``src`` suggests it, else row-major."""
    shape, strides = tuple(shape), tuple(strides)
    if is_non_overlapping_and_dense(shape, strides):
        return strides
    if suggest_memory_format(shape, strides) == "channels_last":
        return _ordered_strides(shape, _CHANNELS_LAST_ANY[len(shape)])
    return contiguous_strides(shape)


def _ordered_strides(shape, order) -> tuple[int, ...]:
    strides = [0] * len(shape)
    acc = 1
    for d in order:
        strides[d] = acc
        acc *= max(shape[d], 1)
    return tuple(strides)


def iterator_strides(operands: list, shape) -> tuple[int, ...]:
    """The strides TensorIterator gives an elementwise op's result of ``shape`` from its tensor
    operands ``[(shape, strides), ...]`` (wrapped numbers as 0-d): when every operand has the
    result's shape, contiguous if all are, channels-last if all are, else the operands' own
    strides if all share them and are dense (compute_fast_setup_type); otherwise the dims ordered by the operands' strides
    (reorder_dimensions: broadcast dims ignored, ties to the smaller size) and laid out
    contiguously in that order. A permuted input thus gives a permuted result."""
    shape = tuple(shape)
    nd = len(shape)
    if nd == 0 or not operands:
        return contiguous_strides(shape)
    if all(tuple(s) == shape for s, _ in operands):
        if all(is_contiguous(s, st) for s, st in operands):
            return contiguous_strides(shape)
        if all(_channels_last(s, st) for s, st in operands):
            return _ordered_strides(shape, _CHANNELS_LAST[nd])
        first = tuple(operands[0][1])
        if all(is_non_overlapping_and_dense(s, st) for s, st in operands) and \
                all(tuple(st) == first for _, st in operands):
            return first
    aligned = []
    for s, st in operands:
        off = nd - len(s)
        b = [0] * nd
        for i, n in enumerate(s):
            b[off + i] = 0 if (n == 1 and shape[off + i] != 1) else st[i]
        aligned.append(b)
    return _ordered_strides(shape, reorder_dimensions(shape, aligned))


def reorder_dimensions(shape, aligned: list) -> list:
    """TensorIterator's reorder_dimensions: the dims, fastest-moving first, by an insertion sort
    over the operands' strides ``aligned`` (each as long as ``shape``, 0 where it broadcasts):
    the first operand whose strides differ decides, a broadcast dim is skipped, equal strides put
    the smaller size first."""
    nd = len(shape)

    def should_swap(d0: int, d1: int) -> int:
        for b in aligned:
            s0, s1 = b[d0], b[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 < s1:
                return -1
            if s0 > s1:
                return 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    perm = list(range(nd - 1, -1, -1))      # perm[0]: the fastest-moving dim
    for i in range(1, nd):
        dim1 = i
        for dim0 in range(i - 1, -1, -1):
            c = should_swap(perm[dim0], perm[dim1])
            if c > 0:
                perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
                dim1 = dim0
            elif c < 0:
                break
    return perm
