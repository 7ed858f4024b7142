"""Packing equations into the line: a :class:`Block` is the rows of one ``align*`` environment,
broken at relations, between summands (:class:`Terms`) and between the factors of a product;
:func:`sym_pieces` breaks a long SymPy sum into lines."""

from __future__ import annotations

from typing import TYPE_CHECKING

import sympy

from adjoint.render.latex.widths import LINE_EM, tex_width

if TYPE_CHECKING:
    from adjoint.render.latex.printer import DerivationPrinter


class Terms(list):
    """The summands of one side of an equation, broken across lines when the side is long."""


class Block:
    """The rows of one align* environment, packed to the line width.

    A row is ``lhs = seg = seg ...``; a segment that does not fit moves to a continuation line
    aligned at the relation; a :class:`Terms` segment may itself break between summands."""

    def __init__(self):
        self.rows: list[tuple[str, list]] = []

    def eq(self, lhs: str, *segs, rel: str = "=") -> "Block":
        items = [s for s in segs if s is not None and s != []]
        self.rows.append((lhs, [(rel if i == 0 else "=", s) for i, s in enumerate(items)]))
        return self

    def lines(self, lhs: str, pieces: list[str], rel: str = "=") -> "Block":
        """A right-hand side already split into lines (the first gets the relation)."""
        self.rows.append((lhs, [("\x00", [rel + " " + pieces[0]] + ["\\quad " + p for p in pieces[1:]])]))
        return self

    def render(self) -> str:
        if not self.rows:
            return ""
        lw = max(tex_width(lhs) for lhs, _ in self.rows)
        out: list[str] = []
        for lhs, items in self.rows:
            cur = f"{lhs} &"
            width = lw
            empty = True

            def put(piece: str, cont: str) -> None:
                nonlocal cur, width, empty
                w = tex_width(piece) + 0.3
                if not empty and width + w > LINE_EM:
                    out.append(cur.rstrip())
                    cur, width = cont, lw + (1.0 if "quad" in cont else 0.0)
                cur += " " + piece
                width += w
                empty = False

            for rel, content in items:
                if rel == "\x00":
                    for k, line in enumerate(content):
                        if k:
                            out.append(cur.rstrip())
                            cur = "&"
                        cur += " " + line
                    empty = False
                elif isinstance(content, Terms):
                    for k, term in enumerate(content):
                        if k == 0:
                            put(f"{rel} {term}", "&")
                        elif term.startswith("\x01"):
                            put(term[1:], "&\\quad")
                        elif term.startswith("-"):
                            put(f"- {term[1:].lstrip()}", "&\\quad")
                        else:
                            put(f"+ {term}", "&\\quad")
                else:
                    put(f"{rel} {content}", "&")
            out.append(cur.rstrip())
        return "\\begin{align*}\n" + " \\\\\n".join(out) + "\n\\end{align*}\n"


def sym_pieces(P: "DerivationPrinter", e, budget: float) -> list[str]:
    """A (possibly long) SymPy expression split at top-level + and - into lines of ``budget`` em."""
    tex = P.doprint(e)
    if tex_width(tex) <= budget or not isinstance(e, sympy.Add):
        return [tex]
    pieces: list[str] = []
    cur = ""
    for i, term in enumerate(e.as_ordered_terms()):
        if i == 0:
            t = P.doprint(term)
        elif term.could_extract_minus_sign():
            t = "- " + P.doprint(-term)
        else:
            t = "+ " + P.doprint(term)
        if cur and tex_width(cur + t) > budget:
            pieces.append(cur.strip())
            cur = ""
        cur += " " + t
    if cur.strip():
        pieces.append(cur.strip())
    return pieces
