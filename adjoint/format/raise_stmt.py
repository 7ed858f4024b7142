"""A forward's ``raise TYPE("message")`` line (a forward that raises, as PyTorch tests'
``FailsInForwardModel`` does): parsed from the AST, never evaluated. The forward stops there
with that error, which ``_call_impl`` handles as any error of a forward (``always_call``
forward hooks still run), and the variant's answer is the error."""

from __future__ import annotations

import ast

from adjoint.format.errors import Loc, ProblemError
from adjoint.format.syntax import RAISABLE, Raise


def parse_raise(stmt: ast.Raise, loc: Loc, what: str) -> Raise:
    exc = stmt.exc
    shape = (f"{what}: write raise TYPE(\"message\") with TYPE one of {', '.join(RAISABLE)} and one string "
             "literal (or none)")
    if stmt.cause is not None or exc is None:
        raise ProblemError(loc, shape)
    if isinstance(exc, ast.Name):
        name, args = exc.id, []
    elif isinstance(exc, ast.Call) and isinstance(exc.func, ast.Name) and not exc.keywords:
        name, args = exc.func.id, exc.args
    else:
        raise ProblemError(loc, shape)
    if name not in RAISABLE:
        raise ProblemError(loc, f"{what}: raise {name} is not offered; {shape.split(': ', 1)[1]}")
    if len(args) > 1 or (args and not (isinstance(args[0], ast.Constant) and isinstance(args[0].value, str))):
        raise ProblemError(loc, shape)
    return Raise(loc, name, args[0].value if args else "")
