"""Functions of the reductions family: what PyTorch 2.13 runs for each (checked in real torch).

* ``sum`` / ``mean``: with no ``dim`` argument at all, SumBackward0 / MeanBackward0 (the
  ``sum(input)`` overload); with ``dim`` given -- an int, a tuple, even ``None`` or ``()``,
  both of which reduce every dim -- SumBackward1 / MeanBackward1 (``sum.dim_IntList``);
  ``keepdim`` without ``dim`` is PyTorch's TypeError;
* ``var(input, dim=None, unbiased=True, keepdim=False, *, correction=None)``: VarBackward0
  (``var(x, True)`` is the unbiased overload; unbiased=False is correction 0);
* ``max`` / ``min``: every element (MaxBackward1: saves self and the result), along a dim
  (MaxBackward0: a tuple ``(values, indices)``; the int64 indices have no grad_fn and are the
  node's only saved tensor), or with a tensor (``torch.max(a, b)`` is ``maximum``);
* ``amax`` / ``amin(input, dim=(), keepdim=False)``: AmaxBackward0 / AminBackward0;
* ``any`` / ``all(input, dim=None, keepdim=False)``: a bool tensor and no node;
* ``norm(input, p='fro', dim=None, keepdim=False)`` (``torch.norm``, ``Tensor.norm``):
  ``torch.linalg.vector_norm`` for a number ``p`` and for 'fro' over at most two dims
  (LinalgVectorNormBackward0); the matrix norms ('nuc', 'fro' over more dims) are refused.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.return_types import max_min
from adjoint.engine.bindings.signature import Function, Param
from adjoint.engine.bindings.views import dim_index
from adjoint.engine.bindings.signature import PARSER_TYPE_ERROR, after_packs, keepdim_flag, keepdim_without_dim
from adjoint.engine.torch_errors import TorchError

#: A parameter the call did not pass (PyTorch picks a different overload then).
ABSENT = "<absent>"


def reduce_dims(x: Tensor, dim, loc: Loc) -> tuple[int, ...]:
    """``dim`` (an int, a tuple of ints, None or ()) as sorted non-negative dims; () means every
    dim. Duplicates are PyTorch's error."""
    if dim is None:
        return ()
    items = (dim,) if not isinstance(dim, (tuple, list)) else tuple(dim)
    out = []
    for d in items:
        if not (isinstance(d, Fraction) and d.denominator == 1) or isinstance(d, bool):
            raise ProblemError(loc, f"dim must be an int or a tuple of ints, got {d!r}: {PARSER_TYPE_ERROR}")
        k = dim_index(int(d), len(x.shape), loc)
        if k in out:
            raise TorchError("RuntimeError", f"dim {k} appears multiple times in the list of dims")
        out.append(k)
    if not x.shape:
        return ()
    return tuple(sorted(out))


def _sum_like(whole: str, by_dims: str, what: str):
    def lower(rt, a, loc):
        x = a["input"]
        if a["dim"] is ABSENT:
            if a["keepdim"] is not ABSENT:
                raise keepdim_without_dim(a, what, loc)
            return rt.apply(whole, [x], None, loc)
        keepdim = keepdim_flag(a, what, (_IN,) + _DIM_ABSENT, loc) if a["keepdim"] is not ABSENT else False
        return rt.apply(by_dims, [x], (reduce_dims(x, a["dim"], loc), keepdim), loc)
    lower.__name__ = f"lower_{what}"
    return lower


def _variance_args(a, loc, what: str) -> tuple:
    """(dims, correction, keepdim) of var / var_mean: the (input, unbiased) overload, unbiased or
    correction (not both), correction 1 unless unbiased=False; PyTorch's TypeErrors otherwise."""
    dim, unbiased, correction = a["dim"], a["unbiased"], a["correction"]
    if isinstance(dim, bool):          # var(x, True): the var(input, unbiased) overload
        if unbiased is not None:
            raise ProblemError(loc, f"{what}() got unbiased twice: {PARSER_TYPE_ERROR}")
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise ProblemError(loc, f"{what}() takes unbiased or correction, not both: {PARSER_TYPE_ERROR}")
    if correction is None:
        correction = Fraction(0) if unbiased is False else Fraction(1)
    if not isinstance(correction, Fraction) or isinstance(correction, bool):
        raise ProblemError(loc, f"{what}(): correction must be a number: {PARSER_TYPE_ERROR}")
    return dim, correction, a["keepdim"]


