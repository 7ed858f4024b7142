"""View and copy functions: what PyTorch 2.13 runs for each (checked with ``grad_fn`` and
``next_functions`` in real torch).

* ``view`` (fails when the strides do not allow it), ``reshape`` (a view when they do, else
  ``clone`` then ``_unsafe_view``), ``flatten`` (no op when nothing is flattened),
  ``unflatten``, ``squeeze`` (``SqueezeBackward0/1/2`` for no dim / one dim / dims),
  ``unsqueeze``, ``transpose``, ``permute``, ``t``, ``.T`` (a permute), ``.mT`` (a transpose),
  ``expand``, ``contiguous`` (itself when contiguous, else a clone), ``narrow`` (a slice),
  ``select``, ``chunk`` (``split`` with ceil(n / chunks)), ``split`` (``SplitBackward0``, or
  ``SplitWithSizesBackward0`` for a list of sizes), ``unbind``, ``cat``, ``stack``, ``clone``,
  ``detach`` (no node; shares the version counter);
* indexing ``x[...]`` as ``THPVariable_getitem`` does it: a lone slice is always a
  ``slice`` (even ``x[:]``), a lone int a ``select``, a lone ``None`` an ``unsqueeze``, a lone
  ``...`` an ``alias``; in a tuple each item in turn (a full slice is skipped there), and an
  ``alias`` when nothing was applied; integer tensors, bool masks or lists then index
  (``IndexBackward0``: :mod:`adjoint.engine.bindings.indexing`).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.engine.return_types import TorchSize
from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.torch_errors import TorchError
from adjoint.values.strides import is_contiguous, preserve_format_strides, view_strides
from adjoint.engine.ops.views import cat_skipped
from adjoint.engine.bindings.signature import dim_index  # noqa: F401 (the families read it here too)
from adjoint.engine.bindings.signature import Function, Param, REQUIRED, PARSER_TYPE_ERROR
from adjoint.engine.pyfloat import is_int


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def infer_shape(shape, numel: int, loc: Loc) -> tuple:
    """A shape with at most one -1, resolved as ``infer_size`` does; a shape it refuses is
    PyTorch's RuntimeError, an answer raised when the op runs (the sizes are read in order: a
    second -1 or a size below -1 is named where it stands)."""
    shape = [int(d) for d in shape]
    infer, newsize = None, 1
    for i, d in enumerate(shape):
        if d == -1:
            if infer is not None:
                raise TorchError("RuntimeError", "only one dimension can be inferred")
            infer = i
        elif d >= 0:
            newsize *= d
        else:
            raise TorchError("RuntimeError", f"invalid shape dimension {d} at index {i} of shape {shape}")
    if numel == newsize or (infer is not None and newsize > 0 and numel % newsize == 0):
        if infer is not None:
            if newsize == 0:
                raise TorchError("RuntimeError", f"cannot reshape tensor of 0 elements into shape {shape} because "
                                                 "the unspecified dimension size -1 can be any value and is "
                                                 "ambiguous")
            shape[infer] = numel // newsize
        return tuple(shape)
    raise TorchError("RuntimeError", f"shape '{shape}' is invalid for input of size {numel}")


def unflatten_sizes(sizes, d: int, n: int, loc: Loc) -> tuple:
    """``unflatten``'s sizes for dim ``d`` of size ``n``: sizes that do not multiply up to it are
    PyTorch's RuntimeError (an answer); sizes infer_size itself refuses (two -1, a size below -1,
    -1 beside a 0) make PyTorch wrap infer_size's error in a longer message, left a refusal."""
    sizes = [int(v) for v in sizes]
    if not sizes:
        raise TorchError("RuntimeError", "unflatten: sizes must be non-empty")
    if sizes.count(-1) <= 1 and all(v >= -1 for v in sizes):
        known = _numel([v for v in sizes if v != -1])
        if -1 in sizes and known == 0 and n == 0:
            pass
        elif (known != n) if -1 not in sizes else (known == 0 or n % known):
            raise TorchError("RuntimeError", f"unflatten: Provided sizes {sizes} don't multiply up to the size of "
                                             f"dim {d} ({n}) in the input tensor")
        else:
            return infer_shape(sizes, n, loc)
    raise ProblemError(loc, f"unflatten: sizes {sizes} for a dim of size {n}: PyTorch's RuntimeError 'unflatten got "
                            "an unexpected error' is not modelled: its message carries PyTorch's C++ stack trace "
                            "(addresses, paths); use sizes infer_size accepts")


# ----------------------------------------------------------------------------- reshaping

def view(rt, x: Tensor, shape, loc: Loc):
    shape = infer_shape(shape, _numel(x.shape), loc)
    if view_strides(x.shape, x.strides, shape) is None:
        # PyTorch's RuntimeError, a prediction (the file is valid; the program raises)
        raise TorchError("RuntimeError", "view size is not compatible with input tensor's size and stride (at least "
                                         "one dimension spans across two contiguous subspaces). Use .reshape(...) "
                                         "instead.", "view_size")
    return rt.apply("view", [x], shape, loc)


def reshape(rt, x: Tensor, shape, loc: Loc):
    """at::reshape: ``view`` of a contiguous tensor, ``_reshape_alias`` (ReshapeAliasBackward0)
    when the strides allow a view of a non-contiguous one, else ``clone`` then ``_unsafe_view``."""
    from adjoint.engine.bindings.core import aten_reshape
    return aten_reshape(rt, x, infer_shape(shape, _numel(x.shape), loc), loc)


def lower_view(rt, a, loc):
    return view(rt, a["self"], a["size"], loc)


