"""Functions of the activations family: what PyTorch 2.13 runs for each (checked in real torch).

Every one is a single node (see :mod:`adjoint.engine.ops.activations`), with PyTorch's signature:

* ``relu`` (``F.relu(input, inplace=False)``, ``torch.relu``, ``Tensor.relu``), ``relu_``;
* ``F.leaky_relu(input, negative_slope=0.01, inplace=False)``: LeakyReluBackward0; in place
  (``inplace=True``, ``F.leaky_relu_``) LeakyReluBackward1, which saves the result;
* ``F.gelu(input, *, approximate='none')``, ``F.silu(input, inplace=False)``,
  ``F.softplus(input, beta=1, threshold=20)``;
* ``F.elu(input, alpha=1.0, inplace=False)``: EluBackward0; in place EluBackward1 (saves the
  result); ``F.hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False)``: HardtanhBackward0
  out of place and in place (then self is cloned and saved, as for silu and clamp);
* ``torch.clamp(input, min=None, max=None)`` and ``clip``: ClampBackward1 for number bounds,
  ClampBackward0 (edges self, min, max) for tensor bounds; ``Tensor.clamp_`` in place;
* ``softmax(input, dim)`` / ``log_softmax``: SoftmaxBackward0 / LogSoftmaxBackward0; ``dim``
  is required here (``torch.softmax`` requires it, ``F.softmax`` without it picks a legacy
  implicit dim and warns: name it);
* ``torch.maximum`` / ``torch.minimum``; ``torch.where(condition, input, other)`` with a bool
  condition (WhereBackward0; a number for input or other is a wrapped scalar, no edge).

In-place forms go through :func:`adjoint.engine.inplace.apply_inplace` (version bump, rebase_history,
PyTorch's refusals), as ``relu_`` does.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.pyfloat import PyFloat
from adjoint.engine.bindings.signature import Function, Overload, Param, after_packs, invalid_combination
from adjoint.engine.torch_errors import TYPE_NAMES, TorchError
from adjoint.engine.bindings.views import dim_index

_IN = Param("input", "tensor")
_SELF = Param("self", "tensor")


def _inplace(rt, prim: str, x: Tensor, params, loc: Loc, others=()):
    from adjoint.engine.inplace import apply_inplace
    return apply_inplace(rt, prim, x, list(others), params, loc)


def _unary(prim: str, params_of, inplace_prim: str | None = None, kernel_checks: bool = False):
    """A one-tensor activation: ``prim`` out of place, ``inplace_prim`` when ``inplace=True``;
    ``kernel_checks``: PyTorch's error for the arguments comes from the kernel, after the node
    packed the input."""
    def lower(rt, a, loc):
        p = after_packs(rt, prim, [a["input"]], loc, lambda: params_of(a, loc)) if kernel_checks else \
            params_of(a, loc)
        if a.get("inplace"):
            return _inplace(rt, inplace_prim, a["input"], p, loc)
        return rt.apply(prim, [a["input"]], p, loc)
    lower.__name__ = f"lower_{prim}"
    return lower


def _in_place(prim: str, params_of):
    def lower(rt, a, loc):
        return _inplace(rt, prim, a["input"], params_of(a, loc), loc)
    lower.__name__ = f"lower_{prim}_"
    return lower


def _none(a, loc):
    return None


def _slope(a, loc):
    return a["negative_slope"]


def _alpha(a, loc):
    return (a["alpha"], Fraction(1), Fraction(1))   # F.elu: scale = input_scale = 1


#: ATen's SELU_ALPHA and SELU_SCALE, the doubles torch.selu hands elu as alpha and scale
SELU_ALPHA = Fraction(1.6732632423543772848170429916717)
SELU_SCALE = Fraction(1.0507009873554804934193349852946)


def _selu(a, loc):
    return (SELU_ALPHA, SELU_SCALE, Fraction(1))


def _celu(a, loc):
    """celu's alpha, its forward's input_scale ``1. / alpha.to<double>()`` and its backward's
    ``1.0 / alpha.toFloat()`` (alpha rounded to float32 first: at x = 0 the gradient of
    celu(x, 0.3) is 0.99999996), each the double PyTorch computes; alpha = 0 is the kernel's error
    (Op.forward_error), its scales 0 here."""
    import numpy as np
    alpha = a["alpha"]
    if alpha == 0:
        return (alpha, Fraction(0), Fraction(0))
    return (alpha, Fraction(1.0 / float(alpha)), Fraction(1.0 / float(np.float32(float(alpha)))))


def _threshold(a, loc):
    return (a["threshold"], a["value"])


def _lambd(a, loc):
    return a["lambd"]


def _hardtanh_bounds(a, loc):
    """F.hardtanh's own check (Python, before any node): min_val above max_val is its ValueError."""
    if a["min_val"] > a["max_val"]:
        raise TorchError("ValueError", "min_val cannot be greater than max_val")
    return _bounds(a, loc)


