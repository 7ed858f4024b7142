"""Keeping the document's lines short: TeX reads a source line into a buffer of 200,000
characters (``buf_size``) and stops with "Unable to read an entire line" past it -- a hook
label of 100,000 characters escaped is longer. A long line is broken after a space or a
closing brace (``\\}`` and ``\\ `` included: a control symbol ends there) with ``%`` and a
newline: TeX's comment swallows the newline, so the broken source typesets exactly as the
long line did (the document has no verbatim text)."""

from __future__ import annotations

#: the longest source line written
MAX_LINE = 50_000


def wrap(tex: str, limit: int = MAX_LINE) -> str:
    if all(len(line) <= limit for line in tex.split("\n")):
        return tex
    return "\n".join(_wrap_line(line, limit) for line in tex.split("\n"))


def _wrap_line(line: str, limit: int) -> str:
    pieces = []
    while len(line) > limit:
        cut = max(line.rfind(" ", 0, limit), line.rfind("}", 0, limit))
        if cut <= 0:   # no safe break point in the first `limit` characters: look further on
            spaces = [i for i in (line.find(" ", limit), line.find("}", limit)) if i > 0]
            if not spaces:
                break
            cut = min(spaces)
        pieces.append(line[:cut + 1] + "%")
        line = line[cut + 1:]
    pieces.append(line)
    return "\n".join(pieces)