def _variance(rt, a, loc, prim: str):
    """var / var_mean: the node packs self before the kernel checks the dims."""
    x = a["input"]
    dim, correction, keepdim = _variance_args(a, loc, prim)
    # PyTorch's optional dim: None where the call gives none (var_backward counts the two apart)
    dims = None if dim is None else after_packs(rt, prim, [x], loc, lambda: reduce_dims(x, dim, loc))
    factor = 1
    for d in (dims if dims else range(len(x.shape))):
        factor *= x.shape[d]
    if factor - correction <= 0:   # std_var_out's TORCH_WARN (each call), before the kernel divides by it
        from adjoint.engine import warns
        warns.warn(rt, "UserWarning", warns.no_degrees_of_freedom(prim))
    return rt.apply(prim, [x], (dims, correction, keepdim), loc)


def lower_var(rt, a, loc):
    return _variance(rt, a, loc, "var")


def lower_var_mean(rt, a, loc):
    """torch.var_mean (a function, no Tensor method): the same arguments as var; one VarMeanBackward0."""
    return _variance(rt, a, loc, "var_mean")


def _refuse_symbolic(rt, x: Tensor, loc: Loc, what: str) -> None:
    if rt.B.is_symbolic(x.value):
        raise ProblemError(loc, f"{what} over values with free symbols: which element is selected depends on the "
                                "symbols, so the gradient has no single closed form; bind them under symbols: and "
                                "use numbers")


def select_along(rt, x: Tensor, dim: int, keepdim: bool, largest: bool, loc: Loc):
    """max(x, dim) / min(x, dim): (values, indices); the indices are computed here (the first
    index among ties, as the CPU kernel) and handed to the node, which saves them."""
    what = "max" if largest else "min"
    if x.shape and x.shape[dim] == 0:   # (the meta function's, before any node)
        raise TorchError("IndexError", f"{what}(): Expected reduction dim {dim} to have non-zero size.")
    _refuse_symbolic(rt, x, loc, f"{what}(dim=...)")
    _, idx = rt.B.argmax(x.value, dim, keepdim, largest)
    indices = rt.tensor(idx, dtype="int64")
    values = rt.apply("max_dim" if largest else "min_dim", [x, indices], (dim, keepdim), loc)
    return max_min(what, values, indices)   # torch.return_types.max / min: .values, .indices


#: std::sort (the CPU kernel's, for an unstable sort) runs an insertion sort, stable, on at most this many elements
_INSERTION_SORT = 16


def _selection_input(rt, x: Tensor, dim, loc: Loc, what: str) -> int:
    """sort / topk's operand checks; the dim as a non-negative int."""
    if x.dtype not in ("float32", "float64"):
        raise ProblemError(loc, f"{what} of a {x.dtype} tensor is not modelled yet; use a float tensor")
    if not x.shape:
        raise ProblemError(loc, f"{what} of a 0-d tensor is not modelled yet; give it a dim (x.reshape(1))")
    if 0 in x.shape:
        raise ProblemError(loc, f"{what} of a tensor with no element is not modelled yet")
    _refuse_symbolic(rt, x, loc, what)
    return dim_index(int(dim), len(x.shape), loc)


