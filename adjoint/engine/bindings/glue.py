"""The "glue" a forward is full of: what PyTorch 2.13 does for each (checked in real torch).

* ``x.size()`` (a torch.Size: a tuple of Python ints, as ``x.shape``), ``x.size(d)``,
  ``x.dim()`` / ``x.ndimension()``, ``x.numel()`` / ``torch.numel(x)``: Python ints, no node.
  A dim out of range is PyTorch's IndexError (``Dimension out of range (expected to be in
  range of [-2, 1], but got 5)``; of a 0-d tensor ``Dimension specified as 0 but tensor has
  no dimensions``). ``len(x)`` is in the interpreter (a Python builtin): :func:`python_len`.
* ``x.expand_as(other)``: ``x.expand(other.size())``, ``ExpandBackward0`` (a view).
* dtype conversions ``x.double()``, ``x.float()``, ``x.to(dtype)``, ``x.to(other)``,
  ``x.type_as(other)``: to the dtype ``x`` already has, ``x`` itself (no node, the same
  tensor object); a bool or int64 tensor to the problem's float dtype, a new tensor with no
  grad_fn (True is 1.0). Anything else (a float tensor to another float dtype:
  ``ToCopyBackward0`` across dtypes; to bool or int64) is refused as not modelled yet.
  The dtype names ``torch.float64`` (``torch.double``), ``torch.float32`` (``torch.float``),
  ``torch.int64`` (``torch.long``), ``torch.bool`` and the attribute ``x.dtype`` are
  :class:`DType` values.
* ``m.logical_not()`` / ``torch.logical_not(m)``: a bool tensor, no node (``m == 0``);
  ``~m`` / ``m.bitwise_not()`` on a bool tensor: the same; on a float tensor ``~x`` is
  PyTorch's TypeError, ``bitwise_not`` its NotImplementedError.
* ``x.new_zeros(size)``, ``x.new_ones(size)``, ``x.new_full(size, v)``: new constant tensors
  of ``x``'s dtype, no grad.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from adjoint.engine.return_types import TorchSize
from adjoint.values.numbers.float_held import float_holds
from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.runtime import ints_held_exactly
from adjoint.engine.torch_errors import TYPE_NAMES, TorchError
from adjoint.values.strides import is_contiguous
from adjoint.engine.bindings.signature import Function, Param


@dataclass(frozen=True)
class DType:
    """A ``torch.dtype`` a problem expression names (``torch.float64``, ``x.dtype``)."""

    name: str   # float32 | float64 | int64 | bool

    def __str__(self) -> str:
        return f"torch.{self.name}"


@dataclass(frozen=True)
class Device:
    """``x.device``: every tensor adjoint models lives on the CPU (``device=x.device`` in a
    constructor such as ``torch.arange``)."""

    type: str = "cpu"

    def __str__(self) -> str:
        return self.type


#: ``torch.NAME`` that names a dtype of a problem's tensors.
DTYPE_NAMES = {"float64": "float64", "double": "float64", "float32": "float32", "float": "float32",
               "int64": "int64", "long": "int64", "bool": "bool"}
_FLOATS = ("float32", "float64")


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


# ----------------------------------------------------------------------------- sizes

def size_dim(x: Tensor, d: int) -> int:
    """``x.size(d)``: the dim wrapped as ``maybe_wrap_dim`` does, PyTorch's IndexError otherwise."""
    n = len(x.shape)
    if n == 0:
        raise TorchError("IndexError", f"Dimension specified as {d} but tensor has no dimensions")
    if not -n <= d < n:
        raise TorchError("IndexError", f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but "
                                       f"got {d})")
    return x.shape[d]


def lower_size(rt, a, loc):
    x = a["self"]
    if a["dim"] is None:
        return TorchSize(Fraction(d) for d in x.shape)
    return Fraction(size_dim(x, a["dim"]))


