"""A PyTorch-named function's signature (:class:`Function`, its :class:`Param` s) and Python's
argument binding against it (:func:`bind`), with the TypeErrors PyTorch's parser gives. The
families of :mod:`adjoint.engine.bindings` define their functions with these records."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

from adjoint.engine.pyfloat import is_int
from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.graph import Tensor
from adjoint.format.gaussian import Gaussian
from adjoint.engine.torch_errors import TorchError

REQUIRED = object()

#: Why a call PyTorch's argument parser refuses stays a refusal: its TypeError lists the overloads
#: the call could match, or names the argument's position, by call form (torch.f or x.f) and by
#: how each argument was passed; measured case by case only (keepdim_flag), not in general.
PARSER_TYPE_ERROR = ("PyTorch's TypeError is not modelled (its argument parser words it by the overloads, the call "
                     "form and how each argument was passed)")


#: PyTorch's argument parser takes NumPy's names too (python_arg_parser.cpp's numpy compatibility):
#: ``x.sum(axis=0, keepdims=True)`` is ``x.sum(dim=0, keepdim=True)``
NUMPY_NAMES = {"axis": "dim", "keepdims": "keepdim"}


@dataclass(frozen=True)
class Param:
    """One parameter: ``kind`` is what it accepts (tensor, tensors, int, ints, number, bool,
    str, dtype, any); ``default`` is PyTorch's (REQUIRED: none); ``optional``: None is accepted."""

    name: str
    kind: str
    default: object = REQUIRED
    optional: bool = False
    keyword_only: bool = False


def numpy_names(kwargs: dict, names: set, what: str, prefix: str, loc: Loc) -> dict:
    """``axis=`` / ``keepdims=`` as ``dim=`` / ``keepdim=`` where PyTorch's C++ argument parser binds
    the call; a Python-level function (``F.softmax``, ``Tensor.norm``) raises TypeError on them, and
    so does the parser when both names are given: not modelled (refused, naming it)."""
    from adjoint.format.torch_names import takes_numpy_names
    method = what.startswith("Tensor.")
    if not takes_numpy_names(what.removeprefix("Tensor."), prefix, method):
        return kwargs   # the unknown keyword is refused below, as PyTorch's TypeError
    out = {}
    for k, v in kwargs.items():
        name = NUMPY_NAMES.get(k, k) if NUMPY_NAMES.get(k) in names else k
        if name in out or (name != k and name in kwargs):
            raise ProblemError(loc, f"{what}() got '{k}' and '{name}', one argument twice: {PARSER_TYPE_ERROR}")
        out[name] = v
    return out


@dataclass(frozen=True)
class Function:
    """A function of the problem language (torch.x, F.x or a Tensor method): its parameters and how it lowers to ops."""

    name: str
    params: tuple[Param, ...]
    lower: Callable                 # (rt, args: dict, loc) -> Tensor | tuple | number
    where: str = "both"             # function | method | both
    varargs: bool = False           # the last parameter also takes the rest positionally: view(2, 3)
    doc: str = ""                   # what PyTorch runs (the node chain), for docs/ops.md


def dim_index(d: int, ndim: int, loc: Loc, what: str = "dim") -> int:
    """``maybe_wrap_dim``: a dimension argument, negative ones counted from the end; out of
    range, PyTorch's IndexError (an answer, raised when the op runs)."""
    n = max(ndim, 1)
    if not -n <= d < n:
        raise TorchError("IndexError", f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but "
                                       f"got {d})")
    return d + n if d < 0 else d


def after_packs(rt, opname: str, ins: list, loc: Loc, compute: Callable):
    """``compute()`` (the op's arguments: dims wrapped and checked); where it finds PyTorch's
    error, that error comes from the kernel of ``opname``, after its node packed its inputs."""
    try:
        return compute()
    except TorchError as e:
        rt.raise_after_packs(opname, ins, e, loc)


# ----------------------------------------------------------------------------- binding

