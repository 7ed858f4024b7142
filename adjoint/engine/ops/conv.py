"""Convolution (``aten::convolution``, ``ConvolutionBackward0``) and constant padding
(``constant_pad_nd``, ``ConstantPadNdBackward0``, which ``padding="same"`` adds when the
total padding is odd).

The convolution is computed as PyTorch's CPU kernels do it mathematically: the input is
padded with zeros, unfolded into patches (``im2col``) and multiplied by the weight, group by
group. The backward is the same unfolding read backwards: ``grad_weight = g^T cols``,
``grad_input`` is ``g W`` folded back (``col2im``, overlapping patches add up) and cropped,
``grad_bias`` is ``g`` summed over the batch and the positions. ``ConvolutionBackward0``
saves ``input`` and ``weight`` whatever needs a gradient (probed on 2.13).

A transposed convolution (``conv_transpose1d`` / ``2d``: the same node, ``transposed=True``) is
the input gradient of the convolution with the same weight and arguments: its forward is that
col2im of ``x W`` onto an output of ``(L - 1) * stride - 2 * padding + dilation * (k - 1) +
output_padding + 1`` positions; its backward is the convolution read the other way:
``grad_input`` the convolution of ``g`` with ``W``, ``grad_weight`` the convolution's weight
gradient with ``g`` as its input and ``x`` as its output gradient.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from adjoint.format.errors import ProblemError
from adjoint.engine.torch_errors import TorchError
from adjoint.values.mathtree import Fn, generic_vjp, layer, number_text
from adjoint.engine.ops.record import Check, Math, Op, Save
from adjoint.engine.ops.pool import Refused


@dataclass(frozen=True)
class ConvSpec:
    """The convolution's integer arguments, one entry per spatial dimension."""

    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int
    transposed: bool = False
    output_padding: tuple[int, ...] = ()

    def plain(self) -> "ConvSpec":
        """The convolution a transposed one is the input gradient of (the same arguments)."""
        return ConvSpec(self.stride, self.padding, self.dilation, self.groups)


def conv_out_size(size: int, k: int, s: int, p: int, d: int) -> int:
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def transposed_out_size(size: int, k: int, s: int, p: int, d: int, op: int) -> int:
    return (size - 1) * s - 2 * p + d * (k - 1) + op + 1


def _refusal(x, w, b, p: ConvSpec):
    from adjoint.engine.ops.conv_checks import conv_refusal, conv_transpose_refusal
    if p.transposed:
        return conv_transpose_refusal(x, w, b, p.stride, p.padding, p.dilation, p.groups, p.output_padding)
    return conv_refusal(x, w, b, p.stride, p.padding, p.dilation, p.groups)


def conv_shape(shapes, p: ConvSpec, loc):
    if isinstance(p, Refused):   # an argument PyTorch refuses (the binding decided): its error after the packs
        return p.shape
    x, w, b = shapes
    n_sp = len(w) - 2
    if len(x) != n_sp + 2:
        raise ProblemError(loc, f"convolution of a {len(x)}-D input with a {len(w)}-D weight: an internal error "
                                f"(conv{n_sp}d refuses the input's rank, PyTorch's error, before the op)")
    if _refusal(x, w, b, p) is not None:   # PyTorch's error is the op's value_error (after the packs)
        return (x[0], w[1] * p.groups if p.transposed else w[0]) + (0,) * n_sp
    if p.transposed:
        return (x[0], w[1] * p.groups) + tuple(transposed_out_size(*a) for a in zip(
            x[2:], w[2:], p.stride, p.padding, p.dilation, p.output_padding))
    out = []
    for size, k, s, pad, d in zip(x[2:], w[2:], p.stride, p.padding, p.dilation):
        out.append(conv_out_size(size, k, s, pad, d))
    return (x[0], w[0]) + tuple(out)


def conv_refused(B, values, p: ConvSpec):
    """PyTorch's error for this convolution (``value_error``: raised once the node has packed
    input and weight), else None."""
    if isinstance(p, Refused):
        return p.error
    x, w, b = (None if v is None else tuple(B.shape(v)) for v in values)
    return _refusal(x, w, b, p)