def lower_reshape(rt, a, loc):
    return reshape(rt, a["input"], a["shape"], loc)


def lower_view_as(rt, a, loc):
    """``x.view_as(other)``: ``x.view(other.size())`` (a gradient reversal's ``x.view_as(x)``)."""
    return view(rt, a["self"], tuple(Fraction(d) for d in a["other"].shape), loc)


def lower_reshape_as(rt, a, loc):
    """``x.reshape_as(other)``: ``x.reshape(other.size())``."""
    return reshape(rt, a["self"], tuple(Fraction(d) for d in a["other"].shape), loc)


def lower_flatten(rt, a, loc):
    """at::flatten: both dims wrapped (a 0-d tensor's as a 1-d one's: -1 or 0, else PyTorch's
    IndexError), then a 0-d tensor is ``reshape(1)``."""
    x = a["input"]
    nd = len(x.shape)
    start, end = dim_index(a["start_dim"], nd, loc), dim_index(a["end_dim"], nd, loc)
    if nd == 0:
        return reshape(rt, x, (1,), loc)
    if start > end:
        raise TorchError("RuntimeError", "flatten() has invalid args: start_dim cannot come after end_dim")
    if start == end:
        return x
    shape = x.shape[:start] + (_numel(x.shape[start:end + 1]),) + x.shape[end + 1:]
    return reshape(rt, x, shape, loc)


def lower_unflatten(rt, a, loc):
    x = a["input"]
    if not x.shape:
        raise ProblemError(loc, "unflatten of a 0-d tensor: PyTorch's RuntimeError 'unflatten got an unexpected "
                                "error' is not modelled: its message carries PyTorch's C++ stack trace (addresses, "
                                "paths); unflatten a tensor of at least 1 dimension")
    d = dim_index(a["dim"], len(x.shape), loc)
    sizes = unflatten_sizes(a["sizes"], d, x.shape[d], loc)
    return view(rt, x, x.shape[:d] + sizes + x.shape[d + 1:], loc)


def lower_squeeze(rt, a, loc):
    x = a["input"]
    dim = a["dim"]
    if dim is None:
        return rt.apply("squeeze_all", [x], None, loc)
    if isinstance(dim, (tuple, list)):
        dims = []
        for d in dim:   # dim_list_to_bitset: each wrapped, a repeat PyTorch's error
            k = dim_index(int(d), len(x.shape), loc)
            if k in dims:
                raise TorchError("RuntimeError", f"dim {k} appears multiple times in the list of dims")
            dims.append(k)
        return rt.apply("squeeze_dims", [x], tuple(dims), loc)
    return rt.apply("squeeze_dim", [x], (dim_index(int(dim), len(x.shape), loc),), loc)


def lower_unsqueeze(rt, a, loc):
    x = a["input"]
    return rt.apply("unsqueeze", [x], dim_index(a["dim"], len(x.shape) + 1, loc), loc)


def lower_transpose(rt, a, loc):
    x = a["input"]
    nd = len(x.shape)
    return rt.apply("transpose", [x], (dim_index(a["dim0"], nd, loc), dim_index(a["dim1"], nd, loc)), loc)


def lower_swapaxes(rt, a, loc):
    """``swapaxes(input, axis0, axis1)``: at::swapaxes is ``transpose`` (TransposeBackward0)."""
    x = a["input"]
    nd = len(x.shape)
    return rt.apply("transpose", [x], (dim_index(a["axis0"], nd, loc), dim_index(a["axis1"], nd, loc)), loc)


def lower_movedim(rt, a, loc):
    """at::movedim (TensorShape.cpp): the counts must match, each dim wrapped, no repeats (the
    messages print the dims as given), then ``permute`` (PermuteBackward0, an identity order
    too) with each source dim at its destination and the other dims, in order, in the other
    places. A 0-d tensor's is ``alias()`` (AliasBackward0): refused."""
    _movedim_overload(a, loc)
    x = a["input"]
    nd = len(x.shape)
    src, dst = a["source"], a["destination"]

    def shown(v):
        return "[" + ", ".join(str(i) for i in v) + "]"
    if len(src) != len(dst):
        raise TorchError("RuntimeError", f"movedim: Invalid source or destination dims: source ({shown(src)} dims) "
                                         f"should contain the same number of dims as destination ({shown(dst)} dims)")
    nsrc = [dim_index(d, nd, loc) for d in src]
    ndst = [dim_index(d, nd, loc) for d in dst]
    if len(set(nsrc)) != len(nsrc):
        raise TorchError("RuntimeError", f"movedim: repeated dim in `source` ({shown(src)})")
    if len(set(ndst)) != len(ndst):
        raise TorchError("RuntimeError", f"movedim: repeated dim in `destination` ({shown(dst)})")
    if nd == 0:
        raise ProblemError(loc, "movedim of a 0-d tensor is alias() (an AliasBackward0), which adjoint does not "
                                "model; drop the movedim")
    order = [-1] * nd
    for s_, d_ in zip(nsrc, ndst):
        order[d_] = s_
    rest = iter(d for d in range(nd) if d not in nsrc)
    order = [o if o >= 0 else next(rest) for o in order]
    return rt.apply("permute", [x], tuple(order), loc)