class Bound(dict):
    """The bound arguments by name, and how the call passed them: ``positional`` (the names
    given by position; a method's self is one), ``keywords`` (the names given by keyword, in the
    call's order), ``method`` (``x.f(...)``, not ``torch.f(x, ...)``) and ``types`` (each given
    argument's Python type as PyTorch's parser names it, read from the call's expressions; None
    where adjoint cannot tell it): PyTorch's argument parser words its errors by all of them."""

    positional: frozenset = frozenset()
    keywords: tuple = ()
    method: bool = False
    types: dict = {}
    prefix: str = ""              # torch., F. (and its spellings), or "" as the call wrote it
    name: str = ""            # the function's name as PyTorch's messages give it ("clamp_", not "Tensor.clamp_")

    def type_of(self, name: str, guess: bool = False) -> str | None:
        """The Python type of argument ``name`` as PyTorch's parser prints it (``py_typename``): the
        call's own where the interpreter read it from the expression, else the value's. A number
        whose int or float the expression does not tell (one from a name or a tuple) is None,
        or with ``guess`` taken from its value (an integral one as an int: the keepdim errors'
        older reading, kept for them), as are a tuple and a list."""
        if self.types.get(name) is not None:
            return self.types[name]
        v = self[name]
        if isinstance(v, (Fraction, Gaussian)) and not isinstance(v, bool) and not guess:
            return None
        return _py_type(v)


def keepdim_flag(a: Bound, fn_name: str, params: tuple, loc: Loc, name: str = "keepdim"):
    """``a[name]`` where PyTorch's parser wants a bool (the dim overload, the only one the call's
    arguments select): another value is its TypeError "sum(): argument 'keepdim' (position 2)
    must be bool, not int" (the position only when passed by position, counted without self for
    a method). None given by keyword makes the parser try every overload ("invalid combination
    of arguments"), as do the functions torch.mean, torch.max and torch.min (measured in torch
    2.13 for every dim form); a list or tuple's type adjoint does not keep apart: all refused."""
    v = a[name]
    if isinstance(v, bool):
        return v
    if not a.method and fn_name in ("mean", "max", "min"):
        raise ProblemError(loc, f"torch.{fn_name}(): a keepdim that is not True or False is PyTorch's TypeError "
                                "listing the overloads it tried, not modelled; pass True or False")
    kind = a.type_of(name, guess=True)
    if kind is None or (v is None and name not in a.positional):
        raise ProblemError(loc, f"{fn_name}(): argument '{name}' must be True or False: PyTorch's TypeError for "
                                f"{describe(v)} here is not modelled (its parser words it by the overloads it tried)")
    where = ""
    if name in a.positional:
        index = [p.name for p in params].index(name)
        where = f" (position {index + (0 if a.method else 1)})"
    raise TorchError("TypeError", f"{fn_name}(): argument '{name}'{where} must be bool, not {kind}")


def _py_type(v) -> str | None:
    """The Python type PyTorch's parser names for a value of the problem language (None where
    adjoint keeps apart no such type: a tuple or a list)."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, Fraction):
        return "int" if is_int(v) else "float"
    if isinstance(v, Tensor):
        return "Parameter" if v.is_param else "Tensor"
    if isinstance(v, Gaussian):
        return "complex"
    return {type(None): "NoneType", str: "str"}.get(type(v))


def keepdim_without_dim(a: Bound, fn_name: str, loc: Loc) -> TorchError:
    """``x.sum(keepdim=True)`` (sum, mean, prod, max, min): no overload takes keepdim without
    dim, so PyTorch's parser lists them all, by call form (measured in torch 2.13)."""
    kind = a.type_of("keepdim", guess=True)
    if kind is None or kind == "NoneType":
        raise ProblemError(loc, f"{fn_name}() with keepdim= but no dim: {PARSER_TYPE_ERROR}; give dim too")
    return TorchError("TypeError", f"{fn_name}() received an invalid combination of arguments - got "
                                   f"{_arg_desc(*_given(a, loc, guess=True))}, but expected one of:\n"
                                   f"{_NO_DIM_OVERLOADS[fn_name][0 if a.method else 1]}")


# ----------------------------------------------------------------------------- the parser's TypeError

