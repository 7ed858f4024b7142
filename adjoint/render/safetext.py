"""Text from a problem file made safe to show on a terminal.

A problem file is shared data: its labels, descriptions and names (and the file names a user
types) can hold an ESC sequence that recolours, retitles or rewrites the terminal, a bidi
override that shows text in another order than it is (``\\u202e``), or a newline that splits a
one-line error into two. :func:`terminal_safe` shows every such character as an escape
instead, the way Python writes it in a string literal:

* C0 controls, DEL and C1 controls (U+0000-001F, U+007F-009F): ``\\x1b``, ``\\n``, ``\\t``;
* bidi embeddings, overrides and isolates (U+202A-202E, U+2066-2069), the directional marks
  (U+200E, U+200F, U+061C) and the line and paragraph separators (U+2028, U+2029): ``\\u202e``;
* lone surrogates (U+D800-DFFF; a Python string can hold them, no terminal encoding can):
  ``\\ud800``.

Everything else, accents, Greek, CJK and emoji included, passes through unchanged. A
backslash is not doubled: the point is that what the terminal shows is what the file says,
not that the escape can be read back.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_UNSAFE_KEEP_NEWLINES = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e"
                                   "\u2066-\u2069\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(match: re.Match) -> str:
    ch = match.group()
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str, keep_newlines: bool = False) -> str:
    """``text`` with every control, bidi and surrogate character shown as an escape.

    ``keep_newlines`` leaves ``\\n`` alone, for a multi-line report whose line breaks are our
    own (each piece of user text in it must then be escaped on its own first, or be known to
    hold no newline)."""
    text = str(text)
    pattern = _UNSAFE_KEEP_NEWLINES if keep_newlines else _UNSAFE
    if pattern.search(text) is None:
        return text
    return pattern.sub(_escape, text)
