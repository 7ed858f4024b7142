"""The one error ``adjoint import`` reports: what it cannot bring into a problem file, and where."""

from __future__ import annotations

from adjoint.format.errors import ProblemError


def refuse(where: str | None, what: str, instead: str) -> ProblemError:
    """``FILE:LINE: what; instead`` (no location prefix when the user's code has none to give)."""
    text = f"{what}; {instead}"
    return ProblemError(None, f"{where}: {text}" if where else text)
