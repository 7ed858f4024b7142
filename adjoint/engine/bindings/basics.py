"""square, reciprocal, clamp_min / clamp_max, sign, std, and zeros_like / ones_like / full_like,
as PyTorch 2.13 runs them (each checked in real torch, float64):

* ``torch.square(x)`` / ``x.square()``: ``x ** 2`` (one ``PowBackward0``, exponent 2);
* ``torch.reciprocal(x)`` / ``x.reciprocal()``: ``ReciprocalBackward0`` (saves the result);
* ``torch.clamp_min(x, min)`` / ``x.clamp_min(min)``: ``ClampMinBackward0``; ``clamp_max``:
  ``ClampMaxBackward0`` (a number bound; a tensor bound, ``ClampMinBackward1``, is refused);
* ``torch.sign(x)`` / ``x.sign()``: ``SignBackward0`` (the gradient is zeros);
* ``torch.std(x, dim=None, unbiased=True, keepdim=False, *, correction)`` / ``x.std(...)``:
  ``StdBackward0`` (saves self, result), the arguments as ``var``'s;
* ``torch.zeros_like(x)``, ``torch.ones_like(x)``, ``torch.full_like(x, v)``: a new tensor of x's
  shape and dtype with no grad_fn; its strides are x's when x is non-overlapping and dense
  (``memory_format=torch.preserve_format``), else dense in the order of x's strides
  (``infer_dense_strides``).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.bindings.signature import Function, Param, after_packs
from adjoint.engine.bindings.reductions import _variance, norm_order, reduce_dims
from adjoint.values.strides import _ordered_strides, is_non_overlapping_and_dense, reorder_dimensions

_IN = Param("input", "tensor")


def lower_square(rt, a, loc: Loc):
    return rt.apply("pow_scalar", [a["input"]], Fraction(2), loc)


def lower_reciprocal(rt, a, loc: Loc):
    return rt.apply("reciprocal", [a["input"]], None, loc)


def lower_sign(rt, a, loc: Loc):
    return rt.apply("sign", [a["input"]], None, loc)


def _one_bound(prim: str, which: str):
    def lower(rt, a, loc: Loc):
        bound = a[which]
        if isinstance(bound, Tensor):
            raise ProblemError(loc, f"{prim}() with a tensor bound (Clamp{which.capitalize()}Backward1) is not modelled "
                                    f"yet; use clamp({which}=tensor) (ClampBackward0) or a number bound")
        if not isinstance(bound, Fraction):
            raise ProblemError(loc, f"{prim}() with a complex bound is not modelled; give a real number")
        return rt.apply(prim, [a["input"]], bound, loc)
    lower.__name__ = f"lower_{prim}"
    return lower


def lower_std(rt, a, loc: Loc):
    """StdBackward0: var's arguments, and var's order (the node packs self before the kernel checks the dims)."""
    return _variance(rt, a, loc, "std")


def lower_std_mean(rt, a, loc: Loc):
    """torch.std_mean (a function, no Tensor method): var's arguments; one StdMeanBackward0 (two outputs)."""
    return _variance(rt, a, loc, "std_mean")


# ----------------------------------------------------------------------------- F.normalize

def lower_normalize(rt, a, loc: Loc):
    """F.normalize as torch/nn/functional.py writes it: ``denom = input.norm(p, dim, keepdim=True)
    .clamp_min(eps).expand_as(input); return input / denom``: LinalgVectorNormBackward0,
    ClampMinBackward0, ExpandBackward0, DivBackward0. ``p`` is read as Tensor.norm reads it
    (``float("inf")`` the max-norm, ``"fro"`` and None the 2-norm over ``dim``)."""
    if a["out"] is not None:
        raise ProblemError(loc, "normalize(..., out=...) is not modelled (its result is not differentiable); "
                                "leave out out=")
    x, dim = a["input"], a["dim"]
    order = norm_order(a["p"], dim, loc)
    norm = rt.apply("norm", [x], (order, reduce_dims(x, dim, loc), True), loc)
    denom = rt.apply("expand", [rt.apply("clamp_min", [norm], a["eps"], loc)], tuple(x.shape), loc)
    return rt.apply("div", [x, denom], None, loc)


