"""Atomic file output: write to a temporary file beside the target, then rename."""

from __future__ import annotations

import os
import tempfile


def write_atomic(path: str, data: str | bytes) -> None:
    """Either ``path`` ends up with all of ``data`` or it is left exactly as it was."""
    directory = os.path.dirname(os.path.abspath(path))
    mode = "wb" if isinstance(data, bytes) else "w"
    fd, tmp = tempfile.mkstemp(prefix=".adjoint-", dir=directory)
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
