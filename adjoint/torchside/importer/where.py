"""Where something is in the user's code: ``file:line`` for a module class, a function, an
fx node or an exception, as a message names it (paths relative to the working directory
when they are under it)."""

from __future__ import annotations

import inspect
import os
import re
import traceback

_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def show_path(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("..") else path


def of_object(obj) -> str | None:
    """``file:line`` of a class or function's definition (None when Python cannot tell)."""
    target = inspect.unwrap(obj) if callable(obj) else obj
    target = getattr(target, "func", target)   # functools.partial
    try:
        path = inspect.getsourcefile(target)
        _, line = inspect.getsourcelines(target)
    except (TypeError, OSError):
        return None
    return f"{show_path(path)}:{line}" if path else None


def of_module(module) -> str | None:
    """Where the module's ``forward`` is defined (its class when forward is inherited from torch)."""
    forward = getattr(type(module), "forward", None)
    found = of_object(forward) if forward is not None else of_object(type(module))
    if found is not None and "/torch/" in os.path.abspath(found).replace(os.sep, "/"):
        return None     # a torch.nn class: torch's own source is not where the user's code is
    return found


def of_attribute(module, name: str) -> str | None:
    """``file:line`` of the first line of the module's class that names its attribute ``name``
    (``self.register_buffer("scale", ...)``, ``self.scale = nn.Parameter(...)``), else of the
    class (None for a torch.nn class, or when Python cannot tell)."""
    cls = type(module)
    try:
        path = inspect.getsourcefile(cls)
        lines, start = inspect.getsourcelines(cls)
    except (TypeError, OSError):
        return None
    if not path or "/torch/" in os.path.abspath(path).replace(os.sep, "/"):
        return None
    named = re.compile(rf"""self\.{re.escape(name)}\b|["']{re.escape(name)}["']""")
    for i, line in enumerate(lines):
        if named.search(line):
            return f"{show_path(path)}:{start + i}"
    return f"{show_path(path)}:{start}"


def of_assignment(function, name: str) -> str | None:
    """``file:line`` of the first line of ``function`` (a forward) that assigns ``self.NAME``
    (None when there is none, or Python cannot tell)."""
    try:
        path = inspect.getsourcefile(function)
        lines, start = inspect.getsourcelines(function)
    except (TypeError, OSError):
        return None
    assigned = re.compile(rf"\bself\.{re.escape(name)}\s*(=(?!=)|[-+*/@]=)")
    for i, line in enumerate(lines):
        if assigned.search(line):
            return f"{show_path(path)}:{start + i}"
    return None


def _user_frame(frames, files: set[str]) -> str | None:
    best = None
    for path, line in frames:
        if os.path.abspath(path) in files:
            best = f"{show_path(path)}:{line}"
    return best


def of_exception(exc: BaseException, files: set[str]) -> str | None:
    """The innermost frame of the traceback that lies in one of ``files`` (absolute paths)."""
    frames = [(f.filename, f.lineno) for f in traceback.extract_tb(exc.__traceback__)]
    return _user_frame(frames, files)


def of_stack_trace(text: str | None, files: set[str]) -> str | None:
    """The innermost user frame of an fx node's recorded ``stack_trace``."""
    if not text:
        return None
    return _user_frame([(p, int(n)) for p, n in _FRAME.findall(text)], files)


def frame_of(text: str | None, files: set[str]) -> tuple[str, int] | None:
    """(absolute path, line) of the innermost user frame of an fx node's ``stack_trace``."""
    found = None
    for path, line in _FRAME.findall(text or ""):
        if os.path.abspath(path) in files:
            found = (os.path.abspath(path), int(line))
    return found


def source_files(module) -> set[str]:
    """Files defining the classes of ``module`` and its submodules (outside torch itself)."""
    out = set()
    for m in module.modules():
        try:
            path = inspect.getsourcefile(type(m))
        except TypeError:
            continue
        if path and "/torch/" not in path.replace(os.sep, "/"):
            out.add(os.path.abspath(path))
    return out
