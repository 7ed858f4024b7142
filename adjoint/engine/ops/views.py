"""Views and copies: select, slice, transpose, permute, expand, unsqueeze, squeeze, split,
unbind, the view PyTorch regenerates after an in-place write (``as_strided``), clone, cat,
stack, advanced indexing and ``copy_``.

A view's output shares its input's storage and version counter (``Op.view``); ``layout``
gives its strides as PyTorch computes them, and ``scatter`` writes a new value of the view
back into its input (what an in-place op on the view does to the base). Their derivatives
put the gradient back where the view took its elements from (zeros elsewhere).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.engine.torch_errors import TorchError
from adjoint.format.errors import ProblemError
from adjoint.values.strides import expanded, permuted, unsqueezed
from adjoint.values.mathtree import (TT, Fn, TConst, TFn, TSub, generic_vjp, no_gradient, number, number_text, reshaped, shape_text,
                                     sum_to)
from adjoint.engine.ops.record import Check, Math, Op


def _norm_dim(d: int, n: int) -> int:
    return d + n if d < 0 else d


# ----------------------------------------------------------------------------- index keys

def select_key(ndim: int, p) -> tuple:
    dim, index = p
    return (slice(None),) * dim + (index,)


def slice_key(ndim: int, p) -> tuple:
    dim, start, end, step = p
    return (slice(None),) * dim + (slice(start, end, step),)


# ----------------------------------------------------------------------------- select and slice

def select_shape(shapes, p, loc):
    dim, index = p
    s = shapes[0]
    return tuple(s[:dim]) + tuple(s[dim + 1:])


def select_forward(B, ins, p):
    return B.index(ins[0], select_key(len(B.shape(ins[0])), p))


def select_vjp(B, gs, ins, outs, p, need):
    shape = B.shape(ins[0])
    return [B.place(shape, select_key(len(shape), p), gs[0])]


def select_scatter(B, base, new, p):
    return B.assign(base, select_key(len(B.shape(base)), p), new)


def select_layout(shape, strides, offset, p):
    dim, index = p
    return tuple(strides[:dim]) + tuple(strides[dim + 1:]), offset + index * strides[dim]


def slice_shape(shapes, p, loc):
    dim, start, end, step = p
    s = list(shapes[0])
    s[dim] = len(range(start, end, step))
    return tuple(s)


def slice_forward(B, ins, p):
    return B.index(ins[0], slice_key(len(B.shape(ins[0])), p))


def slice_vjp(B, gs, ins, outs, p, need):
    shape = B.shape(ins[0])
    return [B.place(shape, slice_key(len(shape), p), gs[0])]


def slice_scatter(B, base, new, p):
    return B.assign(base, slice_key(len(B.shape(base)), p), new)


def slice_layout(shape, strides, offset, p):
    dim, start, end, step = p
    s = list(strides)
    s[dim] = strides[dim] * step
    return tuple(s), offset + start * strides[dim]


# ----------------------------------------------------------------------------- transpose, permute, t

def permute_shape(shapes, p, loc):
    return tuple(shapes[0][d] for d in p)


def permute_forward(B, ins, p):
    return B.permute(ins[0], tuple(p))


def _inverse(perm) -> tuple:
    inv = [0] * len(perm)
    for i, d in enumerate(perm):
        inv[d] = i
    return tuple(inv)


def permute_vjp(B, gs, ins, outs, p, need):
    return [B.permute(gs[0], _inverse(p))]


def permute_scatter(B, base, new, p):
    return B.permute(new, _inverse(p))


def permute_layout(shape, strides, offset, p):
    return permuted(strides, p), offset


def transpose_perm(ndim: int, p) -> tuple:
    """The permutation ``transpose(d0, d1)`` is: none for a 0-d tensor (its dims 0 and -1, wrapped
    as a 1-d one's, name no dim: PyTorch's TransposeBackward0 of the tensor as it is)."""
    if ndim == 0:
        return ()
    d0, d1 = p
    perm = list(range(ndim))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return tuple(perm)


def transpose_shape(shapes, p, loc):
    return permute_shape(shapes, transpose_perm(len(shapes[0]), p), loc)


def transpose_forward(B, ins, p):
    return B.permute(ins[0], transpose_perm(len(B.shape(ins[0])), p))


def transpose_vjp(B, gs, ins, outs, p, need):
    return [B.permute(gs[0], transpose_perm(len(B.shape(gs[0])), p))]


def transpose_scatter(B, base, new, p):
    return B.permute(new, transpose_perm(len(B.shape(new)), p))


def transpose_layout(shape, strides, offset, p):
    return permuted(strides, transpose_perm(len(shape), p)), offset


# ----------------------------------------------------------------------------- diagonal

def diagonal_length(shape, p) -> int:
    """The diagonal's length: at::diagonal's, never below 0 (an offset past the end: empty)."""
    offset, d1, d2 = p
    if offset >= 0:
        return max(min(shape[d1], shape[d2] - offset), 0)
    return max(min(shape[d1] + offset, shape[d2]), 0)


def _diagonal_parts(shape, p):
    """``diagonal(offset, d1, d2)`` as numpy sees it: the permutation putting the other dims first
    (in order), then ``d1``, ``d2``; and the key picking the diagonal from that permuted tensor
    (two adjacent index arrays at the end, so the diagonal is the last dim, as in PyTorch)."""
    import numpy as np
    offset, d1, d2 = p
    others = [d for d in range(len(shape)) if d not in (d1, d2)]
    n = diagonal_length(shape, p)
    rows = np.arange(n) + max(-offset, 0)
    cols = np.arange(n) + max(offset, 0)
    return tuple(others) + (d1, d2), (slice(None),) * len(others) + (rows, cols)


def diagonal_shape(shapes, p, loc):
    offset, d1, d2 = p
    s = tuple(shapes[0])
    return tuple(n for d, n in enumerate(s) if d not in (d1, d2)) + (diagonal_length(s, p),)


def diagonal_forward(B, ins, p):
    perm, key = _diagonal_parts(B.shape(ins[0]), p)
    return B.index(B.permute(ins[0], perm), key)


def diagonal_vjp(B, gs, ins, outs, p, need):
    # diagonal_backward: zeros(input sizes).diagonal(offset, dim1, dim2).copy_(grad)
    shape = tuple(B.shape(ins[0]))
    perm, key = _diagonal_parts(shape, p)
    placed = B.place_add(tuple(shape[d] for d in perm), key, gs[0])
    return [B.permute(placed, _inverse(perm))]


def diagonal_scatter(B, base, new, p):
    perm, key = _diagonal_parts(B.shape(base), p)
    return B.permute(B.assign(B.permute(base, perm), key, new), _inverse(perm))


def diagonal_layout(shape, strides, offset, p):
    off, d1, d2 = p
    kept = tuple(st for d, st in enumerate(strides) if d not in (d1, d2))
    start = off * strides[d2] if off >= 0 else -off * strides[d1]
    return kept + (strides[d1] + strides[d2],), offset + (start if diagonal_length(shape, p) else 0)


# ----------------------------------------------------------------------------- unfold (Tensor.unfold)

def _unfold_parts(shape, p):
    """``x.unfold(d, size, step)`` as numpy sees it: the key putting an (n, size) index array at dim
    ``d`` (window ``i``, element ``j`` is ``i * step + j``), and the permutation moving the window's
    elements (dim ``d + 1`` of the indexed array) last, as at::unfold's view has them."""
    import numpy as np
    d, size, step = p
    n = (shape[d] - size) // step + 1
    idx = np.arange(n)[:, None] * step + np.arange(size)[None, :]
    key = (slice(None),) * d + (idx,)
    nd = len(shape)
    perm = tuple(range(d + 1)) + tuple(range(d + 2, nd + 1)) + (d + 1,)
    return key, perm


