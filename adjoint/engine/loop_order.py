"""An in-place op whose scalar loop reads elements it already wrote (PyTorch 2.13 CPU).

When an in-place op's operand aliases the written tensor in a layout PyTorch does not check
(adjoint.engine.inplace.refuse_order_dependent) and some element reads a place an earlier
element of the loop wrote, PyTorch's result is what its kernel's loop does. It is determined
when that loop is certainly TensorIterator's ``basic_loop`` (cpu_kernel_vec's scalar path:
``VectorizedLoop2d`` takes it when an operand of the innermost coalesced dim is neither
contiguous nor a lone broadcast scalar, and its vectorized path runs its remainder through it
when that dim has fewer than two vectors' elements -- 2 * 32 bytes, AVX2's width, the narrowest
this build dispatches): one thread (fewer than GRAIN_SIZE elements) visits the elements in
``iteration_rank`` order and each reads memory as it is then. Only elementwise kernels are
modelled this way (``ELEMENTWISE``); anything else stays refused.
"""

from __future__ import annotations

from adjoint.engine.graph import Tensor
from adjoint.values.strides import contiguous_strides, reorder_dimensions


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


#: at::internal::GRAIN_SIZE: a TensorIterator loop over fewer elements runs on one thread
GRAIN_SIZE = 32768


def broadcast_strides(t: Tensor, shape) -> tuple:
    """``t``'s strides as TensorIterator sees them for ``shape`` (0 where it broadcasts)."""
    strides = t.strides or contiguous_strides(t.shape)
    lead = len(shape) - len(t.shape)
    return (0,) * lead + tuple(0 if d == 1 and n != 1 else st for d, st, n in zip(t.shape, strides, shape[lead:]))


def iteration_rank(shape, operands: list):
    """The position of each element (row-major logical index) in TensorIterator's loop:
    reorder_dimensions' insertion sort (the first operand whose strides differ decides, a
    broadcast dim is skipped, equal strides put the smaller size first), innermost dim fastest."""
    import numpy as np
    nd = len(shape)
    slow_to_fast = loop_perm(shape, operands)[::-1]
    ranks = np.arange(_numel(shape), dtype=np.int64).reshape(tuple(shape[d] for d in slow_to_fast))
    return np.transpose(ranks, np.argsort(slow_to_fast)) if nd else ranks


def loop_perm(shape, operands: list) -> list:
    """TensorIterator's dims, innermost first (:func:`adjoint.values.strides.reorder_dimensions`)."""
    return reorder_dimensions(shape, operands)

#: in-place primitives whose kernel computes each element from the operands' same element
ELEMENTWISE = frozenset(("add", "sub", "mul", "div", "copy_"))

#: the narrowest vector PyTorch's CPU kernels use (bytes: AVX2; DEFAULT's Vectorized is 32 too)
VECTOR_BYTES = 32

_ITEMSIZE = {"float64": 8, "int64": 8, "float32": 4, "bool": 1}


def scalar_loop(prim, target: Tensor, inputs: list, written, read, rank, clash):
    """``reads``: for each element (row-major) the element whose new value it reads, or -1 --
    None when the loop is not certainly the scalar one in ``rank`` order."""
    if prim not in ELEMENTWISE:
        return None
    item = _ITEMSIZE.get(str(target.dtype))
    if item is None:
        return None
    shape = tuple(target.shape)
    operands = [broadcast_strides(target, shape)] + [broadcast_strides(x, shape) for x in inputs
                                                      if isinstance(x, Tensor) and len(x.shape) <= len(shape)]
    size, strides = _inner_dim(shape, operands)
    scalar_only = any(st not in (0, 1) for st in strides) or size < 2 * VECTOR_BYTES // item
    if not scalar_only:
        return None
    position = {a: k for k, a in enumerate(written.tolist())}
    reads = [-1] * len(written)
    for k, (r, own, m) in enumerate(zip(read.tolist(), rank.tolist(), clash.tolist())):
        if m:
            j = position[r]
            if rank[j] < own:
                reads[k] = j
    return reads


def _inner_dim(shape: tuple, operands: list) -> tuple:
    """TensorIterator's innermost dim after reorder_dimensions and coalesce_dimensions: its size
    and each operand's stride there (in elements)."""
    perm = [d for d in loop_perm(shape, operands) if shape[d] != 1]
    if not perm:
        return 1, tuple(0 for _ in operands)
    d0 = perm[0]
    size, strides = shape[d0], [st[d0] for st in operands]
    for d1 in perm[1:]:
        if all(st * size == o[d1] for st, o in zip(strides, operands)):
            size *= shape[d1]
        else:
            break
    return size, tuple(strides)


def sequential_operands(B, op, values: list, params, index: int, reads: list, shape: tuple) -> list:
    """The operand values each element of the scalar loop reads: the operand at ``index`` as it
    was, except where an element reads what an earlier element wrote (``reads``): that new value.
    Computed whole-tensor, one round per link of the longest chain of such reads."""
    import numpy as np
    n = len(reads)
    depth = [0] * n
    for k in sorted(range(n), key=lambda k: _chain_order(k, reads)):
        if reads[k] >= 0:
            depth[k] = depth[reads[k]] + 1
    ks = np.array([k for k in range(n) if reads[k] >= 0], dtype=np.int64)
    js = np.array([reads[k] for k in ks.tolist()], dtype=np.int64)
    old = B.reshape(B.broadcast_to(values[index], shape), (n,))
    current = list(values)
    current[index] = B.reshape(old, shape)
    for _ in range(max(depth)):
        new = B.reshape(op.forward(B, current, params), (n,))
        current[index] = B.reshape(B.assign(old, ks, B.index(new, js)), shape)
    return current


def _chain_order(k: int, reads: list) -> int:
    steps = 0
    while reads[k] >= 0:
        k = reads[k]
        steps += 1
    return steps
