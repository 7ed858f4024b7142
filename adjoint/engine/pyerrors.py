"""Python's own errors in a program of the file, as CPython 3 words them: predictions, not refusals.

A hook body that computes with an argument PyTorch handed as None (``grad_input[0] * 2`` where
no gradient flows) makes CPython raise ``TypeError: unsupported operand type(s) for *:
'NoneType' and 'int'``; PyTorch lets it propagate out of ``backward()``. That is the answer to
the file (a :class:`~adjoint.engine.runtime.TorchError`, the contract's ``error``), not bad input. The
messages here are CPython's, checked against CPython 3.11 with torch 2.13 (``Tensor`` and
``Parameter`` return ``NotImplemented`` for a None operand, so CPython's generic message is
what the user sees):

* a binary operator with a None operand: ``unsupported operand type(s) for OP: 'A' and 'B'``
  (``**`` is worded ``** or pow()``);
* unary minus of None: ``bad operand type for unary -: 'NoneType'``;
* an ordering comparison with None: ``'OP' not supported between instances of 'A' and 'B'``;
* a method or attribute of None: ``AttributeError: 'NoneType' object has no attribute 'NAME'``;
* indexing None: ``TypeError: 'NoneType' object is not subscriptable``; a tuple index out of
  range: ``IndexError: tuple index out of range``;
* an operator with a tuple, list or ``torch.return_types`` operand that is no concatenation or
  repetition (:func:`sequence_operand`);
* a true division of Python numbers by zero: ``ZeroDivisionError: division by zero`` (two ints),
  ``float division by zero``, ``complex division by zero``.

A Python number's type (``int`` or ``float``) is read from the expression that made it (the
engine keeps numbers exact, as fractions); where that cannot be told, the operation is refused
as not modelled rather than guessed.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format import syntax as S
from adjoint.format.errors import ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.runtime import TorchError
from adjoint.format.gaussian import Gaussian
from adjoint.engine.pyfloat import PyFloat
from adjoint.engine.pylist import PyList, sequence_name

#: how CPython names the operator in "unsupported operand type(s) for OP"
_OP_TEXT = {"**": "** or pow()"}


def number_type(e: S.Expr, names: dict | None = None) -> str | None:
    """``int``, ``float`` or ``complex``: the Python type of the number expression ``e`` evaluates to, or
    None when it cannot be told from the expression alone (a name bound elsewhere). ``names``: the
    types of names a program assigned from expressions that tell it (``T = x.size(1)``)."""
    if isinstance(e, S.Name):
        kind = names.get(e.id) if names else None
        return None if kind == SIZE else kind
    if isinstance(e, S.Num):
        if not isinstance(e.value, Fraction):   # an imaginary literal (2j)
            return "complex"
        return "int" if e.is_int else "float"
    if isinstance(e, S.Neg):
        return number_type(e.operand, names)
    if _size_int(e, names):
        return "int"
    if isinstance(e, S.Call) and e.func == "float" and e.prefix == "" and len(e.args) == 1:   # Python's float()
        return "float"
    if isinstance(e, S.Bin):
        left, right = number_type(e.left, names), number_type(e.right, names)
        if left is None or right is None:
            return None
        if "complex" in (left, right):
            return "complex"
        if e.op == "/":
            return "float"
        if e.op == "**":   # int ** int is an int for an exponent >= 0, a float below
            if "float" in (left, right):
                return "float"
            return ("int" if e.right.value >= 0 else "float") if isinstance(e.right, S.Num) else None
        return "int" if left == right == "int" else "float"
    return None


#: Tensor methods that return a Python int (``x.size(1)``, ``x.dim()``, ``x.numel()``).
_INT_METHODS = ("size", "dim", "ndimension", "numel", "nelement")
#: what :func:`assigned_types` records for a name holding a ``torch.Size`` (``s = x.shape``): a
#: tuple of ints, so ``s[1]`` is an int (not a number type itself)
SIZE = "Size"


def _sizes(e: S.Expr, names: dict | None) -> bool:
    """``e`` is a ``torch.Size``, a tuple of ints: ``x.shape``, ``x.size()``, a name assigned
    one (``s = x.shape``), or a slice of one (``x.shape[1:]``)."""
    if isinstance(e, S.Attr):
        return e.name == "shape"
    if isinstance(e, S.Method):
        return e.name == "size" and not e.args and not e.kwargs
    if isinstance(e, S.Name):
        return bool(names) and names.get(e.id) == SIZE
    if isinstance(e, S.Subscript) and len(e.items) == 1 and isinstance(e.items[0], S.Slice):
        return _sizes(e.value, names)
    return False


def assigned_types(target: S.Expr, value: S.Expr, names: dict) -> None:
    """After ``target = value``: record the Python number type each assigned name now has when
    the expression tells it (``T = x.size(1)``; ``B, T = x.shape``; a ``torch.Size``, ``s =
    x.shape``, as :data:`SIZE`, whose items ``s[1]`` are ints), forget it otherwise."""
    if isinstance(target, S.Name):
        kind = SIZE if _sizes(value, names) else number_type(value, names)
        if kind is None:
            names.pop(target.id, None)
        else:
            names[target.id] = kind
        return
    if isinstance(target, S.Tup):
        sizes = _sizes(value, names)
        for item in target.items:
            if isinstance(item, S.Name):
                if sizes:
                    names[item.id] = "int"
                else:
                    names.pop(item.id, None)


def _size_int(e: S.Expr, names: dict | None = None) -> bool:
    """``e`` is a tensor's size as Python holds it, an int: ``x.size(d)``, ``x.shape[d]``,
    ``x.size()[d]``, ``s[d]`` of a name holding a ``torch.Size``, ``x.dim()``, ``x.ndim``,
    ``x.numel()``, ``len(x)``."""
    if isinstance(e, S.Method):
        return e.name in _INT_METHODS and (e.name != "size" or len(e.args) + len(e.kwargs) == 1)
    if isinstance(e, S.Attr):
        return e.name == "ndim"
    if isinstance(e, S.Subscript) and len(e.items) == 1 and not isinstance(e.items[0], S.Slice):
        return _sizes(e.value, names)
    if isinstance(e, S.Call):
        return e.func == "len" and e.prefix == "" and len(e.args) == 1
    return False


class SequenceType(str):
    """A sequence literal's type name (``tuple``, ``list``: compares as that string) that also keeps
    the Python type of each number written in it (``(1.0, 0)``: float, int; None where the
    expression does not tell, or the item is no number), which PyTorch's parser checks where it
    takes ints."""

    elements: tuple

    def __new__(cls, name: str, elements: tuple = ()):
        self = super().__new__(cls, name)
        self.elements = elements
        return self


def type_name(value, e: S.Expr, names: dict | None = None) -> str | None:
    """The Python type name of ``value`` (what ``e`` evaluated to) as CPython's messages print it,
    or None when adjoint cannot tell it (``names``: as :func:`number_type`'s)."""
    if value is None:
        return "NoneType"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, Tensor):
        return "Parameter" if value.is_param else "Tensor"
    if isinstance(value, tuple):   # a tuple, a list, a torch.return_types value
        name = sequence_name(value)
        if isinstance(e, (S.Tup, S.ListLit)) and len(e.items) == len(value):   # a literal: its numbers' types too
            # (a nested literal's own SequenceType, a bool's "bool": what torch.tensor's dtype inference reads)
            return SequenceType(name, tuple(number_type(x, names) if isinstance(v, Fraction) and not isinstance(v, bool)
                                            else "bool" if isinstance(v, bool)
                                            else type_name(v, x, names) if isinstance(v, tuple) else None
                                            for v, x in zip(value, e.items)))
        return name
    if isinstance(value, PyFloat) or getattr(value, "printed_number", False):
        return "float"   # x.item() of a float tensor (an irrational one too), and what is computed from it
    if isinstance(value, (Fraction, Gaussian)):
        return number_type(e, names)
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return None


