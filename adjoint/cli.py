"""Command line: ``adjoint solve | verify | latex | graph | import`` (also ``python -m adjoint``). A thin layer
over the Python API.

Bad input (a problem-file or command-line mistake) is one line on stderr, exit code 2,
nothing written; torch missing or failing to import (``verify``, ``import``) is one line saying
what is wrong with the environment, exit code 4 (:mod:`adjoint.torchside.torchenv`); every line that quotes a file name or the file's text goes through
:func:`adjoint.render.safetext.terminal_safe`. Ctrl-C is one line, ``interrupted``, exit 130;
SIGTERM unwinds the same way (temporary files and directories removed), exit 143. ``-``
reads the problem from standard input (named ``<stdin>`` in messages) and, for ``-o``,
writes to standard output. torch is imported only by ``verify`` and ``import``.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import click
from adjoint.render.paths import refuse_links_outside
from adjoint.render.paths import side_files

from adjoint.format.errors import ProblemError
from adjoint.render.safetext import terminal_safe
from adjoint.torchside.torchenv import EnvironmentProblem

STDIN = "<stdin>"
EXIT_INTERRUPTED = 128 + signal.SIGINT    # 130, as a shell reports Ctrl-C
EXIT_TERMINATED = 128 + signal.SIGTERM    # 143
EXIT_ENVIRONMENT = 4                      # torch missing or broken (adjoint.torchside.torchenv)


class _Terminated(BaseException):
    """Raised in the main thread by the SIGTERM handler, so that ``finally`` and ``with`` blocks
    (temporary directories, the LaTeX engine's process) clean up before the process exits."""


class _Interrupted(Exception):
    """A KeyboardInterrupt, carried past click (which would print a blank line and "Aborted!")."""


def _say(line: str) -> None:
    click.echo(terminal_safe(line), err=True)


def _fail(err: ProblemError) -> None:
    for line in err.lines():  # ProblemErrors: one located line per mistake
        _say(line)
    sys.exit(2)


def _on_sigterm(signum, frame):
    raise _Terminated()


class _Group(click.Group):
    """Turn every ProblemError (and click's usage errors) into the one-line, exit-2 form (a file with
    several independent mistakes, ProblemErrors: one located line each)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise _Interrupted() from None

    def main(self, *args, **kwargs):
        kwargs.setdefault("standalone_mode", False)
        previous = None
        try:
            previous = signal.signal(signal.SIGTERM, _on_sigterm)
        except ValueError:  # not the main thread: leave signals alone
            pass
        try:
            return super().main(*args, **kwargs)
        except EnvironmentProblem as err:   # torch missing or broken: the machine, not the file
            _say(err.line())
            sys.exit(EXIT_ENVIRONMENT)
        except ProblemError as err:
            _fail(err)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except (_Interrupted, KeyboardInterrupt, click.Abort):
            _say("interrupted")
            sys.exit(EXIT_INTERRUPTED)
        except _Terminated:
            _say("terminated")
            sys.exit(EXIT_TERMINATED)
        except click.exceptions.NoArgsIsHelpError as exc:   # bare `adjoint` (or a group without a command)
            click.echo(exc.ctx.get_help())                    # the help as --help prints it, lines intact
            sys.exit(0)
        except click.ClickException as exc:
            _say(f"adjoint: {exc.format_message()}")
            sys.exit(2)
        except RecursionError:
            _say("adjoint: input nested too deeply to process")
            sys.exit(2)
        except Exception as exc:  # a bug: still one line, a distinct code
            if os.environ.get("ADJOINT_DEBUG"):
                raise
            _say(f"adjoint: internal error ({type(exc).__name__}: {exc}); set ADJOINT_DEBUG=1 for a traceback and "
                 "please report it")
            sys.exit(3)
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="adjoint")
def main() -> None:
    """Predict exactly what every PyTorch backward hook is handed, and prove it.

    FILE is a problem file (YAML), a directory (its *.yaml and *.yml files, any case, hidden
    files skipped), or - for standard input."""


# ----------------------------------------------------------------------------- inputs

def _expand(paths: tuple[str, ...]) -> list[str]:
    """Files named on the command line, directories expanded (sorted; hidden files skipped)."""
    files: list[str] = []
    for p in paths:
        if p == "-":
            if "-" in files:
                raise ProblemError(None, "-: standard input can be read only once; give - once")
            files.append(p)
        elif os.path.isdir(p):
            found = sorted(os.path.join(p, f) for f in os.listdir(p)
                           if not f.startswith(".") and f.lower().endswith((".yaml", ".yml"))
                           and os.path.isfile(os.path.join(p, f)))
            if not found:
                raise ProblemError(None, f"{terminal_safe(p)}: no .yaml or .yml problem files in this directory")
            refuse_links_outside(p, found)
            files.extend(found)
        elif os.path.lexists(p):
            files.append(p)
        else:
            raise ProblemError(None, f"{terminal_safe(p)}: no such file or directory")
    return files


def _one_document(paths: tuple[str, ...]) -> bool:
    """--json prints one object for exactly one file argument (``-`` included), else an array."""
    return len(paths) == 1 and not os.path.isdir(paths[0])


def _load(path: str):
    """A problem from a file, or from standard input for ``-``."""
    from adjoint.api import load, loads

    if path != "-":
        return load(path)
    from adjoint.format.loader import MAX_FILE_BYTES, decode

    raw = click.get_binary_stream("stdin").read(MAX_FILE_BYTES + 1)
    return loads(decode(raw, STDIN), STDIN)


# ----------------------------------------------------------------------------- commands

def _mode_options(command):
    """--float64 / --structure: the answer mode (docs/values.md); exact without either."""
    command = click.option("--structure", is_flag=True,
                           help="No values at all: nodes, edges, shapes, None versus zeros, which hooks fire "
                                "and in what order, PyTorch's errors (value fields null). For any model size.")(command)
    return click.option("--float64", "float64", is_flag=True,
                        help="The same engine on float64 numbers instead of exact values (for models too large "
                             "for exact arithmetic); exact fields null.")(command)


def _variant_option(help_text: str):
    """--variant NAME, given at most once. click keeps the last of a repeated single-value option
    and drops the others without a word; a second --variant is refused instead, so that
    ``--variant a --variant b`` never silently answers for b alone."""
    def one(ctx, param, values):
        if len(values) > 1:
            raise click.UsageError(f"--variant given {len(values)} times ({', '.join(values)}): give one, "
                                   "or none for every variant", ctx)
        return values[0] if values else None
    return click.option("--variant", multiple=True, callback=one, metavar="NAME", help=help_text)


def _mode(float64: bool, structure: bool) -> str:
    if float64 and structure:
        raise click.UsageError("--float64 and --structure are two answer modes: give one")
    return "float64" if float64 else "structure" if structure else "exact"


@main.command()
@click.argument("files", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True,
              help="Print the contract's JSON instead of the report: one object for a single FILE, an array "
                   "(in file order) for a directory or several FILEs. Non-finite numbers are the strings "
                   "\"inf\", \"-inf\", \"nan\".")
@_variant_option("Solve only this variant.")
@click.option("--numeric", is_flag=True, help="Substitute the file's symbols: values (closed form otherwise).")
@click.option("--exact", is_flag=True, help="Show exact values (rationals, closed forms) with their decimals; "
                                            "decimals only by default.")
@click.option("--values/--no-values", default=None,
              help="Show (or hide) the forward values; by default they are shown when short.")
@click.option("--recursion/--no-recursion", default=None,
              help="Show (or hide) the adjoint recursion (the multipliers at every module boundary); by default "
                   "it is shown when short.")
@click.option("--compact", is_flag=True,
              help="With --json: write each rational tensor as its shared denominator and integer numerators "
                   "({\"shape\", \"den\", \"num\"}) instead of a decimal and a fraction per element; other "
                   "values as the contract writes them.")
@click.option("-o", "--output", "out",
              help="Write the report (the JSON with --json) to this file instead of standard output, atomically "
                   "(never over a problem file); - is standard output.")
@_mode_options
def solve(files, as_json, variant, numeric, exact, values, recursion, compact, float64, structure, out):
    """Derive every hook call, what the hooks changed and the final grads, exactly.

    The report is coloured on a terminal (not when piped, nor with NO_COLOR set) and wrapped
    to its width (COLUMNS when not a terminal, else 80); written to a file with -o, it is
    plain text."""
    from adjoint.answer.solve import solve_problem

    mode = _mode(float64, structure)
    if compact and not as_json:
        raise click.UsageError("--compact is a form of --json's values: add --json")
    paths = _expand(files)
    protect = tuple(p for p in paths if p != "-")
    if out is not None and out != "-":
        from adjoint.render.output import check_target

        check_target(out, protect)
    predictions = []
    for path in paths:
        problem = _load(path)
        bar = _SolveProgress(path) if sys.stderr.isatty() else None
        try:
            predictions.append(solve_problem(problem, variant=variant, numeric=numeric, mode=mode, progress=bar))
        finally:
            if bar is not None:
                bar.finish()
    if as_json:
        from adjoint.render.jsontext import dump

        docs = [p.to_json(lazy=True, compact=compact) for p in predictions]
        doc = docs[0] if _one_document(files) else docs

        def produce(write):   # the text streamed, a tensor at a time: never all in memory
            dump(doc, write)
            write("\n")

        if out is None or out == "-":
            stdout = click.get_text_stream("stdout")
            produce(stdout.write)
            stdout.flush()
            return
        from adjoint.render.output import write_atomic_with

        write_atomic_with(out, produce, protect=protect)
        click.echo(terminal_safe(f"wrote {out}"))
        return
    else:
        from adjoint.render.console import console, print_report
        from adjoint.render.report import Options

        opts = Options(exact=exact, values=values, recursion=recursion)
        if out is None or out == "-":
            print_report(predictions, opts, console())
            return
        import io

        buf = io.StringIO()
        print_report(predictions, opts, console(buf, color=False))
        text = buf.getvalue()
    from adjoint.render.output import write_atomic

    write_atomic(out, text, protect=protect)
    click.echo(terminal_safe(f"wrote {out}"))


@main.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--dtype", type=click.Choice(["float32", "float64"]), help="Override the problems' dtype.")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON (non-finite numbers as "
                                                      "\"inf\", \"-inf\", \"nan\").")
@click.option("--fd", is_flag=True, help="Also check final grads by central differences in float64.")
@_variant_option("Verify only this variant.")
@click.option("--origin", is_flag=True, help="Also run the Python model an imported file's origin: names (this runs "
                                             "that file's code), with its own hooks, and compare it with the "
                                             "prediction.")
@_mode_options
def verify(paths, dtype, as_json, fd, variant, float64, structure, origin):
    """Run the same problems in real PyTorch and compare with the prediction.

    Runs the torch installed here, whatever its release (the CPU build: pip install torch
    --index-url https://download.pytorch.org/whl/cpu). The predictions follow PyTorch 2.13; the
    report names the torch it ran against and says so when that is another release."""
    from adjoint.torchside.verify import run

    progress = _ProgressBar if sys.stderr.isatty() and not as_json else None
    code = run(_expand(paths), dtype=dtype, as_json=as_json, fd=fd, variant=variant,
               echo=_verify_echo(as_json), progress=progress, load=_load, mode=_mode(float64, structure),
               origin=origin)
    sys.exit(code)


class _SolveProgress:
    """solve's progress on stderr (a terminal only), shown once a solve has run for a second:
    ``solving FILE  [#########.......]  backward 1200/3000``. Redrawn at most ten times a
    second; the line is cleared when the solve ends."""

    DELAY = 1.0
    EVERY = 0.1
    WIDTH = 24

    def __init__(self, path: str):
        self.path = terminal_safe(path)
        self.start = time.monotonic()
        self.drawn = 0.0
        self.shown = False

    def __call__(self, stage: str, done: int, total: int | None) -> None:
        now = time.monotonic()
        if now - self.start < self.DELAY or now - self.drawn < self.EVERY:
            return
        self.drawn = now
        if total:
            filled = min(self.WIDTH, self.WIDTH * done // total)
            bar = f"[{'#' * filled}{'.' * (self.WIDTH - filled)}]  {stage} {done}/{total}"
        else:
            bar = f"{stage}: {done} ops"
        click.echo(f"\r\033[Ksolving {self.path}  {bar}", err=True, nl=False)
        self.shown = True

    def finish(self) -> None:
        if self.shown:
            click.echo("\r\033[K", err=True, nl=False)


#: verify's verdicts, coloured on a terminal: (pattern, style)
_VERDICTS = (
    (r"(?<=\]  )PASS(?=  \()|^OK(?=:)|(?<=  )ok$", "bold green"),
    (r"(?<=\]  )FAIL(?=  \()|^FAILED(?=:)|(?<=  )MISMATCH$", "bold red"),
    (r"(?<=  )skipped$", "yellow"),
)


def _verify_echo(as_json: bool):
    """How verify prints: plain text (escaped), its verdicts coloured when standard output is a
    terminal (not with NO_COLOR, not for --json)."""
    def plain(text: str) -> None:
        click.echo(terminal_safe(text, keep_newlines=True))

    if as_json:
        return plain
    import re

    from rich.text import Text

    from adjoint.render.console import console

    out = console()
    if not out.is_terminal or out.no_color:
        return plain

    def coloured(text: str) -> None:
        line = Text(terminal_safe(text, keep_newlines=True))
        for pattern, style in _VERDICTS:
            line.highlight_regex(re.compile(pattern, re.M), style)
        out.print(line, soft_wrap=True)

    return coloured


class _ProgressBar:
    """verify's progress bar on stderr (a terminal only)."""

    def __init__(self, total: int):
        self.bar = click.progressbar(length=total, label="verifying", file=sys.stderr, show_pos=True,
                                     item_show_func=lambda item: terminal_safe(item) if item else item)
        self.bar.__enter__()

    def update(self, n: int, item: str) -> None:
        self.bar.update(n, item)

    def finish(self) -> None:
        self.bar.__exit__(None, None, None)


@main.command(name="import")
@click.argument("model")
@click.option("--input", "input_specs", multiple=True, metavar="NAME=SHAPE[:DTYPE[:LO-HI]]",
              help="One input of the forward, in its order: its name and shape, dims joined by x (x=2x4); "
                   "int64 token ids with their range [LO, HI) (ids=2x8:int64:0-100), or a bool mask (m=2x8:bool).")
@click.option("--loss", default="sum(y)", show_default=True, help="The loss, an expression of y (the output).")
@click.option("-o", "--output", "out", help="The problem file to write; - or absent: standard output.")
@click.option("--hooks", "hooks_mode", type=click.Choice(["translate", "observe"]), default="translate",
              show_default=True, help="A hook whose body cannot be translated: stop (translate), or write it "
                                      "observe-only, its effect left out and said so (observe).")
@click.option("--target", "target_specs", multiple=True, metavar="NAME=SHAPE[:DTYPE[:LO-HI]]",
              help="A target the loss reads (not passed to the forward), e.g. t=2x8:int64:0-100.")
def import_(model, input_specs, loss, out, hooks_mode, target_specs):
    """Write a problem file from a real model: MODEL is FILE.py:FACTORY.

    Calls FACTORY() (a function of FILE.py returning the nn.Module: this runs your code),
    traces the model with torch.fx and writes a v2 problem file: built-in types for the
    torch.nn modules the format has, a forward for every other module, the parameters
    exactly, the hooks already registered (their Python bodies translated), inputs of the given
    shapes."""
    from adjoint.render.output import check_target, write_atomic

    protect = (model.rpartition(":")[0],) if ":" in model else ()
    if out and out != "-":
        check_target(out, protect)
    try:
        from adjoint.torchside.importer import import_file
    except Exception as exc:
        from adjoint.torchside.torchenv import classify
        problem = classify(exc, "adjoint import")
        if problem is None:
            raise
        raise problem from None
    from adjoint.torchside.importer import side_file_for, side_path
    notes: list[str] = []
    told: list[str] = []
    side = side_file_for(out)
    import contextlib
    import sys
    with contextlib.redirect_stdout(sys.stderr):   # the user's print()s: never into the YAML on standard output
        text = import_file(model, list(input_specs), loss, out, hooks_mode, notes, list(target_specs), side, told)
    if side.tensors:                    # the big tensors, beside the file (before it is read back: it names them)
        write_atomic(side_path(out, side), side.data(), protect=protect)
        click.echo(terminal_safe(f"wrote {side_path(out, side)} ({len(side.tensors)} tensors)"))
    from adjoint.format.loader import MAX_FILE_BYTES
    if len(text.encode("utf-8")) > MAX_FILE_BYTES:
        raise ProblemError(None, f"the problem file would be {len(text.encode('utf-8'))} bytes, more than the "
                                 f"{MAX_FILE_BYTES} a problem file may hold; the model has too many small tensors to "
                                 "write inline: import a smaller part of it")
    # import_file has loaded the text and checked it against the user's module (importer.selfcheck)
    for note in notes + told:
        _say(f"adjoint: {note}")
    if out and out != "-":
        write_atomic(out, text, protect=protect)
        click.echo(terminal_safe(f"wrote {out}"))
    else:
        click.echo(text, nl=False)


@main.command()
@click.argument("file")
@click.option("-o", "--output", "out",
              help="Where to write: OUT.tex (with --pdf also OUT.pdf beside it); OUT.pdf writes only the PDF "
                   "(--pdf implied); - writes to standard output (the PDF with --pdf). Default: FILE's name with "
                   ".tex (and .pdf) in the current directory; never the problem file itself.")
@click.option("--pdf", is_flag=True, help="Also compile to PDF with a LaTeX engine.")
@_variant_option("Only this variant.")
def latex(file, out, pdf, variant):
    """Write the derivation as a standalone LaTeX document.

    Files are replaced atomically (a failed write leaves the previous file as it was), a
    symbolic link is written through, read-only files are refused and new files get the
    umask's permissions."""
    from adjoint.render.output import check_target, write_atomic
    from adjoint.render.latex import render_document

    targets = _latex_targets(file, out, pdf)
    protect = () if file == "-" else (file,)
    problem = _load(file)
    protect += tuple(side_files(problem))
    for _, path in targets:
        if path != "-":
            check_target(path, protect)
    prediction = problem.solve(variant=variant)
    tex = render_document(prediction)
    data = {"tex": tex}
    if any(kind == "pdf" for kind, _ in targets):
        from adjoint.render.pdf import compile_pdf

        # raises ProblemError, writes nothing, when it cannot
        data["pdf"] = compile_pdf(tex, None, files=_graph_figures(prediction)).pdf
    written = []
    for kind, path in targets:
        if path == "-":
            if kind == "pdf":
                stream = click.get_binary_stream("stdout")
                stream.write(data["pdf"])
                stream.flush()
            else:
                click.echo(tex, nl=False)
        else:
            write_atomic(path, data[kind], protect=protect)
            written.append(path)
    if written:
        message = f"wrote {' and '.join(written)}"
        if any(path == "-" for _, path in targets):
            _say(message)
        else:
            click.echo(terminal_safe(message))


@main.command()
@click.argument("file")
@click.option("-o", "--output", "out",
              help="Where to write: OUT.svg, OUT.png, OUT.pdf or OUT.dot (the Graphviz source); - writes to "
                   "standard output (SVG, or --format). Default: FILE's name with .svg in the current directory. "
                   "With several variants and no --variant, one file per variant: -o g.svg writes "
                   "g-VARIANT.svg for each.")
@_variant_option("Only this variant.")
@click.option("--format", "fmt", type=click.Choice(["svg", "png", "pdf", "dot"]),
              help="The picture's format when -o does not say it (-o -, or no -o).")
@_mode_options
def graph(file, out, variant, fmt, float64, structure):
    """Draw the backward graph as PyTorch builds it, with every hook where it attaches.

    Nodes are PyTorch's autograd nodes (with their sequence_nr), boxes are module calls,
    yellow notes are hook calls numbered in firing order (as in solve's report), a grey None
    is an input slot without an edge, a red edge carries materialized zeros. Drawing needs
    Graphviz (apt-get install graphviz); -o FILE.dot writes the source without it."""
    from adjoint.render.output import check_target, write_atomic
    from adjoint.render.graph import picture

    problem = _load(file)
    protect = () if file == "-" else (file,)
    protect += tuple(side_files(problem))
    pred = problem.solve(variant=variant, mode=_mode(float64, structure))
    targets = _graph_targets(file, out, fmt, [v.name for v in pred.variants])
    for _, _, path in targets:
        if path != "-":
            check_target(path, protect)
    written = []
    # a distributed file: rank 0's graph (every rank builds the same graph and fires its hooks,
    # comm hooks included, in the same order; only the values differ)
    shown = [v.ranks[0] for v in pred.variants] if problem.distributed is not None else pred.variants
    for (name, kind, path), v in zip(targets, shown):
        data = picture(v).render(kind)
        if path == "-":
            stream = click.get_binary_stream("stdout")
            stream.write(data)
            stream.flush()
        else:
            write_atomic(path, data, protect=protect)
            written.append(path)
    if written:
        message = f"wrote {' and '.join(written)}"
        if any(path == "-" for *_, path in targets):
            _say(message)
        else:
            click.echo(terminal_safe(message))


def _graph_targets(file: str, out: str | None, fmt: str | None, variants: list[str]) -> list[tuple[str, str, str]]:
    """(variant, format, path) per picture ``graph`` writes; path "-" for standard output."""
    if out == "-":
        if len(variants) > 1:
            raise ProblemError(None, f"-o - writes one picture and the problem has {len(variants)} variants "
                                     f"({', '.join(variants)}); add --variant NAME")
        return [(variants[0], fmt or "svg", "-")]
    if out is None and file == "-":
        raise ProblemError(None, "-: the problem comes from standard input, so there is no name to give the "
                                 "picture; add -o OUT.svg (or -o - for standard output)")
    if out is not None:
        stem, ext = os.path.splitext(out)
        kind = ext[1:].lower()
        if kind not in ("svg", "png", "pdf", "dot"):
            if fmt is None:
                raise ProblemError(None, f"{terminal_safe(out)}: the picture's format comes from the name; end it "
                                         "in .svg, .png, .pdf or .dot, or give --format")
            kind, stem, ext = fmt, out, ""
        elif fmt is not None and fmt != kind:
            raise ProblemError(None, f"{terminal_safe(out)}: the name says {kind} but --format says {fmt}; "
                                     "make them agree")
    else:
        kind = fmt or "svg"
        stem, ext = _here(file, ""), "." + kind
    if len(variants) == 1:
        return [(variants[0], kind, stem + ext)]
    return [(name, kind, f"{stem}-{part}{ext}") for name, part in zip(variants, _file_parts(variants))]


def _here(file: str, ext: str) -> str:
    """The default output name: FILE's name with ``ext``, in the current directory (as every
    command line tool writes), not beside FILE."""
    return os.path.splitext(os.path.basename(file))[0] + ext


def _file_parts(names: list[str]) -> list[str]:
    """Variant names as pieces of file names: ASCII letters, digits, '_', '-' and '.' kept, any other
    character '_'; a piece another variant's took already (``a/b`` and ``a_b``, ``Full`` and ``full``
    on a file system that ignores case) gets ``-2``, ``-3``... so that no picture overwrites another."""
    out, taken = [], set()
    for name in names:
        base = "".join(ch if (ch.isascii() and ch.isalnum()) or ch in "_-." else "_" for ch in name)
        part, n = base, 1
        while part.lower() in taken:
            n += 1
            part = f"{base}-{n}"
        taken.add(part.lower())
        out.append(part)
    return out


def _graph_figures(prediction) -> dict[str, bytes]:
    """Every variant's graph as a PDF, for the document to include; without Graphviz a warning
    and none (the document says how to add them)."""
    from adjoint.render.graph import picture
    from adjoint.render.latex.document import graph_file
    from adjoint.render.pdf import find_engine

    if find_engine() is None:  # compile_pdf says what to install: one line, not a warning before it
        return {}
    try:
        shown = [getattr(v, "ranks", [v])[0] for v in prediction.variants]   # a distributed file: rank 0's graph
        return {graph_file(i): picture(v).render("pdf", max_inches=200) for i, v in enumerate(shown, 1)}
    except ProblemError as err:
        _say(f"adjoint: warning: the PDF has no graph pictures: {err.message}")
        return {}


def _latex_targets(file: str, out: str | None, pdf: bool) -> list[tuple[str, str]]:
    """What ``latex`` writes: [(kind, path)], kind "tex" or "pdf", path "-" for standard output."""
    if out == "-":
        return [("pdf", "-")] if pdf else [("tex", "-")]
    if out is not None and out.lower().endswith(".pdf"):
        return [("pdf", out)]
    if out is None and file == "-":
        if pdf:
            raise ProblemError(None, "-: the problem comes from standard input, so there is no name to give the "
                                     "PDF; add -o OUT.pdf (or -o - for standard output)")
        return [("tex", "-")]
    tex = out if out is not None else _here(file, ".tex")
    return [("tex", tex)] + ([("pdf", os.path.splitext(tex)[0] + ".pdf")] if pdf else [])


if __name__ == "__main__":
    main()
