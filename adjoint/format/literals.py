"""Numbers, free-symbol names and tensor literals of problem files, read exactly and refused safely.

Numbers are exact: ``0.3`` is 3/10, ``"1/4"`` is 1/4. Reading one never builds a huge
integer first: the decimal exponent is bounded from the text before any arithmetic, so
``1e999999999`` is refused at once ("exponent 999999999 is beyond what a float64 can
hold") instead of computing ``10 ** 999999999``.

The policy (contract v2; docs/format.md):

* a number whose exact value a float64 cannot hold is refused: beyond about 1.8e308 it
  would be inf, below 2**-1075 it would be 0 (:func:`read_number`); the problem's own dtype
  is checked later, once it is known (:func:`check_range`): a nonzero literal below the
  dtype's smallest normal number would be a denormal or 0 in PyTorch, and is refused too
  (overflow beyond the dtype is refused when the forward runs, symbols bound);
* only plain ASCII digits; no ``_`` separators (``1_000`` is 1000 to YAML 1.1 and a string
  to YAML 1.2); no integers with a leading zero (``017`` is octal 15 to YAML 1.1);
* ``inf``, ``NaN``, ``Infinity`` are not finite numbers, and never symbols; in a tensor literal
  ``-inf`` and ``inf`` (also ``-.inf``, ``-Infinity``) are :class:`Infinite` elements, allowed
  in float tensors that do not require grad (a float mask) and refused elsewhere by the callers;
* a free symbol is a plain ASCII identifier that neither SymPy nor Python gives a meaning
  (not ``E``, ``I``, ``pi``, ``oo``, ``nan``, ``None``, ``True``, ``_x``, a keyword...);
  a name that only looks like one after Unicode normalisation (``ｗ０``) is refused.
"""

from __future__ import annotations

import functools
import keyword
import re
import unicodedata
from dataclasses import replace
from fractions import Fraction

import numpy as np

from adjoint.format.errors import Loc, ProblemError
from adjoint.format.loader import YMap, YNode, YScalar, YSeq, kind_name
from adjoint.format.loader import YNumberRow
from adjoint.format.problem import MAX_ELEMENTS, Element, Infinite, Literal, Sym, TensorDecl
from adjoint.format.sidefiles import FileItems
from adjoint.format.sidefiles import read as read_side_file

#: A number literal may have at most this many digits (Python refuses to convert 4,300).
MAX_DIGITS = 1000

_DECIMAL = re.compile(r"([+-]?)(?:([0-9]+)(?:\.([0-9]*))?|\.([0-9]+))(?:[eE]([+-]?[0-9]+))?")
_FRACTION = re.compile(r"([+-]?[0-9]+)/([0-9]+)")
_PREFIXED_INT = re.compile(r"[+-]?0(?:[xX][0-9a-fA-F]+|[oO][0-7]+|[bB][01]+)")
_NONFINITE = re.compile(r"[+-]?\.?(inf|infinity|nan)", re.IGNORECASE)
_NUMBERISH = re.compile(r"[+-]?[0-9_.]*[0-9][0-9_.]*(?:[eE][+-]?[0-9_]+)?(?:/[0-9_]+)?")

SYMBOL_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: Names SymPy or Python give a meaning: never free symbols.
RESERVED_SYMBOLS = frozenset({"E", "I", "pi", "oo", "nan", "inf", "zoo", "S", "N", "O", "Q", "None", "True",
                              "False"})

#: float64's limits: values at or beyond the first round to inf, at or below the second to 0.
FLOAT64_OVERFLOW = Fraction(2 ** 1024 - 2 ** 970)
FLOAT64_ZERO = Fraction(1, 2 ** 1075)
#: The smallest normal number of each dtype: below it PyTorch holds a denormal (or 0).
SMALLEST_NORMAL = {"float32": Fraction(1, 2 ** 126), "float64": Fraction(1, 2 ** 1022)}
_SMALLEST_TEXT = {"float32": "1.2e-38", "float64": "2.2e-308"}


