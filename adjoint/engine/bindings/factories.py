"""Constant tensors a forward or a hook body makes: ``torch.zeros``, ``torch.ones``, ``torch.full``,
``torch.arange``, ``torch.eye``, as PyTorch 2.13 makes them (each checked in real torch):

* a new contiguous tensor, version 0, no ``grad_fn``, not requiring grad; no node;
* its dtype: ``dtype=`` when given; else PyTorch's default dtype, float32, for ``zeros``,
  ``ones`` and ``eye``; ``full`` infers it from the fill value (a bool: bool, an int: int64, a
  float: float32); ``arange`` from its arguments (all ints: int64, else float32). A number's
  int or float is read from how it is written (``3`` against ``3.0``, ``x.size(1)``); where
  the expression does not tell (a name bound elsewhere), the call needs ``dtype=``;
* a float32 tensor in a float64 run (``dtype: float64``): PyTorch would mix float32 and float64,
  which adjoint does not model yet: refused, with ``dtype=`` as the way out -- but with grad mode
  off (a hook body) made, as ``x.double()`` is there: returned by a hook it is PyTorch's "has
  changed the type of value";
* PyTorch's errors: ``zeros: Dimension size must be non-negative.`` (``zeros`` checks first),
  ``Trying to create tensor with negative dimension -1: [-1]`` (``ones``, ``full``), ``n must be
  greater or equal to 0, got -1`` / ``m ...`` (``eye``), ``step must be nonzero`` and ``upper
  bound and lower bound inconsistent with step sign`` (``arange``);
* refused: ``requires_grad=True`` (a new leaf: declare it under ``inputs:``), ``out=``, a
  ``layout``, a device other than the CPU, a fill value the dtype does not hold exactly (PyTorch
  would round or truncate it), ``arange`` with non-integer arguments (its length and values are
  computed in doubles).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.errors import Loc, ProblemError
from adjoint.format.problem import Infinite, Literal
from adjoint.engine.bindings.glue import Device, checked_size, constant, convert, dtype_of, exact_in
from adjoint.engine.ops.masking import infinity
from adjoint.engine.bindings.signature import Function, Param
from adjoint.engine.graph import Tensor
from adjoint.engine.pyfloat import PyFloat
from adjoint.engine.torch_errors import TorchError

_FLOATS = ("float32", "float64")
#: PyTorch's default dtype (torch.get_default_dtype()): what a float constant is made in.
DEFAULT_FLOAT = "float32"


def _tail() -> tuple[Param, ...]:
    return (Param("out", "any", None, keyword_only=True), Param("dtype", "any", None, keyword_only=True),
            Param("layout", "any", None, keyword_only=True), Param("device", "any", None, keyword_only=True),
            Param("pin_memory", "any", False, keyword_only=True),
            Param("requires_grad", "any", False, keyword_only=True))


def _refuse_extras(a, loc: Loc, what: str) -> None:
    if a.get("requires_grad") is True:
        raise ProblemError(loc, f"torch.{what}(..., requires_grad=True) makes a new leaf, which is not modelled in a "
                                "forward; declare the tensor under inputs: with requires_grad: true")
    if a.get("requires_grad", False) is not False:
        raise ProblemError(loc, f"torch.{what}(): requires_grad must be True or False")
    if "out" in a and a["out"] is not None:
        raise ProblemError(loc, f"torch.{what}(..., out=...) is not modelled; leave out out=")
    if "layout" in a and a["layout"] is not None:
        raise ProblemError(loc, f"torch.{what}(..., layout=...) is not modelled; leave it out (torch.strided)")
    if a.get("pin_memory") not in (False, None):
        raise ProblemError(loc, f"torch.{what}(..., pin_memory=True) is not modelled; leave it out")
    device = a["device"]
    if not (device is None or isinstance(device, Device) or device == "cpu"):
        raise ProblemError(loc, f"torch.{what}(..., device={device!r}): adjoint models PyTorch on the CPU; leave "
                                "device out, or give 'cpu' or x.device")


def _dtype(rt, a, loc: Loc, what: str, inferred: str) -> str:
    """``dtype=`` when given, else ``inferred`` (the default dtype or the one the arguments give);
    a float dtype other than the run's is refused (adjoint does not mix float dtypes yet)."""
    dtype = dtype_of(a["dtype"], loc, f"torch.{what}") if a["dtype"] is not None else inferred
    if dtype not in _FLOATS + ("int64", "bool"):
        raise ProblemError(loc, f"torch.{what}() of dtype {dtype} is not modelled yet")
    if dtype in _FLOATS and dtype != rt.dtype and rt.grad_enabled and rt.dtype != "float64":
        # with grad mode off (a hook body, no_grad) it is made, as x.double() is there: a hook returning
        # it is PyTorch's "has changed the type of value", an op mixing it with the run's dtype is refused
        given = "dtype=" if a["dtype"] is not None else "PyTorch's default dtype, without dtype="
        raise ProblemError(loc, f"torch.{what}() makes a {dtype} tensor here ({given}) and this run is {rt.dtype}; "
                                f"adjoint does not mix float dtypes yet: pass dtype=torch.{rt.dtype} (or x.dtype)")
    return dtype


