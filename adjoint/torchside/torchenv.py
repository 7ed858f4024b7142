"""The PyTorch a command runs against, as an environment fact rather than a bug: torch missing,
torch installed but failing to import, torch another release than the one predictions follow.

Nothing here imports torch (``find_spec`` only locates it). ``verify`` and ``import`` import
:mod:`adjoint.torchside`, which imports torch; when that import fails, :func:`classify` tells
whether the failure came from torch itself (the traceback runs through torch's own files, or
the missing module is torch or one of its parts) -- an environment problem, said as what is
wrong and how to repair it, exit 4 in the CLI -- or from adjoint's code (a bug, left to
propagate). docs/cli.md ("Exit codes") says the same for users.
"""

from __future__ import annotations

import importlib.util
import os

from adjoint.format.errors import ProblemError

#: the PyTorch release whose semantics the predictions follow
MODELLED_TORCH = "2.13.0"
#: how to install PyTorch's CPU build beside adjoint (one line; the default index gives the CUDA build)
INSTALL_TORCH_CPU = "pip install torch --index-url https://download.pytorch.org/whl/cpu"
#: releases known to behave differently from 2.13 for something adjoint predicts: version prefix -> what
#: differs. Empty: no difference has been found and pinned yet; a release not listed is simply not checked.
KNOWN_DIFFERENCES: dict[str, str] = {}


class EnvironmentProblem(ProblemError):
    """The machine, not the problem file, is what is wrong (torch missing or broken): one line, exit 4."""

    def __init__(self, message: str):
        super().__init__(None, message)


def torch_location() -> str | None:
    """The directory torch would be imported from, or None when Python cannot find torch at all."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return os.path.realpath(list(spec.submodule_search_locations)[0])
    return os.path.dirname(os.path.realpath(spec.origin)) if spec.origin else None


def from_torch(exc: BaseException) -> bool:
    """Whether ``exc`` (raised while importing adjoint's torch side) was raised by torch's import."""
    if isinstance(exc, ImportError) and (exc.name or "").split(".")[0] == "torch":
        return True
    where = torch_location()
    if where is None:
        return False
    import traceback   # only on a failed import: not on every start

    for frame in traceback.extract_tb(exc.__traceback__):
        if os.path.realpath(frame.filename).startswith(where + os.sep):
            return True
    return False


def classify(exc: BaseException, command: str) -> EnvironmentProblem | None:
    """The environment problem ``exc`` is (``command``: "adjoint verify", "adjoint import"), or None
    when it did not come from torch (a bug in adjoint: let it propagate)."""
    if not from_torch(exc):
        return None
    detail = " ".join(f"{type(exc).__name__}: {exc}".split())
    if torch_location() is None:
        return EnvironmentProblem(f"{command} runs PyTorch, which is not installed in this Python "
                                  f"({detail}); install the CPU build: {INSTALL_TORCH_CPU}")
    return EnvironmentProblem(f"{command} runs PyTorch, and the torch installed at {torch_location()} fails "
                              f"to import ({detail}); the installation is broken or incomplete: reinstall it, "
                              f"e.g. pip install --force-reinstall torch --index-url "
                              f"https://download.pytorch.org/whl/cpu")


def semantics_note(version: str) -> str | None:
    """The line a report carries when ``version`` (the torch verify runs) is not the modelled
    release: the predictions follow 2.13, and what is known to differ in ``version``."""
    if version.split("+")[0].rsplit(".", 1)[0] == MODELLED_TORCH.rsplit(".", 1)[0]:
        return None
    known = [what for prefix, what in KNOWN_DIFFERENCES.items() if version.startswith(prefix)]
    differs = ("known differences: " + "; ".join(known)) if known else \
        "no difference between the two is known to adjoint, but none is ruled out"
    return (f"note: the predictions follow PyTorch {MODELLED_TORCH} semantics and this run uses torch {version}; "
            f"{differs}; a mismatch may be a change between releases")