def _unknown(loc, what: str) -> ProblemError:
    return ProblemError(loc, f"{what}: Python raises TypeError, with a message adjoint cannot word exactly here "
                             "(the number's type, int or float, is not known); not modelled yet -- compute with "
                             "a tensor or a number literal")


def binary_none(op: str, a, a_expr: S.Expr, b, b_expr: S.Expr, loc) -> TorchError:
    """CPython's TypeError for ``a OP b`` where one operand is None and the other a number, a
    tensor or None."""
    left, right = type_name(a, a_expr), type_name(b, b_expr)
    if left is None or right is None:
        raise _unknown(loc, f"'{_source(a_expr, left)} {op} {_source(b_expr, right)}' has a None operand")
    return TorchError("TypeError", f"unsupported operand type(s) for {_OP_TEXT.get(op, op)}: '{left}' and '{right}'",
                      "python")


def _source(e: S.Expr | None, name: str | None) -> str:
    """An operand as a message shows it: its expression, else its type (an engine's own operand)."""
    return S.to_source(e) if e is not None else name or "a number"


def sequence_operand(op: str, a, a_expr: S.Expr | None, b, b_expr: S.Expr | None, names: dict | None, loc,
                     augmented: bool = False) -> TorchError:
    """CPython's TypeError for ``a OP b`` (``a OP= b`` when ``augmented``) where an operand is a
    tuple, a list or a ``torch.return_types`` value and Python's concatenation (``+`` of two tuples,
    of two lists) or repetition (``*`` by an int) does not apply. Tensor's operators return
    NotImplemented for a sequence, so CPython's own message is what the user sees: ``+`` with a
    sequence on the left is ``can only concatenate tuple (not "Tensor") to tuple`` (the sequence's
    concatenation); ``*`` with a sequence takes the other operand as a count (``can't multiply
    sequence by non-int of type 'float'``; a float tensor's, or a tensor of several elements',
    ``__index__`` raises first), except that ``t *= seq`` has no repetition to try; anything else
    is ``unsupported operand type(s) for OP``. Checked against CPython 3.11 with torch 2.13 in
    tests/test_pyerrors_sequences.py. A number whose type (int or float) cannot be told: refused."""
    left, right = type_name(a, a_expr, names), type_name(b, b_expr, names)
    if left is None or right is None:
        raise _unknown(loc, f"'{_source(a_expr, left)} {op} {_source(b_expr, right)}' has a tuple operand")
    if op == "+" and isinstance(a, tuple):
        base = "list" if isinstance(a, PyList) else "tuple"
        return TorchError("TypeError", f'can only concatenate {base} (not "{right}") to {base}', "python")
    if op == "*" and (isinstance(a, tuple) or not augmented):
        count, kind = (b, right) if isinstance(a, tuple) else (a, left)
        if isinstance(count, Tensor):
            numel = 1
            for d in count.shape:
                numel *= d
            if numel == 1 and count.dtype in ("int64", "bool"):
                raise ProblemError(loc, "a sequence repeated by an integer tensor (its __index__) is not modelled; "
                                        "repeat by a Python int")
            return TorchError("TypeError", "only integer tensors of a single element can be converted to an index",
                              "python")
        return TorchError("TypeError", f"can't multiply sequence by non-int of type '{kind}'", "python")
    text = op + "=" if augmented else _OP_TEXT.get(op, op)
    return TorchError("TypeError", f"unsupported operand type(s) for {text}: '{left}' and '{right}'", "python")