def unfold_shape(shapes, p, loc):
    d, size, step = p
    s = list(shapes[0])
    s[d] = (s[d] - size) // step + 1
    return tuple(s) + (size,)


def unfold_forward(B, ins, p):
    key, perm = _unfold_parts(B.shape(ins[0]), p)
    return B.permute(B.index(ins[0], key), perm)


def unfold_vjp(B, gs, ins, outs, p, need):
    # unfold_backward: zeros(input sizes), each window's gradient added into its elements (windows
    # that overlap, step < size, add up)
    shape = tuple(B.shape(ins[0]))
    key, perm = _unfold_parts(shape, p)
    return [B.place_add(shape, key, B.permute(gs[0], _inverse(perm)))]


def unfold_scatter(B, base, new, p):
    d, size, step = p
    if step < size:
        raise ProblemError(None, "writing in place through an unfold view whose windows overlap (step < size) is not "
                                 "modelled: several of its elements are one memory location, written in the kernel's "
                                 "loop order")
    key, perm = _unfold_parts(B.shape(base), p)
    return B.assign(base, key, B.permute(new, _inverse(perm)))


def unfold_layout(shape, strides, offset, p):
    d, size, step = p
    out = list(strides)
    out[d] = strides[d] * step
    return tuple(out) + (strides[d],), offset


# ----------------------------------------------------------------------------- unsqueeze, squeeze, expand

def unsqueeze_shape(shapes, p, loc):
    s = tuple(shapes[0])
    return s[:p] + (1,) + s[p:]


def reshape_to_out(B, ins, p, shape):
    return B.reshape(ins[0], shape)


def unsqueeze_forward(B, ins, p):
    s = B.shape(ins[0])
    return B.reshape(ins[0], tuple(s[:p]) + (1,) + tuple(s[p:]))


