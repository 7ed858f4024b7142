"""The likelihood and distance losses, as PyTorch 2.13 runs them (each checked in real torch):

* ``poisson_nll_loss``: F's own reduction check (it knows no ``elementwise_mean``), then ATen's
  composite (Loss.cpp): ``exp(input) - target * input`` (``log_input``; the product made first,
  C++ evaluating the right operand of ``-`` first) or ``input - target * log(input + eps)``; with
  ``full``, the Stirling term ``target * log(target) - target + 0.5 * log(2 * pi * target)``
  (its right-hand ``0.5 * log(...)`` made first), ``masked_fill(target <= 1, 0)`` and added to
  the loss in place (``loss += ...``: AddBackward0 over the loss's node); then mean / sum;
* ``pairwise_distance``: ATen's ``norm(x1 - x2 + eps, p, innermost_dim, keepdim)``, whose norm is
  ``at::norm``'s node (``NormBackward1``), not ``linalg.vector_norm``'s;
* ``triplet_margin_loss``: F's reduction (``_Reduction.get_enum``) and margin checks, ATen's rank
  check, then three (with ``swap``) pairwise distances, ``minimum`` of the negative ones with
  ``swap``, ``clamp_min(margin + d_pos - d_neg, 0)`` and the reduction.
"""

from __future__ import annotations

import math
from fractions import Fraction

from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.bindings.signature import Function, Param, describe
from adjoint.engine.bindings.losses import _reduce, reduction_of
from adjoint.engine.torch_errors import TorchError

_FLOATS = ("float32", "float64")


def _floating(fn: str, loc: Loc, **tensors: Tensor) -> None:
    """Float operands only: PyTorch's promotions of an integer or bool operand through these
    composites are not modelled."""
    for what, t in tensors.items():
        if t.dtype not in _FLOATS:
            raise ProblemError(loc, f"{fn}(): {what} is {t.dtype}; adjoint models {fn} on floating-point tensors "
                                    f"only (convert it: {what}.double() or .float())")


def _plain_reduction(rt, a: dict, loc: Loc, fn: str) -> str:
    """The functional's own check of ``reduction`` (Python, before any op): ``'none'``, ``'mean'``
    or ``'sum'``, else its ValueError (no ``elementwise_mean`` alias here)."""
    r = reduction_of(a, loc, fn)
    if r not in ("none", "mean", "sum"):
        raise TorchError("ValueError", f"{r} is not a valid value for reduction")
    return r


def _aten_namespace_refused(a, loc: Loc) -> None:
    """``torch.X`` is ATen's own function, whose ``reduction`` is an int (and whose arguments are
    all required): not modelled; F.X's is."""
    if a.prefix == "torch.":
        raise ProblemError(loc, f"torch.{a.name}() (ATen's, with an int reduction) is not modelled; write "
                                f"F.{a.name}(...)")


# ----------------------------------------------------------------------------- poisson_nll_loss

def lower_poisson_nll_loss(rt, a: dict, loc: Loc):
    from adjoint.engine.bindings import call_function
    from adjoint.engine.inplace import apply_inplace
    x, t = a["input"], a["target"]
    _aten_namespace_refused(a, loc)
    reduction = _plain_reduction(rt, a, loc, "poisson_nll_loss")
    _floating("poisson_nll_loss", loc, input=x, target=t)
    ap = rt.apply
    if a["log_input"]:
        prod = ap("mul", [t, x], None, loc)                 # the right operand of - first
        loss = ap("sub", [ap("exp", [x], None, loc), prod], None, loc)
    else:
        logs = ap("log", [ap("add_scalar", [x], a["eps"], loc)], None, loc)
        loss = ap("sub", [x, ap("mul", [t, logs], None, loc)], None, loc)
    if a["full"]:
        # 0.5 * log(2 * pi * target), the right operand of +, first; 2 * pi is the double
        half_log = ap("mul_scalar", [ap("log", [ap("mul_scalar", [t], Fraction(2 * math.pi), loc)], None, loc)],
                      Fraction(1, 2), loc)
        left = ap("sub", [ap("mul", [t, ap("log", [t], None, loc)], None, loc), t], None, loc)
        stirling = ap("add", [left, half_log], None, loc)
        mask = call_function(rt, "le", [t, Fraction(1)], {}, loc)
        loss = apply_inplace(rt, "add", loss, [ap("masked_fill", [stirling, mask], Fraction(0), loc)], None, loc)
    return _reduce(rt, loss, reduction, loc)


