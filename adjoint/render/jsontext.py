"""JSON text for ``--json``: always strict JSON, written fast.

Python's ``json`` writes ``NaN``, ``Infinity`` and ``-Infinity`` for non-finite floats, which
no JSON parser has to accept (``jq``, JavaScript's ``JSON.parse`` and Go refuse them). A
prediction's decimal ``value`` is infinite where PyTorch overflows, and torch's observed
values can be NaN; :func:`dumps` writes those floats as the strings ``"inf"``, ``"-inf"`` and
``"nan"`` (the ``exact`` field next to them says the same in its own words). The objects'
own ``to_json()`` keep Python floats; the conversion happens here, when text is made.

With an indent, :func:`dumps` writes exactly what ``json.dumps(doc, indent=...)`` writes,
but a list of plain numbers or strings (a tensor's row: most of a prediction's text) is one
``str.join`` instead of one Python-level step per element: ``json``'s C encoder is not used
with an indent, and its Python encoder took a second on a 7 MB prediction.
"""

from __future__ import annotations

import json
import math
from json.encoder import encode_basestring_ascii as _quote

_FLOAT_REPR = float.__repr__
_INT_REPR = int.__repr__


#: the characters json writes as they are inside a string (printable ASCII but the quote and the
#: backslash): a list of strings made only of them is quoted by concatenation
_PLAIN = bytes(c for c in range(0x20, 0x7F) if c not in b'"\\')

#: how many pieces :func:`dump` gathers before handing their text to ``write``
SPILL_PARTS = 2048
#: characters of deferred values' text :func:`dump` keeps to write again (see ``_Writer.deferred``)
MEMO_CHARS = 32_000_000


def dumps(doc, indent: int | None = 2) -> str:
    """``doc`` as strict JSON text, non-finite floats written as "inf", "-inf", "nan". With an
    indent, a callable in ``doc`` stands for the value it returns (see :func:`dump`)."""
    if indent is None:
        try:
            return json.dumps(doc, indent=None, allow_nan=False)
        except ValueError:  # a non-finite float somewhere: the rare case pays for a second pass
            return json.dumps(finite(doc), indent=None, allow_nan=False)
    parts: list[str] = []
    _Writer(" " * indent if isinstance(indent, int) else str(indent), parts).value(doc, 0)
    return "".join(parts)


def dump(doc, write, indent: int = 2) -> None:
    """Write the text ``dumps(doc, indent)`` makes, in pieces, by calling ``write(str)``.

    A callable in ``doc`` (a ``Prediction.to_json(lazy=True)``'s tensor lists) is called when
    the writer reaches it and its result written and dropped: a big answer's text and its
    lists of numbers are never all in memory at once, one tensor's at a time."""
    parts: list[str] = []
    _Writer(" " * indent if isinstance(indent, int) else str(indent), parts, write).value(doc, 0)
    if parts:
        write("".join(parts))


def finite(doc):
    """A copy of ``doc`` (dicts, lists, tuples, scalars) with non-finite floats as strings."""
    if isinstance(doc, float):
        if math.isfinite(doc):
            return doc
        return "nan" if math.isnan(doc) else ("inf" if doc > 0 else "-inf")
    if isinstance(doc, dict):
        return {k: finite(v) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [finite(v) for v in doc]
    return doc


def _scalar(v) -> str:
    t = type(v)
    if t is str:
        return _quote(v)
    if t is float:
        if v != v:
            return '"nan"'
        if v in (math.inf, -math.inf):
            return '"inf"' if v > 0 else '"-inf"'
        return _FLOAT_REPR(v)
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return _INT_REPR(v)
    if isinstance(v, float):
        return _scalar(float(v))
    if isinstance(v, str):
        return _quote(str(v))
    raise TypeError(f"Object of type {type(v).__name__} is not JSON serializable")


def _key(k) -> str:
    if isinstance(k, str):
        return _quote(k)
    if k is True or k is False or k is None or isinstance(k, (int, float)):
        return _quote(_scalar(k).strip('"'))
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(k).__name__}")


