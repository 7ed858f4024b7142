"""What ``native_batch_norm_backward`` on the CPU reads as its gradient (PyTorch 2.13).

``batch_norm_backward_cpu_template`` takes its fast path when the input and the gradient are
each contiguous in some format (``is_contiguous()`` or channels-last) and both *suggest* the
same memory format; the fast kernel then walks the gradient's memory with the input's order.
``suggest_memory_format`` falls back to NCHW in ambiguous cases (pytorch#63224), so a gradient
that is channels-last contiguous only thanks to a size-1 dimension -- the CPU flash attention
backward's (batch, length, heads, E) layout with E = 1, reaching a batch norm in eval or
training mode -- passes the check while its memory is not in NCHW order: the kernel reads its
elements as if it were, mixing channels (probed on 2.13: the bias gradient of a gradient laid
out with strides (4, 1, 2, 1) sums [1, 3] and [2, 4] instead of [1, 2] and [3, 4]). The slow
path reads by strides and is right; so is every gradient already in the input's order.
"""

from __future__ import annotations

from adjoint.values.strides import (channels_last_contiguous, contiguous_strides, is_contiguous,
                                    suggest_memory_format)

#: the channels-last order of a 4-D / 5-D tensor, slowest first (N H W C / N D H W C)
_CL_SLOW_FIRST = {4: (0, 2, 3, 1), 5: (0, 2, 3, 4, 1)}


def _any_contiguous(shape, strides) -> bool:
    return is_contiguous(shape, strides) or channels_last_contiguous(shape, strides)


def grad_as_read(B, g, g_strides: tuple | None, x_shape: tuple, x_strides: tuple | None):
    """The gradient ``g`` as the batch norm backward kernel reads it, given its strides and the
    input's (None: row-major). Unchanged unless the fast path reads it in another order."""
    shape = tuple(x_shape)
    if g is None or g_strides is None or len(shape) not in _CL_SLOW_FIRST:
        return g
    x_strides = tuple(x_strides) if x_strides else contiguous_strides(shape)
    g_strides = tuple(g_strides)
    if not (_any_contiguous(shape, x_strides) and _any_contiguous(shape, g_strides)
            and suggest_memory_format(shape, x_strides) == suggest_memory_format(shape, g_strides)):
        return g   # the TensorIterator path: it reads by strides
    order = (tuple(range(len(shape))) if is_contiguous(shape, x_strides)   # the contiguous kernel
             else _CL_SLOW_FIRST[len(shape)])                              # the channels-last one
    in_memory = tuple(sorted(range(len(shape)), key=lambda d: -g_strides[d]))
    if _same_order(shape, in_memory, order):
        return g
    numel = 1
    for d in shape:
        numel *= d
    memory = B.reshape(B.permute(g, in_memory), (numel,))          # g's elements in storage order
    read = B.reshape(memory, tuple(shape[d] for d in order))        # walked in the input's order
    back = tuple(order.index(d) for d in range(len(shape)))
    return B.permute(read, back) if order != tuple(range(len(shape))) else read


def _same_order(shape, a: tuple, b: tuple) -> bool:
    """Two slowest-first dim orders that lay the elements out alike (size-1 dims do not count)."""
    return [d for d in a if shape[d] != 1] == [d for d in b if shape[d] != 1]