def zero_division(a, a_expr: S.Expr, b, b_expr: S.Expr, names: dict | None, loc) -> TorchError:
    """CPython's ZeroDivisionError for ``a / b`` of two Python numbers with ``b`` zero: ``division by
    zero`` for two ints (true division), ``float division by zero`` when one is a float,
    ``complex division by zero`` when one is complex; refused where a number's type cannot be told."""
    kinds = (type_name(a, a_expr, names), type_name(b, b_expr, names))
    if "complex" in kinds or isinstance(a, Gaussian) or isinstance(b, Gaussian):
        return TorchError("ZeroDivisionError", "complex division by zero", "python")
    if None in kinds:
        raise ProblemError(loc, "division by zero between two numbers: Python's ZeroDivisionError says int or float "
                                "division, which adjoint cannot tell here; divide by a number that is not 0")
    return TorchError("ZeroDivisionError", "division by zero" if kinds == ("int", "int") else "float division by zero",
                      "python")


def matmul_number(a, a_expr: S.Expr, b, b_expr: S.Expr) -> TorchError | None:
    """CPython's TypeError for ``a @ b`` with a Python number (or bool) operand: Tensor.__matmul__
    returns NotImplemented for it and numbers have no ``@``; None when a number's type (int or
    float) cannot be told from its expression."""
    left, right = type_name(a, a_expr), type_name(b, b_expr)
    if left is None or right is None:
        return None
    return TorchError("TypeError", f"unsupported operand type(s) for @: '{left}' and '{right}'", "python")