class PrintedNumber:
    """``x.item()`` of a value that is not rational (a norm's square root): the Python float
    PyTorch would round it to. It may be printed (``print(g.norm().item())``); computing with it
    is refused, as the rounding PyTorch does there is not modelled."""

    printed_number = True   # what bind() and the runtime look for, before any op takes it

    def __init__(self, loc: Loc, value: float | None = None):
        self.loc = loc
        self.value = value   # the float PyTorch holds (to the dtype's rounding), as the answer writes it

    def _refuse(self, *args):
        raise ProblemError(self.loc, "x.item() of a value that is not rational (a square root, an exponential) is the "
                                     "Python float PyTorch rounds it to: it may be printed, but computing with it is not "
                                     "modelled yet; compute with the tensor instead (g / g.norm())")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _refuse
    __pow__ = __rpow__ = __neg__ = __lt__ = __le__ = __gt__ = __ge__ = __bool__ = __float__ = __int__ = _refuse

    def __repr__(self) -> str:
        return "<a Python float>"


def _first_float(value) -> float | None:
    """A one-element value's float, where its backend computes floats (None in --structure)."""
    floats = getattr(value, "floats", None)
    f = floats() if callable(floats) else floats
    while isinstance(f, list) and f:
        f = f[0]
    return float(f) if isinstance(f, (int, float, str)) else None


def lower_item(rt, a, loc):
    """``x.item()``: a one-element tensor's value as a Python number (an int for int64, a bool for
    bool); more elements: PyTorch's RuntimeError. A value that is not rational is a
    :class:`PrintedNumber`."""
    x = a["self"]
    n = _numel(x.shape)
    if n != 1:
        raise TorchError("RuntimeError", f"a Tensor with {n} elements cannot be converted to Scalar")
    if x.dtype in ("complex64", "complex128"):
        raise ProblemError(loc, "x.item() of a complex tensor is not modelled yet (a Python complex)")
    from adjoint.values.mathtree.functions import number
    item = getattr(x.value, "item", None)
    v = item() if callable(item) else None
    if not isinstance(v, (float, Fraction)) and type(v).__name__ != "fmpq":   # (--float64 gives the double)
        return PrintedNumber(loc, _first_float(x.value))
    v = number(v)
    if x.dtype in ("float16", "bfloat16", "float32", "float64"):   # a Python float, 3.0 too (adjoint.engine.pyfloat)
        from adjoint.engine.pyfloat import PyFloat
        return PyFloat(v)
    return bool(v) if x.dtype == "bool" else v


def python_len(args: list, kwargs: dict, loc: Loc):
    """Python's ``len(v)`` of a tensor (its size along dim 0; a 0-d tensor is PyTorch's TypeError) or a tuple."""
    if kwargs or len(args) != 1:
        raise ProblemError(loc, f"len() takes exactly one argument ({len(args) + len(kwargs)} given): Python raises "
                                "TypeError")
    v = args[0]
    if isinstance(v, Tensor):
        if not v.shape:
            raise TorchError("TypeError", "len() of a 0-d tensor")
        return Fraction(v.shape[0])
    if isinstance(v, (tuple, list)):
        return Fraction(len(v))
    raise ProblemError(loc, "len() of a tensor or a tuple is modelled; this is not one")


# ----------------------------------------------------------------------------- dtypes

def dtype_of(v, loc: Loc, what: str) -> str:
    if isinstance(v, DType):
        return v.name
    if isinstance(v, Tensor):
        return v.dtype
    raise ProblemError(loc, f"{what}: expected a dtype (torch.float64, torch.float32, torch.int64, torch.bool, "
                            "x.dtype) or a tensor")


