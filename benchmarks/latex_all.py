"""Every problem file's derivation through pdflatex: problems/, tests/data/ and tests/pytorch/.

    python benchmarks/latex_all.py [--jobs 2] [--keep DIR] [FILES...]

For each file it solves the problem, renders ``adjoint latex`` and compiles it with
``-halt-on-error`` and the suite's strictness (no LaTeX error, no equation running into the
margin). A file that is bad input (exit 2 in the CLI) is skipped and counted; a problem that
renders or compiles badly is listed with its first error. The exit code is the number of
failures. The test suite compiles a representative subset (tests/test_latex_v2.py); this
script is the full sweep, to run after touching the renderer or the derivation.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

ROOTS = ("problems", "tests/data", "tests/pytorch")


def files() -> list[str]:
    out = []
    for root in ROOTS:
        out += sorted(glob.glob(os.path.join(ROOT, root, "**", "*.yaml"), recursive=True))
    return out


def one(path: str, keep: str | None) -> tuple[str, str, float]:
    """(path, outcome, seconds): outcome is ok, bad-input: ..., or FAIL: ..."""
    import adjoint
    from adjoint.format.errors import ProblemError
    from adjoint.render.latex import render_document
    from adjoint.render.pdf import compile_pdf
    start = time.perf_counter()
    try:
        pred = adjoint.load(path).solve()
    except ProblemError as exc:
        return path, f"bad-input: {str(exc).splitlines()[0][:100]}", time.perf_counter() - start
    except Exception as exc:  # an engine defect: not this script's to judge, but worth seeing
        return path, f"FAIL solve: {type(exc).__name__}: {exc}", time.perf_counter() - start
    try:
        tex = render_document(pred)
    except Exception as exc:
        return path, f"FAIL render: {type(exc).__name__}: {exc}", time.perf_counter() - start
    if keep:
        with open(os.path.join(keep, os.path.basename(path)[:-5] + ".tex"), "w") as fh:
            fh.write(tex)
    try:
        compile_pdf(tex, None, strict=True)
    except ProblemError as exc:
        return path, f"FAIL compile: {exc}", time.perf_counter() - start
    return path, "ok", time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="*")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--keep", help="write every .tex into this directory")
    a = ap.parse_args()
    paths = [os.path.abspath(f) for f in a.files] or files()
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=a.jobs) as pool:
        results = list(pool.map(one, paths, [a.keep] * len(paths)))
    fails = [(p, o) for p, o, _ in results if o.startswith("FAIL")]
    bad = [(p, o) for p, o, _ in results if o.startswith("bad-input")]
    for p, o in fails:
        print(f"{os.path.relpath(p, ROOT)}: {o}")
    slow = sorted(results, key=lambda r: -r[2])[:3]
    print(f"{len(results)} files: {len(results) - len(fails) - len(bad)} compiled, {len(bad)} bad input, "
          f"{len(fails)} failed; {time.perf_counter() - start:.1f}s "
          f"(slowest: {', '.join(f'{os.path.basename(p)} {t:.1f}s' for p, _, t in slow)})")
    return min(len(fails), 100)


if __name__ == "__main__":
    sys.exit(main())
