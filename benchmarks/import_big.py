"""Big-model import: ``examples/resnet18.py`` imported (side file), then solved in
``--structure`` and ``--float64`` and, with ``--verify``, verified with ``--origin`` against
the module itself. Each step is a fresh process, timed (wall and child CPU seconds).

    python benchmarks/import_big.py [--verify] [--input x=1x3x1x1] [--keep DIR]

Too slow for the test suite on two shared cores (tests use small models); numbers in
docs/import.md.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(cmd: list[str], cwd: str) -> tuple[float, float, int]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0,):
        print(done.stderr.strip()[-500:], file=sys.stderr)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.returncode


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--verify", action="store_true", help="also verify --float64 --origin (slow)")
    ap.add_argument("--keep", help="work in this directory (kept) instead of a temporary one")
    ap.add_argument("--input", default="x=1x3x32x32", help="the input (x=1x3x1x1 is the smallest ResNet-18 takes)")
    args = ap.parse_args()
    work = args.keep or tempfile.mkdtemp(prefix="adjoint-big-")
    os.makedirs(work, exist_ok=True)
    shutil.copy(os.path.join(ROOT, "examples", "resnet18.py"), work)
    py = [sys.executable, "-m", "adjoint"]
    steps = [("import", py + ["import", "resnet18.py:make_model", "--input", args.input, "-o", "resnet18.yaml"]),
             ("solve --structure", py + ["solve", "resnet18.yaml", "--structure"]),
             ("solve --float64", py + ["solve", "resnet18.yaml", "--float64"])]
    if args.verify:
        steps.append(("verify --float64 --origin", py + ["verify", "resnet18.yaml", "--float64", "--origin"]))
    bad = 0
    for name, cmd in steps:
        wall, cpu, code = timed(cmd, work)
        bad |= code != 0
        print(f"{name:<28} exit {code}  {wall:7.1f} s wall  {cpu:7.1f} s CPU")
    sizes = {f: os.path.getsize(os.path.join(work, f)) for f in ("resnet18.yaml", "resnet18.safetensors")}
    print(", ".join(f"{f}: {n:,} bytes" for f, n in sizes.items()))
    if not args.keep:
        shutil.rmtree(work)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
