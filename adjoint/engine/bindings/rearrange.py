"""logsumexp, cumsum, flip, roll, repeat, tril / triu, trace and ``F.pad``: what PyTorch 2.13
runs for each (checked in real torch: one node each, a new tensor, never a view).

* ``logsumexp(input, dim, keepdim=False)``: LogsumexpBackward0 (saves self, result); ``dim``
  an int or a tuple (required: PyTorch's TypeError without it); ``dim=()`` reduces every dim
  with keepdim=True and is PyTorch's error after the packs without (the composite's broadcast
  error); an empty input is refused, as are integer inputs (a float result);
* ``cumsum(input, dim, *, dtype=None)``: CumsumBackward0 (saves nothing); ``dtype=`` refused;
* ``flip(input, dims)`` (the method also takes the dims unpacked): FlipBackward0;
* ``roll(input, shifts, dims=None)``: RollBackward0; no dims: the flattened tensor rolled;
* ``Tensor.repeat(*sizes)`` (a method only): RepeatBackward0;
* ``tril(input, diagonal=0)`` / ``triu``: TrilBackward0 / TriuBackward0 (at least 2-D);
* ``trace(input)``: TraceBackward0 (2-D only);
* ``F.pad(input, pad, mode='constant', value=None)``: ConstantPadNdBackward0 (negative pads
  crop); the other modes are refused;
* ``diff(input, n=1, dim=-1, prepend=None, append=None)``: ATen's composite, n times (n at
  most the dim's size): ``narrow(x, dim, 1, len - 1) - narrow(x, dim, 0, len - 1)``, the second
  slice made first (SliceBackward0, SliceBackward0, SubBackward0); prepend / append are first
  cat'd on (CatBackward0); ``n=0`` (a CopyBackwards copy) is refused;
* ``prod(input, dim, keepdim=False, *, dtype=None)``: ProdBackward0 with no dim at all,
  ProdBackward1 with one (an int: a tuple or None is PyTorch's TypeError); ``dtype=`` and values
  with free symbols (whether an element is 0 decides the backward) are refused.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.pyfloat import is_int
from adjoint.engine.graph import Tensor
from adjoint.engine.infinity import Infinite
from adjoint.engine.bindings.signature import (PARSER_TYPE_ERROR, Function, Param, dim_index, keepdim_flag,
                                               keepdim_without_dim)
from adjoint.engine.bindings.reductions import ABSENT, reduce_dims
from adjoint.engine.ops.conv import PadValue
from adjoint.engine.torch_errors import TorchError
from adjoint.values.strides import is_contiguous


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _float_input(x: Tensor, loc: Loc, what: str) -> None:
    if x.dtype in ("int64", "bool"):
        raise ProblemError(loc, f"{what} of {'an' if x.dtype == 'int64' else 'a'} {x.dtype} tensor is not modelled "
                                "yet; use a float tensor")


def lower_logsumexp(rt, a, loc):
    x, dim = a["input"], a["dim"]
    if dim is None:
        raise ProblemError(loc, f"logsumexp(): argument 'dim' must be an int or a tuple of ints, not None: "
                                f"{PARSER_TYPE_ERROR}")
    keepdim = keepdim_flag(a, "logsumexp", LOGSUMEXP_PARAMS, loc)
    _float_input(x, loc, "logsumexp")
    if _numel(x.shape) == 0:
        raise ProblemError(loc, "logsumexp of an empty tensor is not modelled yet")
    if isinstance(dim, (tuple, list)) and not dim and x.shape and not keepdim:
        # dim=(): the composite's amax keeps every dim as 1s, and sum_out then refuses the 0-d
        # result, after LogsumexpBackward0 packed self (with keepdim=True it reduces every dim)
        rt.raise_after_packs("logsumexp", [x], TorchError(
            "RuntimeError", f"output with shape [] doesn't match the broadcast shape {[1] * len(x.shape)}"), loc)
    return rt.apply("logsumexp", [x], (reduce_dims(x, dim, loc), keepdim), loc)


def _lower_scan(name: str):
    """``torch.cumsum`` / ``torch.cumprod`` (``dim``; ``dtype=`` refused): one op of that name."""
    def lower(rt, a, loc):
        x = a["input"]
        if a["dtype"] is not None:
            raise ProblemError(loc, f"{name}(dtype=...) is not modelled yet; leave dtype out")
        _float_input(x, loc, name)
        return rt.apply(name, [x], dim_index(a["dim"], len(x.shape), loc), loc)
    return lower


lower_cumsum = _lower_scan("cumsum")
lower_cumprod = _lower_scan("cumprod")


def lower_flip_function(rt, a, loc):
    if not isinstance(a["dims"], (tuple, list)) or not all(isinstance(d, Fraction) and not isinstance(d, bool)
                                                           and d.denominator == 1 for d in a["dims"]):
        raise ProblemError(loc, f"flip(): argument 'dims' must be tuple of ints: {PARSER_TYPE_ERROR} (here also by "
                                "the first element and by list or tuple)")
    return lower_flip(rt, {"input": a["input"], "dims": tuple(int(d) for d in a["dims"])}, loc)


def lower_flip(rt, a, loc):
    x, dims = a["input"], []
    for d in a["dims"]:
        k = dim_index(d, len(x.shape), loc)
        if k in dims:
            raise TorchError("RuntimeError", f"dim {k} appears multiple times in the list of dims")
        dims.append(k)
    return rt.apply("flip", [x], tuple(sorted(dims)) if x.shape else (), loc)


def lower_tile(rt, a, loc):
    """at::tile: ``repeat`` (RepeatBackward0, ``repeat(1, ..., 1)`` too: a new node, not the
    tensor) with the reps padded with leading 1s to the tensor's dims where fewer are given."""
    x, reps = a["input"], a["dims"]
    if not isinstance(reps, (tuple, list)) or not all(isinstance(r, int) and not isinstance(r, bool) or is_int(r)
                                                      for r in reps):
        # torch.tile(x, 2): tile's dims is a SymInt[] without a size, so PyTorch's parser takes no
        # lone int there (x.tile(2) is the method's varargs)
        raise ProblemError(loc, f"torch.tile(): argument 'dims' must be a tuple of ints: {PARSER_TYPE_ERROR}")
    reps = tuple(int(r) for r in reps)
    reps = (1,) * (len(x.shape) - len(reps)) + reps
    return lower_repeat(rt, {"self": x, "repeats": reps}, loc)


