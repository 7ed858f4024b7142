"""Atomic file output: write to a temporary file beside the target, then rename."""

from __future__ import annotations

import os
import tempfile

from .errors import ProblemError


def write_atomic(path: str, data: str | bytes) -> None:
    """Either ``path`` ends up with all of ``data`` or it is left exactly as it was.

    A path that cannot be written is bad input: one ProblemError line, nothing written."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise ProblemError(None, f"{path}: cannot write there: the directory {directory} does not exist")
    if os.path.isdir(path):
        raise ProblemError(None, f"{path}: is a directory; give a file name such as {os.path.join(path, 'out.tex')}")
    mode = "wb" if isinstance(data, bytes) else "w"
    try:
        fd, tmp = tempfile.mkstemp(prefix=".adjoint-", dir=directory)
    except OSError as exc:
        raise ProblemError(None, f"{path}: cannot write there ({exc.strerror})") from None
    try:
        with os.fdopen(fd, mode, **({} if isinstance(data, bytes) else {"encoding": "utf-8"})) as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
