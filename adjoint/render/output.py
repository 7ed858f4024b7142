"""Writing an output file: all of the new content, or the previous file left exactly as it was.

The rules (docs/cli.md says the same for users):

* **Atomic.** The content goes to a temporary file beside the target, is flushed to disk
  (fsync), and is renamed over the target. A full disk, a name too long for the file
  system, a missing permission or an interruption leaves the previous file unchanged and
  the temporary file removed; it is one ProblemError line (exit 2 in the CLI).
* **Never the problem file.** A target that is one of the ``protect`` files (the inputs and
  the side files they read, compared as files: a hard link or a symbolic link to the input counts) is refused.
* **Symbolic links are written through.** The file the link points to gets the new content
  and the link stays a link (what an editor does); a link to nothing is refused, so a link
  planted beforehand cannot make us create a file elsewhere.
* **Read-only files are respected.** An existing target without write permission (for its
  owner, or for us) is refused, never replaced; so is anything but a regular file (a device,
  a FIFO: ``-o /dev/null`` would otherwise replace the device node when run as root).
* **Modes follow the umask.** A new file gets ``0666 & ~umask`` like any file the shell
  creates (``mkstemp`` alone would give 0600); an existing file keeps its permission bits.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Sequence

from adjoint.format.errors import ProblemError
from adjoint.render.safetext import terminal_safe


def check_target(path: str, protect: Sequence[str] = ()) -> str:
    """The file that writing ``path`` would replace or create; ProblemError when it must not be."""
    shown = terminal_safe(path)  # a newline in the name must not split the one-line message
    if os.path.islink(path):
        real = os.path.realpath(path)
        if not os.path.lexists(real):
            raise ProblemError(None, f"{shown}: is a symbolic link to {terminal_safe(real)}, which does not exist; remove the link "
                                     "or give another output name")
    else:
        real = os.path.abspath(path)
    directory = os.path.dirname(real)
    if not os.path.isdir(directory):
        raise ProblemError(None, f"{shown}: cannot write there: the directory {terminal_safe(directory)} does not exist")
    if os.path.isdir(real):
        raise ProblemError(None, f"{shown}: is a directory; give a file name such as {terminal_safe(os.path.join(path, 'out.tex'))}")
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return real
    except OSError as exc:
        raise _os_error(path, exc) from None
    for i, source in enumerate(protect):   # the problem file first, then the side files it reads
        try:
            same = os.path.samefile(real, source)
        except OSError:
            same = False
        if same:
            what = "the problem file being read" if i == 0 else "a side file the problem reads"
            raise ProblemError(None, f"{shown}: is {what}; writing there would overwrite it, "
                                     "give another output name with -o")
    if not stat.S_ISREG(st.st_mode):
        raise ProblemError(None, f"{shown}: is not a regular file (a device, FIFO or socket); give a file name "
                                 "(or - for standard output)")
    if not st.st_mode & stat.S_IWUSR or not os.access(real, os.W_OK):
        raise ProblemError(None, f"{shown}: is read-only; it is left as it is, make it writable or give another "
                                 "output name")
    return real


def write_atomic(path: str, data: str | bytes, protect: Sequence[str] = ()) -> None:
    """Either ``path`` ends up with all of ``data`` or it is left exactly as it was.

    A path that cannot or must not be written is bad input: one ProblemError line, nothing
    written. Text is written as UTF-8."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    write_atomic_with(path, lambda write: write(payload), protect)


def write_atomic_with(path: str, produce, protect: Sequence[str] = ()) -> None:
    """:func:`write_atomic` of content made in pieces: ``produce(write)`` calls ``write`` with
    each piece (str, written as UTF-8, or bytes) in order, so the whole content is never in
    memory at once (``solve --json -o``). An exception in ``produce`` leaves the previous file
    exactly as it was, like any other failure."""
    real = check_target(path, protect)
    try:
        mode = stat.S_IMODE(os.stat(real).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~umask()
    except OSError as exc:
        raise _os_error(path, exc) from None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".adjoint-", suffix=".tmp", dir=os.path.dirname(real))
    except OSError as exc:
        raise _os_error(path, exc) from None
    try:
        def write(piece: str | bytes) -> None:
            view = memoryview(piece.encode("utf-8") if isinstance(piece, str) else piece)
            while view:
                view = view[os.write(fd, view):]

        try:
            os.fchmod(fd, mode)
            produce(write)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, real)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise _os_error(path, exc) from None
        raise


def _os_error(path: str, exc: OSError) -> ProblemError:
    existed = os.path.lexists(path)
    kept = "the previous file is unchanged" if existed else "nothing was written"
    return ProblemError(None, f"{terminal_safe(path)}: cannot write it: {exc.strerror or exc}; {kept}")


def umask() -> int:
    """The process's umask, read without changing it where Linux shows it (/proc/self/status)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # elsewhere: the only portable way is to set it and put it back
    os.umask(mask)
    return mask


class RenderBug(Exception):
    """A renderer's engine (pdflatex, Graphviz's dot) refused what adjoint wrote for it: a bug in
    adjoint, not in the user's file (the CLI's exit 3, one line)."""
