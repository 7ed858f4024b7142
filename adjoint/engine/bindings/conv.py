"""``conv1d``, ``conv2d`` and the 2-D pools, as PyTorch 2.13 runs them on the CPU.

* ``conv1d`` / ``conv2d``: one ``ConvolutionBackward0`` (edges ``input, weight, bias``; the
  bias edge is None without a bias). An unbatched input is ``unsqueeze(0)`` before and
  ``squeeze(0)`` after (``UnsqueezeBackward0``, ``SqueezeBackward1``). ``padding="same"`` pads
  ``dilation * (k - 1)`` in total, the odd one on the right: when the two sides differ the
  input first goes through ``constant_pad_nd`` (``ConstantPadNdBackward0``), as
  ``_convolution_mode`` does.
* ``conv_transpose1d`` / ``conv_transpose2d``: the same ``ConvolutionBackward0`` with
  ``transposed=True`` (and ``output_padding``), unbatched the same way; its argument checks
  ATen's (:func:`adjoint.engine.ops.conv_checks.conv_transpose_refusal`), after the packs.
* ``max_pool2d``: ``MaxPool2DWithIndicesBackward0`` (``return_indices=True`` also returns the
  int64 indices, without a gradient); ``avg_pool2d``: ``AvgPool2DBackward0``;
  ``adaptive_avg_pool2d``: ``AdaptiveAvgPool2DBackward0``, except an output of 1 x 1, which
  ATen computes as ``mean(dim=(-1, -2), keepdim=True)`` (``MeanBackward1``).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.torch_errors import TorchError
from adjoint.engine.graph import Tensor
from adjoint.engine.ops.attention import mean_dims
from adjoint.engine.ops.conv import ConvSpec, FoldSpec, fold_blocks
from adjoint.engine.ops.pool import PoolSpec, Refused, empty_window_dim
from adjoint.engine.ops.pool_checks import pool_refusal
from adjoint.engine.ops.pool import Emptied
from adjoint.engine.bindings.signature import Function, Param
from adjoint.engine.warns import SAME_EVEN_KERNEL, warn_once


def expand_arg(v, rank: int, name: str, what: str, loc: Loc) -> tuple[int, ...]:
    """An int or ``rank`` ints (PyTorch's ``_pair`` / expand_param_if_needed). Lengths PyTorch
    refuses were refused before (``_conv_arg_refusal``, ``_length_refusal``: PyTorch's errors);
    values are the kernel's to refuse (:mod:`adjoint.engine.ops.conv_checks`, ``pool_checks``)."""
    t = (int(v),) if not isinstance(v, (tuple, list)) else tuple(int(n) for n in v)
    if len(t) == 1:
        t = t * rank
    if len(t) != rank:
        raise ProblemError(loc, f"{what}: {name}={list(t)} of another length than {rank}: an internal error (the "
                                "argument's length is checked before, as PyTorch does)")
    return t


def _conv_arg_refusal(w_shape, groups: int, rank: int, **given):
    """at::_convolution's first checks, after ConvolutionBackward0 packed input and weight: the
    weight's rank, groups, then stride, padding and dilation (each as conv{rank}d's parser hands
    it: an int repeated ``rank`` times) of one value or one per the weight's spatial dimensions.
    An explicit 1-tuple is taken as an int (PyTorch's parser would keep its one value)."""
    dim = len(w_shape) - 2
    if dim <= 0:
        return "weight should have at least three dimensions"
    if groups <= 0:
        return "non-positive groups is not supported"
    for name, v in given.items():
        t = [int(n) for n in v] if isinstance(v, (tuple, list)) else [int(v)]
        t = t * rank if len(t) == 1 else t   # the parser's int[rank] (a 1-tuple is taken as an int here)
        if len(t) not in (1, dim):
            return (f"expected {name} to be a single integer value or a list of {dim} values to match the "
                    f"convolution dimensions, but got {name}={t}")
    return None


def _ints_or_str(v, loc: Loc, what: str):
    if isinstance(v, str) or (isinstance(v, tuple) and all(type(i) is int for i in v)):
        return v   # a padding string, or the default
    from adjoint.engine.bindings.signature import check_kind
    return check_kind(v, Param("padding", "ints"), loc, what)


def convolution(rt, x: Tensor, w: Tensor, b: Tensor | None, stride, padding, dilation, groups: int, rank: int,
                loc: Loc):
    """at::conv{rank}d: the unbatched wrapping, padding="same"'s extra pad, one convolution."""
    what = f"conv{rank}d"
    if len(x.shape) not in (rank + 1, rank + 2):
        raise TorchError("RuntimeError", f"Expected {rank + 1}D (unbatched) or {rank + 2}D (batched) input to {what}, "
                                         f"but got input of size: {list(x.shape)}", "forward")
    if padding == "valid":   # at::_convolution_mode: padding {0}, one value of any dimension count
        padding = (0,) * (len(w.shape) - 2) if len(w.shape) > 3 else 0
    if padding == "same" and len(w.shape) != rank + 2:
        _same_padding_other_rank(x, w, groups, rank)
    if padding == "same":   # _convolution_same, before any node: groups, then each argument's length
        if groups <= 0:
            raise TorchError("RuntimeError", "non-positive groups is not supported", "forward")
        for name, v in (("stride", stride), ("dilation", dilation)):
            if isinstance(v, (tuple, list)) and len(v) not in (1, rank):
                raise TorchError("RuntimeError", f"{name} cannot broadcast to {rank} dimensions", "forward")
    # groups, stride, padding and dilation values, channels, bias and sizes are the kernel's to
    # refuse (ops/conv_checks.py, after the packs); the input's rank and padding='same' with a
    # stride are refused by conv{rank}d itself, before any node
    refusal = None if isinstance(padding, str) else _conv_arg_refusal(w.shape, groups, rank, stride=stride,
                                                                         padding=padding, dilation=dilation)
    if refusal is None and not isinstance(padding, str) and len(w.shape) != rank + 2:
        # arguments of one value or the weight's length: check_shape_forward's input rank
        # against the weight's (the unbatched input unsqueezed first)
        shape = ((1,) if len(x.shape) == rank + 1 else ()) + tuple(x.shape)
        refusal = (f"Expected {len(w.shape)}-dimensional input for {len(w.shape)}-dimensional weight {list(w.shape)}, "
                   f"but got {len(shape)}-dimensional input of size {list(shape)} instead")
    if refusal is None:
        stride = expand_arg(stride, rank, "stride", what, loc)
        dilation = expand_arg(dilation, rank, "dilation", what, loc)
        if any(d < 1 for d in dilation) and x.dtype != "float64":
            raise ProblemError(loc, f"{what} with a non-positive dilation in {x.dtype} is not modelled (PyTorch's "
                                    "message depends on the CPU backend it picks: 'dilation should be greater than "
                                    "zero, but got ...' or 'non-positive dilation is not supported'); use dtype "
                                    "float64 or a positive dilation")
    ap = rt.apply
    x, unbatched = _batched(rt, x, w, b, refusal, rank, loc)
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise TorchError("RuntimeError", f"Invalid padding string: '{padding}'", "forward")
        if padding == "valid":
            pads = (0,) * rank
        else:
            if any(s != 1 for s in stride):
                raise TorchError("RuntimeError", "padding='same' is not supported for strided convolutions",
                                 "forward")
            left = [d * (k - 1) // 2 for d, k in zip(dilation, w.shape[2:])]
            right = [d * (k - 1) - lo for d, k, lo in zip(dilation, w.shape[2:], left)]
            if left != right:
                warn_once(rt, "UserWarning", SAME_EVEN_KERNEL)
                pad_nd = [0] * (2 * rank)
                for i in range(rank):
                    pad_nd[2 * (rank - 1 - i) + 1] = right[i] - left[i]
                x = ap("constant_pad_nd", [x], tuple(pad_nd), loc)
            pads = tuple(left)
    else:
        pads = expand_arg(padding, rank, "padding", what, loc)
    y = ap("convolution", [x, w, b], ConvSpec(stride, pads, dilation, groups), loc)
    if unbatched:
        y = ap("squeeze_dim", [y], (0,), loc)
    return y


def conv_transpose(rt, x: Tensor, w: Tensor, b: Tensor | None, stride, padding, output_padding, groups: int,
                   dilation, rank: int, loc: Loc):
    """at::conv_transpose{rank}d: the input's rank checked before any node, an unbatched input
    unsqueezed, one transposed convolution (whose arguments the op checks after its packs)."""
    what = f"conv_transpose{rank}d"
    if len(x.shape) not in (rank + 1, rank + 2):
        raise TorchError("RuntimeError", f"Expected {rank + 1}D (unbatched) or {rank + 2}D (batched) input to {what}, "
                                         f"but got input of size: {list(x.shape)}", "forward")
    refusal = _conv_arg_refusal(w.shape, groups, rank, stride=stride, padding=padding, dilation=dilation,
                                output_padding=output_padding)
    if refusal is None and len(w.shape) != rank + 2:   # check_shape_forward's input rank against the weight's
        shape = ((1,) if len(x.shape) == rank + 1 else ()) + tuple(x.shape)
        refusal = (f"Expected {len(w.shape)}-dimensional input for {len(w.shape)}-dimensional weight {list(w.shape)}, "
                   f"but got {len(shape)}-dimensional input of size {list(shape)} instead")
    ap = rt.apply
    x, unbatched = _batched(rt, x, w, b, refusal, rank, loc)
    spec = ConvSpec(expand_arg(stride, rank, "stride", what, loc), expand_arg(padding, rank, "padding", what, loc),
                    expand_arg(dilation, rank, "dilation", what, loc), groups, True,
                    expand_arg(output_padding, rank, "output_padding", what, loc))
    from adjoint.engine.ops.conv_checks import conv_transpose_refusal
    if any(op >= s for op, s in zip(spec.output_padding, spec.stride)) and conv_transpose_refusal(
            x.shape, w.shape, None if b is None else b.shape, spec.stride, spec.padding, spec.dilation, groups,
            spec.output_padding) is None:
        raise ProblemError(loc, f"{what} with an output_padding of at least the stride (allowed below the dilation): "
                                "the positions past the last window are not modelled; give an output_padding "
                                "below the stride")
    y = ap("convolution", [x, w, b], spec, loc)
    if unbatched:
        y = ap("squeeze_dim", [y], (0,), loc)
    return y


def _batched(rt, x: Tensor, w: Tensor, b: Tensor | None, refusal, rank: int, loc: Loc):
    """(the input as the convolution takes it, whether it was unbatched): an unbatched input is
    ``unsqueeze(0)`` first; an argument ``refusal`` is raised by the convolution node, made
    after that unsqueeze (ATen checks its arguments inside at::convolution)."""
    unbatched = len(x.shape) == rank + 1
    if unbatched:
        x = rt.apply("unsqueeze", [x], 0, loc)
    if refusal is not None:
        rt.apply("convolution", [x, w, b], Refused("RuntimeError", refusal, x.shape), loc)
    return x, unbatched


def _same_padding_other_rank(x: Tensor, w: Tensor, groups: int, rank: int) -> None:
    """padding='same' with a weight of another rank than conv{rank}d's: _convolution_same
    refuses before any node (after the unbatched input's unsqueeze): the weight's rank,
    groups, then the input's rank against the weight's."""
    if len(w.shape) < 3:
        raise TorchError("RuntimeError", "weight should have at least three dimensions", "forward")
    if groups <= 0:
        raise TorchError("RuntimeError", "non-positive groups is not supported", "forward")
    shape = ((1,) if len(x.shape) == rank + 1 else ()) + tuple(x.shape)
    raise TorchError("RuntimeError", f"Expected {len(w.shape)}-dimensional input for {len(w.shape)}-dimensional "
                                     f"weight{list(w.shape)}, but got {len(shape)}-dimensional input of size "
                                     f"{list(shape)} instead", "forward")


def _lower_conv(rank: int):
    def lower(rt, a: dict, loc: Loc):
        padding = _ints_or_str(a["padding"], loc, f"conv{rank}d")
        return convolution(rt, a["input"], a["weight"], a["bias"], a["stride"], padding, a["dilation"],
                           a["groups"], rank, loc)
    lower.__name__ = f"lower_conv{rank}d"
    return lower


# ----------------------------------------------------------------------------- pooling

def pool_spec(kernel, stride, padding, loc: Loc, what: str, rank: int = 2, **extra) -> PoolSpec:
    """F.max_pool{rank}d / F.avg_pool{rank}d arguments: ``stride=None`` (or ``[]``) is the kernel size.
    Their values are not checked here: a zero stride, a negative padding... are the kernel's errors."""
    k = expand_arg(kernel, rank, "kernel_size", what, loc)
    empty = stride is None or (isinstance(stride, (tuple, list)) and not stride)
    s = k if empty else expand_arg(stride, rank, "stride", what, loc)
    p = expand_arg(padding, rank, "padding", what, loc)
    extra.setdefault("dilation", (1,) * rank)
    return PoolSpec(k, s, p, **extra)


#: the pool kernels' complaints about an argument's length (rank 2 and max_pool3d; avg_pool3d's words differ)
_LENGTH_WORDS = {"kernel_size": "must either be a single int", "stride": "must either be omitted, a single int",
                 "padding": "must either be a single int", "dilation": "must be either a single int"}
_AVG3D_LENGTH_WORDS = {"kernel_size": "must be a single int", "stride": "must be omitted, a single int",
                       "padding": "must be a single int"}


def _length_refusal(rank: int, what: str, **args):
    """The first of ``args`` (kernel_size, stride, padding[, dilation], in that order) whose length
    is neither 1 nor ``rank`` (an empty stride is the kernel's): the kernel's RuntimeError, after the
    node packed self, as a Refused parameter; else None."""
    words = _AVG3D_LENGTH_WORDS if what == "avg_pool3d" else _LENGTH_WORDS
    for name, v in args.items():
        n = len(v) if isinstance(v, (tuple, list)) else 1 if v is not None else 0
        if n not in (1, rank) and not (name == "stride" and n == 0):
            return f"{what}: {name} {words[name]}, or a tuple of {('two', 'three')[rank - 2]} ints"
    return None


def _refuse_symbolic(rt, x: Tensor, loc: Loc, what: str) -> None:
    if rt.B.is_symbolic(x.value):
        raise ProblemError(loc, f"{what} of values with free symbols: which element is a window's maximum depends on "
                                "them; bind the symbols (symbols: ...) or give numbers")


def _refuse_empty_window(x: Tensor, spec: PoolSpec, loc: Loc, what: str) -> None:
    """A max pool (PyTorch accepts it) with a window that holds no element of the input: ATen's
    kernel gives -inf and an index past the window (:func:`adjoint.engine.ops.pool.empty_window_dim`),
    whose backward writes outside the input plane: refused, not guessed."""
    rank = len(spec.kernel)
    if len(x.shape) < rank or pool_refusal(tuple(x.shape), spec, what) is not None:
        return   # PyTorch's own error comes first (the op's value_error)
    dim = empty_window_dim(x.shape[-rank:], spec)
    if dim is not None:
        size = x.shape[len(x.shape) - rank + dim]
        raise ProblemError(loc, f"{what} with a window that holds no element of the input (kernel "
                                f"{spec.kernel[dim]}, dilation {spec.dilation[dim]} from padding {spec.padding[dim]} "
                                f"steps over a size of {size}) is not modelled: PyTorch's kernel gives -inf with an "
                                "index past the window, and its backward writes outside the input (undefined); use "
                                "a smaller dilation or padding")


def max_pool(rank: int, rt, x: Tensor, kernel, stride, padding, dilation, ceil_mode: bool, return_indices: bool,
             loc: Loc):
    """F.max_pool{rank}d (rank 2 or 3): one MaxPool{rank}DWithIndicesBackward0."""
    what = f"max_pool{rank}d"
    bad = _length_refusal(rank, what, kernel_size=kernel, stride=stride, padding=padding, dilation=dilation)
    if bad:
        rt.apply(f"max_pool{rank}d_with_indices", [x], Refused("RuntimeError", bad, x.shape), loc)
    spec = pool_spec(kernel, stride, padding, loc, what, rank,
                     dilation=expand_arg(dilation, rank, "dilation", what, loc), ceil_mode=ceil_mode)
    _refuse_symbolic(rt, x, loc, what)
    _refuse_empty_window(x, spec, loc, what)
    out, indices = rt.apply(f"max_pool{rank}d_with_indices", [x], spec, loc)
    return (out, indices) if return_indices else out


def avg_pool(rank: int, rt, x: Tensor, kernel, stride, padding, ceil_mode: bool, count_include_pad: bool,
             divisor_override, loc: Loc):
    """F.avg_pool{rank}d (rank 2 or 3): one AvgPool{rank}DBackward0."""
    what = f"avg_pool{rank}d"
    bad = _length_refusal(rank, what, kernel_size=kernel, stride=stride, padding=padding)
    if bad:
        rt.apply(what, [x], Refused("RuntimeError", bad, x.shape), loc)
    spec = pool_spec(kernel, stride, padding, loc, what, rank, ceil_mode=ceil_mode,
                     count_include_pad=count_include_pad, divisor_override=divisor_override)
    return rt.apply(what, [x], spec, loc)


def _received(out) -> str:
    """ATen's ``{a, b}`` / ``{a, b,c}`` (adaptive_avg_pool3d writes its last comma without a space)."""
    return "{" + ", ".join(map(str, out[:2])) + "".join("," + str(n) for n in out[2:]) + "}"


def _list_with_default(x: Tensor, output_size) -> None:
    """F._list_with_default: a tuple output_size needs an input of more dimensions (ValueError)."""
    if isinstance(output_size, (tuple, list)) and len(x.shape) <= len(output_size):
        raise TorchError("ValueError", f"Input dimension should be at least {len(output_size) + 1}", "forward")


def _output_sizes(x: Tensor, sizes, rank: int, loc: Loc, what: str):
    """output_size with ``None`` entries replaced by the input's sizes (F._list_with_default)."""
    if any(s is None for s in sizes) and len(x.shape) < rank:
        raise ProblemError(loc, f"{what}: output_size None needs an input of at least {rank} dimensions")
    return tuple(x.shape[-rank + i] if s is None else int(s) for i, s in enumerate(sizes))


def adaptive_avg_pool(rank: int, rt, x: Tensor, output_size, loc: Loc):
    """F.adaptive_avg_pool{rank}d (rank 2 or 3); ``None`` in output_size keeps that input size; an
    output of all ones is ATen's ``mean`` over the spatial dims (MeanBackward1), whatever the input's
    rank (of fewer dims than the pool's, mean's IndexError). at::adaptive_avg_pool
    refuses output_size's length and negative sizes before any node; the kernel refuses the input's
    rank once AdaptiveAvgPool{rank}DBackward0 has packed self."""
    what = f"adaptive_avg_pool{rank}d"
    _list_with_default(x, output_size)
    sizes = (output_size,) * rank if output_size is None or isinstance(output_size, int) else tuple(output_size)
    if len(sizes) != rank:
        raise TorchError("RuntimeError", f"{what}: output_size must be {rank}", "forward")
    out = _output_sizes(x, sizes, rank, loc, what)
    if any(s < 0 for s in out):
        raise TorchError("RuntimeError", f"{what}: elements of output_size must be greater than or equal to 0 but "
                                         f"received {_received(out)}", "forward")
    if out == (1,) * rank:   # mean over dims -1, -2 (, -3): of fewer dims, mean's IndexError
        return rt.apply("mean_dim", [x], mean_dims(len(x.shape), tuple(range(-1, -rank - 1, -1)), True, loc), loc)
    if len(x.shape) not in (rank + 1, rank + 2):
        refused = Refused("RuntimeError", f"{what}(): Expected {rank + 1}D or {rank + 2}D tensor, but got "
                                          f"{list(x.shape)}", tuple(x.shape[:-rank]) + out)
        return rt.apply(what, [x], refused, loc)
    # the kernel's input check (the spatial dims in 2-D, every non-batch dim in 3-D), after the pack
    shape, nd = list(x.shape), len(x.shape)
    empty = [d for d in (range(nd - 2, nd) if rank == 2 else range(1, nd)) if shape[d] == 0]
    if empty:
        refused = Refused("RuntimeError", f"{what}(): Expected input to have non-zero size for non-batch dimensions, "
                                          f"but input has sizes {shape} with dimension {empty[0]} being empty",
                          tuple(x.shape[:-rank]) + out)
        return rt.apply(what, [x], refused, loc)
    return rt.apply(what, [x], _emptied(what, tuple(x.shape[:-rank]) + out, out), loc)


def _emptied(what: str, out_shape: tuple, sizes: tuple):
    """An adaptive pool's output size; an :class:`Emptied` one when the output has an empty
    non-batch dimension: PyTorch computes it, and its backward refuses the grad_output."""
    empty = [d for d in range(1, len(out_shape)) if out_shape[d] == 0]
    if not empty:
        return sizes
    return Emptied(sizes, f"{what}_backward(): Expected grad_output to have non-zero size for non-batch dimensions, "
                          f"but grad_output has sizes {list(out_shape)} with dimension {empty[0]} being empty")


def torch_namespace_pool(a, loc: Loc) -> bool:
    """Whether the call is ``torch.max_pool1d/2d/3d`` or ``torch.adaptive_max_pool1d`` (ATen's own
    functions), not ``F.``'s: they take no ``return_indices`` (one passed is the argument parser's
    TypeError: by position, "takes from 2 to 6 positional arguments but 7 were given"; by keyword,
    "got an unexpected keyword argument 'return_indices'"); ``torch.max_pool*`` returns the output
    alone, ``torch.adaptive_max_pool1d`` the pair (output, indices) always."""
    if a.prefix != "torch.":
        return False
    if "return_indices" in a.positional:
        most = len(a) - 1
        takes = "takes 2" if most == 2 else f"takes from 2 to {most}"
        raise TorchError("TypeError", f"{a.name}() {takes} positional arguments but {most + 1} were given")
    if "return_indices" in a.keywords:
        raise TorchError("TypeError", f"{a.name}() got an unexpected keyword argument 'return_indices'")
    return True


def _lower_max_pool(rank: int):
    def lower(rt, a: dict, loc: Loc):
        torch_namespace_pool(a, loc)
        return max_pool(rank, rt, a["input"], a["kernel_size"], a["stride"], a["padding"], a["dilation"],
                        a["ceil_mode"], a["return_indices"], loc)
    lower.__name__ = f"lower_max_pool{rank}d"
    return lower


def _lower_avg_pool(rank: int):
    def lower(rt, a: dict, loc: Loc):
        return avg_pool(rank, rt, a["input"], a["kernel_size"], a["stride"], a["padding"], a["ceil_mode"],
                        a["count_include_pad"], a["divisor_override"], loc)
    lower.__name__ = f"lower_avg_pool{rank}d"
    return lower


def _lower_adaptive_avg_pool(rank: int):
    def lower(rt, a: dict, loc: Loc):
        return adaptive_avg_pool(rank, rt, a["input"], _output_size(a["output_size"], loc), loc)
    lower.__name__ = f"lower_adaptive_avg_pool{rank}d"
    return lower


def _int(v, loc: Loc) -> int:
    if isinstance(v, Fraction) and not isinstance(v, bool) and v.denominator == 1:
        return int(v)
    raise ProblemError(loc, "adaptive_avg_pool2d(): output_size must be an int, None or a tuple of them: PyTorch "
                            "raises TypeError")


def _adaptive_max_refusal(rank: int, x: Tensor, sizes):
    """at::adaptive_max_pool{rank}d's checks, in their order, all after the node packed self: the
    input's rank, its non-batch sizes non-zero, output_size's length, a negative size (the output
    tensor cannot be made). (type, message, placeholder shape), or None."""
    what = f"adaptive_max_pool{rank}d"
    shape, nd = list(x.shape), len(x.shape)
    if nd not in (rank + 1, rank + 2):
        return (f"{what}(): Expected {rank + 1}D or {rank + 2}D tensor, but got: {shape}", ())
    empty = [d for d in range(1, nd) if shape[d] == 0]
    if empty:
        return (f"{what}(): Expected input to have non-zero size for non-batch dimensions, but input has sizes "
                f"{shape} with dimension {empty[0]} being empty", ())
    if len(sizes) != rank:
        return (f"{what}(): internal error: output_size.size() must be {rank}", ())
    out = tuple(shape[:-rank]) + tuple(x.shape[-rank + i] if s is None else int(s) for i, s in enumerate(sizes))
    negative = [n for n in out if n < 0]
    if negative:
        return (f"Trying to create tensor with negative dimension {negative[0]}: {list(out)}", out)
    return None


def adaptive_max_pool(rank: int, rt, x: Tensor, output_size, return_indices: bool, loc: Loc):
    """F.adaptive_max_pool{rank}d (rank 2 or 3): one AdaptiveMaxPool{rank}DBackward0 (``None`` in
    output_size keeps that size)."""
    what = f"adaptive_max_pool{rank}d"
    _list_with_default(x, output_size)
    sizes = (output_size,) * rank if output_size is None or isinstance(output_size, int) else tuple(output_size)
    refusal = _adaptive_max_refusal(rank, x, sizes)
    if refusal is not None:
        out, _ = rt.apply(what, [x], Refused("RuntimeError", refusal[0], refusal[1]), loc)
        return out
    out = tuple(x.shape[-rank + i] if s is None else int(s) for i, s in enumerate(sizes))
    _refuse_symbolic(rt, x, loc, what)
    out, indices = rt.apply(what, [x], _emptied(what, tuple(x.shape[:-rank]) + out, out), loc)
    return (out, indices) if return_indices else out


def adaptive_max_pool2d(rt, x: Tensor, output_size, return_indices: bool, loc: Loc):
    return adaptive_max_pool(2, rt, x, output_size, return_indices, loc)


def _pool1d_output_size(output_size, what: str, loc: Loc, keyword: bool = False) -> int:
    """A 1-d adaptive pool's ``output_size``, as ATen's ``int[1]`` reads it: None (or a None in the
    list), passed by position (as the modules and F.adaptive_max_pool1d pass it), is the argument
    parser's TypeError; by keyword (``keyword``) its words depend on the list's form and length, not
    modelled. Another length than one is at::adaptive_*_pool1d's check1d."""
    has_none = output_size is None or (isinstance(output_size, tuple) and None in output_size)
    if has_none and keyword:
        raise ProblemError(loc, f"{what}(output_size=...) holding None: PyTorch's TypeError is not modelled (its "
                                "argument parser words it by the list's form and length); give ints")
    if output_size is None:
        raise TorchError("TypeError", f"{what}(): argument 'output_size' (position 2) must be tuple of ints, not "
                                      "NoneType")
    if isinstance(output_size, tuple):
        if output_size and output_size[0] is None:   # the parser's type check reads the first element
            raise TorchError("TypeError", f"{what}(): argument 'output_size' (position 2) must be tuple of ints, but "
                                          "found element of type NoneType at pos 0")
        if None in output_size:   # a later one fails as the list is unpacked
            raise TorchError("TypeError", f"{what}(): argument 'output_size' failed to unpack the object at pos 2 "
                                          "with error \"type must be tuple of ints,but got NoneType\"")
        if len(output_size) != 1:
            raise TorchError("RuntimeError", f"{what}() argument 'output_size' should contain one int "
                                             f"(got {len(output_size)})", "forward")
        output_size = output_size[0]
    return int(output_size)


def _pool1d_input_rank(x: Tensor, what: str) -> None:
    """at::adaptive_*_pool1d's checkDimRange: a 2-D or 3-D input, before any node."""
    if len(x.shape) not in (2, 3):
        raise TorchError("RuntimeError", f"Expected 2 to 3 dimensions, but got {len(x.shape)}-dimensional tensor for "
                                         f"argument #1 'self' (while checking arguments for {what})", "forward")


def adaptive_avg_pool1d(rt, x: Tensor, output_size, loc: Loc, keyword: bool = False):
    """F.adaptive_avg_pool1d (ATen's own, also torch.adaptive_avg_pool1d): ``unsqueeze(-2)``
    (UnsqueezeBackward0), adaptive_avg_pool2d to (1, L) (AdaptiveAvgPool2DBackward0; an output of
    one: its mean over the last two dims, MeanBackward1), ``squeeze(-2)`` (SqueezeBackward1), as
    at::adaptive_avg_pool1d; its own checks first (the input 2-D or 3-D, one output size)."""
    _pool1d_input_rank(x, "adaptive_avg_pool1d")
    length = _pool1d_output_size(output_size, "adaptive_avg_pool1d", loc, keyword)
    ap = rt.apply
    u = ap("unsqueeze", [x], len(x.shape) - 1, loc)
    out = adaptive_avg_pool(2, rt, u, (1, length), loc)
    return ap("squeeze_dim", [out], (len(out.shape) - 2,), loc)


def adaptive_max_pool1d(rt, x: Tensor, output_size, return_indices: bool, loc: Loc, keyword: bool = False):
    """F.adaptive_max_pool1d: ``unsqueeze(-2)`` (UnsqueezeBackward0), adaptive_max_pool2d to (1, L),
    ``squeeze(-2)`` (SqueezeBackward1) of the output and of the indices. ``keyword``: ATen's
    torch.adaptive_max_pool1d handed output_size by keyword (F.'s passes it by position)."""
    _pool1d_input_rank(x, "adaptive_max_pool1d")
    output_size = _pool1d_output_size(output_size, "adaptive_max_pool1d", loc, keyword)
    empty = [d for d in range(1, len(x.shape)) if x.shape[d] == 0]
    if empty:   # at::adaptive_max_pool1d's own check, before any node
        raise TorchError("RuntimeError", "adaptive_max_pool1d(): Expected input to have non-zero size for non-batch "
                                         f"dimensions, but input has sizes {list(x.shape)} with dimension {empty[0]} "
                                         "being empty", "forward")
    ap = rt.apply
    u = ap("unsqueeze", [x], len(x.shape) - 1, loc)
    out, indices = adaptive_max_pool2d(rt, u, (1, output_size), True, loc)
    nd = len(out.shape)
    out = ap("squeeze_dim", [out], (nd - 2,), loc)
    indices = ap("squeeze_dim", [indices], (nd - 2,), loc)
    return (out, indices) if return_indices else out


#: check_max_pool1d's words for an argument of the wrong length
_MAX_POOL1D_LENGTH = {
    "kernel_size": "max_pool1d() kernel_size must be an int, list of ints or tuple of ints of size 1 but got size {n}",
    "stride": "max_pool1d() stride must be None, an int, list of ints, or tuple of ints of size 1 but got size {n}",
    "padding": "max_pool1d() padding must be an int, list of ints, or tuple of ints of size 1 but got size {n}",
    "dilation": "max_pool1d() dilation must be an int, list of ints or tuple of ints of size 1 but got size {n}",
}


def _pool1d_args(x: Tensor, kernel, stride, padding, dilation, what: str, own_checks: bool):
    """at::max_pool1d's / at::avg_pool1d's / at::max_pool1d_with_indices' own checks, before any
    node: the input 2-D or 3-D, one kernel size, stride (empty: the kernel), padding and dilation
    each. ``own_checks``: at::max_pool1d's check_max_pool1d (its words; the input's non-batch sizes
    non-zero); otherwise the values are the 2-d kernel's to refuse (ops/pool_checks.py)."""
    nd = len(x.shape)
    if own_checks:
        if nd not in (2, 3) or 0 in x.shape[-2 if nd == 3 else -1:] or (nd == 2 and 0 in x.shape):
            raise TorchError("RuntimeError", "max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim "
                                             f"batch size for input, but got:{list(x.shape)}", "forward")
    elif nd not in (2, 3):
        raise TorchError("RuntimeError", f"Expected 2 to 3 dimensions, but got {nd}-dimensional tensor for argument "
                                         f"#1 'self' (while checking arguments for {what})", "forward")

    def one(v, name: str) -> int:
        t = (int(v),) if not isinstance(v, (tuple, list)) else tuple(int(n) for n in v)
        if len(t) != 1:
            raise TorchError("RuntimeError", _MAX_POOL1D_LENGTH[name].format(n=len(t)) if own_checks else
                             f"{what}() argument '{name}' should contain one int (got {len(t)})", "forward")
        return t[0]
    k = one(kernel, "kernel_size")
    empty = stride is None or (isinstance(stride, (tuple, list)) and not stride)
    s = None if empty else one(stride, "stride")
    p, d = one(padding, "padding"), one(dilation, "dilation")
    return k, k if s is None else s, p, d


def max_pool1d(rt, x: Tensor, kernel, stride, padding, dilation, ceil_mode: bool, return_indices: bool, loc: Loc):
    """F.max_pool1d: ``unsqueeze(-2)`` (UnsqueezeBackward0), max_pool2d_with_indices over (1, L)
    windows (MaxPool2DWithIndicesBackward0), ``squeeze(-2)`` (SqueezeBackward1) of the output and
    of the indices, as at::max_pool1d_with_indices (the path of an input that requires grad).
    Without return_indices at::max_pool1d's check_max_pool1d refuses first, in its own words."""
    k, s, p, d = _pool1d_args(x, kernel, stride, padding, dilation, "max_pool1d", not return_indices)
    if not return_indices:
        from adjoint.engine.ops.pool import pooling_output_size
        for ok, message in ((k > 0, f"kernel_size must be greater than zero, but got {k}"),
                            (s > 0, f"stride must be greater than zero, but got {s}"),
                            (p >= 0, f"padding must be non-negative, but got {p}"),
                            (p <= k // 2, f"padding should be at most half of kernel size, but got padding={p} and "
                                          f"kernel_size={k}"),
                            (d > 0, f"dilation must be greater than zero, but got {d}")):
            if not ok:
                raise TorchError("RuntimeError", "max_pool1d() " + message, "forward")
        width = pooling_output_size(x.shape[-1], k, p, s, d, ceil_mode)
        if width <= 0:
            raise TorchError("RuntimeError", f"max_pool1d() Invalid computed output size: {width}", "forward")
    _refuse_symbolic(rt, x, loc, "max_pool1d")
    ap = rt.apply
    u = ap("unsqueeze", [x], len(x.shape) - 1, loc)
    out, indices = max_pool(2, rt, u, (1, k), (1, s), (0, p), (1, d), ceil_mode, True, loc)
    nd = len(out.shape)
    out = ap("squeeze_dim", [out], (nd - 2,), loc)
    indices = ap("squeeze_dim", [indices], (nd - 2,), loc)
    return (out, indices) if return_indices else out


def avg_pool1d(rt, x: Tensor, kernel, stride, padding, ceil_mode: bool, count_include_pad: bool, loc: Loc):
    """F.avg_pool1d: ``unsqueeze(-2)`` (UnsqueezeBackward0), avg_pool2d over (1, L) windows
    (AvgPool2DBackward0, its checks), ``squeeze(-2)`` (SqueezeBackward1), as at::avg_pool1d."""
    k, s, p, _ = _pool1d_args(x, kernel, stride, padding, 1, "avg_pool1d", False)
    ap = rt.apply
    u = ap("unsqueeze", [x], len(x.shape) - 1, loc)
    out = avg_pool(2, rt, u, (1, k), (1, s), (0, p), ceil_mode, count_include_pad, None, loc)
    return ap("squeeze_dim", [out], (len(out.shape) - 2,), loc)


def _lower_max_pool1d(rt, a: dict, loc: Loc):
    torch_namespace_pool(a, loc)
    return max_pool1d(rt, a["input"], a["kernel_size"], a["stride"], a["padding"], a["dilation"], a["ceil_mode"],
                      a["return_indices"], loc)


def _lower_avg_pool1d(rt, a: dict, loc: Loc):
    return avg_pool1d(rt, a["input"], a["kernel_size"], a["stride"], a["padding"], a["ceil_mode"],
                      a["count_include_pad"], loc)


def _output_size(size, loc: Loc):
    if isinstance(size, (tuple, list)):
        return tuple(None if s is None else _int(s, loc) for s in size)
    return None if size is None else _int(size, loc)


def _lower_adaptive_max_pool(rank: int):
    def lower(rt, a: dict, loc: Loc):
        return adaptive_max_pool(rank, rt, a["input"], _output_size(a["output_size"], loc), a["return_indices"], loc)
    lower.__name__ = f"lower_adaptive_max_pool{rank}d"
    return lower


def lower_adaptive_max_pool1d(rt, a: dict, loc: Loc):
    pair = torch_namespace_pool(a, loc)   # torch.adaptive_max_pool1d: (output, indices) always
    return adaptive_max_pool1d(rt, a["input"], _output_size(a["output_size"], loc), pair or a["return_indices"],
                               loc, keyword=pair and "output_size" in a.keywords)


def lower_adaptive_avg_pool1d(rt, a: dict, loc: Loc):
    return adaptive_avg_pool1d(rt, a["input"], _output_size(a["output_size"], loc), loc,
                               keyword="output_size" in a.keywords)


_IN = Param("input", "tensor")


def _lower_conv_transpose(rank: int):
    def lower(rt, a: dict, loc: Loc):
        return conv_transpose(rt, a["input"], a["weight"], a["bias"], a["stride"], a["padding"], a["output_padding"],
                              a["groups"], a["dilation"], rank, loc)
    lower.__name__ = f"lower_conv_transpose{rank}d"
    return lower


def _conv_transpose_params() -> tuple[Param, ...]:
    return (_IN, Param("weight", "tensor"), Param("bias", "tensor", None), Param("stride", "ints", (1,)),
            Param("padding", "ints", (0,)), Param("output_padding", "ints", (0,)), Param("groups", "int", 1),
            Param("dilation", "ints", (1,)))


def _fold_pair(v, name: str, what: str, loc: Loc, typ=None) -> tuple[int, int]:
    """torch.nn.functional's ``_pair``: an int twice; a tuple or list as given, which im2col /
    col2im check is of length 2 (another length: PyTorch's RuntimeError, refused here). Anything
    but Python ints (a float, a tensor): PyTorch's TypeError, refused."""
    items = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    if isinstance(v, (tuple, list)) and len(items) != 2:
        raise ProblemError(loc, f"F.{what}: {name} of {len(items)} ints: PyTorch's RuntimeError there is not "
                                "modelled; give an int or two")
    if typ == "float" or any(isinstance(e, bool) or not isinstance(e, (int, Fraction)) or Fraction(e).denominator != 1
                             for e in items):
        raise ProblemError(loc, f"F.{what}: {name} must be an int or two ints here (PyTorch's TypeError for "
                                "another type is not modelled)")
    return (int(items[0]), int(items[-1]))


def _fold_spec(a, what: str, loc: Loc, output_size=None) -> FoldSpec:
    spec = FoldSpec(*(_fold_pair(a[n], n, what, loc, a.type_of(n)) for n in ("kernel_size", "dilation", "padding",
                                                                             "stride")),
                    output_size)
    if min(spec.kernel_size + spec.dilation + spec.stride) <= 0 or min(spec.padding) < 0:
        raise ProblemError(loc, f"F.{what} with a kernel_size, dilation or stride below 1 or a negative padding: "
                                "PyTorch's RuntimeError there is not modelled")
    return spec


def lower_im2col(rt, a, loc: Loc):
    """F.unfold: ``torch._C._nn.im2col`` (Im2ColBackward0, saves no tensor) of a 3-d or 4-d input
    with at least one block; PyTorch's shape errors are refused, not predicted."""
    x = a["input"]
    spec = _fold_spec(a, "unfold", loc)
    if len(x.shape) not in (3, 4) or 0 in x.shape:
        raise ProblemError(loc, "F.unfold of a tensor that is not 3-d or 4-d with non-zero sizes: PyTorch's "
                                "RuntimeError there is not modelled")
    if min(fold_blocks(x.shape[-2:], spec)) < 1:
        raise ProblemError(loc, "F.unfold with no sliding block (the kernel is larger than the padded input): "
                                "PyTorch's RuntimeError there is not modelled")
    return rt.apply("im2col", [x], spec, loc)


def lower_col2im(rt, a, loc: Loc):
    """F.fold: ``torch._C._nn.col2im`` (Col2ImBackward0, saves no tensor) of a 2-d or 3-d input whose
    sizes match output_size's blocks; PyTorch's shape errors are refused, not predicted."""
    x = a["input"]
    size = _fold_pair(a["output_size"], "output_size", "fold", loc, a.type_of("output_size"))
    spec = _fold_spec(a, "fold", loc, size)
    k = spec.kernel_size[0] * spec.kernel_size[1]
    blocks = fold_blocks(size, spec)
    if len(x.shape) not in (2, 3) or 0 in x.shape or x.shape[-2] % k or min(size) < 1 or min(blocks) < 1 or \
            x.shape[-1] != blocks[0] * blocks[1]:
        raise ProblemError(loc, "F.fold of an input whose sizes do not match output_size, kernel_size and the "
                                "number of sliding blocks (or with no block): PyTorch's RuntimeError there is not "
                                "modelled")
    return rt.apply("col2im", [x], spec, loc)


def _conv_params() -> tuple[Param, ...]:
    return (_IN, Param("weight", "tensor"), Param("bias", "tensor", None), Param("stride", "ints", (1,)),
            Param("padding", "any", (0,)), Param("dilation", "ints", (1,)), Param("groups", "int", 1))


FUNCTIONS = (
    Function("unfold", (_IN, Param("kernel_size", "any"), Param("dilation", "any", 1), Param("padding", "any", 0),
                        Param("stride", "any", 1)), lower_im2col, where="function",
             doc="F.unfold: Im2ColBackward0 (im2col; a 3-d input too, no node of its own)"),
    Function("fold", (_IN, Param("output_size", "any"), Param("kernel_size", "any"), Param("dilation", "any", 1),
                      Param("padding", "any", 0), Param("stride", "any", 1)), lower_col2im, where="function",
             doc="F.fold: Col2ImBackward0 (col2im; a 2-d input too, no node of its own)"),
    Function("conv1d", _conv_params(), _lower_conv(1), where="function",
             doc="ConvolutionBackward0 (unbatched: UnsqueezeBackward0 first, SqueezeBackward1 last; "
                 "padding='same' with uneven sides: ConstantPadNdBackward0 first)"),
    Function("conv2d", _conv_params(), _lower_conv(2), where="function",
             doc="ConvolutionBackward0 (unbatched: UnsqueezeBackward0 first, SqueezeBackward1 last; "
                 "padding='same' with uneven sides: ConstantPadNdBackward0 first)"),
    Function("conv_transpose1d", _conv_transpose_params(), _lower_conv_transpose(1), where="function",
             doc="ConvolutionBackward0, transposed=True (unbatched: UnsqueezeBackward0 first, SqueezeBackward1 last)"),
    Function("conv_transpose2d", _conv_transpose_params(), _lower_conv_transpose(2), where="function",
             doc="ConvolutionBackward0, transposed=True (unbatched: UnsqueezeBackward0 first, SqueezeBackward1 last)"),
    Function("max_pool2d", (_IN, Param("kernel_size", "ints"), Param("stride", "ints", None),
                            Param("padding", "ints", (0,)), Param("dilation", "ints", (1,)),
                            Param("ceil_mode", "bool", False), Param("return_indices", "bool", False)),
             _lower_max_pool(2), where="function",
             doc="MaxPool2DWithIndicesBackward0 (return_indices=True: also the int64 indices)"),
    Function("avg_pool2d", (_IN, Param("kernel_size", "ints"), Param("stride", "ints", None),
                            Param("padding", "ints", (0,)), Param("ceil_mode", "bool", False),
                            Param("count_include_pad", "bool", True), Param("divisor_override", "int", None)),
             _lower_avg_pool(2), where="function", doc="AvgPool2DBackward0"),
    Function("adaptive_avg_pool2d", (_IN, Param("output_size", "any")), _lower_adaptive_avg_pool(2),
             where="function", doc="AdaptiveAvgPool2DBackward0; output 1 x 1: MeanBackward1 (mean over H, W)"),
    Function("adaptive_max_pool2d", (_IN, Param("output_size", "any"), Param("return_indices", "bool", False)),
             _lower_adaptive_max_pool(2), where="function",
             doc="AdaptiveMaxPool2DBackward0 (saves self, indices; return_indices=True: also the int64 indices)"),
    Function("adaptive_max_pool1d", (_IN, Param("output_size", "any"), Param("return_indices", "bool", False)),
             lower_adaptive_max_pool1d, where="function",
             doc="UnsqueezeBackward0, AdaptiveMaxPool2DBackward0, SqueezeBackward1"),
    Function("adaptive_avg_pool1d", (_IN, Param("output_size", "any")), lower_adaptive_avg_pool1d, where="function",
             doc="UnsqueezeBackward0, AdaptiveAvgPool2DBackward0 (an output of 1: MeanBackward1), SqueezeBackward1"),
    Function("max_pool1d", (_IN, Param("kernel_size", "ints"), Param("stride", "ints", None),
                            Param("padding", "ints", (0,)), Param("dilation", "ints", (1,)),
                            Param("ceil_mode", "bool", False), Param("return_indices", "bool", False)),
             _lower_max_pool1d, where="function",
             doc="UnsqueezeBackward0, MaxPool2DWithIndicesBackward0, SqueezeBackward1 (return_indices=True: also the "
                 "int64 indices)"),
    Function("avg_pool1d", (_IN, Param("kernel_size", "ints"), Param("stride", "ints", None),
                            Param("padding", "ints", (0,)), Param("ceil_mode", "bool", False),
                            Param("count_include_pad", "bool", True)),
             _lower_avg_pool1d, where="function", doc="UnsqueezeBackward0, AvgPool2DBackward0, SqueezeBackward1"),
)