def _movedim_overload(a, loc) -> None:
    """movedim's two overloads take (int, int) or (int[], int[]): one dim an int and the other a
    tuple or list matches neither, and PyTorch's parser raises its TypeError listing both, before
    anything runs (measured in torch 2.13 for each call form): the sequence is marked in both, the
    int in the list overload only."""
    kinds = {n: a.type_of(n) for n in ("source", "destination")}
    seqs = [n for n, k in kinds.items() if k in ("tuple", "list")]
    if len(seqs) != 1:
        return
    if any(k is None for k in kinds.values()):
        raise ProblemError(loc, f"{a.name}() with a dim whose type (int or float) adjoint cannot tell beside a "
                                f"{kinds[seqs[0]]}: {PARSER_TYPE_ERROR}")
    order = ([] if a.method else ["input"]) + ["source", "destination"]
    keywords = [k for k in reversed(a.keywords) if k in order]
    last_keyword = len(keywords) == len(order)   # _argDesc keeps the last ", " when nothing is positional

    def described(n, elements: bool) -> str:
        t = kinds.get(n) or a.type_of("input")
        return f"{t} of {_elements(a[n], t)}" if elements and n in seqs else t
    got = [described(n, False) for n in order if n not in a.keywords] + \
          [f"{k}={described(k, False)}" for k in keywords]
    lead = "" if a.method else "Tensor input, "
    lines = ""
    for over, listed_overload in (("int", False), ("tuple of ints", True)):
        marked = []
        for n in order:
            kind = described(n, True)
            text = f"{n}={kind}" if n in a.keywords else kind
            # the parser marks a Parameter against "Tensor input" too (its type's name differs)
            bad = n in seqs or (listed_overload and n in kinds) or kind == "Parameter"
            marked.append(f"!{text}!" if bad else text)
        args = "".join(f"{m}, " for m in marked)
        lines += (f" * ({lead}{over} source, {over} destination)\n      didn't match because some of the arguments "
                  f"have invalid types: ({args if last_keyword else args[:-2]})\n")
    text = "".join(f"{t}, " for t in got)
    raise TorchError("TypeError", f"{a.name}() received an invalid combination of arguments - got "
                                  f"({text if last_keyword else text[:-2]}), but expected one of:\n{lines}")


def _elements(v, kind: str) -> str:
    """``_formattedArgDesc``'s elements of an int sequence: ``(int, int)``, ``(int,)`` of a tuple,
    ``[int, int]`` of a list."""
    inner = ", ".join("int" for _ in v)
    if kind == "list":
        return f"[{inner}]"
    return f"({inner},)" if len(v) == 1 else f"({inner})"


def lower_ravel(rt, a, loc):
    """at::ravel: ``self.contiguous().view(-1)``: CloneBackward0 first for a non-contiguous
    tensor, then ViewBackward0 (a 1-d tensor's too: not the tensor itself)."""
    x = a["input"]
    c = x if is_contiguous(x.shape, x.strides) else rt.apply("clone", [x], None, loc)
    return view(rt, c, (Fraction(-1),), loc)


def lower_permute(rt, a, loc):
    x = a["input"]
    nd = len(x.shape)
    if len(a["dims"]) != nd:    # PyTorch's checks, in its order: the count, then each dim's range and repeat
        raise TorchError("RuntimeError", "permute(sparse_coo): number of dimensions in the tensor input does not "
                                         "match the length of the desired ordering of dimensions i.e. input.dim() "
                                         f"= {nd} is not equal to len(dims) = {len(a['dims'])}")
    dims = []
    for d in a["dims"]:
        k = dim_index(d, nd, loc)
        if k in dims:
            raise TorchError("RuntimeError", "permute(): duplicate dims are not allowed.")
        dims.append(k)
    dims = tuple(dims)
    return rt.apply("permute", [x], dims, loc)


def lower_expand(rt, a, loc):
    from adjoint.engine.ops.views import expand_shape
    x = a["self"]   # -1 keeps a size: resolved here, so the op's value and layout see real sizes
    size = [int(n) for n in a["size"]]
    if len(size) < len(x.shape) and x.dtype in _EXPAND_TYPE_NAMES:
        raise TorchError("RuntimeError", f"expand({_EXPAND_TYPE_NAMES[x.dtype]}{{{list(x.shape)}}}, size={size}): the "
                                         f"number of sizes provided ({len(size)}) must be greater or equal to the "
                                         f"number of dimensions in the tensor ({len(x.shape)})")
    return rt.apply("expand", [x], expand_shape([x.shape], tuple(size), loc), loc)


# the tensor expand's message names: Tensor::toString (a bool tensor's is its type's name)
_EXPAND_TYPE_NAMES = {"float32": "torch.FloatTensor", "float64": "torch.DoubleTensor", "int64": "torch.LongTensor",
                      "bool": "CPUBoolType", "complex64": "CPUComplexFloatType",
                      "complex128": "CPUComplexDoubleType"}


def lower_contiguous(rt, a, loc):
    x = a["self"]
    if is_contiguous(x.shape, x.strides):
        return x
    return rt.apply("clone", [x], None, loc)


def lower_clone(rt, a, loc):
    """``x.clone()`` (``memory_format=torch.preserve_format``): at::clone keeps a non-overlapping,
    dense tensor's strides (``empty_strided``), else ``empty_like``'s suggested layout -- unlike
    ``contiguous()``, whose copy is row-major."""
    x = a["input"]
    out = rt.apply("clone", [x], None, loc)
    if x.strides and len(x.strides) == len(x.shape):
        out.strides = preserve_format_strides(x.shape, x.strides)
    return out


def lower_detach(rt, a, loc):
    if a["input"].inference and not rt.inference:
        # PyTorch gives this detach() (not a view of it, nor its own detach()) a version counter: an
        # in-place write through it is allowed, and writes the inference tensor's memory
        raise ProblemError(loc, "detach() of an inference tensor outside 'with inference_mode():' is not modelled; "
                                "clone it")
    return rt.detach(a["input"])


# ----------------------------------------------------------------------------- pieces