def unary_none(op: str = "-", name: str = "NoneType") -> TorchError:
    """``-v`` of None (or of a tuple: ``name``), which has no unary operator."""
    return TorchError("TypeError", f"bad operand type for unary {op}: '{name}'", "python")


def comparison_none(op: str, a, a_expr: S.Expr, b, b_expr: S.Expr, loc) -> TorchError:
    """CPython's TypeError for an ordering ``a OP b`` with a None operand."""
    left, right = type_name(a, a_expr), type_name(b, b_expr)
    if left is None or right is None:
        raise _unknown(loc, f"'{S.to_source(a_expr)} {op} {S.to_source(b_expr)}' has a None operand")
    return TorchError("TypeError", f"'{op}' not supported between instances of '{left}' and '{right}'", "python")


def no_attribute(name: str) -> TorchError:
    """``None.NAME`` (a method or an attribute of an argument PyTorch handed as None)."""
    return TorchError("AttributeError", f"'NoneType' object has no attribute '{name}'", "python")


def return_type_attribute(obj, name: str) -> TorchError:
    """``x.max(dim=1).foo``: a ``torch.return_types.max`` has only its fields (values, indices)."""
    return TorchError("AttributeError", f"'torch.return_types.{obj.kind}' object has no attribute '{name}'", "python")


def not_subscriptable() -> TorchError:
    return TorchError("TypeError", "'NoneType' object is not subscriptable", "python")


def tuple_index() -> TorchError:
    return TorchError("IndexError", "tuple index out of range", "python")


#: one-tensor functions whose bare name is ``torch.nn.functional``'s Python function, which calls
#: the method on its argument (``F.tanh(input)`` is ``input.tanh()``): None has no such attribute
_FUNCTIONAL_METHOD_CALLS = frozenset({"tanh", "sigmoid"})

_BOTH = ("", "torch.")
_ALL = ("", "torch.", "F.")
_BARE_F = ("", "F.")
_TORCH = ("torch.",)
#: functions called with one positional argument that is no tensor, and the prefixes (``F.``
#: standing for every functional spelling) whose callable -- resolved as the torch side resolves
#: it, ``adjoint.torchside.callables`` -- refuses it with its argument parser's words
#: ``f(): argument 'input' (position 1) must be Tensor, not NoneType`` (``int``, ``float``,
#: ``bool``): a C++ binding with that one schema, or a functional that hands its input straight
#: to one (``F.silu``). A call with more arguments gets the parser's "invalid combination of
#: arguments" listing every signature, not modelled. Probed in torch 2.13 over every function
#: of the expression language whose first parameter is a tensor; tests/test_pyerrors_calls.py
#: compares each entry, and checks that no such function is left out.
_UNARY_TORCH: dict[str, tuple] = {
    **{name: _BOTH for name in (
        "abs", "amax", "amin", "angle", "arctan2", "argmax", "argmin", "atan", "atan2", "bitwise_not", "chunk",
        "clone", "conj", "cos", "cosh", "cumprod", "cumsum", "detach", "diagonal", "diff", "erf", "exp", "expm1",
        "flatten", "flip", "full_like", "gather", "heaviside", "hypot", "imag", "index_add", "index_copy",
        "index_put", "index_select", "isfinite", "isnan", "kthvalue", "log", "log10", "log1p", "log2",
        "logcumsumexp", "logical_not", "logsumexp", "masked_scatter", "masked_select", "matmul", "max", "maximum",
        "mean", "median", "min", "minimum", "nan_to_num", "nanmean", "nansum", "neg", "numel", "ones_like",
        "permute", "prod", "ravel", "real", "reciprocal", "reshape", "resolve_conj", "roll", "rsqrt", "scatter_add",
        "scatter_reduce", "select", "sgn", "sign", "sin", "sinh", "sort", "sqrt", "square", "squeeze", "sum",
        "swapaxes", "swapdims", "t", "take_along_dim", "tan", "tile", "topk", "trace", "transpose", "tril", "triu",
        "unbind", "unflatten", "unsqueeze", "view_as_complex", "view_as_real", "zeros_like")},
    **{name: _ALL for name in (
        "adaptive_avg_pool1d", "alpha_dropout", "avg_pool1d", "celu", "celu_", "conv_transpose1d", "conv_transpose2d", "dropout",
        "feature_alpha_dropout",
        "hardshrink", "pixel_shuffle", "pixel_unshuffle", "prelu", "relu", "relu_", "selu", "selu_",
        "threshold_")},
    **{name: _BARE_F for name in (
        "avg_pool2d", "avg_pool3d", "elu", "elu_", "gelu", "hardsigmoid", "hardswish", "hardtanh", "hardtanh_",
        "leaky_relu", "leaky_relu_", "linear", "mish", "one_hot", "relu6", "silu", "softplus", "softshrink")},
    **{name: _TORCH for name in (
        "adaptive_max_pool1d", "batch_norm", "binary_cross_entropy_with_logits", "group_norm",
        "hinge_embedding_loss", "instance_norm", "kl_div", "layer_norm", "log_softmax", "max_pool1d", "max_pool2d",
        "max_pool3d", "poisson_nll_loss", "rms_norm", "sigmoid", "softmax", "tanh", "threshold")},
}
_FUNCTIONAL = ("F.", "nn.functional.", "torch.nn.functional.")