def lower_sort(rt, a, loc):
    """torch.sort / Tensor.sort: (values, indices), a ``torch.return_types.sort``. SortBackward0, or
    SortBackward1 when ``stable`` is given at all (the sort.stable overload); both save only the
    indices. Equal elements come in index order where PyTorch's CPU kernel keeps them so: a stable
    sort, or a dim of at most 16 elements (std::sort's insertion sort); longer with ties and not
    stable, std::sort's order is refused."""
    x = a["input"]
    stable = a["stable"]
    if stable is not ABSENT and ({"dim", "descending"} & set(a.positional)):
        raise ProblemError(loc, "sort(..., stable=...) with dim or descending given by position: PyTorch's TypeError "
                                "(the sort.stable overload takes them by keyword), which adjoint does not word; give "
                                "dim= and descending= by keyword")
    dim = _selection_input(rt, x, a["dim"], loc, "sort")
    idx, tied = rt.B.sort_order(x.value, dim, bool(a["descending"]))
    if stable is not True and x.shape[dim] > _INSERTION_SORT and tied.any():
        raise ProblemError(loc, f"sort of equal elements along a dim of {x.shape[dim]} (more than "
                                f"{_INSERTION_SORT}) without stable=True: PyTorch's CPU kernel (std::sort) orders "
                                "them in no documented way, which adjoint does not model; pass stable=True")
    indices = rt.tensor(idx, dtype="int64")
    prim = "sort" if stable is ABSENT else "sort_stable"
    values = rt.apply(prim, [x, indices], (dim, bool(a["descending"])), loc)
    from adjoint.engine.return_types import ReturnTuple
    return ReturnTuple("sort", ("values", "indices"), (values, indices))


def lower_topk(rt, a, loc):
    """torch.topk / Tensor.topk: (values, indices), a ``torch.return_types.topk``; TopkBackward0
    saving the indices. The k largest (smallest) in order; equal values among them, or one of
    them equal to a value left out, are refused (the CPU kernel's partial sort orders ties in no
    documented way), and so is ``sorted=False`` with k > 1."""
    x, k = a["input"], int(a["k"])
    dim = _selection_input(rt, x, a["dim"], loc, "topk")
    largest = bool(a["largest"])
    if not 0 <= k <= x.shape[dim]:   # the kernel's check (TopkBackward0 saves only its output: nothing packed)
        raise TorchError("RuntimeError", "selected index k out of range")
    if k == 0:
        raise ProblemError(loc, "topk with k=0 (an empty result) is not modelled yet")
    if not a["sorted"] and k > 1:
        raise ProblemError(loc, "topk(..., sorted=False) with k > 1: PyTorch's CPU kernel leaves the k values in no "
                                "documented order, which adjoint does not model; leave sorted=True")
    idx, tied = rt.B.sort_order(x.value, dim, largest)
    head = tuple(slice(0, k) if d == dim else slice(None) for d in range(len(x.shape)))
    if tied[head].any():
        raise ProblemError(loc, "topk of equal values among the k selected (or one equal to a value left out): "
                                "PyTorch's CPU kernel (a partial sort) breaks such ties in no documented way, "
                                "which adjoint does not model")
    indices = rt.tensor(rt.B.index(idx, head), dtype="int64")
    values = rt.apply("topk", [x, indices], (dim, k, largest), loc)
    from adjoint.engine.return_types import ReturnTuple
    return ReturnTuple("topk", ("values", "indices"), (values, indices))


def _kth_along(rt, x: Tensor, k: int, dim: int, keepdim: bool, prim: str, what: str, loc: Loc):
    """kthvalue / median along a dim: the k-th smallest (1-based) per slice, its index handed to
    the node, which saves it. The CPU kernel's quickselect picks no documented index among equal
    elements: a tie at the selected value is refused."""
    idx, tied = rt.B.sort_order(x.value, dim, False)
    at = tuple(slice(k - 1, k) if d == dim else slice(None) for d in range(len(x.shape)))
    if tied[at].any():
        raise ProblemError(loc, f"{what} where the selected value occurs more than once along the dim: PyTorch's CPU "
                                "kernel (a quickselect) returns the index of one of them in no documented way, "
                                "which adjoint does not model")
    picked = rt.B.index(idx, at)
    if not keepdim:
        picked = rt.B.reshape(picked, tuple(n for d, n in enumerate(x.shape) if d != dim))
    indices = rt.tensor(picked, dtype="int64")
    values = rt.apply(prim, [x, indices], (dim, keepdim), loc)
    from adjoint.engine.return_types import ReturnTuple
    return ReturnTuple(what, ("values", "indices"), (values, indices))


