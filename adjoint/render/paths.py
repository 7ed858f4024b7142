"""Paths the CLI must not follow or overwrite.

* ``solve DIR/`` reads the problem files *in* DIR: an entry that is a symbolic link to a file
  outside DIR is refused (it would be read, and its lines echoed in messages, though the user
  named only DIR); name such a file itself to read it.
* ``-o`` never overwrites what the problem reads: the problem file (adjoint.render.output) and every
  side file its tensors name.
"""

from __future__ import annotations

import dataclasses
import os

from adjoint.format.errors import ProblemError
from adjoint.render.safetext import terminal_safe
from adjoint.format.problem import Literal
from adjoint.format.sidefiles import FileItems


def refuse_links_outside(directory: str, files: list[str]) -> None:
    """ProblemError for the first entry of ``directory`` that leads outside it."""
    base = os.path.realpath(directory)
    for f in files:
        real = os.path.realpath(f)
        if os.path.commonpath([base, real]) != base:
            raise ProblemError(None, f"{terminal_safe(f)}: is a symbolic link to {terminal_safe(real)}, outside "
                                     f"{terminal_safe(directory)}; a directory is read only for the files in it "
                                     "(name that file itself to read it)")


def side_files(problem) -> list[str]:
    """Every side file the problem's tensors were read from (resolved paths)."""
    found: list[str] = []
    seen: set[int] = set()
    stack = [problem]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, Literal):   # its items: a tuple of numbers, or a side file's FileItems
            items = obj.items
            if isinstance(items, FileItems) and items.path is not None and items.path not in found:
                found.append(items.path)
        elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            stack.extend(getattr(obj, f.name) for f in dataclasses.fields(obj))
        elif isinstance(obj, (tuple, list)):
            stack.extend(obj)
        elif isinstance(obj, dict):
            stack.extend(obj.values())
    return found