def _shape(size, zeros_first: bool) -> tuple[int, ...]:
    if zeros_first and any(int(d) < 0 for d in size):   # torch.zeros checks the size itself, first
        raise TorchError("RuntimeError", "zeros: Dimension size must be non-negative.")
    return checked_size(size)


def _constant(rt, shape: tuple[int, ...], items: list, dtype: str, loc: Loc):
    """A new tensor holding ``items`` (row-major Fractions, or Infinite), made by the backend
    as a literal of the file is (so every mode holds it as it holds an input)."""
    value = rt.B.literal(Literal(shape, tuple(items), loc))
    return rt.tensor(value, dtype=dtype)


def _filled(rt, shape, value, dtype: str, loc: Loc, what: str):
    if isinstance(value, Infinite):   # float("-inf"): a mask's value, as masked_fill writes it
        if dtype not in _FLOATS:
            raise ProblemError(loc, f"torch.{what}() of an infinity in a {dtype} tensor is not modelled")
        return rt.tensor(infinity(rt.B, value.negative, shape), dtype=dtype)
    return constant(rt, shape, value, dtype, loc, f"torch.{what}() with the value",
                    " (PyTorch would round or truncate it)")


# ----------------------------------------------------------------------------- zeros, ones, full

def _fill(what: str, value: Fraction):
    def lower(rt, a, loc: Loc):
        _refuse_extras(a, loc, what)
        shape = _shape(a["size"], zeros_first=what == "zeros")
        return _filled(rt, shape, value, _dtype(rt, a, loc, what, DEFAULT_FLOAT), loc, what)
    lower.__name__ = f"lower_{what}"
    return lower


def lower_full(rt, a, loc: Loc):
    _refuse_extras(a, loc, "full")
    value = a["fill_value"]
    if isinstance(value, bool):
        inferred, value = "bool", Fraction(int(value))
    elif isinstance(value, Infinite):
        inferred = DEFAULT_FLOAT
    elif isinstance(value, Fraction):
        kind = a.type_of("fill_value")
        if kind is None and a["dtype"] is None:
            raise ProblemError(loc, "torch.full(size, fill_value): whether the fill value is an int or a float decides "
                                    "the dtype (int64 or float32), and adjoint cannot tell it from this expression; "
                                    "write it as a literal (3 or 3.0) or pass dtype=")
        inferred = "int64" if kind == "int" else DEFAULT_FLOAT
    else:
        raise ProblemError(loc, "torch.full(size, fill_value) with a fill value that is not a real number (a tensor, "
                                "a complex number) is not modelled yet")
    shape = _shape(a["size"], zeros_first=False)
    return _filled(rt, shape, value, _dtype(rt, a, loc, "full", inferred), loc, "full")


# ----------------------------------------------------------------------------- arange, eye