def back_to_input_shape(B, gs, ins, outs, p, need):
    return [B.reshape(gs[0], B.shape(ins[0]))]


def reshape_scatter(B, base, new, p):
    return B.reshape(new, B.shape(base))


def unsqueeze_layout(shape, strides, offset, p):
    return unsqueezed(shape, strides, p), offset


def squeeze_dims_of(shape, p) -> tuple:
    """The dims squeeze removes: p None (every size-1 dim) or a tuple of dims (size-1 ones only;
    a 0-d tensor's dim 0 or -1, wrapped as a 1-d one's, is none: squeeze keeps it as it is)."""
    if p is None:
        return tuple(i for i, d in enumerate(shape) if d == 1)
    return tuple(d for d in p if d < len(shape) and shape[d] == 1)


def squeeze_shape(shapes, p, loc):
    drop = squeeze_dims_of(shapes[0], p)
    return tuple(d for i, d in enumerate(shapes[0]) if i not in drop)


def squeeze_forward(B, ins, p):
    shape = B.shape(ins[0])
    drop = squeeze_dims_of(shape, p)
    return B.reshape(ins[0], tuple(d for i, d in enumerate(shape) if i not in drop))


def squeeze_layout(shape, strides, offset, p):
    drop = squeeze_dims_of(shape, p)
    return tuple(s for i, s in enumerate(strides) if i not in drop), offset


def expand_shape(shapes, p, loc):
    """The shape ``expand(p)`` makes (-1 keeps a size); sizes that do not fit are PyTorch's
    RuntimeError (``infer_expand_geometry``, which walks the dims from the last: the last bad one
    is named), then a negative size left (an expand of a size-1 dim to -2: numel's overflow
    RuntimeError; beside a 0, PyTorch makes a tensor of a negative size, refused). Fewer sizes
    than dims is checked by the binding (PyTorch's message names the tensor's type, which only
    it knows)."""
    src = tuple(shapes[0])
    size = list(p)
    lead = len(size) - len(src)
    if lead < 0:
        raise ProblemError(loc, f"expand: {len(size)} sizes for a tensor of {len(src)} dims reached the op, not the "
                                "binding that words PyTorch's error with the tensor's type")
    out = [0] * len(size)
    for i in reversed(range(len(size))):
        n, j = size[i], i - lead
        have = src[j] if j >= 0 else 1
        if n == -1:
            if j < 0:
                raise TorchError("RuntimeError", f"The expanded size of the tensor (-1) isn't allowed in a leading, "
                                                 f"non-existing dimension {i}")
            n = have
        if have != n:
            if have != 1:
                raise TorchError("RuntimeError", f"The expanded size of the tensor ({n}) must match the existing size "
                                                 f"({have}) at non-singleton dimension {i}.  Target sizes: {size}.  "
                                                 f"Tensor sizes: {list(src)}")
        out[i] = n
    if any(n < 0 for n in out):
        if 0 in out:
            raise ProblemError(loc, f"expand to {size}: PyTorch makes a tensor of a negative size beside a 0, not "
                                    "modelled")
        raise TorchError("RuntimeError", "numel: integer multiplication overflow")
    return tuple(out)


def expand_forward(B, ins, p):
    return B.broadcast_to(ins[0], tuple(p))


def expand_vjp(B, gs, ins, outs, p, need):
    return [B.sum_to(gs[0], B.shape(ins[0]))]


def expand_layout(shape, strides, offset, p):
    return expanded(shape, strides, tuple(p)), offset


def view_layout(shape, strides, offset, p):
    from adjoint.values.strides import view_strides
    return view_strides(shape, strides, tuple(p)), offset


# ----------------------------------------------------------------------------- split, unbind

def split_sizes(shape, p) -> tuple[list[int], int]:
    """(sizes, dim) of a split: ``split`` p = (split_size, dim), ``split_with_sizes`` p = (sizes, dim)."""
    first, dim = p
    if isinstance(first, int):
        n = shape[dim]
        sizes = [min(first, n - i) for i in range(0, n, first)] if n else [0]
        return sizes, dim
    return list(first), dim


def split_shape(shapes, p, loc):
    sizes, dim = split_sizes(shapes[0], p)
    s = list(shapes[0])
    out = []
    for n in sizes:
        s[dim] = n
        out.append(tuple(s))
    return tuple(out)


def split_keys(shape, p) -> list[tuple]:
    sizes, dim = split_sizes(shape, p)
    keys, start = [], 0
    for n in sizes:
        keys.append((slice(None),) * dim + (slice(start, start + n),))
        start += n
    return keys


def split_forward(B, ins, p):
    return tuple(B.index(ins[0], key) for key in split_keys(B.shape(ins[0]), p))


