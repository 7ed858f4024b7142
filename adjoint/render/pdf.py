"""Compile a LaTeX document with a real engine (``adjoint latex --pdf``).

The document is compiled in a private temporary directory (so concurrent runs never share
auxiliary files) with ``pdflatex -halt-on-error -interaction=nonstopmode``; the log is
parsed for errors and for overfull boxes, and the PDF is written atomically (all of it or
nothing) with :func:`adjoint.render.output.write_atomic`.

An overfull ``\\hbox`` that contains mathematics means an equation runs into the margin and
may be cut off. ``compile_pdf`` reports those in :class:`CompileReport`; with
``strict=True`` (the test suite) it refuses them like an error, otherwise it writes the PDF
and prints a one-line warning on stderr.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field

from adjoint.format.errors import ProblemError
from adjoint.render.output import RenderBug, write_atomic

#: engines tried in order; the document uses only amsmath/amssymb/geometry, which all of them have
ENGINES = ("pdflatex", "lualatex", "xelatex")

INSTALL_HINT = ("install a LaTeX engine, e.g. on Debian/Ubuntu: apt-get install texlive-latex-base "
                "texlive-latex-recommended texlive-fonts-recommended (Fedora: dnf install texlive-scheme-basic "
                "texlive-amsmath; macOS: brew install --cask basictex), or drop --pdf to write only the .tex")

_MATH_FONTS = re.compile(r"/(cmm|cmsy|cmex|msam|msbm)|\\OML/|\\OMS/|\\OMX/|\$")


@dataclass
class Overfull:
    """An overfull box the TeX engine reported."""

    points: float
    where: str          # "detected at line N" or "in paragraph at lines A--B"
    content: str        # the box content TeX prints
    math: bool

    def line(self) -> str:
        return f"Overfull \\hbox ({self.points}pt too wide) {self.where}: {self.content[:160]}"


@dataclass
class CompileReport:
    """What compiling the LaTeX gave: the engine, its passes, overfull boxes, the log and the PDF."""

    engine: str
    passes: int
    overfull: list[Overfull] = field(default_factory=list)
    log: str = ""
    pdf: bytes = field(default=b"", repr=False)  # the compiled document

    @property
    def math_overfull(self) -> list[Overfull]:
        return [o for o in self.overfull if o.math]


def find_engine() -> str | None:
    for name in ENGINES:
        path = shutil.which(name)
        if path:
            return path
    return None


@contextlib.contextmanager
def _signals_held():
    """SIGTERM and SIGINT held back (delivered when the block ends): a temporary directory is made
    and its cleanup registered before the CLI's handlers can unwind through it."""
    held = {signal.SIGTERM, signal.SIGINT}
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def compile_pdf(tex: str, pdf_path: str | None, *, strict: bool = False, timeout: float = 180.0,
                keep_log: str | None = None, protect: tuple[str, ...] = (),
                files: dict[str, bytes] | None = None) -> CompileReport:
    """Compile ``tex``; write the PDF to ``pdf_path`` (None: compile only; the bytes are in the
    report's ``pdf``), never over one of the ``protect`` files. ``files`` are put beside the
    document first (name -> content: the graph pictures it includes).

    Raises ProblemError (one line, exit 2 in the CLI) when no engine is installed, when the
    engine reports an error, or -- with ``strict`` -- when an equation overflows the line. The
    temporary directory is removed however the compilation ends (an exception, or the
    CLI's SIGTERM handler, unwinds through it; the engine's process is killed first)."""
    engine = find_engine()
    if engine is None:
        raise ProblemError(None, f"adjoint latex --pdf needs pdflatex (or lualatex/xelatex) on PATH and none was "
                                 f"found; {INSTALL_HINT}")
    name = os.path.basename(engine)
    env = dict(os.environ)
    env.update({"max_print_line": "100000", "error_line": "254", "half_error_line": "238"})
    try:
        with _signals_held():   # made and its cleanup registered as one step (a SIGTERM between leaked it)
            workdir = tempfile.TemporaryDirectory(prefix="adjoint-latex-")
    except OSError as exc:
        raise ProblemError(None, f"cannot create a temporary directory for {name} in {tempfile.gettempdir()}: "
                                 f"{exc.strerror or exc}") from None
    with workdir as work:
        src = os.path.join(work, "derivation.tex")
        try:
            with open(src, "w", encoding="utf-8") as fh:
                fh.write(tex)
        except OSError as exc:
            raise ProblemError(None, f"cannot write the document for {name} in {work}: {exc.strerror or exc}") \
                from None
        try:
            for fname, content in (files or {}).items():
                with open(os.path.join(work, os.path.basename(fname)), "wb") as fh:
                    fh.write(content)
        except OSError as exc:
            raise ProblemError(None, f"cannot write a picture for {name} in {work}: {exc.strerror or exc}") from None
        cmd = [engine, "-halt-on-error", "-interaction=nonstopmode", "-no-shell-escape", "derivation.tex"]
        passes = 0
        log = ""
        while True:
            passes += 1
            try:
                proc = subprocess.run(cmd, cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                                      timeout=timeout)
            except subprocess.TimeoutExpired:
                raise ProblemError(None, f"{name} did not finish within {timeout:.0f}s on the generated document") \
                    from None
            log = _read(os.path.join(work, "derivation.log")) or proc.stdout.decode("utf-8", "replace")
            error = first_error(log)
            if proc.returncode != 0 or error is not None:
                if keep_log:
                    write_atomic(keep_log, log)
                if error is not None and "can't write on file" in error:
                    raise ProblemError(None, f"{name} could not write its output in {work} ({error}); is that disk "
                                             "full?")
                # adjoint wrote a document its engine refuses: a bug (exit 3), not the user's input
                raise RenderBug(f"{name} failed on the generated document: {error or f'exit status {proc.returncode}'}"
                                "; please report it with the problem file")
            if passes >= 3 or not re.search(r"Rerun to get|Label\(s\) may have changed", log):
                break
        report = CompileReport(name, passes, parse_overfull(log), log)
        if keep_log:
            write_atomic(keep_log, log)
        bad = report.math_overfull
        if bad and strict:
            raise ProblemError(None, f"{len(bad)} equation(s) overflow the line in the generated document; first: "
                                     f"{bad[0].line()}")
        if bad:
            print(f"adjoint: warning: {len(bad)} equation(s) run into the margin ({bad[0].where}); the PDF is "
                  "written anyway", file=sys.stderr)
        with open(os.path.join(work, "derivation.pdf"), "rb") as fh:
            report.pdf = fh.read()
        if pdf_path is not None:
            write_atomic(pdf_path, report.pdf, protect=protect)
        return report


def _read(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def first_error(log: str) -> str | None:
    """The first ``! ...`` error of a TeX log, with its input line when TeX names one."""
    lines = log.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("! "):
            msg = line[2:].strip()
            for follow in lines[i + 1:i + 12]:
                m = re.match(r"l\.(\d+) ?(.*)", follow)
                if m:
                    return f"{msg} (line {m.group(1)}: {m.group(2)[:80]})"
            return msg
    return None


def parse_overfull(log: str) -> list[Overfull]:
    out = []
    lines = log.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"Overfull \\hbox \(([\d.]+)pt too wide\) (.*)", line)
        if not m:
            continue
        content = []
        for follow in lines[i + 1:i + 6]:
            if not follow.strip():
                break
            content.append(follow)
        text = " ".join(content)
        where = m.group(2).strip()
        math = where.startswith("detected at line") or bool(_MATH_FONTS.search(text))
        out.append(Overfull(float(m.group(1)), where, text, math))
    return out