class NotANumber(ValueError):
    """The text is not written as a number at all (it may be a symbol name)."""


class NumberRefused(ValueError):
    """The text is written as a number, but one a problem file may not hold; the message says why."""


class NonFinite(NumberRefused):
    """``inf``, ``-Infinity``, ``.nan``, ``NaN``: not a finite number (never a symbol either)."""


# ----------------------------------------------------------------------------- numbers

@functools.lru_cache(maxsize=4096)
def read_number(text: str, floor: str = "zero") -> Fraction:
    """The exact value of a number written as text: decimal (``0.3``, ``-1.5e-3``), integer
    (also ``0x1f``, ``0o17``, ``0b101``) or fraction (``1/4``).

    Raises :class:`NotANumber` when the text is not number syntax, :class:`NumberRefused`
    (with the reason) when it is but cannot be held: beyond float64, rounding to 0 in
    float64 (``floor="zero"``) or below float64's smallest normal (``floor="normal"``,
    for Python float literals inside expressions), non-ASCII digits, ``_``, a leading zero,
    more than :data:`MAX_DIGITS` digits, inf or nan. Bounded time: no big power is built
    before the exponent is known to be in range.

    Memoized (a Fraction is immutable; a refusal is raised again each time): a tensor literal
    repeats its numbers (0, 1, a few dyadic fractions), and this is most of a load's work."""
    t = text.strip()
    if _NONFINITE.fullmatch(t):
        raise NonFinite(f"'{t}' is not a finite number")
    if not t.isascii():
        if any(unicodedata.digit(c, None) is not None and not c.isascii() for c in t) \
                and all(unicodedata.digit(c, None) is not None or c in "+-./eE_" for c in t):
            raise NumberRefused(f"'{t}' uses digits other than the ASCII 0-9; write numbers with 0-9")
        raise NotANumber(t)
    if "_" in t and _NUMBERISH.fullmatch(t):
        raise NumberRefused(f"'{t}': write numbers without '_' ({t.replace('_', '')}); YAML readers disagree on "
                            "what 1_000 means")
    if _PREFIXED_INT.fullmatch(t):
        if len(t) > MAX_DIGITS:
            raise NumberRefused(f"a number literal of {len(t)} characters is too long (at most {MAX_DIGITS} digits)")
        return Fraction(int(t, 0))
    m = _FRACTION.fullmatch(t)
    if m:
        if len(t) > MAX_DIGITS + 2:
            raise NumberRefused(f"the fraction '{_short(t)}' has more than {MAX_DIGITS} digits")
        den = int(m.group(2))
        if den == 0:
            raise NumberRefused(f"'{t}' divides by zero; write a finite number")
        return _in_float64(Fraction(int(m.group(1)), den), t, floor)
    m = _DECIMAL.fullmatch(t)
    if not m:
        raise NotANumber(t)
    sign, whole, frac, only_frac, exp_text = m.groups()
    whole = whole or ""
    frac = frac if frac is not None else (only_frac or "")
    if frac == "" and exp_text is None and len(whole) > 1 and whole.startswith("0"):
        raise NumberRefused(f"'{t}': an integer with a leading zero is octal to YAML 1.1 and decimal to YAML 1.2; "
                            f"write {int(whole)} without the zero (or the value you mean)")
    digits = whole + frac
    if len(digits) > MAX_DIGITS:
        raise NumberRefused(f"a number literal with {len(digits)} digits is too long (at most {MAX_DIGITS})")
    significant = digits.lstrip("0")
    if not significant:
        return Fraction(0)
    exp = 0
    if exp_text is not None:
        body = exp_text.lstrip("+-").lstrip("0") or "0"
        if len(body) > 6:  # |exponent| >= 10**6: far beyond float64 either way
            exp = 10 ** 7 if not exp_text.startswith("-") else -10 ** 7
        else:
            exp = int(exp_text)
    adjusted = len(whole) - (len(digits) - len(significant)) + exp  # value in [10**(adjusted-1), 10**adjusted)
    shown = _short(exp_text) if exp_text is not None else None
    if adjusted > 310:
        what = f"exponent {shown}" if shown is not None else f"'{_short(t)}'"
        raise NumberRefused(f"{what} is beyond what a float64 can hold (the largest is about 1.8e308)")
    if adjusted < -330:
        what = f"exponent {shown}" if shown is not None else f"'{_short(t)}'"
        raise NumberRefused(f"{what} is below what a float64 can hold: it would round to 0 (the smallest float64 "
                            "is about 4.9e-324)")
    value = Fraction(int(digits)) * Fraction(10) ** (exp - len(frac))
    return _in_float64(-value if sign == "-" else value, t, floor)


