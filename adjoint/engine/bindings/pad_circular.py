"""``F.pad(x, pads, mode='circular')`` (and a convolution's ``padding_mode='circular'``), as PyTorch
2.13 runs it: ``at::_pad_circular`` (PadNd.cpp) is a composite with no node of its own.

Its checks, per padded dim from the outermost: a pad larger than the dim ("Padding value causes
wrapping around more than once."), then a dim the negative pads empty ("Negative padding value is
resulting in an empty dimension"). Then ``out = self.new_empty(out_shape)`` (no gradient) and
copies, each through ``slice`` views, as recorded ops:

1. ``out``'s middle (sliced in every padded dim, the last dim first) ``copy_`` from ``self``
   sliced the same way (a ``SliceBackward0`` per padded dim of ``self``, even a slice of the whole
   dim); ``out`` gets ``CopySlices``;
2. for each padded dim, the last first: a positive left pad copies ``out``'s slice ending where
   the right pad starts into ``out[..., :pad_l]``, then a positive right pad copies
   ``out[..., pad_l : pad_l + pad_r]`` into its end: each a ``SliceBackward0`` of ``out`` and one
   more ``CopySlices`` (the corners are written more than once, as in PyTorch).

The result is ``out``, contiguous, at version 1 + the number of copies. Checked in torch: the node
chain (``CopySlices`` over ``SliceBackward0``), values, gradients.
"""

from __future__ import annotations

from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.torch_errors import TorchError


def pad_circular(rt, x: Tensor, pads: tuple, loc: Loc) -> Tensor:
    """``at::_pad_circular(x, pads)`` after ``_pad_enum``'s checks (the pad length fits the dims)."""
    from adjoint.engine.inplace import apply_inplace
    k = len(pads) // 2
    lead = len(x.shape) - k
    in_shape = tuple(x.shape)
    out_shape = list(in_shape)
    for i in range(k):   # the outermost padded dim first: its pads are the last pair
        pad_l, pad_r = pads[2 * (k - i - 1)], pads[2 * (k - i - 1) + 1]
        size = in_shape[lead + i]
        out_shape[lead + i] = size + pad_l + pad_r
        if not (pad_l <= size and pad_r <= size):
            raise TorchError("RuntimeError", "Padding value causes wrapping around more than once.")
        if out_shape[lead + i] < 0:
            raise TorchError("RuntimeError", "Negative padding value is resulting in an empty dimension")
    if 0 in out_shape:
        raise ProblemError(loc, "F.pad(mode='circular') making a dim of size 0 is not modelled (zero-size tensors "
                                "are not)")
    out = rt.tensor(rt.B.zeros(tuple(out_shape)), dtype=x.dtype)   # new_empty: every element is written below

    def sliced(t: Tensor, dim: int, start: int, end: int) -> Tensor:
        return rt.apply("slice", [t], (dim, start, end, 1), loc)

    def copy(dst: Tensor, src: Tensor) -> None:
        apply_inplace(rt, "copy_", dst, [src], None, loc)

    out_slice, in_slice = out, x
    for i in range(k):
        dim = k - i + lead - 1
        pad_l, pad_r = pads[2 * i], pads[2 * i + 1]
        out_slice = sliced(out_slice, dim, max(pad_l, 0), out_shape[dim] - max(pad_r, 0))
        in_slice = sliced(in_slice, dim, max(-pad_l, 0), in_shape[dim] - max(-pad_r, 0))
    copy(out_slice, in_slice)
    for i in range(k):
        dim = k - i + lead - 1
        pad_l, pad_r = pads[2 * i], pads[2 * i + 1]
        if pad_l > 0:
            dst = sliced(out, dim, 0, pad_l)
            src = sliced(out, dim, out_shape[dim] - pad_l - max(pad_r, 0), out_shape[dim] - max(pad_r, 0))
            copy(dst, src)
        if pad_r > 0:
            dst = sliced(out, dim, out_shape[dim] - pad_r, out_shape[dim])
            src = sliced(out, dim, max(pad_l, 0), max(pad_l, 0) + pad_r)
            copy(dst, src)
    return out
