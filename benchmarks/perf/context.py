"""What a measurement function is handed: the mode, a scratch directory, and ``emit``."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Callable

#: the repository root (the adjoint under test is the one here)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass(frozen=True)
class Context:
    """``quick``: fewer rounds (see :meth:`rounds`); ``tmpdir``: where problem files are
    written; ``emit(name, value)``: report one metric as soon as it is measured (a workload
    killed by its timeout keeps what it emitted)."""

    quick: bool
    tmpdir: str
    emit: Callable[[str, float], None]

    def rounds(self, full: int = 7, quick: int = 3) -> int:
        """Interleaved rounds per ratio: ``full`` normally, ``quick`` under --quick."""
        return quick if self.quick else full

    def write(self, filename: str, text: str) -> str:
        """Write a generated problem file into the scratch directory; its path."""
        path = os.path.join(self.tmpdir, filename)
        with open(path, "w") as fh:
            fh.write(text)
        return path


def fresh_sympy_cache() -> None:
    """Clear SymPy's cache (when SymPy is loaded), so that each timed call pays what a fresh
    process pays rather than reusing the previous round's results."""
    cache = sys.modules.get("sympy.core.cache")
    if cache is not None:
        cache.clear_cache()