def conv_work(shapes, p: ConvSpec) -> int:
    """The largest array the lowering makes: the padded input, or the patches (N, Cg, *out, *kernel)."""
    x, w = shapes[0], shapes[1]
    if isinstance(p, Refused) or x is None or w is None or len(x) != len(w) or len(x) < 3:
        return 0   # the shape rule raises PyTorch's complaint
    if _refusal(x, w, shapes[2] if len(shapes) > 2 else None, p):
        return 0   # PyTorch refuses it before any work
    if p.transposed:   # the padded output, or the patches of the convolution it is the input gradient of
        out = conv_shape([x, w, None], p, None)
        padded = out[0] * out[1] * _prod(s + 2 * pd for s, pd in zip(out[2:], p.padding))
        return max(padded, x[0] * _prod(x[2:]) * w[1] * p.groups * _prod(w[2:]))
    padded = x[0] * x[1] * _prod(s + 2 * pd for s, pd in zip(x[2:], p.padding))
    outs = [max(conv_out_size(sz, k, s, pd, d), 0) for sz, k, s, pd, d in
            zip(x[2:], w[2:], p.stride, p.padding, p.dilation)]
    return max(padded, x[0] * w[1] * _prod(outs) * _prod(w[2:]))


def _positions(in_shape, k_shape, p: ConvSpec):
    """Index arrays into the padded input: one per spatial dim, broadcast to
    (*out_spatial, *kernel_spatial)."""
    n = len(k_shape)
    outs = [conv_out_size(sz, k, s, pd, d) for sz, k, s, pd, d in
            zip(in_shape, k_shape, p.stride, p.padding, p.dilation)]
    keys = []
    for i in range(n):
        pos = np.arange(outs[i])[:, None] * p.stride[i] + np.arange(k_shape[i])[None, :] * p.dilation[i]
        shape = [1] * (2 * n)
        shape[i], shape[n + i] = outs[i], k_shape[i]
        keys.append(pos.reshape(shape))
    return tuple(outs), tuple(keys)


def _padded(B, x, pads):
    n, c = B.shape(x)[:2]
    spatial = B.shape(x)[2:]
    shape = (n, c) + tuple(s + 2 * pd for s, pd in zip(spatial, pads))
    key = (slice(None), slice(None)) + tuple(slice(pd, pd + s) for s, pd in zip(spatial, pads))
    return B.place(shape, key, x) if any(pads) else x


def _cols(B, x, k_shape, p: ConvSpec, group: int):
    """The patches of one group: (N * L, Cg * K) and the output's spatial shape."""
    fast = getattr(B, "conv_patches", None)   # the float64 backend's kernel: the same matrix, no gather
    if fast is not None:
        return fast(x, k_shape, p.stride, p.padding, p.dilation, p.groups, group), tuple(
            conv_out_size(sz, k, s, pd, d) for sz, k, s, pd, d in zip(B.shape(x)[2:], k_shape, p.stride, p.padding, p.dilation))
    n_batch, c = B.shape(x)[:2]
    cg = c // p.groups
    outs, keys = _positions(B.shape(x)[2:], k_shape, p)
    xp = _padded(B, x, p.padding)
    patches = B.index(xp, (slice(None), slice(group * cg, (group + 1) * cg)) + keys)  # (N, Cg, *O, *K)
    nd = len(k_shape)
    perm = (0,) + tuple(range(2, 2 + nd)) + (1,) + tuple(range(2 + nd, 2 + 2 * nd))
    length, kprod = _prod(outs), _prod(k_shape)
    return B.reshape(B.permute(patches, perm), (n_batch * length, cg * kprod)), outs


def _prod(xs) -> int:
    out = 1
    for v in xs:
        out *= v
    return out


def _group_weight(B, w, p: ConvSpec, group: int):
    o = B.shape(w)[0]
    og = o // p.groups
    piece = B.index(w, (slice(group * og, (group + 1) * og),))
    return B.reshape(piece, (og, _prod(B.shape(w)[1:])))


def _to_channels(B, y, n_batch: int, outs) -> object:
    """(N * L, O) -> (N, O, *outs)."""
    o = B.shape(y)[1]
    y = B.permute(B.reshape(y, (n_batch, _prod(outs), o)), (0, 2, 1))
    return B.reshape(y, (n_batch, o) + tuple(outs))