class _Writer:
    """Appends the text of a value at a nesting level, as json's indenting encoder lays it out."""

    def __init__(self, unit: str, parts: list[str], write=None):
        self.unit = unit
        self.parts = parts
        self.write = write   # None: keep every piece (dumps); else hand them on now and then (dump)
        self.memo: dict = {}   # a deferred value's text_key -> (its text, the level it was written at)
        self.memo_chars = 0

    def spill(self) -> None:
        """Hand the pieces gathered so far to ``write`` (dump), when there are enough of them."""
        if self.write is not None and len(self.parts) >= SPILL_PARTS:
            self.write("".join(self.parts))
            self.parts.clear()

    def value(self, v, level: int) -> None:
        t = type(v)
        if t is dict:
            self.mapping(v, level)
        elif t is list or t is tuple:
            self.sequence(v, level)
        elif t is not str and t is not float and callable(v):   # a deferred value: made now, written, dropped
            key = getattr(v, "text_key", None)
            if key is None:
                self.value(v(), level)
            else:
                self.deferred(v, key, level)
        else:
            self.parts.append(_scalar(v))

    def deferred(self, v, key, level: int) -> None:
        """A deferred value that names its text (``text_key``: the same tensor's same list,
        wherever it appears): made and written once, its text kept (up to :data:`MEMO_CHARS`
        in all) and written again, re-indented, where it appears again. Its text has no line
        break but the layout's: json escapes one inside a string."""
        hit = self.memo.get(key)
        if hit is not None:
            text, at = hit
            if at < level:
                text = text.replace("\n", "\n" + self.unit * (level - at))
            elif at > level:
                text = text.replace("\n" + self.unit * (at - level), "\n")
            self.parts.append(text)
            return
        sub = _Writer(self.unit, [])
        sub.value(v(), level)
        text = "".join(sub.parts)
        if self.memo_chars + len(text) <= MEMO_CHARS:
            self.memo[key] = (text, level)
            self.memo_chars += len(text)
        self.parts.append(text)

    def mapping(self, d: dict, level: int) -> None:
        if not d:
            self.parts.append("{}")
            return
        inner = "\n" + self.unit * (level + 1)
        out = self.parts
        out.append("{")
        first = True
        for k, v in d.items():
            out.append(inner if first else "," + inner)
            first = False
            out.append(_key(k))
            out.append(": ")
            self.value(v, level + 1)
            self.spill()
        out.append("\n" + self.unit * level + "}")

    def sequence(self, items, level: int) -> None:
        if not items:
            self.parts.append("[]")
            return
        inner = "\n" + self.unit * (level + 1)
        flat = _flat_text(items, "," + inner)
        if flat is not None:
            self.parts.append("[" + inner + flat + "\n" + self.unit * level + "]")
            self.spill()
            return
        out = self.parts
        out.append("[")
        first = True
        for v in items:
            out.append(inner if first else "," + inner)
            first = False
            self.value(v, level + 1)
            self.spill()
        out.append("\n" + self.unit * level + "]")


def _flat_text(items, sep: str) -> str | None:
    """The joined text of a list of finite floats, of strings or of ints, or None for any other list.
    (float.__repr__ and the string quoting refuse anything else with a TypeError: no check per
    element is needed.)"""
    first = type(items[0])
    try:
        if first is float:
            text = sep.join(map(_FLOAT_REPR, items))
            return None if "n" in text else text  # 'inf' or 'nan': written as strings by the slow path
        if first is str:
            return _quoted_strings(items, sep)
        if first is int and set(map(type, items)) == {int}:   # a compact tensor's numerators (not bools)
            return sep.join(map(_INT_REPR, items))
    except TypeError:
        return None
    return None


def _quoted_strings(items, sep: str) -> str:
    """``sep.join(map(_quote, items))``: the same text, but a list whose strings need no escape
    (an exact tensor's "p/q" texts, thousands of digits each on a deep chain) is quoted by
    concatenation: json's C quoting reads about 60 MB/s, the check below several times that.
    A non-string element raises TypeError, as ``_quote`` does."""
    body = "".join(items)
    if body.isascii() and not body.encode("ascii").translate(None, _PLAIN):
        return '"' + ('"' + sep + '"').join(items) + '"'
    return sep.join(map(_quote, items))