def convert(rt, x: Tensor, target: str, loc: Loc, what: str) -> Tensor:
    """``x`` as ``target`` (``_to_copy`` when the dtype changes; ``x`` itself when it does not)."""
    if target == x.dtype:
        return x
    if x.dtype == "float32" and target == "float64" and not rt.grad_enabled:
        # no node records it (a hook body runs with grad mode off): the same values, exactly, as
        # float64 -- what a hook returning it is refused for ("has changed the type of value")
        return rt.tensor(x.value, dtype=target)
    if x.dtype in _FLOATS and target in _FLOATS and rt.dtype == "float64" and not x.needs_grad and \
            is_contiguous(x.shape, x.strides) and (target == "float64" or rt.B.float_held(x.value, target)):
        # a float32 constant of a float64 problem (adjoint.engine.float32_tensors) and back: no node (nothing
        # requires grad), the same numbers; a float64 tensor's values as float32 only where float32 holds them
        return rt.tensor(rt.B.add(x.value, rt.B.zeros(x.shape)), dtype=target)
    if x.dtype in _FLOATS and target in _FLOATS:
        raise ProblemError(loc, f"{what} of a {x.dtype} tensor to {target} (ToCopyBackward0 across float dtypes, "
                                "tensors of two float dtypes in one problem) is not modelled yet"
                                + ("; with grad mode off (in a hook body) it is a float64 copy, which a hook may "
                                   "return; in a forward, compute in float32, or make the whole problem float64 "
                                   "(dtype: float64; a model imported from PyTorch: model.double() before importing)"
                                   if target == "float64" else ""))
    if target == "bool":   # x != 0 elementwise (nan is True): a bool tensor, no node, as a comparison makes
        if not is_contiguous(x.shape, x.strides):
            raise ProblemError(loc, f"{what} of a non-contiguous tensor is not modelled yet (the copy's strides); "
                                    "make it contiguous first, or compare: x != 0")
        if rt.B.is_symbolic(x.value):
            raise ProblemError(loc, f"{what} of values with free symbols depends on the symbols; bind them under "
                                    "symbols:")
        return rt.apply("compare", [x, Fraction(0)], "ne", loc)
    if x.dtype not in ("bool", "int64") or target != rt.dtype:
        raise ProblemError(loc, f"{what} of a {x.dtype} tensor to {target} is not modelled yet; a bool or int64 "
                                f"tensor converts to the problem's dtype ({rt.dtype}), any tensor to bool, and a "
                                "tensor to its own dtype")
    if not is_contiguous(x.shape, x.strides):
        raise ProblemError(loc, f"{what} of a non-contiguous {x.dtype} tensor is not modelled yet (the copy's "
                                "strides); make it contiguous first")
    if x.dtype == "int64":
        if not ints_held_exactly(rt.B, x.value, target):
            raise ProblemError(loc, f"{what} of an int64 tensor is modelled for integers a {target} holds exactly "
                                    f"(|v| <= 2**{24 if target == 'float32' else 53}) only")
    return rt.tensor(rt.B.add(x.value, rt.B.zeros(x.shape)), dtype=target)


def _to_dtype(name: str):
    def lower(rt, a, loc):
        return convert(rt, a["self"], name, loc, f"Tensor.{_METHOD_OF[name]}()")
    return lower


_METHOD_OF = {"float64": "double", "float32": "float", "bool": "bool"}


def lower_to(rt, a, loc):
    """``Tensor.to``'s overloads: ``to(dtype, non_blocking, copy)``, ``to(device, dtype, non_blocking,
    copy)``, ``to(other, non_blocking, copy)``, and the same by keyword (device ``"cpu"`` only)."""
    x, args = a["self"], list(a["args"])
    device, dtype, other = a["device"], a["dtype"], None
    if args and isinstance(args[0], Tensor):
        other = args.pop(0)
    elif args and isinstance(args[0], str):
        device = args.pop(0)
        if args and isinstance(args[0], DType):
            dtype = args.pop(0)
    elif args and isinstance(args[0], DType):
        dtype = args.pop(0)
    flags = {"non_blocking": a["non_blocking"], "copy": a["copy"]}
    for name in ("non_blocking", "copy"):
        if args and isinstance(args[0], bool):
            flags[name] = args.pop(0)
    if args or (other is not None and (dtype is not None or device is not None)) \
            or not isinstance(flags["non_blocking"], bool) or not isinstance(flags["copy"], bool) \
            or (dtype is not None and not isinstance(dtype, DType)):
        raise ProblemError(loc, "Tensor.to(...) with these arguments is not modelled; it takes a dtype "
                                "(torch.float64, x.dtype), a tensor, or the device 'cpu' (with a dtype), and "
                                "non_blocking / copy")
    if flags["copy"]:
        raise ProblemError(loc, "Tensor.to(..., copy=True) is not modelled yet")
    if device is not None and device != "cpu":
        raise ProblemError(loc, f"Tensor.to({device!r}): only the device 'cpu' is modelled (the tensor itself)")
    if other is not None:
        return convert(rt, x, other.dtype, loc, "Tensor.to()")
    return x if dtype is None else convert(rt, x, dtype.name, loc, "Tensor.to()")


