"""``assert EXPR`` / ``assert not EXPR`` in a program of the file: Python's own statement.

A failing assert is CPython's ``AssertionError`` with an empty message (or the string literal
the statement gives, ``assert EXPR, "text"``: ``str()`` of the error is that text), raised where the
statement runs: an answer (the contract's ``error``), not bad input. The test is a Python bool
(``x.requires_grad``, a comparison of Python numbers), a number, or a bool or int64 tensor's
one element (``assert torch.isfinite(grad).all()``: the interpreter takes its truth value as an
``if`` does); a float tensor's truth value is not modelled (refused at the line).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format import syntax as S
from adjoint.format.errors import ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.torch_errors import TorchError


def run_assert(value, stmt: S.Assert) -> None:
    """Raise Python's AssertionError when ``stmt`` fails for its test's ``value``."""
    if isinstance(value, Tensor) or not isinstance(value, (bool, int, Fraction, float, type(None))):
        what = "a tensor" if isinstance(value, Tensor) else f"a {type(value).__name__}"
        raise ProblemError(stmt.loc, f"'{S.stmt_source(stmt)}': the truth value of {what} in an assert is not "
                                     "modelled; assert a Python bool, as in 'assert x.requires_grad'")
    if bool(value) == stmt.negated:
        raise TorchError("AssertionError", stmt.message or "", "python")