def lower_select(rt, a, loc):
    x = a["input"]
    if not x.shape:   # at::select's first check, before the dim is wrapped
        raise TorchError("IndexError", "select() cannot be applied to a 0-dim tensor.")
    d = dim_index(a["dim"], len(x.shape), loc)
    return select(rt, x, d, a["index"], loc)


def select(rt, x: Tensor, d: int, index: int, loc: Loc, real_dim: int | None = None):
    """``x.select(d, index)``; ``real_dim``: the dim of the indexed tensor an ``x[...]`` integer
    stands for (applySelect's message names it), None for ``torch.select`` itself."""
    n = x.shape[d]
    if not -n <= index < n:
        if real_dim is None:
            raise TorchError("IndexError", f"select(): index {index} out of range for tensor of size {list(x.shape)} "
                                           f"at dimension {d}")
        raise TorchError("IndexError", f"index {index} is out of bounds for dimension {real_dim} with size {n}")
    return rt.apply("select", [x], (d, index + n if index < 0 else index), loc)


def slice_(rt, x: Tensor, d: int, start, stop, step, loc: Loc):
    if step is not None and step <= 0:      # (CPython's slice unpacking refuses 0, THPVariable_getitem < 0)
        raise TorchError("ValueError", "slice step cannot be zero" if step == 0 else "step must be greater than zero")
    start, stop, step = slice(start, stop, step).indices(x.shape[d])
    stop = max(stop, start)
    return rt.apply("slice", [x], (d, start, stop, step), loc)


