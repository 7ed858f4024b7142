"""Running Graphviz's ``dot`` on a picture's source.

Our own ``subprocess.run`` rather than the graphviz package's pipe, for two reasons: a
``dot`` that exits early (it refuses an HTML-like label over 16,384 characters) makes the
package's line-by-line writer raise BrokenPipeError, which the CLI would take for a closed
standard output; and ``subprocess.run`` kills the child when we are interrupted (Ctrl-C,
SIGTERM: the CLI's handler raises through it), where the package's writer left ``dot``
running for most of a minute."""

from __future__ import annotations

import subprocess

from adjoint.format.errors import ProblemError
from adjoint.render.output import RenderBug

#: how long one drawing may take
DOT_TIMEOUT = 120.0


def run_dot(source: str, fmt: str, needs_dot: str, timeout: float = DOT_TIMEOUT) -> bytes:
    """``dot -T<fmt>`` on ``source``: the drawing's bytes, or one ProblemError line."""
    try:
        proc = subprocess.run(["dot", f"-T{fmt}"], input=source.encode("utf-8"), capture_output=True,
                              timeout=timeout)
    except FileNotFoundError:
        raise ProblemError(None, needs_dot) from None
    except subprocess.TimeoutExpired:
        raise ProblemError(None, f"Graphviz's dot did not finish drawing the graph within {timeout:.0f}s; write the "
                                 "source with -o FILE.dot") from None
    except OSError as exc:
        raise ProblemError(None, f"Graphviz's dot could not be run ({exc.strerror or exc})") from None
    if proc.returncode != 0:
        detail = " ".join(proc.stderr.decode("utf-8", "replace").split())[:200]
        raise RenderBug(f"Graphviz's dot failed on the graph ({detail or f'exit status {proc.returncode}'})"
                        "; please report it with the problem file")
    return proc.stdout