def _bounds(a, loc):
    """F.hardtanh_ (torch._C._nn.hardtanh_ itself: no check; min_val above max_val makes max_val)."""
    return (a["min_val"], a["max_val"])


def _gelu_mode(a, loc):
    if a["approximate"] not in ("none", "tanh"):
        raise TorchError("RuntimeError", "approximate argument must be either none or tanh.")
    return a["approximate"]


def _softplus(a, loc):
    return (a["beta"], a["threshold"])


# ----------------------------------------------------------------------------- clamp

def clamp(rt, x: Tensor, lo, hi, loc: Loc, inplace: bool = False):
    """torch.clamp / Tensor.clamp_: number bounds make ClampBackward1, tensor bounds ClampBackward0."""
    # no bound at all: the kernel's RuntimeError once ClampBackward1 packed self (the op's forward_error;
    # in place after the write's own checks)
    # (one tensor bound and one number: PyTorch's parser refuses the call, see _parsed_bounds)
    if any(isinstance(b, Tensor) for b in (lo, hi)):
        # absent bounds are undefined tensors: an edge slot with no edge, nothing saved
        others = [lo if lo is not None else Fraction(0), hi if hi is not None else Fraction(0)]
        p = (lo is not None, hi is not None)
        if inplace:
            return _inplace(rt, "clamp_tensor", x, p, loc, others)
        return rt.apply("clamp_tensor", [x] + others, p, loc)
    if inplace:
        return _inplace(rt, "clamp", x, (lo, hi), loc)
    return rt.apply("clamp", [x], (lo, hi), loc)


#: clamp's two overloads as PyTorch 2.13's parser lists them: the function's (torch.clamp, torch.clip;
#: out makes it take one argument more than a call gives, so no "didn't match" line) and the
#: Tensor method's (x.clamp, x.clamp_, x.clip, x.clip_), each as printed and as the parser splits it
_CLAMP_FUNCTION = (
    Overload("(Tensor input, Tensor min = None, Tensor max = None, *, Tensor out = None)",
             ("Tensor input", "Tensor? min=None", "Tensor? max=None", "*", "Tensor out=None")),
    Overload("(Tensor input, Number min = None, Number max = None, *, Tensor out = None)",
             ("Tensor input", "Scalar? min=None", "Scalar? max=None", "*", "Tensor out=None")))
_CLAMP_METHOD = (
    Overload("(Tensor min = None, Tensor max = None)", ("Tensor? min=None", "Tensor? max=None")),
    Overload("(Number min = None, Number max = None)", ("Scalar? min=None", "Scalar? max=None")))


def _parsed_bounds(a, loc: Loc):
    """clamp's min and max; one Tensor and one number match neither overload (Tensor? min, Tensor?
    max; Scalar? min, Scalar? max): the parser's TypeError, before anything runs."""
    lo, hi = a["min"], a["max"]
    if lo is not None and hi is not None and isinstance(lo, Tensor) != isinstance(hi, Tensor):
        raise invalid_combination(a, _CLAMP_METHOD if a.method else _CLAMP_FUNCTION, loc)
    return lo, hi


def lower_clamp(rt, a, loc):
    return clamp(rt, a["input"], *_parsed_bounds(a, loc), loc)


def lower_clamp_(rt, a, loc):
    return clamp(rt, a["self"], *_parsed_bounds(a, loc), loc, inplace=True)


# ----------------------------------------------------------------------------- softmax

def softmax_dim(x: Tensor, dim, loc: Loc, what: str) -> int:
    if dim is None:
        raise ProblemError(loc, f"{what}() needs dim=: torch.{what} requires it (TypeError) and F.{what} without "
                                "it picks a deprecated implicit dim with a warning; name the dim")
    return dim_index(dim, len(x.shape), loc)


def implicit_softmax_dim(ndim: int) -> int:
    """F._get_softmax_dim: the legacy choice when no dim is given."""
    return 0 if ndim in (0, 1, 3) else 1


def _softmax(prim: str):
    def lower(rt, a, loc):
        x = a["input"]
        if a["dim"] is None and not a.method and a.prefix != "torch.":
            # F.softmax(x) (a bare softmax(x) is F's): F._get_softmax_dim's legacy choice, with its warning
            from adjoint.engine import warns
            warns.warn(rt, "UserWarning", warns.implicit_dim(prim))
            return rt.apply(prim, [x], implicit_softmax_dim(len(x.shape)), loc)
        return rt.apply(prim, [x], softmax_dim(x, a["dim"], loc, prim), loc)
    lower.__name__ = f"lower_{prim}"
    return lower