def lower_type_as(rt, a, loc):
    return convert(rt, a["self"], a["other"].dtype, loc, "Tensor.type_as()")


def lower_expand_as(rt, a, loc):
    from adjoint.engine.ops.views import expand_shape
    x = a["self"]
    return rt.apply("expand", [x], expand_shape([x.shape], tuple(a["other"].shape), loc), loc)


# ----------------------------------------------------------------------------- not

def lower_logical_not(rt, a, loc):
    x = a["input"]
    if x.dtype not in ("bool",) + _FLOATS:
        raise ProblemError(loc, f"logical_not of a {x.dtype} tensor is not modelled yet")
    return rt.apply("compare", [x, Fraction(0)], "eq", loc)


def bitwise_not(rt, x: Tensor, loc: Loc, operator: bool) -> Tensor:
    """``~x`` (``operator``) or ``x.bitwise_not()``: on a bool tensor logical_not."""
    if x.dtype == "bool":
        return rt.apply("compare", [x, Fraction(0)], "eq", loc)
    if x.dtype in _FLOATS:
        if operator:
            raise TorchError("TypeError", "~ (operator.invert) is only implemented on integer and Boolean-type "
                                          "tensors", "dtype")
        raise TorchError("NotImplementedError", f"\"bitwise_not_cpu\" not implemented for '{TYPE_NAMES[x.dtype]}'",
                         "dtype")
    raise ProblemError(loc, f"~ of an {x.dtype} tensor (an integer result) is not modelled yet; ~ of a bool "
                            "tensor is")


def lower_bitwise_not(rt, a, loc):
    return bitwise_not(rt, a["input"], loc, operator=False)


# ----------------------------------------------------------------------------- new constants

def _new_dtype(x: Tensor, a, loc: Loc, what: str) -> str:
    if a["requires_grad"]:
        raise ProblemError(loc, f"{what}(..., requires_grad=True) is not modelled yet")
    dtype = x.dtype if a["dtype"] is None else dtype_of(a["dtype"], loc, what)
    if dtype not in _FLOATS + ("bool", "int64"):
        raise ProblemError(loc, f"{what} of dtype {dtype} is not modelled yet")
    return dtype


def exact_in(value: Fraction, dtype: str) -> bool:
    """``value`` is held exactly by ``dtype`` (a float: an integer times a power of two in range)."""
    if dtype == "bool":
        return value in (0, 1)
    if dtype == "int64":
        return value.denominator == 1
    return float_holds(value, dtype)


def _new(fill):
    def lower(rt, a, loc):
        x, name = a["self"], f"Tensor.{fill or 'new_full'}"
        dtype = _new_dtype(x, a, loc, name)
        shape = checked_size(a["size"])
        value = Fraction(0 if fill == "new_zeros" else 1) if fill else a["fill_value"]
        if isinstance(value, bool):
            value = Fraction(int(value))
        return constant(rt, shape, value, dtype, loc, f"{name} with the fill value")
    return lower


def checked_size(size) -> tuple[int, ...]:
    """A new tensor's size; a negative dimension is PyTorch's RuntimeError (``empty``'s check)."""
    shape = tuple(int(d) for d in size)
    if any(d < 0 for d in shape):
        raise TorchError("RuntimeError", f"Trying to create tensor with negative dimension {min(shape)}: {list(shape)}")
    return shape