# ----------------------------------------------------------------------------- F.cosine_similarity

def lower_cosine_similarity(rt, a, loc: Loc):
    """at::cosine_similarity (Distance.cpp), a composite: ``expand_outplace(x1, x2)`` (when the
    shapes differ both are expanded, x2 first: ExpandBackward0 each), ``linalg_vector_norm(x, 2,
    dim, keepdim=True).clone()`` for x1 then x2 (LinalgVectorNormBackward0, CloneBackward0), the
    two clones ``clamp_min_(eps)`` under NoGradGuard (no node; each clone's version bumped), then
    ``(x1 / n1) * (x2 / n2)`` -- the division by n2 made first (GCC evaluates the operands right
    to left) -- and ``sum(dim)``: DivBackward0, DivBackward0, MulBackward0, SumBackward1."""
    from adjoint.engine.inplace import apply_inplace
    from adjoint.engine.ops.arith import broadcast_shapes
    x1, x2, eps = a["x1"], a["x2"], a["eps"]
    for t in (x1, x2):
        if t.dtype not in ("float32", "float64"):
            raise ProblemError(loc, f"cosine_similarity of a {t.dtype} tensor is not modelled (PyTorch converts it to "
                                    "the common float dtype first); convert it (x.double())")
    if x1.shape != x2.shape:   # expand_outplace: both expanded to the broadcast shape (x2's expand made first)
        shape = broadcast_shapes(x1.shape, x2.shape, loc)
        x2 = rt.apply("expand", [x2], shape, loc)
        x1 = rt.apply("expand", [x1], shape, loc)
    dims = after_packs(rt, "norm", [x1], loc, lambda: reduce_dims(x1, Fraction(a["dim"]), loc))
    norms = []
    for x in (x1, x2):
        norms.append(rt.apply("clone", [rt.apply("norm", [x], (Fraction(2), dims, True), loc)], None, loc))
    before = rt.grad_enabled
    rt.grad_enabled = False   # NoGradGuard: clamp_min_ writes the clones, no node
    try:
        for n in norms:
            apply_inplace(rt, "clamp_min", n, [], eps, loc)
    finally:
        rt.grad_enabled = before
    q2 = rt.apply("div", [x2, norms[1]], None, loc)
    q1 = rt.apply("div", [x1, norms[0]], None, loc)
    return rt.apply("sum_dim", [rt.apply("mul", [q1, q2], None, loc)], (dims, False), loc)


# ----------------------------------------------------------------------------- zeros_like, ones_like, full_like

def _like_strides(x: Tensor) -> tuple:
    """empty_like's strides under preserve_format: x's own when x is non-overlapping and dense,
    else infer_dense_strides: x's dims in the order of its strides (a zero stride ambiguous, equal
    strides the smaller size first), laid out densely (TensorIterator's ordering of one operand)."""
    if is_non_overlapping_and_dense(x.shape, x.strides):
        return tuple(x.strides)
    return _ordered_strides(x.shape, reorder_dimensions(x.shape, [list(x.strides)]))


_LIKE_KEYWORDS = ("dtype", "layout", "device", "pin_memory", "memory_format")


def _like(what: str, value_of):
    def lower(rt, a, loc: Loc):
        x = a["input"]
        for k in _LIKE_KEYWORDS:
            if a[k] is not None:
                raise ProblemError(loc, f"{what}(..., {k}=...) is not modelled yet; leave it out (the result takes the "
                                        "input's dtype and layout)")
        if a["requires_grad"]:
            raise ProblemError(loc, f"{what}(..., requires_grad=True) is not modelled yet (a new leaf); declare the "
                                    "tensor under inputs: with requires_grad: true")
        value = value_of(a)
        if x.dtype not in ("float32", "float64") and (value.denominator != 1 or x.dtype == "bool"):
            raise ProblemError(loc, f"{what}() of a {x.dtype} tensor with the value {value} is not modelled yet "
                                    "(PyTorch casts the value to the tensor's dtype)")
        out = rt.apply("full_like", [x], value, loc)
        out.strides = _like_strides(x)
        return out
    lower.__name__ = f"lower_{what}"
    return lower