# ----------------------------------------------------------------------------- maximum, minimum, where

def _binary(prim: str):
    def lower(rt, a, loc):
        return rt.apply(prim, [a["input"], a["other"]], None, loc)
    lower.__name__ = f"lower_{prim}"
    return lower




def where(rt, cond: Tensor, x, y, loc: Loc):
    """torch.where(condition, input, other): WhereBackward0 (edges input, other; saves condition).
    A Python float among ``input`` and ``other`` (a :class:`PyFloat`, :func:`_number`) makes the
    result PyTorch's default dtype, float32, beside an int64 tensor or another number (the
    runtime's type promotion)."""
    if cond.dtype != "bool":   # the kernel's check, once WhereBackward0 packed the condition (first of all)
        rt.raise_after_packs("where", [x, y, cond], TorchError(
            "RuntimeError", f"where expected condition to be a boolean tensor, but got a tensor with dtype "
                            f"{TYPE_NAMES[cond.dtype]}"), loc)
    if not isinstance(x, Tensor) and not isinstance(y, Tensor) and \
            not (rt.dtype == "float32" and (isinstance(x, PyFloat) or isinstance(y, PyFloat))):
        # two Python scalars: PyTorch makes an int64 tensor of two ints, and a tensor of its default dtype
        # (float32, whatever the file's) when one is a float: the file's in a float32 file
        raise ProblemError(loc, "torch.where with two Python numbers is not modelled yet here (PyTorch makes an "
                                "int64 tensor of two ints, a float32 one if either is a float: modelled in a float32 "
                                "file); give one of them as a tensor of the file's dtype, as in torch.where(c, x, 0)")
    return rt.apply("where", [x, y, cond], None, loc)


def _number(a, name: str):
    """Argument ``name``, a number the call wrote as a Python float (``0.5``, ``1.0``) as a
    :class:`PyFloat`: it decides the dtype of where's result beside an int64 tensor."""
    v = a[name]
    return PyFloat(v) if type(v) is Fraction and a.type_of(name) == "float" else v


def _comparison(prim_rel: str):
    """``torch.gt(input, other)`` and its kin: a bool tensor and no autograd node (derivatives.yaml
    declares their output not differentiable), whatever requires grad."""
    def lower(rt, a, loc):
        x, other = a["input"], a["other"]
        for t in (x, other):
            if isinstance(t, Tensor) and rt.B.is_symbolic(t.value):
                raise ProblemError(loc, f"a comparison ({prim_rel}) of values with free symbols: its result depends "
                                        "on the symbols; bind them under symbols: and compare numbers")
        return rt.apply("compare", [x, other], prim_rel, loc)
    lower.__name__ = f"lower_{prim_rel}"
    return lower


def lower_isnan(rt, a, loc):
    """``torch.isnan(x)``: ``x != x`` elementwise (IEEE: only nan differs from itself), a bool tensor and
    no node, as the comparisons."""
    x = a["input"]
    if isinstance(x, Tensor) and rt.B.is_symbolic(x.value):
        raise ProblemError(loc, "isnan of values with free symbols: its result depends on the symbols; bind them "
                                "under symbols: and test numbers")
    return rt.apply("compare", [x, x], "ne", loc)


#: a float dtype's largest finite value (nan_to_num's default for +inf; its negative for -inf)
_FINITE_MAX = {"float32": Fraction((2 ** 24 - 1) * 2 ** 104), "float64": Fraction(1.7976931348623157e308)}


def _no_symbols(rt, x, loc: Loc, what: str) -> None:
    if isinstance(x, Tensor) and rt.B.is_symbolic(x.value):
        raise ProblemError(loc, f"{what} of values with free symbols: its result depends on the symbols; bind them "
                                "under symbols: and test numbers")


def lower_isfinite(rt, a, loc):
    """``torch.isfinite(x)``: ATen's composite for a float tensor, ``(x == x) * (x.abs() != inf)``:
    the abs is a node (AbsBackward0, packing x) when x requires grad, made and dropped; the result a
    bool tensor with no node. An int64 or bool tensor is all True (``ones_like``), no abs."""
    x = a["input"]
    _no_symbols(rt, x, loc, "isfinite")
    if x.dtype in ("int64", "bool"):
        return rt.apply("compare", [x, x], "eq", loc)
    if x.dtype.startswith("complex"):
        raise ProblemError(loc, "isfinite of a complex tensor is not modelled yet")
    rt.apply("abs", [x], None, loc)
    return rt.apply("isfinite", [x], None, loc)