def _in_float64(value: Fraction, text: str, floor: str) -> Fraction:
    size = abs(value)
    if size >= FLOAT64_OVERFLOW:
        raise NumberRefused(f"'{_short(text)}' is beyond what a float64 can hold (the largest is about 1.8e308)")
    if value and size <= FLOAT64_ZERO:
        raise NumberRefused(f"'{_short(text)}' is below what a float64 can hold: it would round to 0 (the smallest "
                            "float64 is about 4.9e-324)")
    if value and floor == "normal" and size < SMALLEST_NORMAL["float64"]:
        raise NumberRefused(f"'{_short(text)}' is below float64's smallest normal number (about 2.2e-308): Python "
                            "holds it as a denormal, which PyTorch flushes or rounds; write a larger number")
    return value


def _short(text: str) -> str:
    return text if len(text) <= 24 else text[:20] + "..."


# ----------------------------------------------------------------------------- names

def symbol_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a free symbol, or None when it can."""
    if not name.isascii():
        folded = unicodedata.normalize("NFKC", name)
        if folded != name and folded.isascii() and SYMBOL_RE.fullmatch(folded):
            return f"'{name}' looks like '{folded}' but is written with other Unicode characters; write plain ASCII"
        return f"'{name}' is not a plain ASCII name; symbol names use the letters A-Z, a-z, digits and _"
    if name.startswith("_"):
        return f"'{name}' starts with '_'; symbol names start with a letter"
    if not SYMBOL_RE.fullmatch(name):
        return f"'{name}' is not a valid symbol name; use a letter, then letters, digits and _"
    if name in RESERVED_SYMBOLS or name.lower() in ("nan", "inf", "infinity") or keyword.iskeyword(name):
        return f"'{name}' cannot name a free symbol: SymPy or Python gives it a meaning; use another name, e.g. '{name}0'"
    return None


def name_problem(name: str, what: str) -> str | None:
    """Why ``name`` is not a valid identifier (tensor, parameter, module, argument names), or None.
    ``fullmatch``: a name ending in a newline is not a name."""
    if IDENT_RE.fullmatch(name):
        return None
    if not name.isascii():
        folded = unicodedata.normalize("NFKC", name)
        if folded != name and IDENT_RE.fullmatch(folded):
            return f"'{name}' looks like '{folded}' but is written with other Unicode characters; write plain ASCII"
    return f"{show_text(name)} is not a valid {what}; use letters, digits and _"


def show_text(name: str) -> str:
    """``'name'`` quoted, control characters escaped (a trailing newline shows as ``\\n``)."""
    return "'" + name.encode("unicode_escape").decode("ascii").replace("'", "\\'") + "'" if not name.isprintable() \
        else f"'{name}'"


# ----------------------------------------------------------------------------- YAML values

def parse_number(node: YNode, what: str) -> Fraction:
    """A number from a YAML scalar: ``0.3``, ``"1/4"``, ``-2``."""
    if isinstance(node, YScalar) and node.kind in ("int", "float", "str"):
        try:
            return read_number(node.text)
        except NonFinite:
            raise ProblemError(node.loc, f"{what} '{node.text}' is not a finite number; infinities and NaN cannot be "
                                         "written exactly") from None
        except NumberRefused as exc:
            raise ProblemError(node.loc, f"{what}: {exc}") from None
        except NotANumber:
            pass
    raise ProblemError(node.loc, f"{what} must be a number such as 0.3 or \"1/4\", not {show(node)}")


def parse_int(node: YNode, what: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer from a YAML int scalar (``3``, not ``3.0`` or ``"3"``), optionally bounded."""
    if not (isinstance(node, YScalar) and node.kind == "int"):
        raise ProblemError(node.loc, f"{what} must be an integer, not {show(node)}")
    try:
        value = read_number(node.text)
    except (NumberRefused, NotANumber) as exc:
        raise ProblemError(node.loc, f"{what}: {exc}") from None
    if value.denominator != 1:
        raise ProblemError(node.loc, f"{what} must be an integer, not {node.text}")
    n = int(value)
    if minimum is not None and n < minimum:
        raise ProblemError(node.loc, f"{what} must be at least {minimum}, not {n}")
    if maximum is not None and n > maximum:
        raise ProblemError(node.loc, f"{what} must be at most {maximum}, not {n}")
    return n


