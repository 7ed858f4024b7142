"""Command line: ``adjoint solve | verify | latex``. A thin layer over the Python API.

Bad input (a problem-file or command-line mistake) is one line on stderr, exit code 2,
nothing written. torch is imported only by ``verify``.
"""

from __future__ import annotations

import json
import os
import sys

import click

from .errors import ProblemError


def _fail(err: ProblemError) -> None:
    click.echo(err.line(), err=True)
    sys.exit(2)


class _Group(click.Group):
    """Turn every ProblemError (and click's usage errors) into the one-line, exit-2 form (a file with
    several independent mistakes, ProblemErrors: one located line each)."""

    def main(self, *args, **kwargs):
        kwargs.setdefault("standalone_mode", False)
        try:
            return super().main(*args, **kwargs)
        except ProblemError as err:
            _fail(err)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("aborted", err=True)
            sys.exit(2)
        except click.UsageError as exc:
            click.echo(f"adjoint: {exc.format_message()}", err=True)
            sys.exit(2)
        except click.ClickException as exc:
            click.echo(f"adjoint: {exc.format_message()}", err=True)
            sys.exit(2)
        except RecursionError:
            click.echo("adjoint: input nested too deeply to process", err=True)
            sys.exit(2)
        except Exception as exc:  # a bug: still one line, a distinct code
            if os.environ.get("ADJOINT_DEBUG"):
                raise
            click.echo(f"adjoint: internal error ({type(exc).__name__}: {exc}); set ADJOINT_DEBUG=1 for a "
                       "traceback and please report it", err=True)
            sys.exit(3)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="adjoint")
def main() -> None:
    """Predict exactly what every PyTorch backward hook is handed, and prove it."""


def _expand(paths: tuple[str, ...]) -> list[str]:
    files: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            files.extend(sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith((".yaml", ".yml"))))
        elif os.path.exists(p):
            files.append(p)
        else:
            raise ProblemError(None, f"{p}: no such file or directory")
    if not files:
        raise ProblemError(None, f"{' '.join(paths)}: no .yaml problem files found")
    return files


@main.command()
@click.argument("files", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print the contract's JSON instead of the report.")
@click.option("--variant", help="Solve only this variant.")
@click.option("--numeric", is_flag=True, help="Substitute the file's symbols: values (closed form otherwise).")
def solve(files, as_json, variant, numeric):
    """Derive forward values, adjoints, every hook call and final grads, exactly."""
    from . import load
    from .render.console import render

    predictions = []
    for path in _expand(files):
        problem = load(path)
        predictions.append(problem.solve(variant=variant, numeric=numeric))
    if as_json:
        docs = [p.to_json() for p in predictions]
        click.echo(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2))
    else:
        click.echo("\n".join(render(p) for p in predictions), nl=False)


@main.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--dtype", type=click.Choice(["float32", "float64"]), help="Override the problems' dtype.")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.option("--fd", is_flag=True, help="Also check final grads by central differences in float64.")
@click.option("--variant", help="Verify only this variant.")
def verify(paths, dtype, as_json, fd, variant):
    """Run the same problems in real PyTorch and compare with the prediction."""
    from .verify import run

    progress = _ProgressBar if sys.stderr.isatty() and not as_json else None
    code = run(_expand(paths), dtype=dtype, as_json=as_json, fd=fd, variant=variant, echo=click.echo,
               progress=progress)
    sys.exit(code)


class _ProgressBar:
    """verify's progress bar on stderr (a terminal only)."""

    def __init__(self, total: int):
        self.bar = click.progressbar(length=total, label="verifying", file=sys.stderr, show_pos=True,
                                     item_show_func=lambda item: item)
        self.bar.__enter__()

    def update(self, n: int, item: str) -> None:
        self.bar.update(n, item)

    def finish(self) -> None:
        self.bar.__exit__(None, None, None)


@main.command()
@click.argument("file")
@click.option("-o", "--output", "out", help="Write the .tex here (default: FILE with .tex).")
@click.option("--pdf", is_flag=True, help="Also compile to PDF with a LaTeX engine.")
@click.option("--variant", help="Only this variant.")
def latex(file, out, pdf, variant):
    """Write the derivation as a standalone LaTeX document."""
    from . import load
    from .output import write_atomic
    from .render.latex import render_document

    problem = load(file)
    prediction = problem.solve(variant=variant)
    tex = render_document(prediction)
    target = out or os.path.splitext(file)[0] + ".tex"
    if pdf:
        from .render.pdf import compile_pdf

        pdf_path = os.path.splitext(target)[0] + ".pdf"
        compile_pdf(tex, pdf_path)  # raises ProblemError, writes nothing, when it cannot
        write_atomic(target, tex)
        click.echo(f"wrote {target} and {pdf_path}")
    else:
        write_atomic(target, tex)
        click.echo(f"wrote {target}")


if __name__ == "__main__":
    main()
