"""PyTorch's refusals of a well-formed pooling call, in ATen's order and words: an answer (a
``TorchError`` once the pool's node has packed ``self``), never a malformed file.

``max_pool2d_with_indices`` / ``avg_pool2d`` (the 1-d pools reach them through ``unsqueeze``) and
``max_pool3d_with_indices`` / ``avg_pool3d``: avg's ``divisor must be not zero`` first, then the
input's rank, then per spatial dimension (the first to the last) ``pooling_output_shape``'s
checks (``stride should not be zero``, ``pad must be non-negative``, ``pad should be at most half
of effective kernel size``: the dilated kernel), then ``pool2d_shape_check`` /
``pool3d_shape_check``: kernel, stride and dilation positive, the input's non-batch sizes
non-zero, the padding at most half the undilated kernel (a second check, in other words), the
3-d average pool's input at least the kernel, every output size at least 1.
"""

from __future__ import annotations


def pooling_output_size(size: int, k: int, pad: int, stride: int, dilation: int, ceil_mode: bool) -> int:
    """ATen's pooling_output_shape (div_rtn: rounding toward minus infinity)."""
    num = size + 2 * pad - dilation * (k - 1) - 1 + (stride - 1 if ceil_mode else 0)
    out = num // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _sizes(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def pool_refusal(shape, p, what: str):
    """(type, message) of the error PyTorch raises for a pool (``p``: a PoolSpec) of an input of
    ``shape``, else None; ``what``: ``max_pool2d``, ``avg_pool2d``, ``max_pool3d`` or ``avg_pool3d``."""
    rank = len(p.kernel)
    avg = what.startswith("avg")
    nd = len(shape)
    if avg and p.divisor_override is not None and p.divisor_override == 0 and (rank == 2 or nd in (4, 5)):
        return ("RuntimeError", "divisor must be not zero")
    if rank == 2:
        if nd not in (3, 4):
            if not avg:
                return ("RuntimeError", "non-empty 3D or 4D (batch mode) tensor expected for input")
            if nd == 0:   # avg_pool2d's input.size(-3)
                return ("IndexError", "Dimension specified as -3 but tensor has no dimensions")
            if nd < 3:
                return ("IndexError", f"Dimension out of range (expected to be in range of [{-max(nd, 1)}, "
                                      f"{max(nd, 1) - 1}], but got -3)")
    elif nd not in (4, 5):
        return ("RuntimeError", "non-empty 4D or 5D (batch mode) tensor expected for input")
    sizes = shape[-rank:]
    dil = p.dilation if not avg else (1,) * rank
    for size, k, s, pad, d in zip(sizes, p.kernel, p.stride, p.padding, dil):
        if s == 0:
            return ("RuntimeError", "stride should not be zero")
        if pad < 0:
            return ("RuntimeError", f"pad must be non-negative, but got pad: {pad}")
        if pad > _cdiv((k - 1) * d + 1, 2):
            return ("RuntimeError", f"pad should be at most half of effective kernel size, but got pad={pad}, "
                                    f"kernel_size={k} and dilation={d}")
    out = [pooling_output_size(size, k, pad, s, d, p.ceil_mode)
           for size, k, s, pad, d in zip(sizes, p.kernel, p.stride, p.padding, dil)]
    names = ("T", "H", "W")[3 - rank:]
    if any(k <= 0 for k in p.kernel):
        return ("RuntimeError", "kernel size should be greater than zero, but got " +
                " ".join(f"k{n}: {k}" for n, k in zip(names, p.kernel)))
    if any(s <= 0 for s in p.stride):
        return ("RuntimeError", "stride should be greater than zero, but got " +
                " ".join(f"d{n}: {s}" for n, s in zip(names, p.stride)))
    if any(d <= 0 for d in dil):
        return ("RuntimeError", "dilation should be greater than zero, but got " +
                " ".join(f"dilation{n}: {d}" for n, d in zip(names, dil)))
    planes = shape[-rank - 1]
    if rank == 2:
        if (nd == 3 and 0 in shape) or (nd == 4 and 0 in shape[1:]) or nd not in (3, 4):
            return ("RuntimeError", "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, "
                                    f"but got:{_sizes(shape)}")
        if any(_cdiv(k, 2) < pad for k, pad in zip(p.kernel, p.padding)):
            (kh, kw), (ph, pw) = p.kernel, p.padding
            return ("RuntimeError", "pad should be smaller than or equal to half of kernel size, but got "
                                    f"padW = {pw}, padH = {ph}, kW = {kw}, kH = {kh}")
    else:
        fn = "avg_pool3d()" if avg else "max_pool3d_with_indices_out_cpu_template()"
        for i, n in enumerate(shape):
            if not (nd == 5 and i == 0) and n <= 0:
                return ("RuntimeError", f"{fn}: Expected input's non-batch dimensions to have positive length, but "
                                        f"input has a shape of {_sizes(shape)} and non-batch dimension {n} has length "
                                        "zero!")
        if avg and any(n < k for n, k in zip(sizes, p.kernel)):
            return ("RuntimeError", "input image (T: {} H: {} W: {}) smaller than kernel size (kT: {} kH: {} kW: {})"
                    .format(*sizes, *p.kernel))
        if any(_cdiv(k, 2) < pad for k, pad in zip(p.kernel, p.padding)):
            (kt, kh, kw), (pt, ph, pw) = p.kernel, p.padding
            return ("RuntimeError", "pad should be smaller than or equal to half of kernel size, but got "
                                    f"kT: {kt} kW: {kw} kH: {kh} padT: {pt} padW: {pw} padH: {ph}")
    if min(out) < 1:
        return ("RuntimeError", f"Given input size: ({'x'.join(map(str, (planes,) + tuple(sizes)))}). Calculated "
                                f"output size: ({'x'.join(map(str, (planes,) + tuple(out)))}). Output size is too "
                                "small")
    return None


def _cdiv(a: int, b: int) -> int:
    """C++'s integer division (toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q