def lower_narrow(rt, a, loc):
    """at::narrow's checks, in its order, PyTorch's errors (answers): a 0-d tensor, a negative
    length, then (the dim wrapped) a start outside [-size, size], then start + length past the end."""
    x = a["input"]
    start, length = int(a["start"]), int(a["length"])
    if not x.shape:
        raise TorchError("RuntimeError", "narrow() cannot be applied to a 0-dim tensor.")
    if length < 0:
        raise TorchError("RuntimeError", "narrow(): length must be non-negative.")
    d = dim_index(a["dim"], len(x.shape), loc)
    n = x.shape[d]
    if not -n <= start <= n:
        raise TorchError("IndexError", f"start out of range (expected to be in range of [{-n}, {n}], but got {start})")
    if start < 0:
        start += n
    if start > n - length:
        raise TorchError("RuntimeError", f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    return rt.apply("slice", [x], (d, start, start + length, 1), loc)


def lower_unfold(rt, a, loc):
    """Tensor.unfold (TensorShape.cpp's at::unfold): the dim wrapped, then PyTorch's checks in its
    order (the window's largest size, a negative size, the step), then the view
    (UnfoldBackward0): the dim becomes the number of windows (its stride times step), the window's
    elements a new last dim (the dim's stride). A 0-d tensor and an empty window (size 0) are
    refused (zero-size tensors are not modelled)."""
    x = a["self"]
    nd = len(x.shape)
    if nd == 0:
        raise ProblemError(loc, "unfold of a 0-d tensor is not modelled yet")
    d = dim_index(a["dimension"], nd, loc)
    size, step = int(a["size"]), int(a["step"])
    if size > x.shape[d]:
        raise TorchError("RuntimeError", f"maximum size for tensor at dimension {d} is {x.shape[d]} but size is {size}")
    if size < 0:
        raise TorchError("RuntimeError", f"size is {size} but must be >= 0")
    if step <= 0:
        raise TorchError("RuntimeError", f"step is {step} but must be > 0")
    if size == 0:
        raise ProblemError(loc, "unfold with size 0 (an empty window) is not modelled (zero-size tensors are not)")
    return rt.apply("unfold", [x], (d, size, step), loc)


def lower_diagonal(rt, a, loc):
    """at::diagonal: both dims wrapped, not the same one (PyTorch's RuntimeError names the dims as
    given), then the view (DiagonalBackward0): the other dims in order, the diagonal last. An
    empty diagonal (an offset past the end) is refused."""
    x = a["input"]
    nd = len(x.shape)
    d1, d2 = dim_index(a["dim1"], nd, loc), dim_index(a["dim2"], nd, loc)
    if d1 == d2:
        raise TorchError("RuntimeError", f"diagonal dimensions cannot be identical {int(a['dim1'])}, "
                                         f"{int(a['dim2'])}")
    from adjoint.engine.ops.views import diagonal_length
    p = (int(a["offset"]), d1, d2)
    if diagonal_length(x.shape, p) == 0:
        raise ProblemError(loc, "diagonal with an offset past the end (an empty diagonal) is not modelled (zero-size "
                                "tensors are not)")
    return rt.apply("diagonal", [x], p, loc)


def lower_tensor_split(rt, a, loc):
    """at::tensor_split (TensorShape.cpp): a 0-d tensor refused in PyTorch's words, the dim wrapped,
    then one ``slice`` (SliceBackward0, a view) per piece, in order: ``sections`` pieces, the first
    ``size % sections`` one longer (a positive count: PyTorch's error), or the pieces between the
    given indices (each wrapped and clamped as at::slice does). A tensor of indices is refused."""
    if "indices_or_sections" in a.keywords:   # PyTorch's overloads name it sections / indices / tensor_indices_or_sections
        raise ProblemError(loc, f"tensor_split(indices_or_sections=...) is PyTorch's TypeError (no overload takes that "
                                f"keyword); {PARSER_TYPE_ERROR}; pass it by position")
    x, spec = a["input"], a["indices_or_sections"]
    if not x.shape:
        raise TorchError("RuntimeError", "tensor_split expected at least a 1-dimensional tensor, but got a tensor "
                                         f"with {len(x.shape)} dims")
    d = dim_index(a["dim"], len(x.shape), loc)
    n = x.shape[d]
    if isinstance(spec, Tensor):
        raise ProblemError(loc, "tensor_split with a tensor of indices or sections is not modelled yet; give an int "
                                "or a tuple of ints")
    if isinstance(spec, (tuple, list)):
        if not all(is_int(i) for i in spec):
            raise ProblemError(loc, f"tensor_split(): indices must be ints: {PARSER_TYPE_ERROR}")
        bounds = [0] + [int(i) for i in spec] + [None]
        pieces = list(zip(bounds[:-1], bounds[1:]))
    elif is_int(spec):
        sections = int(spec)
        if sections <= 0:
            raise TorchError("RuntimeError", f"number of sections must be larger than 0, got {sections}")
        size, extra = divmod(n, sections)
        pieces, start = [], 0
        for i in range(sections):
            stop = start + size + (1 if i < extra else 0)
            pieces.append((start, stop))
            start = stop
    else:
        raise ProblemError(loc, f"tensor_split(): indices_or_sections must be an int or a tuple of ints: "
                                f"{PARSER_TYPE_ERROR}")
    out = []
    for start, stop in pieces:
        start = min(max(start + n if start < 0 else start, 0), n)
        stop = n if stop is None else min(max(stop + n if stop < 0 else stop, 0), n)
        if stop <= start:
            raise ProblemError(loc, "tensor_split giving an empty piece is not modelled (zero-size tensors are not)")
        out.append(rt.apply("slice", [x], (d, start, stop, 1), loc))
    return tuple(out)


def lower_chunk(rt, a, loc):
    x = a["input"]
    chunks = int(a["chunks"])
    if not x.shape:
        raise TorchError("RuntimeError", "chunk expects at least a 1-dimensional tensor")
    if chunks <= 0:
        raise TorchError("RuntimeError", f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = dim_index(a["dim"], len(x.shape), loc)
    size = -(-x.shape[d] // chunks) if x.shape[d] else 0
    return rt.apply("split", [x], (max(size, 1) if x.shape[d] else 1, d), loc)


def lower_split(rt, a, loc):
    """split / split_with_sizes, with their checks in PyTorch's order as its errors (answers)."""
    x = a["tensor"]
    s = a["split_size_or_sections"]
    if not x.shape:
        raise TorchError("RuntimeError", "split expects at least a 1-dimensional tensor")
    if isinstance(s, (tuple, list)):
        sizes = [int(v) for v in s]
        d = dim_index(a["dim"], len(x.shape), loc)
        if any(v < 0 for v in sizes):
            raise TorchError("RuntimeError", f"split_with_sizes expects split_sizes have only non-negative entries, "
                                             f"but got split_sizes={sizes}")
        if sum(sizes) != x.shape[d]:   # the dim as given, not wrapped
            raise TorchError("RuntimeError", f"split_with_sizes expects split_sizes to sum exactly to {x.shape[d]} "
                                             f"(input tensor's size at dimension {int(a['dim'])}), but got "
                                             f"split_sizes={sizes}")
        return rt.apply("split_with_sizes", [x], (tuple(sizes), d), loc)
    s = int(s)
    if s < 0:
        raise TorchError("RuntimeError", f"split expects split_size be non-negative, but got split_size={s}")
    d = dim_index(a["dim"], len(x.shape), loc)
    if s == 0:
        if x.shape[d] == 0:
            raise ProblemError(loc, "split with split_size 0 of a dim of size 0 is not modelled yet")
        raise TorchError("RuntimeError", f"split_size can only be 0 if dimension size is 0, but got dimension size "
                                         f"of {x.shape[d]}")
    return rt.apply("split", [x], (s, d), loc)


def lower_unbind(rt, a, loc):
    """at::unbind: the dim wrapped (a 0-d tensor's as a 1-d one's), then ``self.size(dim)``,
    whose IndexError names the wrapped dim for a 0-d tensor."""
    x = a["input"]
    d = dim_index(a["dim"], len(x.shape), loc)
    if not x.shape:
        raise TorchError("IndexError", f"Dimension specified as {d} but tensor has no dimensions")
    return rt.apply("unbind", [x], d, loc)


def lower_cat(rt, a, loc):
    ts = a["tensors"]
    if not ts:
        raise ProblemError(loc, "torch.cat(): expected a non-empty list of Tensors")
    for i, t in enumerate(ts):   # before the dim is wrapped, as PyTorch
        if not t.shape:
            raise TorchError("RuntimeError", f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    # legacy_cat_wrap_dim: the dim wrapped by the first tensor cat does not skip (none: of no element each)
    first = next((t for t in ts if not cat_skipped(t.shape)), None)
    return rt.apply("cat", list(ts), dim_index(a["dim"], len(first.shape), loc) if first else 0, loc)


def lower_stack(rt, a, loc):
    ts = a["tensors"]
    if not ts:
        raise ProblemError(loc, "stack expects a non-empty TensorList")
    return rt.apply("stack", list(ts), dim_index(a["dim"], len(ts[0].shape) + 1, loc), loc)


# ----------------------------------------------------------------------------- attributes and indexing

def _atleast(rt, x: Tensor, n: int, loc: Loc) -> Tensor:
    """at::atleast_1d / _2d / _3d of one tensor: a 0-d one ``reshape``d to ``(1,) * n`` (a view,
    ViewBackward0); a 1-d one ``unsqueeze(0)`` (and for 3-d then ``unsqueeze(-1)``); a 2-d one for
    3-d ``unsqueeze(-1)``; any other the tensor itself."""
    nd = len(x.shape)
    if nd >= n:
        return x
    if nd == 0:
        return reshape(rt, x, (Fraction(1),) * n, loc)
    if nd == 1:
        x = rt.apply("unsqueeze", [x], 0, loc)
        return x if n == 2 else rt.apply("unsqueeze", [x], 2, loc)
    return rt.apply("unsqueeze", [x], 2, loc)


def _stacker(name: str):
    """at::hstack / vstack (row_stack) / dstack / column_stack (TensorShape.cpp): a non-empty list,
    then each tensor made at least 1-, 2- or 3-d (column_stack: a tensor of at most one dim
    ``reshape``d to ``(numel, 1)``), in order, then one ``cat`` (CatBackward0) along dim 0, 1 or
    2 (hstack: 0 when the first is 1-d), whose size checks are PyTorch's."""
    def lower(rt, a, loc):
        ts = list(a["tensors"])
        if not ts:
            raise TorchError("RuntimeError", f"{name} expects a non-empty TensorList")
        if name == "column_stack":
            ts = [reshape(rt, t, (Fraction(_numel(t.shape)), Fraction(1)), loc) if len(t.shape) <= 1 else t
                  for t in ts]
        if name in ("hstack", "column_stack"):
            ts = [_atleast(rt, t, 1, loc) for t in ts]
            dim = 0 if len(ts[0].shape) == 1 else 1
        elif name == "dstack":
            ts, dim = [_atleast(rt, t, 3, loc) for t in ts], 2
        else:
            ts, dim = [_atleast(rt, t, 2, loc) for t in ts], 0
        return lower_cat(rt, {"tensors": ts, "dim": dim}, loc)
    lower.__name__ = f"lower_{name}"
    return lower


_SCALAR_TYPE = {"float32": "Float", "float64": "Double", "bool": "Bool", "int64": "Long"}


def lower_take_along_dim(rt, a, loc):
    """at::take_along_dim (TensorAdvancedIndexing.cpp). With a dim: the ranks must match, the
    indices be int64 (PyTorch's RuntimeErrors), the dim wrapped; then ``indices`` and ``input``
    are each ``broadcast_to`` (``expand``: ExpandBackward0 for the input, a same-shape one too)
    the other's shape with ``dim`` taken from their own, and ``gather`` (GatherBackward0). With no
    dim: ``input.view(-1).gather(0, indices.view(-1))`` (ViewBackward0; a non-contiguous input is
    view's error). An index out of range is not checked on this path in PyTorch 2.13 (it reads
    past the row): refused."""
    from adjoint.engine.bindings.indexing import lower_gather
    from adjoint.engine.ops.arith import broadcast_shapes
    x, idx, dim = a["input"], a["indices"], a["dim"]
    if dim is None:
        flat = view(rt, x, (Fraction(-1),), loc)
        index = view(rt, idx, (Fraction(-1),), loc)
        d = 0
    else:
        if len(x.shape) != len(idx.shape):
            raise TorchError("RuntimeError", "torch.take_along_dim(): input and indices should have the same number of "
                                             f"dimensions, but got {len(x.shape)} dimensions for input, and "
                                             f"{len(idx.shape)} dimensions for indices")
        if idx.dtype != "int64":
            raise TorchError("RuntimeError", "torch.take_along_dim(): dtype of indices should be Long but got "
                                             f"{_SCALAR_TYPE.get(idx.dtype, idx.dtype)}")
        d = dim_index(dim, len(x.shape), loc)
        sizes = list(x.shape)
        if sizes:
            sizes[d] = idx.shape[d]
        index_shape = broadcast_shapes(tuple(sizes), tuple(idx.shape), loc)
        sizes = list(idx.shape)
        if sizes:
            sizes[d] = x.shape[d]
        input_shape = broadcast_shapes(tuple(sizes), tuple(x.shape), loc)
        index = lower_expand(rt, {"self": idx, "size": index_shape}, loc)
        flat = lower_expand(rt, {"self": x, "size": input_shape}, loc)
    n = flat.shape[d] if flat.shape else 1
    values = rt.B.as_indices(index.value).reshape(-1)
    if index.dtype == "int64" and values.size and (int(values.min()) < 0 or int(values.max()) >= n):
        raise ProblemError(loc, "take_along_dim with an index out of [0, size): PyTorch 2.13 does not check it on "
                                "this path (it reads past the row), so its result is not predictable; refused")
    return lower_gather(rt, {"input": flat, "dim": d, "index": index}, loc)


def attribute(rt, x: Tensor, name: str, loc: Loc):
    """``x.T``, ``x.mT``, ``x.shape``, ``x.ndim``, ``x.dtype``, ``x.device`` (what a forward may read of a tensor)."""
    if name == "T":   # numpy_T: a permute reversing the dims (none of a 0-d tensor's), warned once
        if len(x.shape) != 2:
            from adjoint.engine import warns
            warns.warn_once(rt, "UserWarning", warns.T_0D if not x.shape else warns.T_NOT_2D)
        return rt.apply("permute", [x], tuple(reversed(range(len(x.shape)))), loc)
    if name == "mT":   # matrix_T: a 0-d tensor is the tensor itself (warned once), 1-d PyTorch's error
        nd = len(x.shape)
        if nd == 0:
            from adjoint.engine import warns
            warns.warn_once(rt, "UserWarning", warns.MT_0D)
            return x
        if nd < 2:
            raise TorchError("RuntimeError", f"tensor.mT is only supported on matrices or batches of matrices. Got "
                                             f"{nd}-D tensor.")
        return rt.apply("transpose", [x], (nd - 2, nd - 1), loc)
    if name == "shape":
        return TorchSize(Fraction(d) for d in x.shape)
    if name == "ndim":
        return Fraction(len(x.shape))
    if name == "dtype":
        from adjoint.engine.bindings.glue import DType
        return DType(x.dtype)
    if name == "device":
        from adjoint.engine.bindings.glue import Device
        return Device()
    if name == "requires_grad":   # Tensor.requires_grad: a view's also when its base requires grad now
        return x.needs_grad
    if name == "_version":   # the version counter (shared by views, bumped by each in-place write)
        if x.data_alias or (x.detached_root is not None and x.detached_root.data_alias):
            # a .data alias's own counter (the writes through it alone) is not modelled
            raise ProblemError(loc, "reading _version of a .data alias is not modelled (it has a version "
                                    "counter of its own, which writes through it move instead of the tensor's)")
        from adjoint.engine.inference import check_version_read
        check_version_read(x)
        return Fraction(x.version.shown)   # writes through a .data alias are not PyTorch's
    from adjoint.engine.bindings.complexfns import attribute as complex_attribute   # z.real, z.imag: a complex file's
    return complex_attribute(rt, x, name, loc)


def getitem(rt, x: Tensor, items: list, loc: Loc, lone: bool):
    """``x[items]`` as THPVariable_getitem applies it (see the module docstring)."""
    if any(isinstance(i, Tensor) and not i.shape for i in items):
        from adjoint.engine.bindings.indexing import zero_d_indices
        items = zero_d_indices(rt, items, loc)
    if lone:
        item = items[0]
        if isinstance(item, slice):
            if not x.shape:   # applySlicing on a 0-d tensor
                raise TorchError("IndexError", "slice() cannot be applied to a 0-dim tensor.")
            return slice_(rt, x, 0, item.start, item.stop, item.step, loc)
        if item is Ellipsis:
            return rt.apply("alias", [x], None, loc)
        if item is None:
            return rt.apply("unsqueeze", [x], 0, loc)
        if isinstance(item, int):
            if not x.shape:   # applySelect: index 0 is told to use item(); any other is out of a size-0 dim
                if item != 0:
                    raise TorchError("IndexError", f"index {item} is out of bounds for dimension 0 with size 0")
                raise TorchError("IndexError", "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                                               "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
            return select(rt, x, 0, item, loc, real_dim=0)
    out, advanced = basic_items(rt, x, items, loc)
    if advanced:
        from adjoint.engine.bindings.indexing import advanced_index
        return advanced_index(rt, out, advanced, loc)
    if out is x:
        return rt.apply("alias", [x], None, loc)
    return out


def basic_items(rt, x: Tensor, items: list, loc: Loc) -> tuple:
    """applySlicing: the ints, slices, ``None`` and ``...`` of ``items`` applied to ``x`` as views
    (a slice over a whole dim skipped), in order; returns the view (``x`` itself when nothing was
    applied) and the tensor or list items left, as (dim of the view, item) pairs."""
    out = x
    dim = 0
    # a bool mask covers as many dims as it has (count_specified_dimensions)
    specified = sum(len(i.shape) if isinstance(i, Tensor) and i.dtype == "bool" else 1
                    for i in items if i is not None and i is not Ellipsis)
    if specified > len(x.shape):
        raise TorchError("IndexError", f"too many indices for tensor of dimension {len(x.shape)}")
    ellipses = [k for k, i in enumerate(items) if i is Ellipsis]
    if len(ellipses) > 1 and len(x.shape) > specified and any(i is not Ellipsis for i in items[ellipses[1]:]):
        raise ProblemError(loc, "an index with two Ellipses (x[..., ..., 0]): PyTorch's applySlicing skips the "
                                "unnamed dims at each, so an item after the second reads past the tensor's sizes "
                                "(what it raises or returns is not defined); not modelled: write one Ellipsis")
    advanced = []
    made = []   # the steps' results: every one but the last is a temporary of THPVariable_getitem
    real = 0    # the dim of x the item stands for (applySlicing's real_dim)
    for item in items:
        if out is not x and (not made or made[-1] is not out):
            made.append(out)
        if item is Ellipsis:
            dim += len(x.shape) - specified
            real += len(x.shape) - specified
        elif item is None:
            out = rt.apply("unsqueeze", [out], dim, loc)
            dim += 1
            real += 1   # applySlicing counts a None among the dims it names in messages
        elif isinstance(item, int):
            out = select(rt, out, dim, item, loc, real_dim=real)
            real += 1
        elif isinstance(item, slice):
            start, stop, step = item.start, item.stop, item.step
            n = out.shape[dim]
            real += 1
            if (start in (None, 0)) and (stop is None or stop >= n) and step in (None, 1):
                dim += 1
                continue
            out = slice_(rt, out, dim, start, stop, step, loc)
            dim += 1
        else:
            advanced.append((dim, item))
            width = len(item.shape) if isinstance(item, Tensor) and item.dtype == "bool" else 1
            dim += width
            real += width
    for t in made:
        if t is not out:
            t.temporary = True
    return out, advanced


_SELF = Param("self", "tensor")
_IN = Param("input", "tensor")

FUNCTIONS = (
    Function("view", (_SELF, Param("size", "ints")), lower_view, where="method", varargs=True,
             doc="ViewBackward0; refused when the strides do not allow a view"),
    Function("view_as", (_SELF, Param("other", "tensor")), lower_view_as, where="method",
             doc="x.view(other.size()): ViewBackward0"),
    Function("reshape_as", (_SELF, Param("other", "tensor")), lower_reshape_as, where="method",
             doc="x.reshape(other.size()): a view when it can be one, else a copy"),
    Function("reshape", (_IN, Param("shape", "ints")), lower_reshape, varargs=True,
             doc="ViewBackward0, or CloneBackward0 then UnsafeViewBackward0 for a non-viewable layout"),
    Function("flatten", (_IN, Param("start_dim", "int", 0), Param("end_dim", "int", -1)), lower_flatten,
             doc="reshape; the tensor itself when start_dim == end_dim"),
    Function("unflatten", (_IN, Param("dim", "int"), Param("sizes", "ints")), lower_unflatten,
             doc="ViewBackward0"),
    Function("squeeze", (_IN, Param("dim", "any", None)), lower_squeeze,
             doc="SqueezeBackward0 (no dim), SqueezeBackward1 (a dim), SqueezeBackward2 (a tuple of dims)"),
    Function("unsqueeze", (_IN, Param("dim", "int")), lower_unsqueeze, doc="UnsqueezeBackward0"),
    Function("transpose", (_IN, Param("dim0", "int"), Param("dim1", "int")), lower_transpose,
             doc="TransposeBackward0"),
    Function("permute", (_IN, Param("dims", "ints")), lower_permute, varargs=True, doc="PermuteBackward0"),
    Function("swapaxes", (_IN, Param("axis0", "int"), Param("axis1", "int")), lower_swapaxes,
             doc="transpose: TransposeBackward0"),
    Function("swapdims", (_IN, Param("dim0", "int"), Param("dim1", "int")), lower_transpose,
             doc="transpose: TransposeBackward0"),
    Function("movedim", (_IN, Param("source", "ints"), Param("destination", "ints")), lower_movedim,
             doc="permute: PermuteBackward0"),
    Function("moveaxis", (_IN, Param("source", "ints"), Param("destination", "ints")), lower_movedim,
             doc="movedim: PermuteBackward0"),
    Function("ravel", (_IN,), lower_ravel, doc="contiguous().view(-1): (CloneBackward0,) ViewBackward0"),
    Function("expand", (_SELF, Param("size", "ints")), lower_expand, where="method", varargs=True,
             doc="ExpandBackward0"),
    Function("contiguous", (_SELF,), lower_contiguous, where="method",
             doc="the tensor itself when contiguous, else CloneBackward0"),
    Function("clone", (_IN,), lower_clone, doc="CloneBackward0"),
    Function("detach", (_IN,), lower_detach, doc="no node: shares the data and the version counter"),
    Function("select", (_IN, Param("dim", "int"), Param("index", "int")), lower_select, doc="SelectBackward0"),
    Function("narrow", (_IN, Param("dim", "int"), Param("start", "int"), Param("length", "int")), lower_narrow,
             doc="SliceBackward0"),
    Function("chunk", (_IN, Param("chunks", "int"), Param("dim", "int", 0)), lower_chunk,
             doc="SplitBackward0 (split with ceil(n / chunks))"),
    Function("split", (Param("tensor", "tensor"), Param("split_size_or_sections", "any"), Param("dim", "int", 0)),
             lower_split, doc="SplitBackward0, or SplitWithSizesBackward0 for a list of sizes"),
    Function("unbind", (_IN, Param("dim", "int", 0)), lower_unbind, doc="UnbindBackward0"),
    Function("take_along_dim", (_IN, Param("indices", "tensor"), Param("dim", "int", None)), lower_take_along_dim,
             doc="expand (ExpandBackward0) then GatherBackward0; no dim: view(-1) (ViewBackward0) then gather"),
    Function("unfold", (_SELF, Param("dimension", "int"), Param("size", "int"), Param("step", "int")), lower_unfold,
             where="method", doc="UnfoldBackward0 (a view; unfold_backward adds overlapping windows)"),
    Function("diagonal", (_IN, Param("offset", "int", 0), Param("dim1", "int", 0), Param("dim2", "int", 1)),
             lower_diagonal, doc="DiagonalBackward0 (a view)"),
    Function("tensor_split", (_IN, Param("indices_or_sections", "any"), Param("dim", "int", 0)), lower_tensor_split,
             doc="one SliceBackward0 view per piece"),
    Function("cat", (Param("tensors", "tensors"), Param("dim", "int", 0)), lower_cat, where="function",
             doc="CatBackward0"),
    Function("stack", (Param("tensors", "tensors"), Param("dim", "int", 0)), lower_stack, where="function",
             doc="StackBackward0"),
    Function("hstack", (Param("tensors", "tensors"),), _stacker("hstack"), where="function",
             doc="atleast_1d (a 0-d one: ViewBackward0), then CatBackward0 along dim 1 (0 for 1-d)"),
    Function("vstack", (Param("tensors", "tensors"),), _stacker("vstack"), where="function",
             doc="atleast_2d (UnsqueezeBackward0 / ViewBackward0), then CatBackward0 along dim 0"),
    Function("row_stack", (Param("tensors", "tensors"),), _stacker("vstack"), where="function",
             doc="vstack: atleast_2d, then CatBackward0 along dim 0"),
    Function("dstack", (Param("tensors", "tensors"),), _stacker("dstack"), where="function",
             doc="atleast_3d (UnsqueezeBackward0s / ViewBackward0), then CatBackward0 along dim 2"),
    Function("column_stack", (Param("tensors", "tensors"),), _stacker("column_stack"), where="function",
             doc="reshape(numel, 1) of each tensor of at most 1 dim, then hstack"),
)

__all__ = ["FUNCTIONS", "attribute", "basic_items", "getitem", "reshape", "view", "REQUIRED"]
