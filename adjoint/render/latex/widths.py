"""How wide math LaTeX is on the page, estimated without running TeX.

:func:`tex_width` walks the LaTeX this package writes token by token (em of the 11pt body font,
calibrated against TeX's own measurements); :data:`LINE_EM` is the line everything is packed to;
:func:`_choose_columns` picks the columns of a wide matrix that fit (the rest elided with ``\\cdots``).
"""

from __future__ import annotations

import re

#: usable width of a display line, in em of the 11pt body font (text width is ~44em)
LINE_EM = 39.0


_CMD_WIDTH = {
    "lambda": 0.6, "ell": 0.45, "cdot": 0.8, "odot": 1.3, "top": 0.8, "ldots": 1.2, "cdots": 1.3,
    "vdots": 0.5, "ddots": 1.3, "quad": 1.0, "qquad": 2.0, ",": 0.17, ";": 0.28, ":": 0.22, "!": -0.17,
    "partial": 0.6, "sum": 1.1, "langle": 0.4, "rangle": 0.4, "lVert": 0.5, "rVert": 0.5, "left": 0.0,
    "right": 0.0, "infty": 1.0, "times": 1.3, "sigma": 0.6, "tanh": 1.9, "exp": 1.5, "log": 1.3,
    "sin": 1.3, "cos": 1.4, "sinh": 1.9, "cosh": 2.0, "tan": 1.4, "arctan": 2.6, "mathcal": 0.0, "tilde": 0.0, "bar": 0.0, "mathbf": 0.0, "mathrm": 0.0,
    "displaystyle": 0.0, "textstyle": 0.0, "nabla": 0.8, "to": 1.3, "le": 1.2, "ge": 1.2, "ne": 1.2,
    "equiv": 1.3, "approx": 1.3, "mapsto": 1.5, "gets": 1.3, "quad ": 1.0, "phantom": 0.0, "mathit": 0.0,
    "operatorname": 0.0, "mathtt": 0.0, "text": 0.0, "big": 0.0, "Big": 0.0, "hat": 0.0, "in": 1.0,
    "Phi": 0.8, "mathbb": 0.0, "underbrace": 0.0, "dots": 1.2, "colon": 0.4, "vert": 0.3, "mid": 0.6,
    "lbrack": 0.3, "rbrack": 0.3, "{": 0.5, "}": 0.5, "_": 0.5, "&": 0.0, "%": 0.0,
}
#: the one negative width (``\\!``), which bounds what the rest of a string can take off
_NEGATIVE = _CMD_WIDTH["!"]
_MARGIN = 1e-6
_TEXT_ARG = ("operatorname", "mathrm", "text", "mathtt", "mathit", "textrm", "texttt")


class _W:
    """A rough width estimate (em) of math LaTeX as this module writes it."""

    def __init__(self, s: str):
        self.s = s
        self.i = 0

    def group(self, scale: float) -> float:
        if self.i < len(self.s) and self.s[self.i] == "{":
            return tex_width(self._braced(escapes=True)) * scale
        # a single token
        start = self.i
        self.token_width()
        return tex_width(self.s[start:self.i]) * scale

    def raw_group(self) -> str:
        if self.i < len(self.s) and self.s[self.i] == "{":
            return self._braced(escapes=False)
        return ""

    def _braced(self, escapes: bool) -> str:
        """The text inside the brace group opening at ``self.i``; moves past its closing brace.
        With ``escapes``, a backslash hides the next character from the brace count."""
        s = self.s
        depth, j = 0, self.i
        while j < len(s):
            if s[j] == "{":
                depth += 1
            elif s[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            elif escapes and s[j] == "\\":
                j += 1
            j += 1
        inner = s[self.i + 1:j]
        self.i = j + 1
        return inner

    def token_width(self) -> float:
        s = self.s
        c = s[self.i]
        if c == "\\":
            m = re.match(r"\\([A-Za-z]+|.)", s[self.i:])
            name = m.group(1)
            self.i += len(m.group(0))
            if name in _TEXT_ARG:
                return len(self.raw_group()) * 0.52
            if name == "frac":
                a = self.group(1.0)
                b = self.group(1.0)
                return max(a, b) + 0.35
            if name == "sqrt":
                return self.group(1.0) + 0.9
            if name == "begin":
                env = self.raw_group()
                end = s.find("\\end{" + env + "}", self.i)
                body = s[self.i:end if end >= 0 else len(s)]
                self.i = (end + len("\\end{" + env + "}")) if end >= 0 else len(s)
                if env.startswith("aligned") or env.startswith("gathered"):
                    return max(tex_width(r) for r in body.split("\\\\"))
                return _matrix_width(body)
            if name in ("mathbf", "tilde", "bar", "hat", "mathcal", "mathbb", "phantom"):
                return self.group(1.0)
            if name in ("hspace", "hspace*"):
                self.raw_group()
                return 1.0
            return _CMD_WIDTH.get(name, 0.7)
        if c in "^_":
            self.i += 1
            return self.group(0.72)
        if c == "{":
            return self.group(1.0)
        self.i += 1
        if c.isdigit():
            return 0.5
        if c.isupper():
            return 0.72
        if c.isalpha():
            return 0.55
        if c == "=":
            return 1.35
        if c in "+-<>":
            return 1.25
        if c in ",;":
            return 0.35
        if c == ".":
            return 0.28
        if c in "()[]|/":
            return 0.4
        if c in " \n\t&~":
            return 0.0
        if c == "'":
            return 0.3
        return 0.6


def tex_width(s: str, limit: float | None = None) -> float:
    """Estimated width (em, 11pt) of a piece of math LaTeX. With ``limit``, the walk may stop once the
    width is known to exceed it, returning a number above ``limit`` (a width compared with ``limit``
    compares the same): the only negative width is ``\\!``'s (a group scales its contents by at most 1),
    so the rest of the string takes off at most its count of them times that width."""
    w = _W(s)
    total = 0.0
    n = len(s)
    while w.i < n:
        total += w.token_width()
        # the margin: a sum in another order may round the other way at a tie
        if limit is not None and total > limit + _MARGIN and total + _NEGATIVE * s.count("\\!", w.i) > limit + _MARGIN:
            return total + _NEGATIVE * s.count("\\!", w.i)
    return total


def _matrix_width(body: str) -> float:
    rows = [r for r in body.split("\\\\") if r.strip()]
    cols: list[float] = []
    for r in rows:
        for j, cell in enumerate(r.split("&")):
            cw = tex_width(cell) * 0.92 if "\\frac" in cell else tex_width(cell)
            if j >= len(cols):
                cols.append(cw)
            else:
                cols[j] = max(cols[j], cw)
    return sum(cols) + 0.95 * max(len(cols) - 1, 0) + 1.2


def _choose_columns(widths: list[float], budget: float, max_cols: int | None):
    """Which columns to show (None marks the elision) so that the matrix fits ``budget``."""
    n = len(widths)
    gap = 0.95

    def total(cols):
        w = sum(widths[j] if j is not None else 1.3 for j in cols)
        return w + gap * (len(cols) - 1) + 1.2

    full = list(range(n))
    if (max_cols is None or n <= max_cols) and total(full) <= budget:
        return full
    best = None
    for shown in range(n - 1, 0, -1):
        if max_cols is not None and shown + 1 > max_cols + 1:
            continue
        head = (shown + 1) // 2
        tail = shown - head
        cols = list(range(head)) + [None] + list(range(n - tail, n))
        if total(cols) <= budget:
            best = cols
            break
    return best