def lower_nan_to_num(rt, a, loc):
    """``torch.nan_to_num(x, nan=0.0, posinf=None, neginf=None)``: NanToNumBackward0 (saves self);
    the defaults for the infinities are the dtype's largest and lowest finite values."""
    x = a["input"]
    _no_symbols(rt, x, loc, "nan_to_num")
    if x.dtype not in _FINITE_MAX:
        raise ProblemError(loc, f"nan_to_num of a {x.dtype} tensor is not modelled yet; use a float tensor")
    top = _FINITE_MAX[x.dtype]
    values = []
    for name, default in (("nan", Fraction(0)), ("posinf", top), ("neginf", -top)):
        v = a[name]
        if v is None:
            v = default
        if not isinstance(v, Fraction) or isinstance(v, bool):
            raise ProblemError(loc, f"nan_to_num's {name}= must be a number here (an infinite or non-number "
                                    "replacement is not modelled)")
        values.append(v)
    return rt.apply("nan_to_num", [x], tuple(values), loc)


def lower_where(rt, a, loc):
    return where(rt, a["condition"], _number(a, "input"), _number(a, "other"), loc)


def lower_where_method(rt, a, loc):
    return where(rt, a["condition"], a["self"], _number(a, "y"), loc)


_NUM = "number"

FUNCTIONS = (
    Function("relu", (_IN, Param("inplace", "bool", False)), _unary("relu", _none, "relu"), where="function",
             doc="ReluBackward0 (saves the result); inplace=True: torch.relu_"),
    Function("relu", (_SELF,), lambda rt, a, loc: rt.apply("relu", [a["self"]], None, loc), where="method",
             doc="ReluBackward0"),
    Function("relu_", (_IN,), _in_place("relu", _none), where="function", doc="ReluBackward0, in place"),
    Function("leaky_relu", (_IN, Param("negative_slope", _NUM, Fraction(1, 100)), Param("inplace", "bool", False)),
             _unary("leaky_relu", _slope, "leaky_relu_"), where="function",
             doc="LeakyReluBackward0 (saves self); in place LeakyReluBackward1 (saves the result)"),
    Function("leaky_relu_", (_IN, Param("negative_slope", _NUM, Fraction(1, 100))), _in_place("leaky_relu_", _slope),
             where="function", doc="LeakyReluBackward1 (saves the result; a negative slope raises in backward)"),
    Function("gelu", (_IN, Param("approximate", "str", "none", keyword_only=True)), _unary("gelu", _gelu_mode, kernel_checks=True),
             where="function", doc="GeluBackward0 (saves self), approximate 'none' (erf) or 'tanh'"),
    Function("silu", (_IN, Param("inplace", "bool", False)), _unary("silu", _none, "silu"), where="function",
             doc="SiluBackward0 (saves self; in place: a clone of self)"),
    Function("elu", (_IN, Param("alpha", _NUM, Fraction(1)), Param("inplace", "bool", False)),
             _unary("elu", _alpha, "elu_"), where="function",
             doc="EluBackward0 (saves self); in place EluBackward1 (saves the result)"),
    Function("elu_", (_IN, Param("alpha", _NUM, Fraction(1))), _in_place("elu_", _alpha), where="function",
             doc="EluBackward1 (saves the result; alpha < 0 raises in backward)"),
    Function("logsigmoid", (_IN,), lambda rt, a, loc: rt.apply("log_sigmoid", [a["input"]], None, loc)[0],
             where="function", doc="LogSigmoidBackward0 (saves self and buffer = exp(-|x|), log_sigmoid_forward's "
                                   "second output)"),
    Function("selu", (_IN, Param("inplace", "bool", False)), _unary("elu", _selu, "elu_"), where="function",
             doc="elu(input, SELU_ALPHA, SELU_SCALE): EluBackward0 (saves self); in place EluBackward1 (saves the "
                 "result)"),
    Function("selu_", (_IN,), _in_place("elu_", _selu), where="function", doc="EluBackward1 (saves the result)"),
    Function("celu", (_IN, Param("alpha", _NUM, Fraction(1)), Param("inplace", "bool", False)),
             _unary("celu", _celu, "celu_"), where="function",
             doc="CeluBackward0 (saves self); in place CeluBackward1 (saves the result)"),
    Function("celu_", (_IN, Param("alpha", _NUM, Fraction(1))), _in_place("celu_", _celu), where="function",
             doc="CeluBackward1 (saves the result; alpha < 0 raises in backward)"),
    Function("hardsigmoid", (_IN, Param("inplace", "bool", False)), _unary("hardsigmoid", _none, "hardsigmoid"),
             where="function", doc="HardsigmoidBackward0 (saves self; in place: a clone of self)"),
    Function("threshold", (_IN, Param("threshold", _NUM), Param("value", _NUM), Param("inplace", "bool", False)),
             _unary("threshold", _threshold, "threshold_"), where="function",
             doc="ThresholdBackward0 (saves self); in place ThresholdBackward1 (saves a clone of self)"),
    Function("threshold_", (_IN, Param("threshold", _NUM), Param("value", _NUM)), _in_place("threshold_", _threshold),
             where="function", doc="ThresholdBackward1 (saves a clone of self)"),
    Function("softshrink", (_IN, Param("lambd", _NUM, Fraction(1, 2))), _unary("softshrink", _lambd),
             where="function", doc="SoftshrinkBackward0 (saves self; a negative lambd raises after the pack)"),
    Function("hardshrink", (_IN, Param("lambd", _NUM, Fraction(1, 2))), _unary("hardshrink", _lambd),
             doc="HardshrinkBackward0 (saves self)"),
    Function("softplus", (_IN, Param("beta", _NUM, Fraction(1)), Param("threshold", _NUM, Fraction(20))),
             _unary("softplus", _softplus), where="function", doc="SoftplusBackward0 (saves self)"),
    Function("hardtanh", (_IN, Param("min_val", _NUM, Fraction(-1)), Param("max_val", _NUM, Fraction(1)),
                          Param("inplace", "bool", False)), _unary("hardtanh", _hardtanh_bounds, "hardtanh"),
             where="function", doc="HardtanhBackward0 (saves self; in place: a clone of self)"),
    Function("hardtanh_", (_IN, Param("min_val", _NUM, Fraction(-1)), Param("max_val", _NUM, Fraction(1))),
             _in_place("hardtanh", _bounds), where="function", doc="HardtanhBackward0, in place"),
    Function("clamp", (_IN, Param("min", "scalar", None), Param("max", "scalar", None)), lower_clamp,
             doc="ClampBackward1 (number bounds), ClampBackward0 (tensor bounds; edges self, min, max)"),
    Function("clip", (_IN, Param("min", "scalar", None), Param("max", "scalar", None)), lower_clamp,
             doc="clamp"),
    Function("clamp_", (_SELF, Param("min", "scalar", None), Param("max", "scalar", None)), lower_clamp_,
             where="method", doc="clamp in place (self cloned and saved)"),
    Function("clip_", (_SELF, Param("min", "scalar", None), Param("max", "scalar", None)), lower_clamp_,
             where="method", doc="clamp_"),
    Function("softmax", (_IN, Param("dim", "int", None)), _softmax("softmax"),
             doc="SoftmaxBackward0 (saves the result); dim required"),
    Function("log_softmax", (_IN, Param("dim", "int", None)), _softmax("log_softmax"),
             doc="LogSoftmaxBackward0 (saves the result); dim required"),
    Function("maximum", (_IN, Param("other", "tensor")), _binary("maximum"),
             doc="MaximumBackward0 (saves other, self); ties: half each"),
    Function("minimum", (_IN, Param("other", "tensor")), _binary("minimum"),
             doc="MinimumBackward0 (saves other, self); ties: half each"),
    *(Function(name, (_IN, Param("other", "scalar")), _comparison(name),
               doc=f"no node: a bool tensor (the Tensor method is what `a {text} b` calls)")
      for name, text in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="), ("eq", "=="), ("ne", "!="))),
    Function("isnan", (_IN,), lower_isnan, doc="no node: a bool tensor, true where the element is nan (x != x)"),
    Function("isfinite", (_IN,), lower_isfinite,
             doc="no node: a bool tensor, true where the element is finite (x.abs()'s AbsBackward0 made and dropped)"),
    Function("nan_to_num", (_IN, Param("nan", "number", Fraction(0)), Param("posinf", "number", None),
                            Param("neginf", "number", None)), lower_nan_to_num,
             doc="NanToNumBackward0 (saves self): g * isfinite(self)"),
    Function("where", (Param("condition", "tensor"), Param("input", "scalar"), Param("other", "scalar")), lower_where,
             where="function",
             doc="WhereBackward0 (edges input, other; saves the bool condition)"),
    Function("where", (_SELF, Param("condition", "tensor"), Param("y", "scalar")), lower_where_method,
             where="method", doc="torch.where(condition, self, y)"),
)