def split_vjp(B, gs, ins, outs, p, need):
    """split_backward: undefined gradients of pieces are zeros; the pieces are concatenated."""
    shape = B.shape(ins[0])
    sizes, dim = split_sizes(shape, p)
    pieces = [g if g is not None else B.zeros(B.shape(o)) for g, o in zip(gs, outs)]
    return [B.concat(pieces, dim)]


def unbind_shape(shapes, p, loc):
    s = tuple(shapes[0])
    piece = s[:p] + s[p + 1:]
    return tuple(piece for _ in range(s[p]))


def unbind_forward(B, ins, p):
    n = B.shape(ins[0])[p]
    return tuple(B.index(ins[0], (slice(None),) * p + (i,)) for i in range(n))


def unbind_vjp(B, gs, ins, outs, p, need):
    pieces = [g if g is not None else B.zeros(B.shape(o)) for g, o in zip(gs, outs)]
    return [B.stack(pieces, p)]


# ----------------------------------------------------------------------------- as_strided (a regenerated view)

class AsStrided:
    """The params of a regenerated view's AsStridedBackward0: where the view lies in its base
    (``view_ops``: the view ops from the base, replayed on values and undone on gradients)."""

    def __init__(self, shape, strides, offset, view_ops):
        self.shape = tuple(shape)
        self.strides = tuple(strides)
        self.offset = offset
        self.view_ops = tuple(view_ops)

    def __repr__(self) -> str:
        return f"AsStrided(size={list(self.shape)}, stride={list(self.strides)}, storage_offset={self.offset})"

    def apply(self, B, base_value):
        v = base_value
        for opname, params, k, _ in self.view_ops:
            out = _BY_NAME[opname].forward(B, [v], params)
            v = out[k] if isinstance(out, tuple) else out
        return v

    def backward(self, B, g, base_shape):
        """g put back where the view lies, zeros elsewhere: each view op's VJP, last first."""
        for opname, params, k, in_shape in reversed(self.view_ops):
            op = _BY_NAME[opname]
            zero_in = B.zeros(in_shape)
            if op.outputs != 1:
                outs = list(op.forward(B, [zero_in], params))
                gs = [None] * len(outs)
                gs[k] = g
                g = op.vjp(B, gs, [zero_in], outs, params, [True])[0]
            else:
                g = op.vjp(B, [g], [zero_in], [op.forward(B, [zero_in], params)], params, [True])[0]
        return g


def as_strided_shape(shapes, p, loc):
    return tuple(p.shape)


def as_strided_forward(B, ins, p):
    return p.apply(B, ins[0])


def as_strided_vjp(B, gs, ins, outs, p, need):
    return [p.backward(B, gs[0], B.shape(ins[0]))]


# ----------------------------------------------------------------------------- copies

def clone_forward(B, ins, p):
    return ins[0]


def clone_vjp(B, gs, ins, outs, p, need):
    return [gs[0]]


def cat_skipped(shape) -> bool:
    """A 1-D tensor of no element, which cat skips wherever it stands (PyTorch's legacy rule: it
    neither wraps the dim nor is checked against the others; its gradient is an empty tensor)."""
    return tuple(shape) == (0,)


def cat_shape(shapes, p, loc):
    dim = p
    kept = [(k, s) for k, s in enumerate(shapes) if not cat_skipped(s)]
    if not kept:
        return (0,)
    first = kept[0][1]
    total = 0
    for k, s in kept:   # PyTorch's checks, tensor by tensor: the rank, then each other dim
        if len(s) != len(first):
            raise TorchError("RuntimeError", f"Tensors must have same number of dimensions: got {len(first)} and "
                                             f"{len(s)}")
        for i, (a, b) in enumerate(zip(first, s)):
            if i != dim and a != b:
                raise TorchError("RuntimeError", f"Sizes of tensors must match except in dimension {dim}. Expected "
                                                 f"size {a} but got size {b} for tensor number {k} in the list.")
        total += s[dim]
    out = list(first)
    out[dim] = total
    return tuple(out)


def cat_forward(B, ins, p):
    kept = [x for x in ins if not cat_skipped(B.shape(x))]
    return B.concat(kept, p) if kept else B.zeros((0,))


def cat_vjp(B, gs, ins, outs, p, need):
    """Every input's slice of g as soon as one is needed: ``tensors`` is one TensorList argument,
    so CatBackward0 asks should_compute_output for the whole range and cat_tensors_backward
    fills every slot (a node post hook sees a tensor even where an input needs no gradient)."""
    if not any(need):
        return [None] * len(ins)
    g, out, start = gs[0], [], 0
    for x in ins:
        if cat_skipped(B.shape(x)):
            out.append(B.zeros((0,)))
            continue
        n = B.shape(x)[p]
        out.append(B.index(g, (slice(None),) * p + (slice(start, start + n),)))
        start += n
    return out


