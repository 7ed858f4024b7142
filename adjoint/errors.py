"""The one error type a user ever sees: a problem-file (or command-line) mistake at a location."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Loc:
    """A position in a problem file; line and col are 1-based, as editors show them."""

    file: str
    line: int
    col: int

    def shifted(self, dline: int, col: int | None = None, dcol: int = 0) -> "Loc":
        return Loc(self.file, self.line + dline, (self.col if col is None else col) + dcol)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class ProblemError(Exception):
    """Bad input. Rendered as exactly one line: ``FILE:LINE:COL: what is wrong; what would be right``."""

    def __init__(self, loc: Loc | None, message: str):
        super().__init__(message)
        self.loc = loc
        self.message = message

    def line(self) -> str:
        text = " ".join(self.message.split())  # one line, always
        return f"{self.loc}: {text}" if self.loc is not None else text

    def __str__(self) -> str:
        return self.line()