def unary_function_none(name: str, prefix: str, nargs: int, nkwargs: int) -> TorchError | None:
    """PyTorch's error for ``NAME(None)`` (a hook argument PyTorch handed as None): see
    :func:`unary_function_not_tensor`."""
    return unary_function_not_tensor(name, prefix, nargs, nkwargs, "NoneType")


def unary_function_not_tensor(name: str, prefix: str, nargs: int, nkwargs: int, type_: str) -> TorchError | None:
    """PyTorch's error for ``NAME(v)`` where ``v`` is no tensor but a ``type_`` (``NoneType``,
    ``int``, ``float``, ``bool``), or None when it is not one of the cases modelled: one
    positional argument, no keywords, a function and prefix of :data:`_UNARY_TORCH` (the
    argument parser's TypeError), or ``tanh`` / ``sigmoid`` called bare or as ``F.``: the
    functional's method call, whose AttributeError names the type. Checked against torch 2.13 in
    tests/test_pyerrors_calls.py."""
    if nargs != 1 or nkwargs:
        return None
    if prefix in ("",) + _FUNCTIONAL and name in _FUNCTIONAL_METHOD_CALLS:
        return TorchError("AttributeError", f"'{type_}' object has no attribute '{name}'", "python")
    spelled = "F." if prefix in _FUNCTIONAL else prefix
    if spelled in _UNARY_TORCH.get(name, ()):
        return TorchError("TypeError", f"{name}(): argument 'input' (position 1) must be Tensor, not {type_}", "python")
    return None


#: the class a custom module's forward is defined in, as CPython names it in a binding error
#: (the torch twin's ``adjoint.torchside.build.CustomModule``: a user's own class would put its name here)
CUSTOM_FORWARD = "CustomModule.forward"


def _quoted_list(names: list) -> str:
    q = [f"'{n}'" for n in names]
    if len(q) == 1:
        return q[0]
    if len(q) == 2:
        return f"{q[0]} and {q[1]}"
    return ", ".join(q[:-1]) + f", and {q[-1]}"


def binding_error(qualname: str, names: list, defaults: set, nargs: int, keywords: list) -> str | None:
    """CPython 3.11's TypeError for calling ``def forward(self, NAMES...)`` (``defaults``: the
    names that have one) with ``nargs`` positional arguments after ``self`` and the keyword
    arguments ``keywords``, in the order its frame set-up checks them (keywords, then the
    positional count, then what is missing); None when the call binds. Checked against CPython
    itself in tests/test_pyerrors_calls.py."""
    bound = set(names[:nargs])
    for k in keywords:
        if k not in names:
            return f"{qualname}() got an unexpected keyword argument '{k}'"
        if k in bound:
            return f"{qualname}() got multiple values for argument '{k}'"
        bound.add(k)
    if nargs > len(names):
        required = len([n for n in names if n not in defaults])
        takes = (f"from {required + 1} to {len(names) + 1} positional arguments" if required < len(names)
                 else f"{len(names) + 1} positional argument{'s' if len(names) + 1 != 1 else ''}")
        return f"{qualname}() takes {takes} but {nargs + 1} were given"
    missing = [n for n in names if n not in bound and n not in defaults]
    if missing:
        return (f"{qualname}() missing {len(missing)} required positional argument{'s' if len(missing) > 1 else ''}: "
                f"{_quoted_list(missing)}")
    return None
