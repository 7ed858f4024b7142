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


def is_contiguous(shape, strides) -> bool:
    """TensorImpl::compute_contiguous: size-1 dimensions do not count."""
    expected = 1
    for d, s in zip(reversed(shape), reversed(strides)):
        if d == 1:
            continue
        if s != expected:
            return False
        expected *= d
    return True


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