def show(node: YNode) -> str:
    if isinstance(node, YScalar):
        if node.kind in ("int", "float") and ":" in node.text:   # 1:30 -- YAML 1.1's base 60, which we do not read
            return f"{show_text(node.text)} (a YAML 1.1 base-60 number, which adjoint does not read: write it in decimal)"
        return show_text(node.text) if node.kind == "str" else kind_name(node)
    return kind_name(node)


def parse_literal(node: YNode, what: str, booleans: bool = False, infinities: bool = False) -> Literal:
    """A tensor literal: number, nested list, free symbol, ``{value: L, scale: S}``, or a side
    file ``{file: NAME.npy}`` / ``{file: NAME.safetensors, key: TENSOR}`` (adjoint.format.sidefiles).
    ``infinities``: ``-inf`` / ``inf`` elements are allowed (a tensor declaration's, checked
    further by its caller); elsewhere (a grad_output, a Dropout mask, a complex part) refused."""
    lit = _parse_literal(node, what, booleans)
    if not infinities and infinite_items(lit):
        raise ProblemError(lit.loc, f"{what} holds an infinity; -inf and inf are modelled only in the tensors of "
                                    "inputs:, targets: and buffers that do not require grad (a float mask)")
    return lit


def _parse_literal(node: YNode, what: str, booleans: bool) -> Literal:
    if isinstance(node, YMap) and node.get("file") is not None:
        return _side_file(node, what)
    if isinstance(node, YMap):
        allowed = ("value", "scale")
        for key, _ in node.entries:
            if key.text in ("imag", "dtype") and what.startswith(("backward.grad_output", "a grad_outputs")):
                raise ProblemError(key.loc, f"a complex {what} is not modelled yet (only a real one, in the problem's "
                                            "dtype); backpropagate a real loss: of the complex tensors instead")
            if key.text not in allowed:
                raise ProblemError(key.loc, f"unknown key '{key.text}' in {what} (allowed: value, scale)")
        if node.get("value") is None:
            raise ProblemError(node.loc, f"{what} is missing the required key 'value'; write {{value: [...]}} with the "
                                         "tensor literal")
        inner = _parse_literal(node.get("value"), what, booleans)
        scale_node = node.get("scale")
        if scale_node is None:
            return replace(inner, loc=node.loc)
        scale = parse_number(scale_node, f"the scale of {what}")
        # the scale multiplies exactly: a written -0.0 times a negative scale is +0.0, as in IEEE
        negzero = inner.negzero if scale >= 0 else ()
        if isinstance(inner.items, FileItems):
            return Literal(inner.shape, inner.items.scaled(scale), node.loc, negzero=negzero)
        if scale == 0 and infinite_items(inner):
            raise ProblemError(scale_node.loc, f"the scale of {what} is 0 and the literal holds an infinity: 0 * inf "
                                               "is nan, which a tensor literal cannot hold")
        items = tuple(e * scale if isinstance(e, Fraction) else
                      Infinite(e.negative != (scale < 0)) if isinstance(e, Infinite) else
                      Sym(e.name, e.coeff * scale) for e in inner.items)
        return Literal(inner.shape, items, node.loc, negzero=negzero)
    items: list[Element] = []
    negative_zeros: list[int] = []
    shape = _literal_shape(node, what, items, booleans, negative_zeros)
    return Literal(shape, tuple(items), node.loc, negzero=tuple(negative_zeros))