# ----------------------------------------------------------------------------- pairwise_distance, triplet_margin_loss

def _distance_order(p, loc: Loc):
    """``p``, a C++ double: a number or ``float("inf")`` (a negative one is refused, as the norm's)."""
    from adjoint.engine.bindings.reductions import norm_order
    if isinstance(p, (str, bool)) or p is None:
        raise ProblemError(loc, f"pairwise_distance(): p must be a number, not {p!r}: PyTorch's TypeError for it is "
                                "not modelled; give a number or float(\"inf\")")
    return norm_order(p, None, loc)


def pairwise_distance(rt, x1: Tensor, x2: Tensor, order, eps: Fraction, keepdim: bool, loc: Loc) -> Tensor:
    """at::pairwise_distance (Distance.cpp): ``norm(x1 - x2 + eps, p, innermost_dim, keepdim)``,
    the innermost dim of the broadcast (SubBackward0, AddBackward1, NormBackward1)."""
    from adjoint.engine.bindings.reductions import reduce_dims
    diff = rt.apply("add_scalar", [rt.apply("sub", [x1, x2], None, loc)], eps, loc)
    dims = reduce_dims(diff, Fraction(max(len(x1.shape), len(x2.shape)) - 1), loc)
    return rt.apply("norm_p", [diff], (order, dims, keepdim), loc)


def lower_pairwise_distance(rt, a: dict, loc: Loc):
    x1, x2 = a["x1"], a["x2"]
    _floating("pairwise_distance", loc, x1=x1, x2=x2)
    return pairwise_distance(rt, x1, x2, _distance_order(a["p"], loc), a["eps"], a["keepdim"], loc)


def _number_kind(v, kind: str | None) -> str | None:
    """The Python type of a number argument: the call's own (``kind``, from the expression), else
    what the value tells (a bool; a float, which alone holds a fraction), else None."""
    from adjoint.engine.pyfloat import PyFloat
    if isinstance(v, bool):
        return "bool"
    if kind is None and (isinstance(v, PyFloat) or v.denominator != 1):
        return "float"
    return kind


def _python_number(v: Fraction, kind: str | None, loc: Loc, what: str) -> str:
    """``str(v)`` of the Python number a call passed, int or float as the expression wrote it."""
    kind = _number_kind(v, kind)
    if kind == "int":
        return str(int(v))
    if kind == "float":
        return repr(float(v))
    raise ProblemError(loc, f"{what}: PyTorch's message prints the number as Python does, int or float, which is "
                            "not known here; write the number itself in the call")


def lower_triplet_margin_loss(rt, a: dict, loc: Loc):
    from adjoint.engine.bindings.losses import reduction_enum
    anchor, positive, negative = a["anchor"], a["positive"], a["negative"]
    _aten_namespace_refused(a, loc)
    reduction = reduction_enum(rt, reduction_of(a, loc, "triplet_margin_loss"))   # _Reduction.get_enum first
    margin = a["margin"]
    if margin <= 0:   # F's own check, before ATen's
        shown = _python_number(margin, a.type_of("margin"), loc, "triplet_margin_loss(margin <= 0)")
        raise TorchError("ValueError", f"margin must be greater than 0, got {shown}")
    dims = [len(t.shape) for t in (anchor, positive, negative)]
    if len(set(dims)) != 1:   # at::triplet_margin_loss's check, before any op
        raise TorchError("RuntimeError", "The anchor, positive, and negative tensors are expected to have the same "
                                         f"number of dimensions, but got: anchor {dims[0]}D, positive {dims[1]}D, and "
                                         f"negative {dims[2]}D inputs")
    _floating("triplet_margin_loss", loc, anchor=anchor, positive=positive, negative=negative)
    order, eps = _distance_order(a["p"], loc), a["eps"]
    dist_pos = pairwise_distance(rt, anchor, positive, order, eps, False, loc)
    dist_neg = pairwise_distance(rt, anchor, negative, order, eps, False, loc)
    if a["swap"]:
        dist_swap = pairwise_distance(rt, positive, negative, order, eps, False, loc)
        dist_neg = rt.apply("minimum", [dist_neg, dist_swap], None, loc)
    gap = rt.apply("sub", [rt.apply("add_scalar", [dist_pos], margin, loc), dist_neg], None, loc)
    return _reduce(rt, rt.apply("clamp_min", [gap], Fraction(0), loc), reduction, loc)