def lower_roll(rt, a, loc):
    x, shifts, dims = a["input"], a["shifts"], a["dims"] or ()
    if not shifts:
        raise TorchError("RuntimeError", "`shifts` required")
    if len(shifts) != len(dims) and not (not dims and len(shifts) == 1):
        raise TorchError("RuntimeError", f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    if dims and not x.shape:
        raise TorchError("IndexError", f"Dimension specified as {dims[0]} but tensor has no dimensions")
    norm = tuple(dim_index(d, len(x.shape), loc) for d in dims)
    return rt.apply("roll", [x], (tuple(shifts), norm), loc)


def lower_repeat(rt, a, loc):
    x, reps = a["self"], tuple(a["repeats"])
    if len(reps) < len(x.shape):
        raise TorchError("RuntimeError", "Number of dimensions of repeat dims can not be smaller than number of "
                                         "dimensions of tensor")
    padded = (1,) * (len(reps) - len(x.shape)) + tuple(x.shape)
    out = [s * r for s, r in zip(padded, reps)]
    negative = [n for n in out if n < 0]      # check_size_nonnegative names the first
    if negative:
        raise TorchError("RuntimeError", f"Trying to create tensor with negative dimension {negative[0]}: {out}")
    return rt.apply("repeat", [x], reps, loc)


def lower_repeat_interleave(rt, a, loc):
    """at::repeat_interleave with an int ``repeats`` (ATen's composite): no dim flattens first
    (``flatten()``: ViewBackward0, none for a 1-D input); the dim wrapped against the input's rank,
    ``repeats`` checked, then ``unsqueeze(dim + 1)``, ``expand`` to ``repeats`` copies, a contiguous
    ``clone`` and ``flatten(dim, dim + 1)``: UnsqueezeBackward0, ExpandBackward0, CloneBackward0,
    ViewBackward0. A tensor ``repeats`` (index_select's path) is refused."""
    from adjoint.engine.bindings.views import lower_flatten
    x, repeats, dim, output_size = a["input"], a["repeats"], a["dim"], a["output_size"]
    if isinstance(repeats, Tensor):
        return _repeat_interleave_tensor(rt, x, repeats, dim, output_size, loc)
    if isinstance(repeats, bool) or not isinstance(repeats, Fraction) or repeats.denominator != 1:
        raise ProblemError(loc, "repeat_interleave() with repeats other than an int or a tensor is not modelled")
    repeats = int(repeats)
    flat = x if dim is not None else lower_flatten(rt, {"input": x, "start_dim": 0, "end_dim": -1}, loc)
    d = dim_index(0 if dim is None else dim, len(x.shape), loc)
    if repeats < 0:
        raise TorchError("RuntimeError", "Repeats must be non-negative")
    h = rt.apply("unsqueeze", [flat], d + 1, loc)
    shape = list(h.shape)
    shape[d + 1] = repeats
    if output_size is not None and output_size != repeats * shape[d]:
        raise TorchError("RuntimeError", f"repeat_interleave: Invalid output_size, expected {repeats * shape[d]} but "
                                         f"got {output_size}")
    h = rt.apply("clone", [rt.apply("expand", [h], tuple(shape), loc)], None, loc)
    return lower_flatten(rt, {"input": h, "start_dim": d, "end_dim": d + 1}, loc)


def _repeat_interleave_tensor(rt, x, repeats, dim, output_size, loc):
    """at::repeat_interleave(self, Tensor repeats, dim): no dim flattens first (ViewBackward0, none
    for 1-D); a 0-d or one-element ``repeats`` is expanded to the dim's size (the dim wrapped: its
    IndexError), a 1-d one must match it, another is PyTorch's error; then the index vector
    ``repeat_interleave(repeats)`` (the kernel's dtype and negative checks) and ``index_select``
    (IndexSelectBackward0, saving that index). ``output_size``, values unknown to ``--structure``,
    an empty result: refused."""
    from adjoint.engine.bindings.views import lower_flatten
    from adjoint.engine.torch_errors import TYPE_NAMES
    if output_size is not None:
        raise ProblemError(loc, "repeat_interleave() with a tensor of repeats and output_size is not modelled yet")
    if not x.shape:
        raise ProblemError(loc, "repeat_interleave() of a 0-d tensor with a tensor of repeats is not modelled yet")
    if rt.B.name == "structure":
        raise ProblemError(loc, "repeat_interleave() with a tensor of repeats under --structure: the result's size "
                                "depends on the values")
    flat = x if dim is not None else lower_flatten(rt, {"input": x, "start_dim": 0, "end_dim": -1}, loc)
    d_given = 0 if dim is None else int(dim)
    if len(repeats.shape) > 1:
        raise TorchError("RuntimeError", "repeats must be 0-dim or 1-dim tensor")
    d = dim_index(d_given, len(flat.shape), loc)
    n = flat.shape[d] if flat.shape else 1
    if repeats.shape and repeats.shape[0] != 1 and repeats.shape[0] != n:
        raise TorchError("RuntimeError", f"repeats must have the same size as input along dim, but got "
                                         f"repeats.size(0) = {repeats.shape[0]} and input.size({d_given}) = {n}")
    if repeats.dtype != "int64":
        raise TorchError("NotImplementedError",
                         f'"repeat_interleave_cpu" not implemented for \'{TYPE_NAMES[repeats.dtype]}\'')
    counts = [int(v) for v in rt.B.as_indices(repeats.value).reshape(-1).tolist()]
    if len(counts) == 1:
        counts = counts * n
    if any(c < 0 for c in counts):
        raise TorchError("RuntimeError", "repeats can not be negative")
    index = [i for i, c in enumerate(counts) for _ in range(c)]
    if not index:
        raise ProblemError(loc, "repeat_interleave() with repeats that sum to 0 (an empty result) is not modelled "
                                "(zero-size tensors are not)")
    idx = rt.tensor(rt.B.integers(index, (len(index),)), dtype="int64")
    return rt.apply("index_select", [flat, idx], d, loc)


def _triangle(prim: str):
    def lower(rt, a, loc):
        x = a["input"]
        if len(x.shape) < 2:
            raise TorchError("RuntimeError", f"{prim}: input tensor must have at least 2 dimensions")
        return rt.apply(prim, [x], a["diagonal"], loc)
    lower.__name__ = f"lower_{prim}"
    return lower


def lower_trace(rt, a, loc):
    x = a["input"]
    if len(x.shape) != 2:
        raise TorchError("RuntimeError", f"trace: expected a matrix, but got tensor with dim {len(x.shape)}")
    _float_input(x, loc, "trace")
    return rt.apply("trace", [x], None, loc)


_NON_CONSTANT = ("Supported combinations for non-constant padding:\n  - 2D or 3D input: padding size = 2 (pads last "
                 "dimension)\n  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n  - 4D or 5D input: "
                 "padding size = 6 (pads last 3 dimensions)")


def _pad_length_checks(x: Tensor, pads: tuple) -> None:
    """at::pad's checks of the pad list, whatever the mode: an even length, at most two per dim."""
    if len(pads) % 2:
        raise TorchError("RuntimeError", "Padding length must be divisible by 2")
    if len(pads) // 2 > len(x.shape):
        raise TorchError("RuntimeError", f"Padding length should be less than or equal to two times the input "
                                         f"dimension but got padding length {len(pads)} and input of dimension "
                                         f"{len(x.shape)}")


def pad_by_copies(rt, x: Tensor, pads: tuple, mode: str, value, loc):
    """``at::pad`` with ``mode='reflect'`` or ``'replicate'`` (``_pad_enum``): its checks in its
    order, then ``reflection_pad{1,2,3}d`` / ``replication_pad{1,2,3}d`` (adjoint.engine.ops.padding);
    ``'circular'``: ``at::_pad_circular``, slices and copies (adjoint.engine.bindings.pad_circular)."""
    from adjoint.engine.ops.padding import PadSpec
    if mode not in ("reflect", "replicate", "circular"):
        raise TorchError("NotImplementedError", f"Unrecognised padding mode {mode}")   # pad_symint's, first
    _pad_length_checks(x, pads)
    if value is not None and value != 0:
        raise TorchError("RuntimeError", f'Padding mode "{mode}" doesn\'t take in value argument')
    k = len(pads) // 2
    if not (k in (1, 2, 3) and k + 1 <= len(x.shape) <= k + 2):
        raise TorchError("NotImplementedError", f"Padding size {len(pads)} is not supported for {len(x.shape)}D input "
                                                f"tensor.\n{_NON_CONSTANT}")
    if mode == "circular":
        from adjoint.engine.bindings.pad_circular import pad_circular
        if 0 in x.shape:
            raise ProblemError(loc, "F.pad(mode='circular') of a tensor with no element is not modelled")
        _float_input(x, loc, "F.pad")
        return pad_circular(rt, x, pads, loc)
    if any(p < 0 for p in pads) or 0 in x.shape:
        raise ProblemError(loc, f"F.pad(mode={mode!r}) with a negative pad or of a tensor with no element is not "
                                "modelled yet (PyTorch crops, or checks sizes adjoint does not follow)")
    _float_input(x, loc, "F.pad")
    prim = f"{'reflection' if mode == 'reflect' else 'replication'}_pad{k}d"
    if mode == "reflect":
        for i in range(k):   # the kernel's check (after the node packed self), the last dim first
            d = len(x.shape) - 1 - i
            left, right = pads[2 * i], pads[2 * i + 1]
            if left >= x.shape[d] or right >= x.shape[d]:
                rt.raise_after_packs(prim, [x], TorchError(
                    "RuntimeError", f"Argument #{4 + 2 * i}: Padding size should be less than the corresponding input "
                                    f"dimension, but got: padding ({left}, {right}) at dimension {d} of input "
                                    f"{list(x.shape)}"), loc)
    return rt.apply(prim, [x], PadSpec(mode, pads), loc)


def lower_pad(rt, a, loc):
    x, pads, mode, value = a["input"], tuple(a["pad"]), a["mode"], a["value"]
    if mode != "constant":
        return pad_by_copies(rt, x, pads, mode, value, loc)
    _pad_length_checks(x, pads)
    for i in range(len(pads) // 2):      # constant_pad_nd narrows by the negative pads first, left then right
        left, right = pads[2 * i], pads[2 * i + 1]
        kept = x.shape[len(x.shape) - 1 - i] + min(left, 0)
        if kept < 0 or kept + min(right, 0) < 0:
            raise TorchError("RuntimeError", "narrow(): length must be non-negative.")
    if all(p <= 0 for p in pads) and not is_contiguous(x.shape, x.strides):
        raise ProblemError(loc, "F.pad with no positive pad of a non-contiguous tensor is not modelled yet "
                                "(PyTorch returns a clone of the cropped view, laid out as the input)")
    _float_input(x, loc, "F.pad")
    if value is None or (isinstance(value, Fraction) and not isinstance(value, bool) and value == 0):
        params = pads
    elif isinstance(value, Infinite):
        params = PadValue(pads, value.text)
    elif isinstance(value, Fraction) and not isinstance(value, bool):
        params = PadValue(pads, value)
    else:
        raise ProblemError(loc, f"pad(): argument 'value' must be a number: {PARSER_TYPE_ERROR}")
    return rt.apply("constant_pad_nd", [x], params, loc)


def lower_prod(rt, a, loc):
    x, dim, keepdim = a["input"], a["dim"], a["keepdim"]
    if a["dtype"] is not None:
        raise ProblemError(loc, "prod(dtype=...) is not modelled yet; leave dtype out")
    # prod of a bool or int64 tensor is int64 (adjoint.engine.int_arith): no gradient, exact integers
    if rt.B.is_symbolic(x.value):
        raise ProblemError(loc, "prod over values with free symbols: whether an element is 0 decides PyTorch's "
                                "backward formula; bind them under symbols: and use numbers")
    if dim is ABSENT:
        if keepdim is not ABSENT:
            raise keepdim_without_dim(a, "prod", loc)
        return rt.apply("prod", [x], None, loc)
    if not (isinstance(dim, Fraction) and not isinstance(dim, bool) and dim.denominator == 1):
        raise ProblemError(loc, "prod(): dim must be one int (a tuple or None is PyTorch's TypeError: invalid "
                                "combination of arguments)")
    keepdim = False if keepdim is ABSENT else keepdim_flag(a, "prod", PROD_PARAMS, loc)
    return rt.apply("prod_dim", [x], (dim_index(int(dim), len(x.shape), loc), keepdim), loc)


def lower_diff(rt, a, loc):
    x, n, prepend, append = a["input"], a["n"], a["prepend"], a["append"]
    if not x.shape:                      # diff_check's order: rank, order, then prepend and append
        raise TorchError("RuntimeError", "diff expects input to be at least one-dimensional")
    if n < 0:
        raise TorchError("RuntimeError", f"order must be non-negative but got {n}")
    for other in (prepend, append):
        if other is None:
            continue
        dim = dim_index(a["dim"], len(x.shape), loc)
        if len(other.shape) != len(x.shape):
            raise TorchError("RuntimeError", "diff expects prepend or append to be the same dimension as input")
        for i, (p, q) in enumerate(zip(x.shape, other.shape)):
            if i != dim and p != q:
                raise TorchError("RuntimeError", "diff expects the shape of tensor to prepend or append to match that "
                                                 "of input except along the differencing dimension; "
                                                 f"input.size({i}) = {p}, but got tensor.size({i}) = {q}")
    if n == 0:
        raise ProblemError(loc, "diff(n=0) (a copy: empty_like(x).copy_(x)) is not modelled yet; use n >= 1")
    dim = dim_index(a["dim"], len(x.shape), loc)
    if prepend is not None or append is not None:
        x = rt.apply("cat", [t for t in (prepend, x, append) if t is not None], dim, loc)
    out_len = x.shape[dim] - 1
    for _ in range(min(n, x.shape[dim])):
        before = rt.apply("slice", [x], (dim, 0, out_len, 1), loc)      # operator-'s right operand first
        after = rt.apply("slice", [x], (dim, 1, 1 + out_len, 1), loc)
        x = rt.apply("sub", [after, before], None, loc)
        out_len -= 1
    return x


_IN = Param("input", "tensor")
LOGSUMEXP_PARAMS = (_IN, Param("dim", "any"), Param("keepdim", "any", False))
PROD_PARAMS = (_IN, Param("dim", "any", ABSENT), Param("keepdim", "any", ABSENT),
               Param("dtype", "any", None, keyword_only=True))

FUNCTIONS = (
    Function("logsumexp", LOGSUMEXP_PARAMS, lower_logsumexp,
             doc="LogsumexpBackward0 (saves self, result): g * exp(x - out)"),
    Function("cumsum", (_IN, Param("dim", "int"), Param("dtype", "any", None, keyword_only=True)), lower_cumsum,
             doc="CumsumBackward0: the reversed cumsum of g"),
    Function("cumprod", (_IN, Param("dim", "int"), Param("dtype", "any", None, keyword_only=True)), lower_cumprod,
             doc="CumprodBackward0 (saves self, result): cumprod_backward, zeros handled as PyTorch"),
    Function("flip", (_IN, Param("dims", "any")), lower_flip_function, where="function", doc="FlipBackward0: g flipped"),
    Function("roll", (_IN, Param("shifts", "ints"), Param("dims", "ints", None)), lower_roll,
             doc="RollBackward0: g rolled by -shifts"),
    Function("repeat", (Param("self", "tensor"), Param("repeats", "ints")), lower_repeat, where="method",
             varargs=True, doc="RepeatBackward0: g summed over the copies"),
    Function("tile", (_IN, Param("dims", "any")), lower_tile, where="function",
             doc="repeat (RepeatBackward0), the reps padded with leading 1s"),
    Function("tile", (_IN, Param("dims", "ints")), lower_tile, where="method", varargs=True,
             doc="repeat (RepeatBackward0), the reps padded with leading 1s"),
    Function("repeat_interleave", (_IN, Param("repeats", "any"), Param("dim", "int", None),
                                   Param("output_size", "int", None, keyword_only=True)), lower_repeat_interleave,
             doc="an int repeats: (no dim: flatten, ViewBackward0), UnsqueezeBackward0, ExpandBackward0, "
                 "CloneBackward0, ViewBackward0"),
    Function("tril", (_IN, Param("diagonal", "int", 0)), _triangle("tril"), doc="TrilBackward0: g.tril(diagonal)"),
    Function("triu", (_IN, Param("diagonal", "int", 0)), _triangle("triu"), doc="TriuBackward0: g.triu(diagonal)"),
    Function("trace", (_IN,), lower_trace, doc="TraceBackward0: g on the diagonal"),
    Function("pad", (_IN, Param("pad", "ints"), Param("mode", "str", "constant"), Param("value", "any", None)),
             lower_pad, where="function", doc="F.pad, mode='constant': ConstantPadNdBackward0 (negative pads crop)"),
)

FUNCTIONS = FUNCTIONS + (
    Function("diff", (_IN, Param("n", "int", 1), Param("dim", "int", -1), Param("prepend", "tensor", None),
                      Param("append", "tensor", None)), lower_diff,
             doc="n times SliceBackward0 (x[:-1]), SliceBackward0 (x[1:]), SubBackward0; prepend / append cat'd "
                 "on first (CatBackward0)"),
    Function("prod", PROD_PARAMS, lower_prod,
             doc="ProdBackward0 with no dim, ProdBackward1 with one (saves self, result): g * out / a without zeros, "
                 "else the products of the others"),
)

#: Tensor.flip takes its dims unpacked too (x.flip(0, 1))
METHOD_FLIP = Function("flip", (_IN, Param("dims", "ints")), lower_flip, where="method", varargs=True,
                       doc="FlipBackward0: g flipped")
FUNCTIONS = FUNCTIONS + (METHOD_FLIP,)


def pixel_shuffle(rt, x: Tensor, factor: int, unshuffle: bool, loc: Loc):
    """``check_pixel_shuffle_shapes`` / ``check_pixel_unshuffle_shapes`` (PixelShuffle.h) in
    PyTorch's order, before any node; then the op."""
    name, what = ("pixel_unshuffle", "downscale_factor") if unshuffle else ("pixel_shuffle", "upscale_factor")
    if len(x.shape) < 3:
        raise TorchError("RuntimeError", f"{name} expects input to have at least 3 dimensions, but got input with "
                                         f"{len(x.shape)} dimension(s)")
    if factor <= 0:
        raise TorchError("RuntimeError", f"{name} expects a positive {what}, but got {factor}")
    if unshuffle:
        for d, side in ((-2, "height"), (-1, "width")):
            if x.shape[d] % factor:
                raise TorchError("RuntimeError", f"pixel_unshuffle expects {side} to be divisible by downscale_factor, "
                                                 f"but input.size({d})={x.shape[d]} is not divisible by {factor}")
    elif x.shape[-3] % (factor * factor):
        raise TorchError("RuntimeError", "pixel_shuffle expects its input's 'channel' dimension to be divisible by the "
                                         f"square of upscale_factor, but input.size(-3)={x.shape[-3]} is not divisible "
                                         f"by {factor * factor}")
    return rt.apply(name, [x], factor, loc)


FUNCTIONS = FUNCTIONS + (
    Function("pixel_shuffle", (_IN, Param("upscale_factor", "int")),
             lambda rt, a, loc: pixel_shuffle(rt, a["input"], int(a["upscale_factor"]), False, loc),
             where="function", doc="PixelShuffleBackward0 (saves nothing): g unshuffled"),
    Function("pixel_unshuffle", (_IN, Param("downscale_factor", "int")),
             lambda rt, a, loc: pixel_shuffle(rt, a["input"], int(a["downscale_factor"]), True, loc),
             where="function", doc="PixelUnshuffleBackward0 (saves nothing): g shuffled"),
)