def _side_file(node: YMap, what: str) -> Literal:
    """``{file: NAME, key: TENSOR}``: the tensor stored next to the problem file."""
    for key, _ in node.entries:
        if key.text not in ("file", "key"):
            raise ProblemError(key.loc, f"unknown key '{key.text}' in the side file of {what} (allowed: file, key)")
    spec = {}
    for name in ("file", "key"):
        v = node.get(name)
        if v is None:
            continue
        if not (isinstance(v, YScalar) and v.kind == "str" and v.text.strip()):
            right = "a file name such as weights.npy" if name == "file" else "a tensor name such as fc1.weight"
            raise ProblemError(v.loc, f"{name} of the side file of {what} must be {right}, not {show(v)}")
        spec[name] = v.text.strip()
    shape, items = read_side_file(node.get("file").loc, spec, what)
    return Literal(shape, items, node.loc, negzero=items.negzero)


def _literal_shape(node: YNode, what: str, out: list[Element], booleans: bool, neg: list[int]) -> tuple[int, ...]:
    """Shape of a nested list, appending its elements (row-major) to ``out`` and the positions of
    those written -0.0 to ``neg`` (nesting is bounded by the loader's depth limit)."""
    if isinstance(node, YSeq):
        if type(node) is YNumberRow and node.texts and len(out) + len(node.texts) <= MAX_ELEMENTS:
            row = _number_row(node.texts, node.kinds)   # a row of plain numbers, no node per number
            if row is not None:
                _negative_zeros(node.texts, row, len(out), neg)
                out.extend(row)
                return (len(row),)
        if not node.items:
            raise ProblemError(node.loc, f"{what} has an empty list, a dimension of size 0: zero-size tensors are not "
                                         "modelled; give every dimension at least one element")
        items = node.items
        if len(out) + len(items) <= MAX_ELEMENTS and all(type(item) is YScalar for item in items):
            row = [_element(item, what, booleans) for item in items]   # a row of numbers: what the loop below does
            _negative_zeros([item.text for item in items], row, len(out), neg)
            out.extend(row)
            return (len(items),)
        shapes = []
        for item in node.items:
            s = _literal_shape(item, what, out, booleans, neg)
            if shapes and s != shapes[0]:
                raise ProblemError(item.loc, f"{what} is ragged: this entry has shape {list(s)} but the first "
                                             f"has shape {list(shapes[0])}; every row needs the same length")
            shapes.append(s)
            if len(out) > MAX_ELEMENTS:
                raise ProblemError(node.loc, f"{what} has more than {MAX_ELEMENTS} elements; problem files "
                                             "describe small models")
        return (len(node.items),) + shapes[0]
    if isinstance(node, YMap):
        raise ProblemError(node.loc, f"{what}: a mapping cannot be a tensor element; use numbers or nested lists")
    assert isinstance(node, YScalar)
    value = _element(node, what, booleans)
    _negative_zeros([node.text], [value], len(out), neg)
    out.append(value)
    return ()


def _negative_zeros(texts: list[str], values: list[Element], start: int, neg: list[int]) -> None:
    """Append to ``neg`` the positions (from ``start``) of the zeros written as a negative float:
    ``-0.0``, ``-.0``, ``-0e0`` are Python's -0.0, which ``torch.tensor`` keeps; ``-0`` and
    ``-0x0`` are the int 0, and a fraction ``-0/1`` is 0 too."""
    zeros = {text for text in set(texts) if _negative_zero_text(text)}   # a row repeats its few texts
    if zeros:
        neg.extend(start + i for i, text in enumerate(texts)
                   if text in zeros and type(values[i]) is Fraction and not values[i])