# ----------------------------------------------------------------------------- gaussian_nll_loss

#: torch.any(bool)'s TypeError: F.gaussian_nll_loss tests ``torch.any(var < 0)`` for a var that is no
#: float (a Python int or bool compares to a bool)
_ANY_OF_BOOL = ("any() received an invalid combination of arguments - got (bool), but expected one of:\n"
                " * (Tensor input, *, Tensor out = None)\n"
                " * (Tensor input, tuple of ints dim = None, bool keepdim = False, *, Tensor out = None)\n"
                " * (Tensor input, int dim, bool keepdim = False, *, Tensor out = None)\n")

#: ``0.5 * math.log(2 * math.pi)``, the double F adds with ``full=True``
_HALF_LOG_TWO_PI = Fraction(0.5 * math.log(2 * math.pi))


def _number_var(rt, x: Tensor, var, kind: str | None, loc: Loc) -> Tensor:
    """A Python number ``var``: a float is ``var * torch.ones_like(input)`` once it is not negative;
    an int or a bool reaches ``torch.any(var < 0)``, which refuses the bool."""
    from adjoint.engine.bindings import call_function
    from adjoint.engine.bindings.core import binary
    kind = _number_kind(var, kind)
    if kind in ("int", "bool"):
        raise TorchError("TypeError", _ANY_OF_BOOL)
    if kind != "float":
        raise ProblemError(loc, f"gaussian_nll_loss(): a var of {var} whose Python type is not known here (a module's "
                                "argument, or a name) is not modelled: an int is PyTorch's TypeError, a float fills a "
                                "tensor; pass a tensor, or call F.gaussian_nll_loss with the number written in the call")
    if var < 0:
        raise TorchError("ValueError", "var has negative entry/entries")
    return binary(rt, "*", var, call_function(rt, "ones_like", [x], {}, loc), loc)


def _var_of_input_size(rt, x: Tensor, var: Tensor, loc: Loc) -> Tensor:
    """F's size check: var of the input's size; one dim short (unsqueezed at -1); or of its rank
    with the sizes where they differ summing to 1 (one dim of size 1: broadcast); else its ValueError."""
    if var.shape == x.shape:
        return var
    if x.shape[:-1] == var.shape:
        return rt.apply("unsqueeze", [var], len(var.shape), loc)
    if len(x.shape) == len(var.shape) and sum(v for i, v in zip(x.shape, var.shape) if i != v) == 1:
        return var
    raise TorchError("ValueError", "var is of incorrect size")


