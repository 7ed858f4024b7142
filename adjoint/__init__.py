"""adjoint: predict, exactly, what every PyTorch backward hook is handed, and prove it.

    >>> import adjoint
    >>> problem = adjoint.load("problems/slinear.yaml")
    >>> prediction = problem.solve()
    >>> prediction.variant("full").hook_calls[0].args["grad_output"]

Nothing here imports torch; :mod:`adjoint.torchside` does, and only ``verify`` loads it.
"""

from __future__ import annotations

from .errors import Loc, ProblemError
from .problem import Problem

__all__ = ["load", "loads", "Problem", "ProblemError", "Loc"]
__version__ = "0.1.0"


def load(path: str) -> Problem:
    """Read and validate a problem file (bad input: one located :class:`ProblemError`, or
    :class:`~adjoint.errors.ProblemErrors` listing every mistake found). Mistakes only running
    the model can reveal (an unknown name in a forward, shapes that do not match) surface when
    it is solved."""
    from .loader import read_yaml
    from .validate import build_problem

    return build_problem(read_yaml(path), path)


def loads(text: str, name: str = "<string>") -> Problem:
    """Like :func:`load`, from YAML text (handy in notebooks and tests)."""
    from .loader import parse_yaml_text
    from .validate import build_problem

    return build_problem(parse_yaml_text(text, name), name)
