"""adjoint: predict, exactly, what every PyTorch backward hook is handed, and prove it.

    >>> import adjoint
    >>> problem = adjoint.load("problems/slinear.yaml")
    >>> prediction = problem.solve()
    >>> prediction.variant("full").hook_calls[0].args["grad_output"]

Nothing here imports torch; :mod:`adjoint.torchside` does, and only ``verify``, ``import``
and :func:`from_module` load it.
"""

from __future__ import annotations

from adjoint.api import Problem, from_module, from_module_text, load, loads
from adjoint.format.errors import Loc, ProblemError

__all__ = ["load", "loads", "from_module", "from_module_text", "Problem", "ProblemError", "Loc"]
__version__ = "0.1.0"