def stack_shape(shapes, p, loc):
    first = shapes[0]
    for k, s in enumerate(shapes):
        if tuple(s) != tuple(first):
            raise TorchError("RuntimeError", f"stack expects each tensor to be equal size, but got {list(first)} at "
                                             f"entry 0 and {list(s)} at entry {k}")
    return tuple(first[:p]) + (len(shapes),) + tuple(first[p:])


def stack_forward(B, ins, p):
    return B.stack(list(ins), p)


def stack_vjp(B, gs, ins, outs, p, need):
    """Every input's part of g as soon as one is needed (one TensorList argument: see cat_vjp)."""
    if not any(need):
        return [None] * len(ins)
    return [B.index(gs[0], (slice(None),) * p + (i,)) for i in range(len(ins))]


def index_shape(shapes, p, loc):
    return tuple(p.out_shape)


def index_forward(B, ins, p):
    return B.index(ins[0], p.key(B, ins[1:]))


def index_vjp(B, gs, ins, outs, p, need):
    """index_put_(zeros, indices, grad, accumulate=True): repeated indices add up."""
    return [B.place_add(B.shape(ins[0]), p.key(B, ins[1:]), gs[0])] + [None] * (len(ins) - 1)


def copy_forward(B, ins, p):
    """``self.copy_(src)``: the result is src, broadcast to self's shape."""
    return B.broadcast_to(ins[1], B.shape(ins[0]))


def copy_vjp(B, gs, ins, outs, p, need):
    g = gs[0]
    return [B.zeros(B.shape(ins[0])) if need[0] else None, B.sum_to(g, B.shape(ins[1])) if need[1] else None]


def copy_shape(shapes, p, loc):
    """self's shape; with a src, TensorIterator's broadcast of the two (the in-place kernel
    refuses one that is not self's: PyTorch's error, after the packs)."""
    from adjoint.engine.ops.arith import broadcast_shapes
    return tuple(shapes[0]) if len(shapes) < 2 else broadcast_shapes(tuple(shapes[0]), tuple(shapes[1]), loc)


def zero_forward(B, ins, p):
    return B.zeros(B.shape(ins[0]))


def zero_vjp(B, gs, ins, outs, p, need):
    return [B.zeros(B.shape(ins[0]))]


def fill_scalar_forward(B, ins, p):
    """``self.fill_(number)``: the number (``"inf"`` / ``"-inf"`` for ``float("inf")``) everywhere."""
    from adjoint.engine.ops.masking import fill_value
    return B.broadcast_to(fill_value(B, p), B.shape(ins[0]))


def fill_shape(shapes, p, loc):
    """self's shape; ``fill_``'s value must be a number or a 0-d tensor (the kernel's check, after
    the node is made: PyTorch's RuntimeError)."""
    if len(shapes) > 1 and len(shapes[1]):
        raise TorchError("RuntimeError", "fill_ only supports 0-dimension value tensor but got tensor with "
                                         f"{len(shapes[1])} dimensions.")
    return tuple(shapes[0])


def given_shape(shapes, p, loc):
    return tuple(p)


def reshape_forward(B, ins, p):
    return B.reshape(ins[0], tuple(p))


def t_shape(shapes, p, loc):
    return tuple(reversed(shapes[0]))


def t_forward(B, ins, p):
    return B.t2(ins[0])


def t_vjp(B, gs, ins, outs, p, need):
    return [B.t2(gs[0])]


def t_scatter(B, base, new, p):
    return B.t2(new)


def t_layout(shape, strides, offset, p):
    return tuple(reversed(strides)), offset


def squeeze_one_forward(B, ins, p):
    return squeeze_forward(B, ins, (p,))


def squeeze_one_shape(shapes, p, loc):
    return squeeze_shape(shapes, (p,), loc)


# ----------------------------------------------------------------------------- how they read (adjoint.mathtree)

RESHAPE = Fn("reshape", "\\operatorname{reshape}_{#s}\\left(#0\\right)",
             lambda lam, n: (TFn(RESHAPE, (lam,), n.a.shape, shape_text(n.a.shape)),))
TRANSPOSE = Fn("transpose", "\\operatorname{transpose}_{#s}\\left(#0\\right)",
               lambda lam, n: (TFn(TRANSPOSE, (lam,), n.a.shape, n.sub, n.params),))
PERMUTE = Fn("permute", "\\operatorname{permute}_{#s}\\left(#0\\right)",
             lambda lam, n: (_permuted(lam, _inverse(n.params), n.a.shape),))
EXPAND = Fn("expand", "\\operatorname{expand}_{#s}\\left(#0\\right)", lambda lam, n: (sum_to(lam, n.a.shape),))
CAT = Fn("cat", "\\operatorname{cat}_{#s}\\left(#*\\right)", lambda lam, n: _cat_pieces(lam, n))
STACK = Fn("stack", "\\operatorname{stack}_{#s}\\left(#*\\right)",
           lambda lam, n: tuple(TSub(lam, (slice(None),) * n.params + (i,), a.shape) for i, a in enumerate(n.args)))


