"""PyTorch's refusals of a well-formed convolution, in ATen's order and words (``at::_convolution``
and its ``check_shape_forward``): an answer (a ``TorchError`` once ``ConvolutionBackward0`` has
packed ``input`` and ``weight``), never a malformed file.

``groups`` positive first, then the padding non-negative, the stride positive, the dilation
positive, the weight at least ``groups`` and divisible by it at dimension 0, the input's channels
``weight.size(1) * groups``, the bias ``[out_channels]``, the padded input at least the dilated
kernel in every spatial dimension.

A transposed convolution (``conv_transpose_refusal``): the same argument checks (and a negative
``output_padding``), the input's channels ``weight.size(0)``, the bias ``[weight.size(1) *
groups]``, then the CPU kernel's (``slow_conv_transpose2d_shape_check``, a 1-d one run as a 2-d
one of height 1): the dilation positive, the output padding smaller than the stride or the
dilation, an output of at least one position.
"""

from __future__ import annotations


def _sizes(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _groups_refusal(w, groups: int):
    """ATen's check of a (plain or transposed) convolution weight's first dimension against groups."""
    if w[0] < groups:
        return ("RuntimeError", f"Given groups={groups}, expected weight to be at least {groups} at dimension 0, but "
                                f"got weight of size {_sizes(w)} instead")
    if w[0] % groups:
        return ("RuntimeError", f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
                                f"but got weight of size [{_sizes(w)}] instead")
    return None


def conv_refusal(x, w, b, stride, padding, dilation, groups: int):
    """(type, message) of the error PyTorch raises for ``convolution`` of an input of shape ``x``
    (batched), a weight ``w``, a bias ``b`` (None: none), else None."""
    if groups <= 0:
        return ("RuntimeError", "non-positive groups is not supported")
    if any(p < 0 for p in padding):
        return ("RuntimeError", "negative padding is not supported")
    if any(s <= 0 for s in stride):
        return ("RuntimeError", "non-positive stride is not supported")
    grouped = _groups_refusal(w, groups)
    if grouped is not None:
        return grouped
    if x[1] != w[1] * groups:
        return ("RuntimeError", f"Given groups={groups}, weight of size {_sizes(w)}, expected input{_sizes(x)} to have "
                                f"{w[1] * groups} channels, but got {x[1]} channels instead")
    if b is not None and tuple(b) != (w[0],):
        return ("RuntimeError", f"Given weight of size {_sizes(w)}, expected bias to be 1-dimensional with {w[0]} "
                                f"elements, but got bias of size {_sizes(b)} instead")
    padded = [n + 2 * p for n, p in zip(x[2:], padding)]
    kernel = [d * (k - 1) + 1 for k, d in zip(w[2:], dilation)]
    if any(n < k for n, k in zip(padded, kernel)):
        return ("RuntimeError", f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). "
                                f"Kernel size: ({' x '.join(map(str, kernel))}). Kernel size can't be greater than "
                                "actual input size")
    if any(d <= 0 for d in dilation):   # the CPU kernel's own check, a 1-d convolution run as a 2-d one
        shown = (1,) + tuple(dilation) if len(dilation) == 1 else tuple(dilation)
        return ("RuntimeError", f"dilation should be greater than zero, but got {_sizes(shown)}")
    return None


def _hw(name: str, values) -> str:
    """The 2-d kernel's ``name_height: a name_width: b`` (a 1-d convolution has height 1, or 0 for
    the output padding)."""
    h, w = values if len(values) == 2 else (0 if name == "output_padding" else 1, values[0])
    return f"{name}_height: {h} {name}_width: {w}"


def conv_transpose_refusal(x, w, b, stride, padding, dilation, groups: int, output_padding):
    """(type, message) of the error PyTorch raises for a transposed ``convolution`` (see
    :func:`conv_refusal`), else None."""
    if groups <= 0:
        return ("RuntimeError", "non-positive groups is not supported")
    if any(p < 0 for p in padding):
        return ("RuntimeError", "negative padding is not supported")
    if any(p < 0 for p in output_padding):
        return ("RuntimeError", "negative output_padding is not supported")
    if any(s <= 0 for s in stride):
        return ("RuntimeError", "non-positive stride is not supported")
    if any(d < 0 for d in dilation):
        return ("RuntimeError", "dilation should be greater than zero")
    grouped = _groups_refusal(w, groups)
    if grouped is not None:
        return grouped
    if x[1] != w[0]:
        return ("RuntimeError", f"Given transposed=1, weight of size {_sizes(w)}, expected input{_sizes(x)} to have "
                                f"{w[0]} channels, but got {x[1]} channels instead")
    if b is not None and tuple(b) != (w[1] * groups,):
        return ("RuntimeError", f"Given transposed=1, weight of size {_sizes(w)}, expected bias to be 1-dimensional "
                                f"with {w[1] * groups} elements, but got bias of size {_sizes(b)} instead")
    if any(d == 0 for d in dilation):
        return ("RuntimeError", "dilation should be greater than zero, but got " + _hw("dilation", dilation).replace(
            " dilation_width", ", dilation_width"))
    if not all(op < s or op < d for op, s, d in zip(output_padding, stride, dilation)):
        return ("RuntimeError", "output padding must be smaller than either stride or dilation, but got "
                                f"{_hw('output_padding', output_padding)} {_hw('stride', stride)} "
                                f"{_hw('dilation', dilation)}")
    out = [(n - 1) * s - 2 * p + d * (k - 1) + op + 1
           for n, k, s, p, d, op in zip(x[2:], w[2:], stride, padding, dilation, output_padding)]
    if any(o < 1 for o in out):
        size = tuple(x[2:]) if len(out) == 2 else (1, x[2])
        shown = tuple(out) if len(out) == 2 else (1, out[0])
        return ("RuntimeError", f"Given input size per channel: ({' x '.join(map(str, size))}). Calculated output size "
                                f"per channel: ({' x '.join(map(str, shown))}). Output size is too small")
    return None