def _like_params(*middle: Param) -> tuple:
    return (_IN,) + middle + tuple(Param(k, "any", None, keyword_only=True) for k in _LIKE_KEYWORDS) + (
        Param("requires_grad", "bool", False, keyword_only=True),)


def _fill_value(a) -> Fraction:
    return a["fill_value"]


def _refuse_tensor_fill(lower):
    def checked(rt, a, loc: Loc):
        if isinstance(a["fill_value"], Tensor):
            raise ProblemError(loc, "full_like(x, fill_value) with a tensor fill_value is not modelled yet; give a number")
        if not isinstance(a["fill_value"], Fraction):
            raise ProblemError(loc, "full_like(x, fill_value) with a complex fill_value is not modelled; give a real number")
        return lower(rt, a, loc)
    checked.__name__ = lower.__name__
    return checked


_VAR_PARAMS = (_IN, Param("dim", "any", None), Param("unbiased", "bool", None), Param("keepdim", "bool", False),
               Param("correction", "any", None, keyword_only=True))

FUNCTIONS = (
    Function("square", (_IN,), lower_square, doc="x ** 2: PowBackward0 (saves self; exponent 2)"),
    Function("reciprocal", (_IN,), lower_reciprocal, doc="ReciprocalBackward0 (saves the result)"),
    Function("clamp_min", (_IN, Param("min", "scalar")), _one_bound("clamp_min", "min"),
             doc="ClampMinBackward0 (saves self): g where x >= min"),
    Function("clamp_max", (_IN, Param("max", "scalar")), _one_bound("clamp_max", "max"),
             doc="ClampMaxBackward0 (saves self): g where x <= max"),
    Function("sign", (_IN,), lower_sign, doc="SignBackward0 (saves nothing; zero gradient)"),
    Function("std", _VAR_PARAMS, lower_std, doc="StdBackward0 (saves self, result)"),
    Function("std_mean", _VAR_PARAMS, lower_std_mean, where="function",
             doc="StdMeanBackward0 (saves self, result0; two outputs, std and mean): std's and mean's backward, "
                 "each for an output whose gradient is defined"),
    Function("normalize", (_IN, Param("p", "any", Fraction(2), optional=True), Param("dim", "any", Fraction(1)),
                           Param("eps", "number", Fraction(1, 10 ** 12)), Param("out", "any", None)),
             lower_normalize, where="function",
             doc="LinalgVectorNormBackward0, ClampMinBackward0, ExpandBackward0, DivBackward0"),
    Function("cosine_similarity", (Param("x1", "tensor"), Param("x2", "tensor"), Param("dim", "int", Fraction(1)),
                                   Param("eps", "number", Fraction(1, 10 ** 8))),
             lower_cosine_similarity, where="function",
             doc="at::cosine_similarity: ExpandBackward0 (x2, x1; shapes that differ), LinalgVectorNormBackward0 and "
                 "CloneBackward0 (x1, x2; the clones clamp_min_(eps) with no node), DivBackward0 (x2 / n2, x1 / n1), "
                 "MulBackward0, SumBackward1"),
    Function("zeros_like", _like_params(), _like("zeros_like", lambda a: Fraction(0)), where="function",
             doc="no node: zeros of the input's shape and dtype"),
    Function("ones_like", _like_params(), _like("ones_like", lambda a: Fraction(1)), where="function",
             doc="no node: ones of the input's shape and dtype"),
    Function("full_like", _like_params(Param("fill_value", "scalar")), _refuse_tensor_fill(_like("full_like", _fill_value)),
             where="function", doc="no node: fill_value in the input's shape and dtype"),
)
