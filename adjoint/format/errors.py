"""The one error type a user ever sees: a problem-file (or command-line) mistake at a location."""

from __future__ import annotations

from dataclasses import dataclass

#: At most this many mistakes of one file are listed (a line more says how many were left out).
MAX_REPORTED = 20


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

    def lines(self) -> list[str]:
        """The lines to print: one (a ProblemErrors: one per mistake)."""
        return [self.line()]

    def __str__(self) -> str:
        return self.line()


class ProblemErrors(ProblemError):
    """Several independent mistakes of one file, each one located line, in file order.

    Validation collects what it can check independently (keys, modules, hooks, variants)
    and raises this once at the end, so a user fixes a file in one round instead of one
    mistake per run. ``errors`` is the ordered list; ``loc`` and ``message`` are the first
    one's, so code that handles a single ProblemError keeps working; ``line()`` gives every
    line (at most :data:`MAX_REPORTED`, then one line saying how many more there are)."""

    def __init__(self, errors: list[ProblemError]):
        flat: list[ProblemError] = []
        for err in errors:
            flat.extend(err.errors if isinstance(err, ProblemErrors) else [err])
        unique: dict[object, ProblemError] = {}
        for err in flat:  # one line per place: a mistake in a YAML alias is seen once per use
            unique.setdefault(err.loc if err.loc is not None else err.message, err)
        self.errors = sorted(unique.values(), key=_file_order)
        if not self.errors:
            raise ValueError("ProblemErrors needs at least one error")
        super().__init__(self.errors[0].loc, self.errors[0].message)

    def line(self) -> str:
        return "\n".join(self.lines())

    def lines(self) -> list[str]:
        shown = [e.line() for e in self.errors[:MAX_REPORTED]]
        rest = self.errors[MAX_REPORTED:]
        if rest:
            more = ProblemError(rest[0].loc, f"{len(rest)} more error{'s' if len(rest) > 1 else ''} not shown "
                                             f"(at most {MAX_REPORTED} are listed); fix these first")
            shown.append(more.line())
        return shown


def _file_order(err: ProblemError) -> tuple:
    loc = err.loc
    return (0, "", 0, 0) if loc is None else (1, loc.file, loc.line, loc.col)


def raise_all(errors: list[ProblemError]) -> None:
    """Raise the collected errors: nothing when there are none, the error itself when there is
    one, else :class:`ProblemErrors`."""
    if not errors:
        return
    combined = ProblemErrors(errors)
    if len(combined.errors) == 1:
        raise combined.errors[0]
    raise combined