def lower_arange(rt, a, loc: Loc):
    _refuse_extras(a, loc, "arange")
    start, end, step = (Fraction(0), a["start"], a["step"]) if a["end"] is None else (a["start"], a["end"], a["step"])
    names = ("start", "step") if a["end"] is None else ("start", "end", "step")
    for v in (start, end, step):
        if isinstance(v, bool) or not isinstance(v, Fraction) or v.denominator != 1:
            raise ProblemError(loc, "torch.arange() with arguments that are not integers is not modelled yet (PyTorch "
                                    "computes its length and values in doubles); give integers, and dtype= for floats")
    kinds = [a.type_of(n) for n in names if n != "step" or "step" in a.positional or "step" in a.keywords]
    if a["dtype"] is None and any(k is None for k in kinds):
        raise ProblemError(loc, "torch.arange(): whether its arguments are ints or floats decides the dtype (int64 or "
                                "float32), and adjoint cannot tell it from these expressions (a name bound elsewhere); "
                                "pass dtype=torch.long (or torch.float32), or write the numbers as literals or "
                                "x.size(d)")
    inferred = "int64" if all(k == "int" for k in kinds) else DEFAULT_FLOAT
    if step == 0:
        raise TorchError("RuntimeError", "step must be nonzero")
    if (end - start) * step < 0:
        raise TorchError("RuntimeError", "upper bound and lower bound inconsistent with step sign")
    dtype = _dtype(rt, a, loc, "arange", inferred)
    n = -((start - end) // step)    # ceil((end - start) / step), exactly
    values = [start + i * step for i in range(int(n))]
    if dtype == "bool":
        raise ProblemError(loc, "torch.arange(..., dtype=torch.bool) is not modelled")
    for v in values[:1] + values[-1:]:
        if not exact_in(v, dtype):
            raise ProblemError(loc, f"torch.arange() reaches {v}, which {dtype} does not hold exactly; not modelled")
    return _constant(rt, (int(n),), values, dtype, loc)


def lower_eye(rt, a, loc: Loc):
    _refuse_extras(a, loc, "eye")
    n, m = a["n"], a["m"] if a["m"] is not None else a["n"]
    for name, v in (("n", n), ("m", m)):
        if isinstance(v, bool) or not isinstance(v, Fraction) or v.denominator != 1:
            raise ProblemError(loc, f"torch.eye(): {name} must be an int")
        if v < 0:
            raise TorchError("RuntimeError", f"{name} must be greater or equal to 0, got {int(v)}")
    dtype = _dtype(rt, a, loc, "eye", DEFAULT_FLOAT)
    rows, cols = int(n), int(m)
    items = [Fraction(int(i == j)) for i in range(rows) for j in range(cols)]
    return _constant(rt, (rows, cols), items, dtype, loc)


# ----------------------------------------------------------------------------- causal masks

def lower_square_subsequent_mask(rt, a, loc: Loc):
    """``nn.Transformer.generate_square_subsequent_mask(sz, device=None, dtype=None)``, a static
    method (torch/nn/modules/transformer.py): ``torch.triu(torch.full((sz, sz), float("-inf"),
    dtype=dtype), diagonal=1)``, float32 unless ``dtype=``: ``-inf`` above the diagonal, 0 on and
    below it; made bool, True above it. A new tensor at version 0, no node."""
    sz = a["sz"]
    if isinstance(sz, bool) or not isinstance(sz, Fraction) or sz.denominator != 1:
        raise ProblemError(loc, "nn.Transformer.generate_square_subsequent_mask(sz): give sz as an int (PyTorch's "
                                "torch.full raises TypeError for a float)")
    device = a["device"]
    if not (device is None or isinstance(device, Device) or device == "cpu"):
        raise ProblemError(loc, "generate_square_subsequent_mask(..., device=...): adjoint models PyTorch on the CPU")
    n = int(sz)
    if n < 0:
        raise TorchError("RuntimeError", f"Trying to create tensor with negative dimension {n}: [{n}, {n}]")
    dtype = _dtype(rt, a, loc, "nn.Transformer.generate_square_subsequent_mask", DEFAULT_FLOAT)
    if dtype == "int64":
        raise TorchError("RuntimeError", "value cannot be converted to type int64_t without overflow")
    above = Fraction(1) if dtype == "bool" else Infinite(True)
    items = [above if j > i else Fraction(0) for i in range(n) for j in range(n)]
    return _constant(rt, (n, n), items, dtype, loc)


# ----------------------------------------------------------------------------- linspace

def lower_linspace(rt, a, loc: Loc):
    """``torch.linspace(start, end, steps)``: ``steps`` numbers from ``start`` to ``end``, float32
    unless ``dtype=``. PyTorch's CPU kernel computes ``step = (end - start) / (steps - 1)`` in the
    dtype (double for an integer dtype), then ``start + step * i`` for the first half and ``end -
    step * (steps - 1 - i)`` for the rest: answered when each of those is exact in the dtype (the
    numbers float32 holds: ``linspace(0, 1, 5)``), refused where it would round
    (``linspace(0, 1, 4)``'s thirds)."""
    _refuse_extras(a, loc, "linspace")
    start, end, steps = a["start"], a["end"], a["steps"]
    for name, v in (("start", start), ("end", end)):
        if isinstance(v, bool) or not isinstance(v, Fraction):
            raise ProblemError(loc, f"torch.linspace(): {name} must be a real number (a tensor or a complex number "
                                    "is not modelled)")
    if isinstance(steps, bool) or not isinstance(steps, Fraction) or steps.denominator != 1:
        raise ProblemError(loc, "torch.linspace(): steps must be an int")
    if steps < 0:
        raise TorchError("RuntimeError", "number of steps must be non-negative")
    dtype = _dtype(rt, a, loc, "linspace", DEFAULT_FLOAT)
    if dtype == "bool":
        raise ProblemError(loc, "torch.linspace(..., dtype=torch.bool) is not modelled")
    n = int(steps)
    if n == 1:
        values = [start]
    elif n == 0:
        values = []
    else:
        step = (end - start) / (n - 1)
        half = n // 2
        values = [start + step * i if i < half else end - step * (n - 1 - i) for i in range(n)]
        within = "float64" if dtype == "int64" else dtype   # an integer dtype steps in doubles
        pieces = [end - start, step] + [step * i for i in range(half)] + [step * (n - 1 - i) for i in range(half, n)]
        if not all(exact_in(v, within) for v in pieces + values + [start, end]) or \
                (dtype == "int64" and any(v.denominator != 1 for v in values)):
            raise ProblemError(loc, f"torch.linspace({start}, {end}, {n}) rounds in {dtype} (PyTorch computes the "
                                    "step and each number in the dtype): not modelled; choose numbers the dtype holds "
                                    "exactly at every step (linspace(0, 1, 5)), or give the tensor under inputs:")
    return _constant(rt, (n,), values, dtype, loc)


# ----------------------------------------------------------------------------- torch.tensor(data)

def lower_tensor(rt, a, loc: Loc):
    """``torch.tensor(data)`` of a number or a nested list / tuple of numbers written in the file:
    a new leaf that needs no grad, no node, contiguous. Its dtype, without ``dtype=``, is
    PyTorch's inference from the Python types: a float anywhere makes the default dtype
    (float32), else an int int64, else bools bool; an empty list is float32. A ragged list is
    PyTorch's ValueError ("expected sequence of length 2 at dim 1 (got 3)"). Refused: a tensor in
    ``data`` (PyTorch copies it, with a warning), a number whose Python type the expression does
    not tell, and a value the dtype does not hold exactly."""
    _refuse_extras(a, loc, "tensor")
    data, kind = a["data"], a.type_of("data")
    items, shape, types = [], [], []

    def walk(v, k, depth: int):
        if isinstance(v, tuple):
            if items and depth >= len(shape):   # a sequence where the first element had a number
                raise ProblemError(loc, "torch.tensor(data) of a list holding both numbers and lists is PyTorch's "
                                        "TypeError (its wording depends on the dtype), not modelled; give a "
                                        "rectangular nested list")
            if depth == len(shape):
                shape.append(len(v))
            elif len(v) != shape[depth]:
                raise TorchError("ValueError", f"expected sequence of length {shape[depth]} at dim {depth} "
                                               f"(got {len(v)})")
            elements = getattr(k, "elements", ())
            for i, item in enumerate(v):
                walk(item, elements[i] if i < len(elements) else None, depth + 1)
            return
        if depth < len(shape):   # a number where the first element had a sequence
            raise TorchError("TypeError", "not a sequence")
        if isinstance(v, Tensor):
            raise ProblemError(loc, "torch.tensor() of a tensor (or a list holding tensors) is not modelled (PyTorch "
                                    "copies it, warning to use x.detach().clone()); write x.detach().clone()")
        if isinstance(v, bool):
            types.append("bool")
            items.append(Fraction(int(v)))
        elif isinstance(v, Infinite):
            types.append("float")
            items.append(v)
        elif isinstance(v, Fraction):
            kind_here = "float" if isinstance(v, PyFloat) else k
            if kind_here not in ("int", "float"):
                raise ProblemError(loc, "torch.tensor(data): whether each number is an int or a float decides the "
                                        "dtype (int64 or float32), and adjoint cannot tell it for a number from a "
                                        "name; write the numbers as literals (3 or 3.0) or pass dtype=")
            types.append(kind_here)
            items.append(v)
        else:
            raise ProblemError(loc, f"torch.tensor() of {type(v).__name__} data is not modelled; give numbers, or "
                                    "nested lists of numbers")

    walk(data, kind, 0)
    inferred = DEFAULT_FLOAT if "float" in types or not types else "int64" if "int" in types else "bool"
    dtype = _dtype(rt, a, loc, "tensor", inferred)
    for v in items:
        if isinstance(v, Infinite):
            if dtype not in _FLOATS:
                raise ProblemError(loc, f"torch.tensor() of an infinity as {dtype} is not modelled")
        elif dtype != "float64" and not exact_in(v, dtype):
            raise ProblemError(loc, f"torch.tensor() holds {v}, which {dtype} does not hold exactly (PyTorch would "
                                    "round or truncate it): not modelled yet; give the tensor under inputs:")
    return _constant(rt, tuple(shape), items, dtype, loc)


def lower_as_tensor(rt, a, loc: Loc):
    """``torch.as_tensor(data, dtype=None, device=None)``: a tensor ``data`` itself when ``dtype`` is
    none or its own (no copy, no node: the same tensor object), else ``data.to(dtype)``; numbers and
    nested lists as ``torch.tensor`` makes them. ``dtype`` and ``device`` are keyword-only in
    PyTorch's binding: one passed by position is its parser's TypeError (checked in torch 2.13)."""
    if len(a.positional) > 1:
        raise TorchError("TypeError", f"as_tensor() takes 1 positional argument but {len(a.positional)} were given")
    data = a["data"]
    if isinstance(data, Tensor):
        _refuse_extras(a, loc, "as_tensor")
        if a["dtype"] is None:
            return data
        return convert(rt, data, dtype_of(a["dtype"], loc, "torch.as_tensor"), loc, "torch.as_tensor")
    return lower_tensor(rt, a, loc)


FUNCTIONS = (
    Function("as_tensor", (Param("data", "any"), Param("dtype", "any", None), Param("device", "any", None)),
             lower_as_tensor, where="function",
             doc="no node: a tensor itself (its dtype), else data.to(dtype); numbers and nested lists as torch.tensor"),
    Function("tensor", (Param("data", "any"), Param("dtype", "any", None, keyword_only=True),
                        Param("device", "any", None, keyword_only=True),
                        Param("requires_grad", "any", False, keyword_only=True),
                        Param("pin_memory", "any", False, keyword_only=True)),
             lower_tensor, where="function",
             doc="no node: the numbers of data (nested lists), int64 / float32 / bool as PyTorch infers them unless "
                 "dtype="),
    Function("linspace", (Param("start", "any"), Param("end", "any"), Param("steps", "any")) + _tail(), lower_linspace,
             where="function", doc="no node: steps numbers from start to end, float32 unless dtype=; refused where the "
                                   "kernel would round"),
    Function("zeros", (Param("size", "ints"),) + _tail(), _fill("zeros", Fraction(0)), where="function",
             varargs=True, doc="no node: zeros, float32 unless dtype="),
    Function("ones", (Param("size", "ints"),) + _tail(), _fill("ones", Fraction(1)), where="function",
             varargs=True, doc="no node: ones, float32 unless dtype="),
    Function("full", (Param("size", "ints"), Param("fill_value", "any")) + _tail(), lower_full, where="function",
             doc="no node: fill_value everywhere; dtype from it (bool, int64, float32) unless dtype="),
    Function("arange", (Param("start", "any"), Param("end", "any", None), Param("step", "any", Fraction(1)))
             + _tail(), lower_arange, where="function",
             doc="no node: start, start + step, ... below end; int64 for int arguments, float32 else, unless dtype="),
    Function("eye", (Param("n", "any"), Param("m", "any", None)) + _tail(), lower_eye, where="function",
             doc="no node: the n x m identity, float32 unless dtype="),
    Function("generate_square_subsequent_mask", (Param("sz", "any"), Param("device", "any", None),
                                                  Param("dtype", "any", None)), lower_square_subsequent_mask,
             where="function", doc="no node (nn.Transformer.generate_square_subsequent_mask): -inf above the "
                                   "diagonal, 0 elsewhere (bool: True above it), float32 unless dtype="),
)

__all__ = ["FUNCTIONS", "DEFAULT_FLOAT"]