def constant(rt, shape: tuple[int, ...], value: Fraction, dtype: str, loc: Loc, refused: str, why: str = ""):
    """A new tensor holding ``value`` everywhere, no node (``new_full``, ``torch.full``...). A value
    ``dtype`` does not hold exactly is refused (``refused``: the message's start, naming the call;
    ``why`` its end); float64 takes the literal's value, as ``x * 0.1`` does."""
    if dtype != "float64" and not exact_in(value, dtype):
        raise ProblemError(loc, f"{refused} {value}, which {dtype} does not hold exactly, is not modelled yet{why}")
    return rt.tensor(rt.B.full(shape, value) if value else rt.B.zeros(shape), dtype=dtype)


_SELF = Param("self", "tensor")
_IN = Param("input", "tensor")
_NEW_TAIL = (Param("dtype", "any", None, keyword_only=True), Param("requires_grad", "bool", False, keyword_only=True))

FUNCTIONS = (
    Function("size", (_SELF, Param("dim", "int", None)), lower_size, where="method",
             doc="no node: a torch.Size (a tuple of ints), or a Python int with a dim"),
    Function("item", (_SELF,), lower_item, where="method",
             doc="no node: a Python number, the one element's value (int for int64, bool for bool)"),
    Function("dim", (_SELF,), lambda rt, a, loc: Fraction(len(a["self"].shape)), where="method",
             doc="no node: a Python int (x.ndim)"),
    Function("ndimension", (_SELF,), lambda rt, a, loc: Fraction(len(a["self"].shape)), where="method",
             doc="no node: a Python int (x.ndim)"),
    Function("numel", (_IN,), lambda rt, a, loc: Fraction(_numel(a["input"].shape)),
             doc="no node: a Python int, the number of elements"),
    Function("expand_as", (_SELF, Param("other", "tensor")), lower_expand_as, where="method",
             doc="ExpandBackward0 (x.expand(other.size()), a view)"),
    Function("double", (_SELF,), _to_dtype("float64"), where="method",
             doc="the tensor itself when float64; a bool or int64 tensor: a new float tensor, no node"),
    Function("float", (_SELF,), _to_dtype("float32"), where="method",
             doc="the tensor itself when float32; a bool or int64 tensor: a new float tensor, no node"),
    Function("bool", (_SELF,), _to_dtype("bool"), where="method",
             doc="the tensor itself when bool; else x != 0 (nan: True): a new bool tensor, no node"),
    Function("to", (_SELF, Param("args", "any", ()), Param("device", "any", None, keyword_only=True),
                    Param("dtype", "any", None, keyword_only=True), Param("non_blocking", "any", False, keyword_only=True),
                    Param("copy", "any", False, keyword_only=True)),
             lower_to, where="method", varargs=True,
             doc="to a dtype or another tensor's dtype: the tensor itself when it has it; bool or int64 to the "
                 "problem's float dtype: a new tensor, no node"),
    Function("type_as", (_SELF, Param("other", "tensor")), lower_type_as, where="method", doc="to(other.dtype)"),
    Function("logical_not", (_IN,), lower_logical_not, doc="no node: a bool tensor (x == 0)"),
    Function("bitwise_not", (_IN,), lower_bitwise_not,
             doc="no node: on a bool tensor logical_not (`~m`); a float tensor is PyTorch's error"),
    Function("new_zeros", (_SELF, Param("size", "ints")) + _NEW_TAIL, _new("new_zeros"), where="method", varargs=True,
             doc="no node: a constant tensor of self's dtype"),
    Function("new_ones", (_SELF, Param("size", "ints")) + _NEW_TAIL, _new("new_ones"), where="method", varargs=True,
             doc="no node: a constant tensor of self's dtype"),
    Function("new_full", (_SELF, Param("size", "ints"), Param("fill_value", "number")) + _NEW_TAIL, _new(None),
             where="method", doc="no node: a constant tensor of self's dtype"),
)

__all__ = ["FUNCTIONS", "DType", "DTYPE_NAMES", "Device", "bitwise_not", "python_len", "size_dim"]