def _negative_zero_text(text: str) -> bool:
    """``text`` is a zero written as a negative decimal with a point or an exponent (``-0.0``, ``-.0e3``)."""
    t = text.strip()
    if t[:2] not in ("-0", "-.") or t.partition("e")[0].partition("E")[0].strip("-.0") \
            or not any(c in t for c in ".eE"):
        return False   # (a digit other than 0 before the exponent: not a zero)
    return _DECIMAL.fullmatch(t) is not None


def _number_row(texts: list[str], kinds: list[str]) -> list[Fraction] | None:
    """The elements of a row of plain numbers, as :func:`_element` reads each; None when a
    text is anything else (a symbol, a boolean, a refused number: the row is read item by
    item, which says what is wrong where)."""
    values = {}
    for text, kind in set(zip(texts, kinds)):
        if kind not in ("int", "float", "str"):
            return None
        try:
            values[text] = read_number(text)
        except (NonFinite, NumberRefused, NotANumber):
            return None
    return list(map(values.__getitem__, texts))


_INFINITY = re.compile(r"([+-]?)\.?inf(?:inity)?", re.IGNORECASE)


def infinity_of(text: str) -> Infinite | None:
    """``-inf``, ``inf``, ``+inf``, ``-.inf`` (YAML's), ``-Infinity``: the infinite element; None
    for anything else (``nan`` stays refused: no mask holds it)."""
    m = _INFINITY.fullmatch(text.strip())
    return Infinite(m.group(1) == "-") if m else None


def infinite_items(lit: Literal) -> bool:
    """The literal holds ``inf`` or ``-inf`` somewhere (a side file never does: its items are numbers)."""
    if "infinite" not in lit.memo:
        lit.memo["infinite"] = isinstance(lit.items, tuple) and any(type(e) is Infinite for e in lit.items)
    return lit.memo["infinite"]


def _element(node: YScalar, what: str, booleans: bool = False) -> Element:
    if node.kind == "bool" and booleans:  # a dtype: bool tensor: True / False are 1 and 0
        return Fraction(int(node.text.lower() in ("true", "yes", "on", "y")))
    if node.kind in ("int", "float", "str"):
        try:
            return read_number(node.text)
        except NonFinite as exc:
            infinite = infinity_of(node.text)
            if infinite is not None:
                return infinite
            raise ProblemError(node.loc, f"{what}: {exc}; tensors here hold numbers, fractions like \"1/4\", "
                                         "symbol names or -inf / inf") from None
        except NumberRefused as exc:
            raise ProblemError(node.loc, f"{what}: {exc}") from None
        except NotANumber:
            pass
    if node.kind == "str":
        name = node.text.strip()
        why = symbol_name_problem(name)
        if why is None:
            return Sym(name)
        if SYMBOL_RE.fullmatch(name) or not name.isascii() or name.startswith("_"):
            raise ProblemError(node.loc, f"{what}: {why}")
    raise ProblemError(node.loc, f"{what}: {show(node)} is not a number, a fraction like \"1/4\" or a symbol name")


# ----------------------------------------------------------------------------- dtype checks

def check_integer(decl: TensorDecl, overflow_ok: bool = False) -> None:
    """An integer tensor: ``dtype: int64`` (:func:`check_int64`) or ``dtype: bool``, whose
    elements are true / false (or 1 / 0). ``overflow_ok``: an int64 element beyond int64's range
    is PyTorch's error where the script makes the tensor (an input's), not refused here."""
    if infinite_items(decl.value):
        raise ProblemError(decl.value.loc, f"the {decl.dtype} tensor '{decl.name}' holds an infinity; "
                                           + ("write true or false" if decl.dtype == "bool" else
                                              "int64 tensors hold integers"))
    if decl.dtype != "bool":
        check_int64(decl, overflow_ok)
        return
    for i, e in enumerate(decl.value.items):
        if not (isinstance(e, Fraction) and e in (0, 1)):
            shown = e.name if isinstance(e, Sym) else e
            raise ProblemError(decl.value.loc, f"the bool tensor '{decl.name}' holds {shown} at element "
                                               f"{_index(i, decl.value.shape)}; write true or false")


