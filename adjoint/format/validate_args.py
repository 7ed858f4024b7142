"""Constructor arguments of built-in modules (``args:``) -> values as torch stores them.

Each key is checked against the type's constructor (:mod:`adjoint.format.module_signatures`): unknown ones
get a suggestion from that constructor's own names, arguments a file does not set say why
(``dtype``, deprecated ``size_average``, tensors that torch keeps as buffers), values are
read by their kind (an int or a list of ints for ``kernel_size``, ...), required ones must be
there; the constructor's own refusals are PyTorch's errors, the answer (:func:`constructor_error`).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format import module_signatures as nn_types
from adjoint.format.checks import boolean, choice, suggest
from adjoint.format.errors import Loc, ProblemError, raise_all
from adjoint.format.literals import parse_int, parse_number, show
from adjoint.format.loader import YMap, YNode, YScalar, YSeq, kind_name
from adjoint.format.module_signatures import NNType


def read_args(node: YNode | None, t: NNType, what: str, loc: Loc) -> dict:
    """``args:`` of a built-in: every key checked against the constructor (all mistakes together),
    required ones present, defaults filled in. The constructor's own refusals of the values are
    not malformed files: :func:`constructor_error` says what PyTorch raises, the answer."""
    given: dict[str, object] = {}
    errors: list[ProblemError] = []
    mentioned: set[str] = set()
    if node is not None:
        if not isinstance(node, YMap):
            raise ProblemError(node.loc, f"the args of {what} must be a mapping NAME: value, not {kind_name(node)}")
        names = [a.name for a in t.args]
        for key, value in node.entries:
            mentioned.add(key.text)
            spec = t.arg(key.text)
            if spec is None:
                errors.append(ProblemError(key.loc, _not_an_arg(key.text, t, names)))
                continue
            try:
                given[key.text] = read_arg(value, spec, f"argument '{key.text}' of {t.name}")
            except ProblemError as err:
                errors.append(err)
        loc = node.loc
    missing = [a.name for a in t.args if a.required and a.name not in mentioned]
    unknown = [k for k in mentioned if t.arg(k) is None]
    if missing and not unknown:  # a misspelt argument explains a missing one: one line, not two
        errors.append(ProblemError(loc, f"a {t.name} needs the argument{'s' if len(missing) > 1 else ''} "
                                        f"{', '.join(missing)}; give args: {{{', '.join(f'{n}: ...' for n in missing)}}}"))
    raise_all(errors)
    return nn_types.resolved_args(t, given)


def constructor_error(t: NNType, args: dict) -> tuple[str, str] | None:
    """What ``torch.nn.TYPE(**args)`` raises, (exception class, message), or None: the first of
    the constructor's refusals in the order its ``__init__`` checks them (``NNType.check``)."""
    refused = t.check(args)
    return (t.raises, refused[0][1]) if refused else None


def _not_an_arg(name: str, t: NNType, names: list[str]) -> str:
    if name in nn_types.NOT_ARGS:
        return f"'{name}' is not set per module: {nn_types.NOT_ARGS[name]}"
    if name in nn_types.TENSOR_ARGS and any(b.name == name for b in t.buffers({a.name: a.default for a in t.args})):
        return f"'{name}' is a tensor, which PyTorch keeps as a buffer: give it under buffers: {{{name}: [...]}}"
    if name.startswith("_"):
        return f"'{name}' is a private argument of {t.name}; problem files use the public ones"
    listed = ", ".join(names) or "none"
    return f"unknown argument '{name}' of {t.name}{suggest(name, names)} (its arguments: {listed})"


def read_arg(node: YNode, spec: nn_types.ArgSpec, what: str):
    """One constructor argument, by its kind (see :data:`adjoint.format.module_signatures.ARG_KINDS`)."""
    kind = spec.kind
    is_null = isinstance(node, YScalar) and node.kind == "null"
    if kind in ("opt_int", "opt_float", "opt_bool", "opt_pool", "output_size") and is_null:
        return None
    if kind in ("int", "opt_int"):
        return parse_int(node, what, spec.minimum)
    if kind in ("float", "opt_float"):
        return parse_number(node, what)
    if kind in ("bool", "opt_bool"):
        return boolean(node, what)
    if kind == "str" and not spec.choices:   # any string (a loss's reduction: its forward refuses an unknown one)
        if not isinstance(node, YScalar) or node.kind != "str":
            raise ProblemError(node.loc, f"{what} must be a string, not {kind_name(node)}")
        return node.text
    if kind == "str":
        return choice(node, what, spec.choices)
    if kind == "padding" and isinstance(node, YScalar) and node.kind == "str":
        if node.text not in ("same", "valid"):   # the constructor's checks before it may raise first
            return nn_types.UnknownPadding(node.text, node.loc)
        return node.text
    if kind in ("ints", "padding"):
        if isinstance(node, YScalar):
            return (parse_int(node, what, spec.minimum),) * spec.rank
        return _int_list(node, what, spec.minimum, spec.rank)
    if kind in ("pool", "opt_pool"):
        if isinstance(node, YScalar):
            return parse_int(node, what, spec.minimum)
        return _int_list(node, what, spec.minimum, spec.rank)
    if kind == "shape":
        if isinstance(node, YScalar):
            return (parse_int(node, what, spec.minimum),)
        return _int_list(node, what, spec.minimum, None)
    if kind == "sizes":
        sizes = _int_list(node, what, -1, None)
        if any(n == 0 for n in sizes) or sizes.count(-1) > 1:
            raise ProblemError(node.loc, f"{what}: give positive sizes, with at most one -1")
        return sizes
    if kind == "output_size":
        if isinstance(node, YScalar):
            return parse_int(node, what, spec.minimum)
        if not isinstance(node, YSeq) or len(node.items) != spec.rank:
            raise ProblemError(node.loc, f"{what} must be an integer or a list of {spec.rank} (integers or null)")
        return tuple(None if isinstance(i, YScalar) and i.kind == "null" else parse_int(i, what, spec.minimum)
                     for i in node.items)
    if kind in ("layer", "opt_layer"):
        if kind == "opt_layer" and is_null:
            return None
        layer = nn_types.lookup(spec.choices[0])
        if not isinstance(node, YMap):
            raise ProblemError(node.loc, f"{what} is a {layer.name}: give its constructor's args as a mapping "
                                         f"NAME: value{' (or null)' if kind == 'opt_layer' else ''}, not {kind_name(node)}")
        return tuple(read_args(node, layer, f"{what} ({layer.name})", node.loc).items())
    raise AssertionError(kind)


def _int_list(node: YNode, what: str, minimum: int | None, rank: int | None) -> tuple[int, ...]:
    if not isinstance(node, YSeq):
        raise ProblemError(node.loc, f"{what} must be an integer or a list of integers, not {show(node)}")
    if rank is not None and len(node.items) != rank:
        raise ProblemError(node.loc, f"{what} must be an integer or a list of {rank} integers, not {len(node.items)}")
    return tuple(parse_int(i, what, minimum) for i in node.items)


def show_args(t: NNType, args: dict) -> str:
    shown = [f"{a.name}={_arg_text(args[a.name])}" for a in t.args if a.required or args[a.name] != a.default]
    return ", ".join(shown) or "default arguments"


def _arg_text(v) -> str:
    if isinstance(v, Fraction):
        return str(float(v)) if v.denominator != 1 else str(v.numerator)
    return repr(v) if isinstance(v, str) else str(v)