@dataclass(frozen=True)
class Overload:
    """One signature PyTorch's argument parser lists in its "invalid combination of arguments"
    TypeError: ``printed`` as the message shows it, ``raw`` the arguments of the signature string
    the parser splits on ", " (``"Tensor? min=None"``, ``"*"`` and ``out`` included): a name is
    what follows the last space (``min=None``: a keyword never matches an argument with a
    default), a type what precedes it (``Tensor?`` matches no value)."""

    printed: str
    raw: tuple[str, ...]


def _given(a: Bound, loc: Loc, guess: bool = False) -> tuple[list[str], list[tuple[str, str]]]:
    """The call's arguments as the parser holds them: the positional ones' types (a method's self
    not among them) and the keywords', in the order its ``std::unordered_map`` iterates them (the
    reverse of the call's, as measured in torch 2.13 for up to three keywords)."""
    names = [n for n in a if n in a.positional][1 if a.method else 0:]
    keywords = list(reversed(a.keywords))
    types = {n: a.type_of(n, guess) for n in names + keywords}
    unknown = [n for n, t in types.items() if t is None]
    if unknown:
        raise ProblemError(loc, f"argument '{unknown[0]}': {PARSER_TYPE_ERROR}, here by the Python type of each "
                                "argument, which adjoint cannot tell for this one (a number from a name, a tuple); "
                                "write it as a literal")
    return [types[n] for n in names], [(k, types[k]) for k in keywords]


def _arg_desc(positional: list[str], keywords: list[tuple[str, str]]) -> str:
    """``_argDesc``: "(Tensor, float, max=Tensor)"; with no positional argument the last ", "
    stays: "(max=float, min=Tensor, )"."""
    text = "".join(f"{t}, " for t in positional) + "".join(f"{k}={t}, " for k, t in keywords)
    return f"({text[:-2] if positional else text})"


def _split(raw: str) -> tuple[str, str]:
    cut = raw.rfind(" ")
    return (raw, raw) if cut < 0 else (raw[:cut], raw[cut + 1:])


def _overload_lines(o: Overload, positional: list[str], keywords: list[tuple[str, str]], loc: Loc) -> str:
    """``format_invalid_args`` for one overload: its printed form, and when as many arguments were
    given as it takes (``_argcountMatch``, out not counted unless given), why it did not match:
    keywords it does not name (``_tryMatchKwargs``, among its last ones) or each argument's type,
    ``!marked!`` where it does not match (``_formattedArgDesc``)."""
    args = [_split(r) for r in o.raw]
    names = [n for _, n in args]
    given = {k for k, _ in keywords}
    has_out = any(n == "out" or n.startswith("out=") for n in names) and "out" not in given
    expected = len(args) - has_out
    text = f" * {o.printed}\n"
    if len(positional) + len(keywords) != expected:
        return text
    start = max(len(args) - len(keywords) - has_out, 0)
    unmatched = [k for k, _ in keywords if k not in names[start:]]
    if keywords and unmatched:
        return text + f"      didn't match because some of the keywords were incorrect: {', '.join(unmatched)}\n"
    marked = []
    for i, t in enumerate(positional + [t for _, t in keywords]):
        kind = args[i][0] if i < len(args) else None
        matching = kind == t or (kind == "Tensor" and t == "Parameter")
        if i >= len(positional):
            name = args[i][1]
            if name not in given:   # PyTorch's kwargs.at(name) throws: not modelled
                raise ProblemError(loc, PARSER_TYPE_ERROR)
            t = f"{name}={dict(keywords)[name]}"
        marked.append(t if matching else f"!{t}!")
    listed = "".join(f"{m}, " for m in marked)
    return text + "      didn't match because some of the arguments have invalid types: " \
                  f"({listed[:-2] if positional else listed})\n"


def invalid_combination(a: Bound, overloads: tuple[Overload, ...], loc: Loc) -> TorchError:
    """PyTorch's parser's TypeError when no overload takes the call's arguments ("clamp() received
    an invalid combination of arguments - got (Tensor, Tensor, float), but expected one of: ..."),
    worded by how each argument was passed and its Python type (``format_invalid_args``); raised
    before anything runs."""
    positional, keywords = _given(a, loc)
    lines = "".join(_overload_lines(o, positional, keywords, loc) for o in overloads)
    return TorchError("TypeError", f"{a.name}() received an invalid combination of arguments - got "
                                   f"{_arg_desc(positional, keywords)}, but expected one of:\n{lines}")


