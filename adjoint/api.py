"""What ``import adjoint`` offers: :func:`load`, :func:`loads`, :func:`from_module`,
:func:`from_module_text`, and the :class:`Problem` they hand back, which solves itself.

This is the top of the layers (docs/architecture.md): a validated problem is a record of
:mod:`adjoint.format`, solving it is :mod:`adjoint.answer`'s, and showing the answer in a
notebook is :mod:`adjoint.render`'s; the conveniences that join them live here, so no layer
below has to reach up for them."""

from __future__ import annotations

from adjoint.format import problem as _format
from adjoint.format import validate as _validate


class Problem(_format.Problem):
    """A validated problem file: the model, the loss and the variants; ``.solve()`` answers it."""

    def solve(self, variant: str | None = None, numeric: bool = False, mode: str = "exact"):
        """Derive everything (exactly by default; ``mode`` ``"float64"`` or ``"structure"``: see
        docs/values.md); returns a :class:`adjoint.answer.prediction.Prediction`, shown as a
        table in a notebook (:mod:`adjoint.render.notebook`)."""
        from adjoint.answer.solve import solve_problem
        from adjoint.render.notebook import shown

        return shown(solve_problem(self, variant=variant, numeric=numeric, mode=mode))


def solvable(problem: _format.Problem) -> Problem:
    """The same validated record, as the :class:`Problem` that solves itself."""
    if isinstance(problem, Problem):
        return problem
    out = object.__new__(Problem)
    out.__dict__.update(vars(problem))
    return out


def load(path: str) -> Problem:
    """Read and validate a problem file (bad input: one located :class:`ProblemError`, or
    :class:`~adjoint.format.errors.ProblemErrors` listing every mistake found). Mistakes only running
    the model can reveal (an unknown name in a forward, shapes that do not match) surface when
    it is solved."""
    return solvable(_validate.load(path))


def loads(text: str, name: str = "<string>") -> Problem:
    """Like :func:`load`, from YAML text (handy in notebooks and tests)."""
    return solvable(_validate.loads(text, name))


def from_module(model, *example_inputs, loss: str = "sum(y)", name: str = "imported") -> Problem:
    """The problem ``adjoint import`` would write for ``model`` (an ``nn.Module``) called on
    ``example_inputs`` (tensors: their values exactly; a float input requires grad when the
    example does, as in PyTorch), loaded:
    ``adjoint.from_module(model, x).solve()``. The module is traced, not changed (docs/import.md)."""
    from adjoint.torchside.importer import from_module as build

    return solvable(build(model, *example_inputs, loss=loss, name=name))


def from_module_text(model, *example_inputs, loss: str = "sum(y)", name: str = "imported") -> str:
    """Like :func:`from_module`, the problem file's YAML text (to save, edit, ``loads``)."""
    from adjoint.torchside.importer import from_module_text as build

    return build(model, *example_inputs, loss=loss, name=name)
