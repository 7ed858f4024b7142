"""adjoint: predict, exactly, what every PyTorch backward hook is handed, and prove it.

    >>> import adjoint
    >>> problem = adjoint.load("problems/slinear.yaml")
    >>> prediction = problem.solve()
    >>> prediction.variant("full").hook_calls[0].args["grad_output"]

Nothing here imports torch; :mod:`adjoint.torchside` does, and only ``verify``, ``import``
and :func:`from_module` load it.
"""

from __future__ import annotations

from adjoint.format.errors import Loc, ProblemError
from adjoint.format.problem import Problem

__all__ = ["load", "loads", "from_module", "from_module_text", "Problem", "ProblemError", "Loc"]
__version__ = "0.1.0"


def load(path: str) -> Problem:
    """Read and validate a problem file (bad input: one located :class:`ProblemError`, or
    :class:`~adjoint.format.errors.ProblemErrors` listing every mistake found). Mistakes only running
    the model can reveal (an unknown name in a forward, shapes that do not match) surface when
    it is solved."""
    from adjoint.format.loader import read_yaml
    from adjoint.format.validate import build_problem

    return build_problem(read_yaml(path), path)


def loads(text: str, name: str = "<string>") -> Problem:
    """Like :func:`load`, from YAML text (handy in notebooks and tests)."""
    from adjoint.format.loader import parse_yaml_text
    from adjoint.format.validate import build_problem

    return build_problem(parse_yaml_text(text, name), name)


def from_module(model, *example_inputs, loss: str = "sum(y)", name: str = "imported") -> Problem:
    """The problem ``adjoint import`` would write for ``model`` (an ``nn.Module``) called on
    ``example_inputs`` (tensors: their values exactly, each ``requires_grad: true``), loaded:
    ``adjoint.from_module(model, x).solve()``. The module is traced, not changed (docs/import.md)."""
    from adjoint.torchside.importer import from_module as build

    return build(model, *example_inputs, loss=loss, name=name)


def from_module_text(model, *example_inputs, loss: str = "sum(y)", name: str = "imported") -> str:
    """Like :func:`from_module`, the problem file's YAML text (to save, edit, ``loads``)."""
    from adjoint.torchside.importer import from_module_text as build

    return build(model, *example_inputs, loss=loss, name=name)