def lower_gaussian_nll_loss(rt, a: dict, loc: Loc):
    from adjoint.engine.bindings import call_function
    from adjoint.engine.bindings.core import binary
    from adjoint.engine.inplace import apply_inplace
    x, t, var, eps, reduction = a["input"], a["target"], a["var"], a["eps"], a["reduction"]
    _floating("gaussian_nll_loss", loc, input=x, target=t)
    if isinstance(var, Tensor):
        _floating("gaussian_nll_loss", loc, var=var)
        if any(rt.B.ints(call_function(rt, "lt", [var, Fraction(0)], {}, loc).value)):
            raise TorchError("ValueError", "var has negative entry/entries")
    elif isinstance(var, (Fraction, bool)):
        var = _number_var(rt, x, var, a.type_of("var"), loc)
    else:
        raise ProblemError(loc, f"gaussian_nll_loss(): a var of {describe(var)} is not modelled (PyTorch compares it "
                                "with 0 first); give a tensor or a float")
    var = _var_of_input_size(rt, x, var, loc)
    if reduction not in ("none", "mean", "sum"):
        raise TorchError("ValueError", f"{reduction} is not valid")
    var = rt.apply("clone", [var], None, loc)
    before = rt.grad_enabled
    rt.grad_enabled = False   # with torch.no_grad(): var.clamp_(min=eps) -- no node, the clone's version moves
    try:
        apply_inplace(rt, "clamp_min", var, [], eps, loc)
    finally:
        rt.grad_enabled = before
    logs = rt.apply("log", [var], None, loc)
    squared = binary(rt, "**", binary(rt, "-", x, t, loc), Fraction(2), loc)
    loss = binary(rt, "*", Fraction(1, 2), binary(rt, "+", logs, binary(rt, "/", squared, var, loc), loc), loc)
    if a["full"]:
        loss = apply_inplace(rt, "add", loss, [_HALF_LOG_TWO_PI], None, loc)
    return _reduce(rt, loss, reduction, loc)


# ----------------------------------------------------------------------------- the table

_OLD = (Param("size_average", "any", None), Param("reduce", "any", None))

FUNCTIONS = (
    Function("poisson_nll_loss", (Param("input", "tensor"), Param("target", "tensor"), Param("log_input", "bool", True),
                                  Param("full", "bool", False), _OLD[0], Param("eps", "number", Fraction(1, 10 ** 8)),
                                  _OLD[1], Param("reduction", "str", "mean")),
             lower_poisson_nll_loss, where="function",
             doc="MulBackward0, ExpBackward0, SubBackward0 (log_input=False: AddBackward1, LogBackward0, MulBackward0, "
                 "SubBackward0); full: MulBackward1, LogBackward0, MulBackward1, LogBackward0, MulBackward0, "
                 "SubBackward0, AddBackward0, MaskedFillBackward0, AddBackward0 (in place); MeanBackward0 / "
                 "SumBackward0"),
    Function("pairwise_distance", (Param("x1", "tensor"), Param("x2", "tensor"), Param("p", "any", Fraction(2)),
                                   Param("eps", "number", Fraction(1, 10 ** 6)), Param("keepdim", "bool", False)),
             lower_pairwise_distance, where="function",
             doc="at::pairwise_distance: SubBackward0, AddBackward1 (+ eps), NormBackward1 over the innermost dim"),
    Function("triplet_margin_loss", (Param("anchor", "tensor"), Param("positive", "tensor"), Param("negative", "tensor"),
                                     Param("margin", "number", Fraction(1)), Param("p", "any", Fraction(2)),
                                     Param("eps", "number", Fraction(1, 10 ** 6)), Param("swap", "bool", False),
                                     _OLD[0], _OLD[1], Param("reduction", "str", "mean")),
             lower_triplet_margin_loss, where="function",
             doc="pairwise_distance(anchor, positive), (anchor, negative) (swap: (positive, negative), "
                 "MinimumBackward0), AddBackward1 (margin +), SubBackward0, ClampMinBackward0 (0), "
                 "MeanBackward0 / SumBackward0"),
    Function("gaussian_nll_loss", (Param("input", "tensor"), Param("target", "tensor"), Param("var", "any"),
                                   Param("full", "bool", False), Param("eps", "number", Fraction(1, 10 ** 6)),
                                   Param("reduction", "str", "mean")),
             lower_gaussian_nll_loss, where="function",
             doc="(UnsqueezeBackward0 of a var one dim short), CloneBackward0 (clamp_(min=eps) under no_grad), "
                 "LogBackward0, SubBackward0, PowBackward0, DivBackward0, AddBackward0, MulBackward0 (0.5 *), "
                 "(full: AddBackward0 in place), MeanBackward0 / SumBackward0"),
)