def within_int64(items) -> bool:
    """Every element of an int64 literal (integers) is in int64's range."""
    if isinstance(items, FileItems) and items.den == 1 and items.num.dtype != object:
        return True
    return all(-2 ** 63 <= e < 2 ** 63 for e in items)


def check_int64(decl: TensorDecl, overflow_ok: bool = False) -> None:
    """An int64 tensor (``dtype: int64``) holds integers in int64's range, no symbols (beyond the
    range: refused unless ``overflow_ok``)."""
    items = decl.value.items
    if isinstance(items, FileItems) and items.den == 1 and items.num.dtype != object:
        return  # integers read from an integer array: in int64's range by construction
    for i, e in enumerate(items):
        where = f"element {_index(i, decl.value.shape)}"
        if isinstance(e, Sym):
            raise ProblemError(decl.value.loc, f"the int64 tensor '{decl.name}' holds the symbol '{e.name}' at {where}; "
                                               "int64 tensors hold integers")
        if e.denominator != 1:
            raise ProblemError(decl.value.loc, f"the int64 tensor '{decl.name}' holds {e} at {where}; int64 tensors "
                                               "hold integers")
        if not -2 ** 63 <= e < 2 ** 63 and not overflow_ok:
            raise ProblemError(decl.value.loc, f"the int64 tensor '{decl.name}' holds {e} at {where}, beyond int64: "
                                               "PyTorch raises ValueError 'Overflow when unpacking long long' (a "
                                               "buffer's, not modelled; an input's or a target's is answered)")


def check_range(decl: TensorDecl, dtype: str) -> None:
    """Refuse a nonzero element below the dtype's smallest normal number: PyTorch would hold a
    denormal (or 0) and the exact prediction would not be what torch computes. (Integer
    tensors are checked by :func:`check_int64`.)"""
    if decl.dtype in ("int64", "bool"):
        return
    floor = SMALLEST_NORMAL[dtype]
    items = decl.value.items
    if isinstance(items, FileItems):
        values = np.abs(items.floats())
        small = (values > 0) & (values < float(floor))
        if not small.any():
            return
        items = [Fraction(0)] * int(np.argmax(small)) + [items[int(np.argmax(small))]]
    floor_den = floor.denominator   # floor is 1/2**k: a nonzero e with a smaller denominator is >= 1/den > floor
    distinct = {id(e): e for e in items}.values()   # a literal repeats its numbers (read_number memoises them)
    if not any(isinstance(e, Fraction) and e and e.denominator >= floor_den and abs(e) < floor for e in distinct):
        return
    for i, e in enumerate(items):
        if isinstance(e, Fraction) and e and e.denominator >= floor_den and abs(e) < floor:
            raise ProblemError(decl.value.loc, f"the literal of '{decl.name}' has {float(e):.2g} at element "
                                               f"{_index(i, decl.value.shape)}, below {dtype}'s smallest normal "
                                               f"number (about {_SMALLEST_TEXT[dtype]}): PyTorch holds a denormal or "
                                               "0 there; use larger values"
                                               + (" or dtype: float64" if dtype == "float32" else ""))


def check_symbol_value(name: str, value: Fraction, dtype: str, loc: Loc) -> None:
    """A symbol's bound value becomes a tensor element in verify: the same floor applies."""
    if value and abs(value) < SMALLEST_NORMAL[dtype]:
        raise ProblemError(loc, f"symbol '{name}' is {float(value):.2g}, below {dtype}'s smallest normal number "
                                f"(about {_SMALLEST_TEXT[dtype]}): PyTorch holds a denormal or 0; use a larger value")


def _index(flat: int, shape: tuple[int, ...]) -> list[int]:
    out = []
    for n in reversed(shape):
        out.append(flat % n)
        flat //= n
    return list(reversed(out))
