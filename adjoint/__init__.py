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


def load(path: str, check: bool = True) -> Problem:
    """Read and validate a problem file. With ``check``, every variant is traced too, so
    name, shape and hook mistakes surface here as one located ProblemError."""
    from .loader import read_yaml
    from .validate import build_problem

    from ._v1compat import problem as _v2
    return _v2(build_problem(read_yaml(path), path))


def loads(text: str, name: str = "<string>", check: bool = True) -> Problem:
    """Like :func:`load`, from YAML text (handy in notebooks and tests)."""
    from ._v1compat import problem as _v2
    from .loader import parse_yaml_text
    from .validate import build_problem

    return _v2(build_problem(parse_yaml_text(text, name), name))