_DTYPE = "*, torch.dtype dtype = None"
_KEYWORDS = "      didn't match because some of the keywords were incorrect: keepdim\n"
_NO_DIM_OVERLOADS = {   # (Tensor method, torch function): the overloads PyTorch 2.13's parser lists
    "sum": (f" * ({_DTYPE})\n * (tuple of ints dim, bool keepdim = False, {_DTYPE})\n",
            f" * (Tensor input, {_DTYPE})\n * (Tensor input, tuple of ints dim, bool keepdim = False, {_DTYPE}, "
            "Tensor out = None)\n"),
    "mean": (f" * ({_DTYPE})\n * (tuple of ints dim, bool keepdim = False, {_DTYPE})\n",
             f" * (Tensor input, {_DTYPE}, Tensor out = None)\n * (Tensor input, tuple of ints dim, bool keepdim = "
             f"False, {_DTYPE}, Tensor out = None)\n"),
    "prod": (f" * ({_DTYPE})\n * (int dim, bool keepdim = False, {_DTYPE})\n",
             f" * (Tensor input, {_DTYPE})\n * (Tensor input, int dim, bool keepdim = False, {_DTYPE}, Tensor out = "
             "None)\n"),
}
_NO_DIM_OVERLOADS["max"] = _NO_DIM_OVERLOADS["min"] = (
    f" * ()\n{_KEYWORDS} * (Tensor other)\n{_KEYWORDS} * (int dim, bool keepdim = False)\n",
    " * (Tensor input, *, Tensor out = None)\n * (Tensor input, Tensor other, *, Tensor out = None)\n * (Tensor "
    "input, int dim, bool keepdim = False, *, tuple of Tensors out = None)\n")

def bind(fn: Function, args: list, kwargs: dict, loc: Loc, what: str, types=None, prefix: str = "") -> dict:
    """Python's argument binding against PyTorch's signature; a mismatch is refused (PyTorch's
    TypeError there is its argument parser's, worded by the overloads: not modelled). ``types``:
    (a list for ``args``, a dict for ``kwargs``) of each argument's Python type as the interpreter
    read it from the call (None where it cannot tell)."""
    params = fn.params
    positional = [p for p in params if not p.keyword_only]
    bound: dict = {}
    given_types: dict = {}
    if types is not None and not (fn.varargs and len(args) > len(positional) - 1):
        given_types = {p.name: t for p, t in zip(positional, types[0])} | dict(types[1])
    if fn.varargs and len(args) > len(positional) - 1:
        head = len(positional) - 1
        rest = args[head:]
        if types is not None and positional[-1].kind in ("int", "ints") and (
                "float" in types[0][head:] or any(_holds_float(t) for t in types[0][head:])):
            # view(B, 2, C // 2.0), x.permute((1.0, 0)): a Python float among the sizes, which PyTorch's parser refuses
            raise ProblemError(loc, f"{what}(): a float among the sizes ({positional[-1].name}), where PyTorch takes "
                                    f"ints: {PARSER_TYPE_ERROR}")
        args = list(args[:head]) + ([rest[0]] if len(rest) == 1 and isinstance(rest[0], (tuple, list)) else
                                    [tuple(rest)])
    if len(args) > len(positional):
        raise ProblemError(loc, f"{what}() takes at most {len(positional)} positional argument(s) "
                                f"({', '.join(p.name for p in positional)}), got {len(args)}: {PARSER_TYPE_ERROR}")
    for p, a in zip(positional, args):
        bound[p.name] = a
    names = {p.name for p in params}
    if any(k in NUMPY_NAMES for k in kwargs):
        kwargs = numpy_names(kwargs, names, what, prefix, loc)
    for k, v in kwargs.items():
        if k not in names:
            raise ProblemError(loc, f"'{k}=' of {what}() is not modelled (a PyTorch argument adjoint does not model "
                                    "yet, or one PyTorch does not take, whose TypeError adjoint does not model); "
                                    f"call it with {', '.join(p.name for p in params)}")
        if k in bound:
            raise ProblemError(loc, f"{what}() got multiple values for argument '{k}': {PARSER_TYPE_ERROR}")
        bound[k] = v
    out = Bound()
    out.positional = frozenset(p.name for p in positional[:len(args)])
    out.keywords = tuple(kwargs)
    out.method = what.startswith("Tensor.")
    out.types = given_types
    out.name = what.removeprefix("Tensor.")
    out.prefix = prefix
    for p in params:
        if p.name not in bound:
            if p.default is REQUIRED:
                raise ProblemError(loc, f"{what}() missing required argument '{p.name}': {PARSER_TYPE_ERROR}")
            out[p.name] = p.default
            continue
        if (p.kind in ("int", "ints") or p.name == "dim") and given_types.get(p.name) == "float":   # 2.0 too
            raise ProblemError(loc, f"{what}(): argument '{p.name}' is a float, where PyTorch takes an int: "
                                    f"{PARSER_TYPE_ERROR}")
        if (p.kind == "ints" or p.name in _INT_LIST_NAMES) and _holds_float(given_types.get(p.name)):
            # x.movedim((1.0, 0), 1), x.sum((0.0,)), x.split([1.0, 1]): PyTorch's TypeError
            raise ProblemError(loc, f"{what}(): argument '{p.name}' holds a float, where PyTorch takes ints: "
                                    f"{PARSER_TYPE_ERROR}")
        out[p.name] = check_kind(bound[p.name], p, loc, what)
    return out