def lower_kthvalue(rt, a, loc):
    """torch.kthvalue / Tensor.kthvalue(k, dim=-1, keepdim=False): KthvalueBackward0 (saves the
    indices); a ``torch.return_types.kthvalue``."""
    x = a["input"]
    dim = _selection_input(rt, x, a["dim"], loc, "kthvalue")
    k = int(a["k"])
    if not 1 <= k <= x.shape[dim]:
        raise TorchError("RuntimeError", f"kthvalue(): selected number k out of range for dimension {dim}")
    return _kth_along(rt, x, k, dim, bool(a["keepdim"]), "kthvalue", "kthvalue", loc)


def lower_median(rt, a, loc):
    """torch.median / Tensor.median: of every element MedianBackward0 (saves self, result; the
    lower median; its backward splits the gradient evenly among the elements equal to it); along
    a dim MedianBackward1 (saves the indices), a ``torch.return_types.median``."""
    x = a["input"]
    if a["dim"] is ABSENT:
        if a["keepdim"] is not ABSENT:
            raise ProblemError(loc, "median() with keepdim= but no dim: PyTorch's TypeError, which adjoint does not "
                                    "word; give dim too")
        if x.dtype not in ("float32", "float64"):
            raise ProblemError(loc, f"median of a {x.dtype} tensor is not modelled yet; use a float tensor")
        if 0 in x.shape:
            raise ProblemError(loc, "median of a tensor with no element is not modelled yet")
        _refuse_symbolic(rt, x, loc, "median")
        return rt.apply("median_all", [x], None, loc)
    if not (isinstance(a["dim"], Fraction) and a["dim"].denominator == 1) or isinstance(a["dim"], bool):
        raise ProblemError(loc, f"median(): dim must be one int: {PARSER_TYPE_ERROR}")
    dim = _selection_input(rt, x, a["dim"], loc, "median")
    keepdim = False if a["keepdim"] is ABSENT else bool(a["keepdim"])
    return _kth_along(rt, x, (x.shape[dim] - 1) // 2 + 1, dim, keepdim, "median_dim", "median", loc)


def _max_like(largest: bool):
    what = "max" if largest else "min"

    def lower(rt, a, loc):
        x, dim, keepdim, other = a["input"], a["dim"], a["keepdim"], a["other"]
        if isinstance(dim, Tensor) or other is not None:      # torch.max(a, b): maximum
            b = other if other is not None else dim
            return rt.apply("maximum" if largest else "minimum", [x, b], None, loc)
        if dim is ABSENT:
            if keepdim is not ABSENT:
                raise keepdim_without_dim(a, what, loc)
            if 0 in x.shape:   # the kernel's, after MaxBackward1 packed self
                rt.raise_after_packs("max_all" if largest else "min_all", [x], TorchError(
                    "RuntimeError", f"{what}(): Expected reduction dim to be specified for input.numel() == 0. "
                                    "Specify the reduction dim with the 'dim' argument."), loc)
            _refuse_symbolic(rt, x, loc, f"{what}()")
            return rt.apply("max_all" if largest else "min_all", [x], None, loc)
        if dim is None or isinstance(dim, (tuple, list)):
            raise ProblemError(loc, f"{what}(): dim must be one int (amax / amin take several): "
                                    f"{PARSER_TYPE_ERROR}")
        keepdim = False if keepdim is ABSENT else keepdim_flag(a, what, _MAX_PARAMS, loc)
        d = reduce_dims(x, dim, loc)
        return select_along(rt, x, d[0] if d else 0, keepdim, largest, loc)
    lower.__name__ = f"lower_{what}"
    return lower


def _empty_reduction_check(x: Tensor, dim, what: str, loc: Loc) -> None:
    """``zero_numel_check_dims`` (amax / amin's meta function, before the dims are resolved): a
    tensor of no element needs dims, none of size 0 (named as given, in the order given)."""
    if x.shape and 0 in x.shape:
        items = () if dim is None else (dim,) if not isinstance(dim, (tuple, list)) else tuple(dim)
        if not items:
            raise TorchError("RuntimeError", f"{what}(): Expected reduction dim to be specified for input.numel() == "
                                             "0. Specify the reduction dim with the 'dim' argument.")
        for d in items:
            if x.shape[dim_index(int(d), len(x.shape), loc)] == 0:
                raise TorchError("IndexError", f"{what}(): Expected reduction dim {int(d)} to have non-zero size.")


def _amax_like(largest: bool):
    prim = "amax" if largest else "amin"

    def lower(rt, a, loc):
        x = a["input"]
        _refuse_symbolic(rt, x, loc, prim)

        def dims_of():
            _empty_reduction_check(x, a["dim"], prim, loc)
            return reduce_dims(x, a["dim"], loc)
        dims = after_packs(rt, prim, [x], loc, dims_of)
        return rt.apply(prim, [x], (dims, a["keepdim"]), loc)
    lower.__name__ = f"lower_{prim}"
    return lower


def _any_like(every: bool):
    """``torch.any`` / ``torch.all(input, dim=None, keepdim=False)`` (and the methods): a bool
    tensor, no node (derivatives.yaml: not differentiable), whatever ``input`` holds -- a float
    element counts when it is not 0 (nan counts); ``dim`` an int or a tuple, ``None`` or absent
    every dim."""
    name = "all" if every else "any"

    def lower(rt, a, loc):
        x = a["input"]
        _refuse_symbolic(rt, x, loc, name)
        if x.shape and 0 in x.shape:
            raise ProblemError(loc, f"{name}() of a tensor with no element is not modelled yet (PyTorch answers "
                                    f"{'True' if every else 'False'} over an empty dim); give every dim an element")
        return rt.apply(name, [x], (reduce_dims(x, a["dim"], loc), a["keepdim"]), loc)
    lower.__name__ = f"lower_{name}"
    return lower


def norm_order(p, dim, loc: Loc):
    """torch.norm's ``p`` as vector_norm's ord (a Fraction), as torch/functional.py decides."""
    if isinstance(p, str):
        if p == "fro" and (dim is None or not isinstance(dim, (tuple, list)) or len(dim) <= 2):
            return Fraction(2)
        raise ProblemError(loc, f"norm(p='{p}') is a matrix norm (torch.linalg.matrix_norm), which adjoint does not "
                                "model yet; use a number p (a vector norm)")
    if p is None:
        return Fraction(2)
    if isinstance(p, bool):   # a Python bool is a Number to linalg_vector_norm's parser: True is 1, False 0
        p = Fraction(int(p))
    from adjoint.format.problem import Infinite
    if isinstance(p, Infinite):   # float("inf"): the max-norm (-inf: the smallest |x|), the op's "inf" / "-inf"
        return p.text
    if not isinstance(p, Fraction):
        raise ProblemError(loc, "norm(): a p other than a number, None or a string is not modelled (a list or tuple is "
                                "PyTorch's TypeError naming its Python type, which adjoint does not keep; a tensor "
                                "order is not modelled); give a number or float(\"inf\")")
    if p < 0:
        raise ProblemError(loc, f"norm with a negative order ({p}) is a PyTorch norm adjoint does not model yet; "
                                "use p >= 0")
    return p


def lower_norm(rt, a, loc):
    x = a["input"]
    if a["dtype"] is not None:
        raise ProblemError(loc, "norm(dtype=...) is not modelled; leave dtype out")
    order = norm_order(a["p"], a["dim"], loc)
    dims = after_packs(rt, "norm", [x], loc, lambda: reduce_dims(x, a["dim"], loc))
    return rt.apply("norm", [x], (order, dims, a["keepdim"]), loc)


_IN = Param("input", "tensor")
_DIM_ABSENT = (Param("dim", "any", ABSENT, optional=True), Param("keepdim", "any", ABSENT))
_MAX_PARAMS = (_IN,) + _DIM_ABSENT + (Param("other", "tensor", None, keyword_only=True),)

FUNCTIONS = (
    Function("sum", (_IN,) + _DIM_ABSENT, _sum_like("sum", "sum_dim", "sum"),
             doc="SumBackward0 with no dim; SumBackward1 with dim (int, tuple, None or ())"),
    Function("mean", (_IN,) + _DIM_ABSENT, _sum_like("mean", "mean_dim", "mean"),
             doc="MeanBackward0 with no dim; MeanBackward1 with dim"),
    Function("var", (_IN, Param("dim", "any", None), Param("unbiased", "bool", None), Param("keepdim", "bool", False),
                     Param("correction", "any", None, keyword_only=True)), lower_var,
             doc="VarBackward0 (saves self): 2 / (N - correction) * g * (a - mean)"),
    Function("max", _MAX_PARAMS, _max_like(True),
             doc="MaxBackward1 (every element; ties split evenly); MaxBackward0 with dim (values, indices; "
                 "the first index among ties); with a tensor: maximum"),
    Function("min", _MAX_PARAMS, _max_like(False),
             doc="MinBackward1 / MinBackward0 / minimum, as max"),
    Function("sort", (_IN, Param("dim", "int", Fraction(-1)), Param("descending", "bool", False),
                      Param("stable", "any", ABSENT, keyword_only=True)), lower_sort,
             doc="SortBackward0 (SortBackward1 with stable=); saves the indices; (values, indices)"),
    Function("topk", (_IN, Param("k", "int"), Param("dim", "int", Fraction(-1)), Param("largest", "bool", True),
                      Param("sorted", "bool", True)), lower_topk,
             doc="TopkBackward0 (saves the indices); (values, indices)"),
    Function("kthvalue", (_IN, Param("k", "int"), Param("dim", "int", Fraction(-1)), Param("keepdim", "bool", False)),
             lower_kthvalue, doc="KthvalueBackward0 (saves the indices); (values, indices)"),
    Function("median", (_IN,) + _DIM_ABSENT, lower_median,
             doc="MedianBackward0 (every element: saves self, result; ties split evenly); MedianBackward1 with dim "
                 "(saves the indices; (values, indices))"),
    Function("amax", (_IN, Param("dim", "any", ()), Param("keepdim", "bool", False)), _amax_like(True),
             doc="AmaxBackward0 (saves self, result); ties split evenly"),
    Function("amin", (_IN, Param("dim", "any", ()), Param("keepdim", "bool", False)), _amax_like(False),
             doc="AminBackward0 (saves self, result); ties split evenly"),
    Function("any", (_IN, Param("dim", "any", None), Param("keepdim", "bool", False)), _any_like(False),
             doc="no node: a bool tensor, True where some element over dim is not 0 (nan counts)"),
    Function("all", (_IN, Param("dim", "any", None), Param("keepdim", "bool", False)), _any_like(True),
             doc="no node: a bool tensor, True where every element over dim is not 0 (nan counts)"),
    Function("norm", (_IN, Param("p", "any", "fro", optional=True), Param("dim", "any", None),
                      Param("keepdim", "bool", False), Param("dtype", "any", None)), lower_norm,
             doc="torch.linalg.vector_norm: LinalgVectorNormBackward0 (saves self, result)"),
    Function("var_mean", (_IN, Param("dim", "any", None), Param("unbiased", "bool", None),
                          Param("keepdim", "bool", False), Param("correction", "any", None, keyword_only=True)),
             lower_var_mean, where="function",
             doc="VarMeanBackward0 (saves self; two outputs, var and mean): var's and mean's backward, each "
                 "for an output whose gradient is defined"),
)