def _permuted(t, perm, shape):
    return TFn(PERMUTE, (t,), tuple(shape), "(" + ",".join(str(d) for d in perm) + ")", tuple(perm))


def _cat_pieces(lam, n) -> tuple:
    out, start, dim = [], 0, n.params
    for a in n.args:
        if cat_skipped(a.shape):   # a 1-D tensor of no element cat skipped: its piece is empty
            out.append(TSub(lam, (slice(0, 0),) * len(a.shape), a.shape) if len(lam.shape) == 1 else
                       TSub(lam, (slice(0, 0),) + (0,) * (len(lam.shape) - 1), a.shape))
            continue
        out.append(TSub(lam, (slice(None),) * dim + (slice(start, start + a.shape[dim]),), a.shape))
        start += a.shape[dim]
    return tuple(out)


def _reshape_formula(a, p, shape, k):
    """A row turned into a column (or back) is a transpose; adding or removing dims of size 1 is invisible
    in the notation; any other reshape is written reshape_{shape}(a)."""
    src, shape = a[0].shape, tuple(shape)
    if (len(src) == 1 and shape == (1, src[0])) or (len(shape) == 1 and tuple(src) == (1, shape[0])):
        return TT(a[0], shape)
    if [d for d in src if d != 1] == [d for d in shape if d != 1]:
        return reshaped(a[0], shape)
    return TFn(RESHAPE, (a[0],), shape, shape_text(shape))


def _transpose_formula(a, p, shape, k):
    perm = transpose_perm(len(a[0].shape), p)
    if len(shape) == 2:
        return TT(a[0], tuple(shape))
    return TFn(TRANSPOSE, (a[0],), tuple(shape), f"{min(p)},{max(p)}" if p[0] != p[1] else f"{p[0]},{p[1]}", perm)


def _as_strided_formula(a, p, shape, k):
    """A regenerated view reads as the views it was made by, applied to the base's current value."""
    t = a[0]
    for opname, params, j, in_shape in p.view_ops:
        op = _BY_NAME[opname]
        out = op.shape([tuple(in_shape)], params, None)
        t = op.math.formula([t], params, out[j] if op.outputs != 1 else out, j)
    return t


_IDENTITY = Math(lambda a, p, shape, k: a[0])
_RESHAPE = RESHAPE_MATH = Math(_reshape_formula)

_T = Math(lambda a, p, shape, k: TT(a[0], tuple(shape)) if len(shape) == 2 else a[0])
_SELECT = Math(lambda a, p, shape, k: TSub(a[0], select_key(len(a[0].shape), p), tuple(shape)))
_SLICE = Math(lambda a, p, shape, k: TSub(a[0], slice_key(len(a[0].shape), p), tuple(shape)))
_TRANSPOSE = Math(_transpose_formula)
_PERMUTE = Math(lambda a, p, shape, k: _permuted(a[0], p, shape))
_EXPAND = Math(lambda a, p, shape, k: TFn(EXPAND, (a[0],), tuple(shape), shape_text(shape)))
_SPLIT = Math(lambda a, p, shape, k: TSub(a[0], split_keys(a[0].shape, p)[k], tuple(shape)))   # piece k
_UNBIND = Math(lambda a, p, shape, k: TSub(a[0], (slice(None),) * p + (k,), tuple(shape)))
_AS_STRIDED = Math(_as_strided_formula)
_CAT = Math(lambda a, p, shape, k: TFn(CAT, tuple(a), tuple(shape), str(p), p))
_STACK = Math(lambda a, p, shape, k: TFn(STACK, tuple(a), tuple(shape), str(p), p))
_ZERO = Math(lambda a, p, shape, k: TConst(Fraction(0), tuple(shape)))
#: fill_(number): the number, an infinite one by name (nothing flows back to self either way)
FILL = Fn("fill", "\\operatorname{fill}_{#s}\\left(#0\\right)", no_gradient)
_FILL = Math(lambda a, p, shape, k: TFn(FILL, (a[0],), tuple(shape), number_text(p), p) if isinstance(p, str)
             else TConst(number(p), tuple(shape)))
_COPY = Math(lambda a, p, shape, k: a[1] if tuple(a[1].shape) == tuple(shape)          # self.copy_(src): src
             else TFn(EXPAND, (a[1],), tuple(shape), shape_text(shape)))


def _view(name, node, forward, vjp, shape, layout, scatter, formula, **kw):
    return Op(name, node, forward, vjp, shape, (), formula, negzero="structural", grows=False, view=True,
              layout=layout, scatter=scatter, **kw)