def _from_channels(B, g, group: int, groups: int):
    """The gradient of one group's output channels, (N, Og, *outs) -> (N * L, Og)."""
    shape = B.shape(g)
    og = shape[1] // groups
    piece = B.index(g, (slice(None), slice(group * og, (group + 1) * og)))
    length = _prod(shape[2:])
    return B.reshape(B.permute(B.reshape(piece, (shape[0], og, length)), (0, 2, 1)), (shape[0] * length, og))


def conv_forward(B, ins, p: ConvSpec):
    x, w, b = ins
    k_shape = B.shape(w)[2:]
    if p.transposed:
        out = conv_shape([B.shape(x), B.shape(w), None], p, None)
        return _add_bias(B, _input_grad(B, x, w, out, p.plain()), b, len(k_shape))
    pieces = []
    outs = None
    for gi in range(p.groups):
        cols, outs = _cols(B, x, k_shape, p, gi)
        pieces.append(_to_channels(B, B.matmul2d(cols, B.t2(_group_weight(B, w, p, gi))), B.shape(x)[0], outs))
    y = pieces[0] if len(pieces) == 1 else B.concat(pieces, 1)
    return _add_bias(B, y, b, len(k_shape))


def _input_grad(B, g, w, x_shape, p: ConvSpec):
    """The convolution's input gradient for an input of shape ``x_shape``: ``g W`` per group,
    folded back over the patches (col2im: overlapping patches add up) and cropped."""
    k_shape = B.shape(w)[2:]
    cg = x_shape[1] // p.groups
    fold = getattr(B, "conv_fold", None)   # the float64 backend's col2im: the same doubles, strided adds
    if fold is not None:
        return fold([B.matmul2d(_from_channels(B, g, gi, p.groups), _group_weight(B, w, p, gi)) for gi in range(p.groups)],
                    x_shape, k_shape, p.stride, p.padding, p.dilation)
    padded_shape = tuple(x_shape[:2]) + tuple(s + 2 * pd for s, pd in zip(x_shape[2:], p.padding))
    _, keys = _positions(x_shape[2:], k_shape, p)
    total = B.zeros(padded_shape)
    nd = len(k_shape)
    for gi in range(p.groups):
        gcols = B.matmul2d(_from_channels(B, g, gi, p.groups), _group_weight(B, w, p, gi))  # (N*L, Cg*K)
        outs_sp = B.shape(g)[2:]
        folded = B.reshape(gcols, (x_shape[0],) + tuple(outs_sp) + (cg,) + tuple(k_shape))
        perm = (0, 1 + nd) + tuple(range(1, 1 + nd)) + tuple(range(2 + nd, 2 + 2 * nd))
        folded = B.permute(folded, perm)  # (N, Cg, *O, *K)
        key = (slice(None), slice(gi * cg, (gi + 1) * cg)) + keys
        total = B.add(total, B.place_add(padded_shape, key, folded))
    crop = (slice(None), slice(None)) + tuple(slice(pd, pd + s) for s, pd in zip(x_shape[2:], p.padding))
    return B.index(total, crop) if any(p.padding) else total


def _weight_grad(B, g, x, k_shape, p: ConvSpec):
    """The convolution's weight gradient: ``g^T`` times the input's patches, group by group."""
    cg = B.shape(x)[1] // p.groups
    pieces = []
    for gi in range(p.groups):
        cols, _ = _cols(B, x, k_shape, p, gi)
        gwg = B.matmul2d(B.t2(_from_channels(B, g, gi, p.groups)), cols)  # (Og, Cg*K)
        pieces.append(B.reshape(gwg, (B.shape(gwg)[0], cg) + tuple(k_shape)))
    return pieces[0] if len(pieces) == 1 else B.concat(pieces, 0)


def _bias_grad(B, g, nd: int):
    o = B.shape(g)[1]
    return B.reshape(B.sum_to(g, (1, o) + (1,) * nd), (o,))


def _add_bias(B, y, b, nd: int):
    return y if b is None else B.add(y, B.reshape(b, (B.shape(b)[0],) + (1,) * nd))


