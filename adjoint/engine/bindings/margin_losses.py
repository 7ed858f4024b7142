"""Functions of the margin losses: what PyTorch 2.13 runs for each (checked in real torch).

* ``soft_margin_loss``: one node, ``SoftMarginLossBackward0`` (adjoint/engine/ops/margin_losses.py),
  whose only edge is the input; the target broadcasts into the input's shape inside the kernel
  (``mul_``, no expand node); a target that would grow the input, or does not broadcast, is the
  kernel's error once the node packed self and target;
* ``margin_ranking_loss``: ATen's ``(-target * (input1 - input2) + margin).clamp_min_(0)``, reduced:
  ``SubBackward0``, ``NegBackward0`` (C++ evaluates the right operand of ``*`` first),
  ``MulBackward0``, ``AddBackward1`` (even for margin 0), ``ClampMinBackward0`` (in place), then
  ``MeanBackward0`` / ``SumBackward0``; F.margin_ranking_loss first refuses tensors of different
  ranks (its RuntimeError), shapes that do not broadcast are mul's / sub's errors;
* ``hinge_embedding_loss``: ATen's ``zeros_like(self)``, ``margin - self`` (C++'s
  ``empty_like(self).fill_(margin).sub_(self)``: an in-place ``SubBackward0`` whose first edge is
  None), ``clamp_min_(0)``, ``where(target != 1, that, zeros)``, ``where(target != -1, self,
  zeros)``, their sum (``AddBackward0``), reduced; the target gets no gradient (it is only compared);
* ``cosine_embedding_loss``: ATen's checks of the ranks (a 0-d target with 1-D inputs, a 1-D one
  with 2-D inputs), then cos = sum(x1 x2) / sqrt_((sum(x1 x1) + EPS) (sum(x2 x2) + EPS)) over the
  last dim (EPS the double 1e-12; ``sqrt_`` in place), ``1 - cos`` (an in-place ``SubBackward0``,
  first edge None), ``(cos - margin).clamp_min_(0)`` (``SubBackward1``, ``ClampMinBackward0``),
  ``where(target == 1, ...)``, ``where(target == -1, ...)``, their sum, reduced;
* ``multilabel_soft_margin_loss``: Python in F, so Python's operators:
  ``-(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))`` (``MulBackward0``,
  ``RsubBackward1``, ``NegBackward0``, ``LogSigmoidBackward0`` ...), times the weight, summed over the
  last dim and divided by its size (a Python int: ``DivBackward0``), then ``mean()`` / ``sum()``;
  the reduction is read only at the end (no ``_Reduction`` enum: an unknown one is
  "NAME is not valid", after every node above).

The deprecated ``size_average`` / ``reduce`` are refused (use ``reduction``), as for the other losses.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.inplace import apply_inplace
from adjoint.engine.ops.arith import broadcast_shapes
from adjoint.engine.ops.losses import Pointwise
from adjoint.engine.bindings.signature import Function, Param
from adjoint.engine.bindings.core import binary
from adjoint.engine.bindings.glue import size_dim
from adjoint.engine.bindings.losses import (_float_tensor, _no_grad_arg, _output_mismatch, _reduce, reduction_enum,
                                            reduction_of)
from adjoint.engine.torch_errors import TorchError, torch_size


def _same_float_dtype(x: Tensor, y: Tensor, fn: str, loc: Loc) -> None:
    """A float input and a target of its dtype (int64 and bool targets are PyTorch's to handle)."""
    _float_tensor(x, "the input", fn, loc)
    if y.dtype in ("int64", "bool"):
        return
    _float_tensor(y, "the target", fn, loc)
    if y.dtype != x.dtype:
        raise ProblemError(loc, f"{fn}(): a {x.dtype} input with a {y.dtype} target is not modelled (PyTorch computes "
                                "in the input's dtype); give both the same dtype")


# ----------------------------------------------------------------------------- soft_margin_loss

def lower_soft_margin_loss(rt, a: dict, loc: Loc):
    x, y = a["input"], a["target"]
    reduction = reduction_enum(rt, reduction_of(a, loc, "soft_margin_loss"))
    _same_float_dtype(x, y, "soft_margin_loss", loc)
    _no_grad_arg(y, "target", "soft_margin_loss", loc)
    try:   # the kernel's mul_ of -input by the target, once the node packed self and target
        shape = broadcast_shapes(x.shape, y.shape, None)
        refused = None if shape == x.shape else _output_mismatch(x.shape, shape)
    except TorchError as e:
        refused = e
    if refused is not None:
        rt.raise_after_packs("soft_margin_loss", [x, y], refused, loc)
    return rt.apply("soft_margin_loss", [x, y], Pointwise(reduction), loc)


# ----------------------------------------------------------------------------- margin_ranking_loss

def lower_margin_ranking_loss(rt, a: dict, loc: Loc):
    x1, x2, t = a["input1"], a["input2"], a["target"]
    reduction = reduction_enum(rt, reduction_of(a, loc, "margin_ranking_loss"))
    if not len(x1.shape) == len(x2.shape) == len(t.shape):   # F.margin_ranking_loss's own check
        raise TorchError("RuntimeError", f"margin_ranking_loss : All input tensors should have same dimension but got "
                                         f"sizes: input1: {torch_size(x1.shape)}, input2: {torch_size(x2.shape)}, "
                                         f"target: {torch_size(t.shape)} ")
    diff = rt.apply("sub", [x1, x2], None, loc)
    neg = rt.apply("neg", [t], None, loc)
    shifted = rt.apply("add_scalar", [rt.apply("mul", [neg, diff], None, loc)], a["margin"], loc)
    return _reduce(rt, apply_inplace(rt, "clamp_min", shifted, [], 0, loc), reduction, loc)


# ----------------------------------------------------------------------------- hinge_embedding_loss

def _scalar_minus(rt, value, x: Tensor, loc: Loc) -> Tensor:
    """C++'s ``double - tensor``: ``empty_like(x).fill_(value).sub_(x)``: an in-place
    ``SubBackward0`` whose first edge (the filled tensor's) is None."""
    return apply_inplace(rt, "sub", rt.apply("full_like", [x], value, loc), [x], None, loc)


def lower_hinge_embedding_loss(rt, a: dict, loc: Loc):
    x, t = a["input"], a["target"]
    reduction = reduction_enum(rt, reduction_of(a, loc, "hinge_embedding_loss"))
    _float_tensor(x, "the input", "hinge_embedding_loss", loc)
    zeros = rt.apply("full_like", [x], Fraction(0), loc)
    margin_clamp = apply_inplace(rt, "clamp_min", _scalar_minus(rt, a["margin"], x, loc), [], 0, loc)
    output_margin = rt.apply("where", [margin_clamp, zeros, rt.apply("compare", [t, Fraction(1)], "ne", loc)], None, loc)
    output_self = rt.apply("where", [x, zeros, rt.apply("compare", [t, Fraction(-1)], "ne", loc)], None, loc)
    return _reduce(rt, rt.apply("add", [output_margin, output_self], None, loc), reduction, loc)


# ----------------------------------------------------------------------------- cosine_embedding_loss

#: cosine_embedding_loss's EPSILON, added to each squared magnitude (a C++ double)
COSINE_EPSILON = Fraction(1e-12)


def lower_cosine_embedding_loss(rt, a: dict, loc: Loc):
    x1, x2, t = a["input1"], a["input2"], a["target"]
    reduction = reduction_enum(rt, reduction_of(a, loc, "cosine_embedding_loss"))
    rank = len(t.shape)
    if rank > 1:   # ATen's checks, before any node
        raise TorchError("RuntimeError", "0D or 1D target tensor expected, multi-target not supported")
    if len(x1.shape) != rank + 1 or len(x2.shape) != rank + 1:
        raise TorchError("RuntimeError", f"{rank}D target tensor expects {rank + 1}D input tensors, but found inputs "
                                         f"with sizes {list(x1.shape)} and {list(x2.shape)}.")
    for x in (x1, x2):
        _float_tensor(x, "an input", "cosine_embedding_loss", loc)

    def summed(u, v):
        return rt.apply("sum_dim", [rt.apply("mul", [u, v], None, loc)], ((rank,), False), loc)

    prod_sum = summed(x1, x2)
    mag_square1 = rt.apply("add_scalar", [summed(x1, x1)], COSINE_EPSILON, loc)
    mag_square2 = rt.apply("add_scalar", [summed(x2, x2)], COSINE_EPSILON, loc)
    denom = apply_inplace(rt, "sqrt", rt.apply("mul", [mag_square1, mag_square2], None, loc), [], None, loc)
    cos = rt.apply("div", [prod_sum, denom], None, loc)
    zeros = rt.apply("full_like", [cos], Fraction(0), loc)
    pos = _scalar_minus(rt, Fraction(1), cos, loc)
    neg = apply_inplace(rt, "clamp_min", rt.apply("sub_scalar", [cos], a["margin"], loc), [], 0, loc)
    output_pos = rt.apply("where", [pos, zeros, rt.apply("compare", [t, Fraction(1)], "eq", loc)], None, loc)
    output_neg = rt.apply("where", [neg, zeros, rt.apply("compare", [t, Fraction(-1)], "eq", loc)], None, loc)
    return _reduce(rt, rt.apply("add", [output_pos, output_neg], None, loc), reduction, loc)


# ----------------------------------------------------------------------------- multilabel_soft_margin_loss

def lower_multilabel_soft_margin_loss(rt, a: dict, loc: Loc):
    x, t, weight = a["input"], a["target"], a["weight"]
    reduction = reduction_of(a, loc, "multilabel_soft_margin_loss")
    _float_tensor(x, "the input", "multilabel_soft_margin_loss", loc)

    def logsigmoid(u):
        return rt.apply("log_sigmoid", [u], None, loc)[0]

    pos = binary(rt, "*", t, logsigmoid(x), loc)
    neg_side = binary(rt, "-", Fraction(1), t, loc)
    neg = binary(rt, "*", neg_side, logsigmoid(rt.apply("neg", [x], None, loc)), loc)
    loss = rt.apply("neg", [binary(rt, "+", pos, neg, loc)], None, loc)
    if weight is not None:
        loss = binary(rt, "*", loss, weight, loc)
    class_dim = len(x.shape) - 1
    n_classes = size_dim(x, class_dim)
    loss = binary(rt, "/", rt.apply("sum_dim", [loss], ((class_dim,), False), loc), Fraction(n_classes), loc)
    if reduction == "none":
        return loss
    if reduction in ("mean", "sum"):
        return rt.apply(reduction, [loss], None, loc)
    raise TorchError("ValueError", f"{reduction} is not valid")


# ----------------------------------------------------------------------------- the table

_IT = (Param("input", "tensor"), Param("target", "tensor"))
_OLD = (Param("size_average", "any", None), Param("reduce", "any", None))
_RED = Param("reduction", "str", "mean")
_MARGIN0 = Param("margin", "number", Fraction(0))

FUNCTIONS = (
    Function("soft_margin_loss", _IT + _OLD + (_RED,), lower_soft_margin_loss, where="function",
             doc="SoftMarginLossBackward0 (one edge: the input)"),
    Function("margin_ranking_loss", (Param("input1", "tensor"), Param("input2", "tensor"), Param("target", "tensor"),
                                     _MARGIN0) + _OLD + (_RED,), lower_margin_ranking_loss, where="function",
             doc="SubBackward0, NegBackward0, MulBackward0, AddBackward1, ClampMinBackward0, then the reduction"),
    Function("hinge_embedding_loss", _IT + (Param("margin", "number", Fraction(1)),) + _OLD + (_RED,),
             lower_hinge_embedding_loss, where="function",
             doc="SubBackward0 (margin - x, in place), ClampMinBackward0, WhereBackward0 x2, AddBackward0, the reduction"),
    Function("cosine_embedding_loss", (Param("input1", "tensor"), Param("input2", "tensor"), Param("target", "tensor"),
                                       _MARGIN0) + _OLD + (_RED,), lower_cosine_embedding_loss, where="function",
             doc="mul, sum, add eps (x3), mul, sqrt_, div; 1 - cos; (cos - margin).clamp_min_(0); where x2; add; "
                 "the reduction"),
    Function("multilabel_soft_margin_loss", _IT + (Param("weight", "tensor", None),) + _OLD + (_RED,),
             lower_multilabel_soft_margin_loss, where="function",
             doc="LogSigmoidBackward0, MulBackward0, RsubBackward1, NegBackward0, LogSigmoidBackward0, MulBackward0, "
                 "AddBackward0, NegBackward0, (MulBackward0 by the weight), SumBackward1, DivBackward0, the reduction"),
)