def check_kind(v, p: Param, loc: Loc, what: str):
    if getattr(v, "printed_number", False):   # x.item() of an irrational value: printed only (glue.PrintedNumber)
        v._refuse()
    if v is None:
        if p.optional or p.default is None:
            return None
        raise ProblemError(loc, f"{what}(): argument '{p.name}' must be {_KIND_WORDS[p.kind]}, not None: "
                                f"{PARSER_TYPE_ERROR}")
    ok = {
        "tensor": lambda: isinstance(v, Tensor),
        "tensors": lambda: isinstance(v, (tuple, list)) and all(isinstance(t, Tensor) for t in v),
        "int": lambda: _is_int(v),
        "ints": lambda: _is_int(v) or (isinstance(v, (tuple, list)) and all(_is_int(i) for i in v)),
        "number": lambda: isinstance(v, Fraction) and not isinstance(v, bool),
        "scalar": lambda: isinstance(v, (Fraction, Gaussian, Tensor)) and not isinstance(v, bool),
        "bool": lambda: isinstance(v, bool),
        "str": lambda: isinstance(v, str),
        "any": lambda: True,
    }[p.kind]()
    if not ok:
        raise ProblemError(loc, f"{what}(): argument '{p.name}' must be {_KIND_WORDS[p.kind]}, not "
                                f"{describe(v)}: {PARSER_TYPE_ERROR}")
    if p.kind == "int":
        return int(v)
    if p.kind == "ints":
        return (int(v),) if _is_int(v) else tuple(int(i) for i in v)
    if p.kind == "tensors":
        return tuple(v)
    return v


#: parameters of kind "any" that PyTorch takes as ints when given a sequence (dims, sizes, split sizes)
_INT_LIST_NAMES = ("dim", "dims", "size", "split_size_or_sections")


def _holds_float(kind) -> bool:
    """Whether a sequence literal's numbers (``pyerrors.SequenceType``) include a float or complex one."""
    return any(t in ("float", "complex") for t in getattr(kind, "elements", ()))


def _is_int(v) -> bool:
    return is_int(v) and not isinstance(v, bool)   # not a PyFloat: x.item() of a float tensor is a float


_KIND_WORDS = {"tensor": "a Tensor", "tensors": "a tuple or list of Tensors", "int": "an int",
               "ints": "an int or a tuple of ints", "number": "a number", "scalar": "a number or a Tensor",
               "bool": "True or False", "str": "a string", "any": "a value"}


def describe(v) -> str:
    """What a value is, in a message ("a Tensor", "a number", "None", ...)."""
    if v is None:
        return "None"
    if isinstance(v, bool):
        return "a bool"
    if isinstance(v, Tensor):
        return "a Tensor"
    if isinstance(v, Fraction):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, (tuple, list)):
        return "a tuple"
    if isinstance(v, dict):
        return "a dict"
    return type(v).__name__