def _reshape_alias_op():
    """``_reshape_alias``: the view ``reshape`` makes of a non-contiguous tensor whose strides allow
    one (ReshapeAliasBackward0)."""
    return Op("reshape_alias", "ReshapeAliasBackward0", reshape_forward, back_to_input_shape, given_shape, (),
              "g reshaped back", negzero="structural", grows=False, view=True, layout=view_layout,
              scatter=reshape_scatter, math=RESHAPE_MATH, checks=(Check(((2, 3),), (3, 2)),))


UNFOLD = Fn("unfold", "\\operatorname{unfold}_{#s}\\left(#0\\right)", generic_vjp)
DIAGONAL = Fn("diagonal", "\\operatorname{diagonal}_{#s}\\left(#0\\right)", generic_vjp)

OPS = (
    _view("diagonal", "DiagonalBackward0", diagonal_forward, diagonal_vjp, diagonal_shape, diagonal_layout,
          diagonal_scatter, "zeros(self) with g on the diagonal (diagonal_backward)",
          math=Math(lambda a, p, shape, k: TFn(DIAGONAL, (a[0],), tuple(shape),
                                               f"\\mathrm{{offset}}={p[0]},\\,{p[1]},{p[2]}", p)),
          checks=(Check(((3, 4),), (0, 0, 1)), Check(((2, 3, 4),), (1, 2, 0)), Check(((3, 3),), (-1, 0, 1)))),
    _view("unfold", "UnfoldBackward0", unfold_forward, unfold_vjp, unfold_shape, unfold_layout, unfold_scatter,
          "zeros(self) with each window's g added into its elements (unfold_backward)",
          math=Math(lambda a, p, shape, k: TFn(UNFOLD, (a[0],), tuple(shape),
                                               f"{p[0]},\\,\\mathrm{{size}}={p[1]},\\,\\mathrm{{step}}={p[2]}", p)),
          checks=(Check(((2, 5),), (1, 2, 1)), Check(((5, 3),), (0, 2, 2)), Check(((2, 3, 4),), (2, 3, 1)))),
    _view("t", "TBackward0", t_forward, t_vjp, t_shape, t_layout, t_scatter, "g^T", math=_T, checks=(Check(((2, 3),)),)),
    _view("view", "ViewBackward0", reshape_forward, back_to_input_shape, given_shape, view_layout, reshape_scatter,
          "g reshaped back", math=_RESHAPE, checks=(Check(((2, 3),), (3, 2)),)),
    Op("unsafe_view", "UnsafeViewBackward0", reshape_forward, back_to_input_shape, given_shape, (), "g reshaped back",
       negzero="structural", grows=False, math=_RESHAPE, checks=(Check(((2, 3),), (6,)),)),
    Op("squeeze_", "SqueezeBackward4", squeeze_one_forward, back_to_input_shape, squeeze_one_shape, (),
       "g reshaped back (the in-place squeeze_ of matmul's 1-D @ 2-D path)", negzero="structural", grows=False,
       math=_RESHAPE, result_version=1, checks=(Check(((1, 3),), 0),)),
    Op("unsqueeze_", "UnsqueezeBackward1", unsqueeze_forward, back_to_input_shape, unsqueeze_shape, (),
       "g reshaped back (the in-place unsqueeze_ of group norm's create_graph backward)", negzero="structural",
       grows=False, math=_RESHAPE, result_version=1, checks=(Check(((2, 3),), 2),)),
    _view("select", "SelectBackward0", select_forward, select_vjp, select_shape, select_layout, select_scatter,
          "g put back at the index (zeros elsewhere)", math=_SELECT, checks=(Check(((2, 3),), (1, 2)),)),
    _view("slice", "SliceBackward0", slice_forward, slice_vjp, slice_shape, slice_layout, slice_scatter,
          "g put back into the slice (zeros elsewhere)", math=_SLICE, checks=(Check(((4, 2),), (0, 1, 4, 2)),)),
    _view("transpose", "TransposeBackward0", transpose_forward, transpose_vjp, transpose_shape, transpose_layout,
          transpose_scatter, "g transposed back", math=_TRANSPOSE, checks=(Check(((2, 3, 2),), (0, 2)),)),
    _view("permute", "PermuteBackward0", permute_forward, permute_vjp, permute_shape, permute_layout,
          permute_scatter, "g permuted back", math=_PERMUTE, checks=(Check(((2, 3, 2),), (2, 0, 1)),)),
    _view("unsqueeze", "UnsqueezeBackward0", unsqueeze_forward, back_to_input_shape, unsqueeze_shape,
          unsqueeze_layout, reshape_scatter, "g reshaped back", math=_RESHAPE, checks=(Check(((2, 3),), 1),)),
    _view("squeeze_all", "SqueezeBackward0", squeeze_forward, back_to_input_shape, squeeze_shape, squeeze_layout,
          reshape_scatter, "g reshaped back", math=_RESHAPE, checks=(Check(((2, 1, 3),), None),)),
    _view("squeeze_dim", "SqueezeBackward1", squeeze_forward, back_to_input_shape, squeeze_shape, squeeze_layout,
          reshape_scatter, "g reshaped back", math=_RESHAPE, checks=(Check(((2, 1, 3),), (1,)),)),
    _view("squeeze_dims", "SqueezeBackward2", squeeze_forward, back_to_input_shape, squeeze_shape, squeeze_layout,
          reshape_scatter, "g reshaped back", math=_RESHAPE, checks=(Check(((1, 2, 1),), (0, 2)),)),
    _view("expand", "ExpandBackward0", expand_forward, expand_vjp, expand_shape, expand_layout, None,
          "g summed over the expanded dims", math=_EXPAND, checks=(Check(((1, 3),), (2, 3)),)),
    _view("split", "SplitBackward0", split_forward, split_vjp, split_shape, None, None,
          "the pieces' gradients concatenated (undefined ones as zeros)", outputs=-1,
          math=_SPLIT, checks=(Check(((5, 2),), (2, 0)),)),
    _view("split_with_sizes", "SplitWithSizesBackward0", split_forward, split_vjp, split_shape, None, None,
          "the pieces' gradients concatenated (undefined ones as zeros)", outputs=-1,
          math=_SPLIT, checks=(Check(((5, 2),), ((1, 4), 0)),)),
    _view("unbind", "UnbindBackward0", unbind_forward, unbind_vjp, unbind_shape, None, None,
          "the pieces' gradients stacked (undefined ones as zeros)", outputs=-1, math=_UNBIND, checks=(Check(((3, 2),), 0),)),
    _view("alias", "AliasBackward0", clone_forward, clone_vjp, lambda shapes, p, loc: tuple(shapes[0]),
          lambda shape, strides, offset, p: (tuple(strides), offset), lambda B, base, new, p: new, "g",
          math=_IDENTITY, checks=(Check(((2, 2),)),)),
    _view("as_strided", "AsStridedBackward0", as_strided_forward, as_strided_vjp, as_strided_shape, None, None,
          "g put back where the view lies in its base (zeros elsewhere)",
          math=_AS_STRIDED, checks=(Check(((4, 2),), AsStrided((2,), (2,), 1, (("slice", (0, 1, 3, 1), 0, (4, 2)),
                                                               ("select", (1, 0), 0, (2, 2))))),)),
    Op("clone", "CloneBackward0", clone_forward, clone_vjp, lambda shapes, p, loc: tuple(shapes[0]), (), "g",
       negzero="keep", grows=False, math=_IDENTITY, checks=(Check(((2, 2),)),), copies_values=True),
    Op("cat", "CatBackward0", cat_forward, cat_vjp, cat_shape, (), "g sliced back to each input",
       negzero="structural", grows=False, math=_CAT, list_argument=True, checks=(Check(((2, 2), (1, 2)), 0),)),
    Op("stack", "StackBackward0", stack_forward, stack_vjp, stack_shape, (), "g selected back for each input",
       negzero="structural", grows=False, math=_STACK, list_argument=True, checks=(Check(((2, 2), (2, 2)), 1),)),
    Op("zero_", "ZeroBackward0", zero_forward, zero_vjp, copy_shape, (), "0", negzero="never", grows=False,
       math=_ZERO, checks=(Check(((2,),)),), checks_internal_overlap=False),
    # fill_.Scalar: derivatives.yaml, self: zeros_like(grad); its kernel runs no TensorIterator
    # overlap check (an expanded tensor is filled), and converts the number checked (float32's range)
    Op("fill_scalar", "FillBackward2", fill_scalar_forward, zero_vjp, fill_shape, (), "0", negzero="never",
       grows=False, fills=True, math=_FILL, checks=(Check(((2,),), Fraction(3, 4)),), checks_internal_overlap=False),
    Op("copy_", "torch::autograd::CopyBackwards", copy_forward, copy_vjp, copy_shape, (),
       "0 for the overwritten tensor; g (summed back) for the source", negzero="structural", grows=False,
       math=_COPY, checks=(Check(((2, 2), (2,))),)),
    # fill_.Tensor: index assignment of a number or a 0-d tensor (set_item's copy_to fills when the
    # value has no dimensions); derivatives.yaml: self zeros_like(grad), value grad.sum()
    Op("fill_", "FillBackward3", copy_forward, copy_vjp, fill_shape, (),
       "0 for the overwritten tensor; g summed for the value", negzero="structural", grows=False,
       math=_COPY, clones_aliased_value=True, checks=(Check(((2, 2), ())),)),
    _reshape_alias_op(),
)

#: the view ops by name: what a regenerated view (:class:`AsStrided`) replays and undoes
_BY_NAME = {op.name: op for op in OPS}