def conv_vjp(B, gs, ins, outs, p: ConvSpec, need):
    g = gs[0]
    x, w, b = ins
    k_shape = B.shape(w)[2:]
    if p.transposed:   # the input gradient of the plain convolution: read back, a convolution
        plain = p.plain()
        gx = conv_forward(B, [g, w, None], plain) if need[0] else None
        gw = _weight_grad(B, x, g, k_shape, plain) if need[1] else None
    else:
        gx = _input_grad(B, g, w, B.shape(x), p) if need[0] else None
        gw = _weight_grad(B, g, x, k_shape, p) if need[1] else None
    gb = _bias_grad(B, g, len(k_shape)) if len(need) > 2 and need[2] and b is not None else None
    return [gx, gw, gb]


# ----------------------------------------------------------------------------- constant_pad_nd

@dataclass(frozen=True)
class PadValue:
    """``F.pad(x, pads, value=v)`` with v not 0: the pads and the number written outside the input
    (a Fraction, or ``"inf"`` / ``"-inf"``); plain pads (a tuple of ints) fill with 0."""

    pads: tuple
    value: object

    def __len__(self):
        return len(self.pads)

    def __getitem__(self, i):
        return self.pads[i]


def pad_shape(shapes, pads, loc):
    """at::pad's and constant_pad_nd's checks, PyTorch's RuntimeError (ConstantPadNdBackward0
    saves nothing, so no pack comes before it)."""
    shape = list(shapes[0])
    if len(pads) % 2:
        raise TorchError("RuntimeError", "Padding length must be divisible by 2")
    if len(pads) // 2 > len(shape):
        raise TorchError("RuntimeError", f"Padding length should be less than or equal to two times the input "
                                         f"dimension but got padding length {len(pads)} and input of dimension "
                                         f"{len(shape)}")
    for i in range(len(pads) // 2):
        d = len(shape) - 1 - i
        shape[d] += pads[2 * i] + pads[2 * i + 1]
        if shape[d] < 0:
            raise TorchError("RuntimeError", "narrow(): length must be non-negative.")
    return tuple(shape)


def _pad_keys(in_shape, pads):
    """(key into the output where the input lands, key into the input of what is kept)."""
    out_key, in_key = [], []
    for d, size in enumerate(in_shape):
        i = len(in_shape) - 1 - d
        lo, hi = (pads[2 * i], pads[2 * i + 1]) if 2 * i < len(pads) else (0, 0)
        keep_lo, keep_hi = max(0, -lo), size - max(0, -hi)
        in_key.append(slice(keep_lo, keep_hi))
        out_key.append(slice(max(0, lo), max(0, lo) + max(0, keep_hi - keep_lo)))
    return tuple(out_key), tuple(in_key)


def pad_forward(B, ins, pads):
    x = ins[0]
    out_shape = pad_shape([B.shape(x)], pads, None)
    out_key, in_key = _pad_keys(B.shape(x), pads)
    if isinstance(pads, PadValue):
        from adjoint.engine.ops.masking import fill_value
        base = B.broadcast_to(fill_value(B, pads.value), out_shape)
        return B.assign(base, out_key, B.index(x, in_key))
    return B.place(out_shape, out_key, B.index(x, in_key))


def pad_vjp(B, gs, ins, outs, pads, need):
    x = ins[0]
    out_key, in_key = _pad_keys(B.shape(x), pads)
    return [B.place(B.shape(x), in_key, B.index(gs[0], out_key))]


# ----------------------------------------------------------------------------- how they read (adjoint.mathtree)
# A convolution reads as one function of (input, weight, bias) with its non-default arguments as a subscript;
# its J^T lambda is declared generic (the col2im / patch products are in the formula above and docs/ops.md).

# ----------------------------------------------------------------------------- im2col, col2im (F.unfold, F.fold)

@dataclass(frozen=True)
class FoldSpec:
    """``im2col`` / ``col2im``'s integer arguments (pairs); ``output_size`` only for col2im."""

    kernel_size: tuple[int, int]
    dilation: tuple[int, int]
    padding: tuple[int, int]
    stride: tuple[int, int]
    output_size: tuple[int, int] | None = None

    def conv(self) -> ConvSpec:
        return ConvSpec(self.stride, self.padding, self.dilation, 1)


def fold_blocks(spatial, p: FoldSpec) -> tuple[int, int]:
    """The number of sliding blocks along each spatial dim (im2col's output_height, output_width)."""
    return tuple(conv_out_size(sz, k, s, pd, d) for sz, k, s, pd, d in
                 zip(spatial, p.kernel_size, p.stride, p.padding, p.dilation))


def im2col_shape(shapes, p: FoldSpec, loc):
    s = tuple(shapes[0])
    k = p.kernel_size[0] * p.kernel_size[1]
    oh, ow = fold_blocks(s[-2:], p)
    return s[:-3] + (s[-3] * k, oh * ow)


def col2im_shape(shapes, p: FoldSpec, loc):
    s = tuple(shapes[0])
    k = p.kernel_size[0] * p.kernel_size[1]
    return s[:-2] + (s[-2] // k,) + tuple(p.output_size)


def im2col(B, x, p: FoldSpec):
    """ATen's im2col: the blocks of the zero-padded input, (N, C * kh * kw, L) with the channel
    slowest, then the kernel row and column; L the blocks in row-major order. A 3-d input is one
    batch entry (no node of its own)."""
    shape = tuple(B.shape(x))
    batched = len(shape) == 4
    x4 = x if batched else B.reshape(x, (1,) + shape)
    n, c, h, w = B.shape(x4)
    outs, keys = _positions((h, w), p.kernel_size, p.conv())
    patches = B.index(_padded(B, x4, p.padding), (slice(None), slice(None)) + keys)   # (N, C, oh, ow, kh, kw)
    cols = B.reshape(B.permute(patches, (0, 1, 4, 5, 2, 3)), (n, c * _prod(p.kernel_size), _prod(outs)))
    return cols if batched else B.reshape(cols, B.shape(cols)[1:])


def col2im(B, cols, p: FoldSpec):
    """ATen's col2im: each block's column added back into its place of the zero-padded output
    (overlapping blocks add up), then cropped: (N, C, *output_size)."""
    shape = tuple(B.shape(cols))
    batched = len(shape) == 3
    c3 = cols if batched else B.reshape(cols, (1,) + shape)
    n, ck, _ = B.shape(c3)
    kh, kw = p.kernel_size
    c = ck // (kh * kw)
    h, w = p.output_size
    outs, keys = _positions((h, w), p.kernel_size, p.conv())
    blocks = B.permute(B.reshape(c3, (n, c, kh, kw) + tuple(outs)), (0, 1, 4, 5, 2, 3))   # (N, C, oh, ow, kh, kw)
    padded_shape = (n, c, h + 2 * p.padding[0], w + 2 * p.padding[1])
    total = B.place_add(padded_shape, (slice(None), slice(None)) + keys, blocks)
    if any(p.padding):
        total = B.index(total, (slice(None), slice(None), slice(p.padding[0], p.padding[0] + h),
                                slice(p.padding[1], p.padding[1] + w)))
    return total if batched else B.reshape(total, (c, h, w))


def im2col_forward(B, ins, p: FoldSpec):
    return im2col(B, ins[0], p)


def im2col_vjp(B, gs, ins, outs, p: FoldSpec, need):
    # derivatives.yaml: col2im(grad, {self.size(-2), self.size(-1)}, kernel_size, dilation, padding, stride)
    size = tuple(B.shape(ins[0]))[-2:]
    return [col2im(B, gs[0], FoldSpec(p.kernel_size, p.dilation, p.padding, p.stride, size))]


def col2im_forward(B, ins, p: FoldSpec):
    return col2im(B, ins[0], p)


def col2im_vjp(B, gs, ins, outs, p: FoldSpec, need):
    # derivatives.yaml: im2col(grad, kernel_size, dilation, padding, stride)
    return [im2col(B, gs[0], p)]


def _fold_sub(p: FoldSpec) -> str:
    text = f"k={_tuple_text(p.kernel_size)}"
    for name, v, default in (("d", p.dilation, 1), ("p", p.padding, 0), ("s", p.stride, 1)):
        if any(e != default for e in v):
            text += f",\\,{name}={_tuple_text(v)}"
    return text


CONV = Fn("conv", "\\operatorname{conv}_{#s}\\left(#*\\right)", generic_vjp)
PAD = Fn("pad", "\\operatorname{pad}_{#s}\\left(#0\\right)", generic_vjp)
IM2COL = Fn("im2col", "\\operatorname{im2col}_{#s}\\left(#0\\right)", generic_vjp)
COL2IM = Fn("col2im", "\\operatorname{col2im}_{#s}\\left(#0\\right)", generic_vjp)


def _conv_sub(p: ConvSpec) -> str:
    parts = [f"\\mathrm{{{name}}}={_tuple_text(v)}" for name, v, default in
             (("stride", p.stride, 1), ("padding", p.padding, 0), ("output\\_padding", p.output_padding, 0),
              ("dilation", p.dilation, 1))
             if any(x != default for x in v)]
    return ",\\,".join((["\\mathrm{transposed}"] if p.transposed else []) + parts
                        + ([f"\\mathrm{{groups}}={p.groups}"] if p.groups != 1 else []))


def _pad_sub(pads) -> str:
    text = _tuple_text(tuple(pads)) if len(pads) > 1 else str(pads[0])
    if isinstance(pads, PadValue):
        value = pads.value
        shown = ("-\\infty" if value == "-inf" else "\\infty") if isinstance(value, str) else number_text(value)
        text += ",\\,\\mathrm{value}=" + shown
    return text


def _tuple_text(v) -> str:
    return str(v[0]) if len(set(v)) == 1 else "(" + ",".join(str(x) for x in v) + ")"


OPS = (
    Op("convolution", "ConvolutionBackward0", conv_forward, conv_vjp, conv_shape,
       (Save("input", "in", 0), Save("weight", "in", 1)),
       "grad_input: g (N, O, *out) times W, folded back over the patches (col2im); grad_weight: g^T times the "
       "patches; grad_bias: g summed over batch and positions", grows=True, work=conv_work,
       value_error=conv_refused,
       checks=(Check(((1, 2, 3, 3), (2, 2, 2, 2), (2,)), ConvSpec((1, 1), (1, 0), (1, 1), 1)),
               Check(((2, 4, 5), (2, 2, 2), None), ConvSpec((2,), (1,), (2,), 2)),
               Check(((1, 2, 2, 3), (2, 2, 2, 2), (2,)), ConvSpec((2, 1), (1, 0), (1, 1), 1, True, (1, 0))),
               Check(((2, 4, 3), (4, 1, 2), None), ConvSpec((2,), (1,), (2,), 2, True, (1,)))),
       math=Math(layer((CONV,), _conv_sub)), integers="alone"),
    Op("im2col", "Im2ColBackward0", im2col_forward, im2col_vjp, im2col_shape, (),
       "col2im(g): each block's gradient added back into its place (overlapping blocks add up), cropped",
       negzero="structural", grows=False, math=Math(layer((IM2COL,), _fold_sub)),
       checks=(Check(((1, 2, 3, 3),), FoldSpec((2, 2), (1, 1), (0, 0), (1, 1))),
               Check(((2, 4, 3),), FoldSpec((2, 1), (1, 2), (1, 0), (2, 1))))),
    Op("col2im", "Col2ImBackward0", col2im_forward, col2im_vjp, col2im_shape, (),
       "im2col(g): the blocks of g", grows=True, math=Math(layer((COL2IM,), _fold_sub)),
       checks=(Check(((1, 8, 4),), FoldSpec((2, 2), (1, 1), (0, 0), (1, 1), (3, 3))),
               Check(((4, 9),), FoldSpec((2, 1), (1, 2), (1, 0), (2, 1), (4, 3))))),
    Op("constant_pad_nd", "ConstantPadNdBackward0", pad_forward, pad_vjp, pad_shape, (),
       "g cropped back to the input (negative pads: zeros where the input was cut)", negzero="structural",
       grows=False, fills=True, math=Math(layer((PAD,), _pad_sub)),
       checks=(Check(((2, 3),), (0, 1)), Check(((2, 3),), (1, -1, 0, 1)),
               Check(((2, 3),), PadValue((1, 1, -1, 1), Fraction(1, 2))))),
)
