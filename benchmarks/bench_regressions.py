"""Solve time of the files that once took minutes, as ratios to slinear measured in the same run.

    python benchmarks/bench_regressions.py [--repeat 3]

Some problems the differential sweep found were right but slow: SymPy's adaptive evalf and
assumption system on large closed forms (tests/data/regressions/slow_*.yaml, each file's
description says what was slow and how long it took). The test suite checks that they agree
with PyTorch; this benchmark holds their speed. For each it prints the best of ``--repeat``
runs of solve + JSON, the same for problems/slinear.yaml, their ratio, and the target ratio;
exit code 1 when a ratio is over its target. The targets leave a wide margin over today's
ratios (under 100) and sit far below what the fixed bugs cost (ratios of 10,000 and more)."""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time

from sympy.core.cache import clear_cache

import adjoint

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: file -> the largest acceptable ratio to slinear's solve + JSON time
TARGETS = {"slow_function_check.yaml": 1000, "slow_exact_strings.yaml": 1000, "slow_signed_zero_check.yaml": 500,
           "slow_signed_zero_hook.yaml": 1000, "slow_zero_times_closed_form.yaml": 1000}


def best_time(text: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        clear_cache()  # each run pays what a fresh process pays
        start = time.perf_counter()
        adjoint.loads(text).solve().to_json()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with open(os.path.join(ROOT, "problems", "slinear.yaml")) as fh:
        slinear = fh.read()
    best_time(slinear, 2)  # warm-up: imports, SymPy's caches
    base = best_time(slinear, max(args.repeat, 5))
    print(f"slinear solve + JSON: {base * 1000:.1f} ms (the unit)\n")
    print(f"{'file':<36} {'seconds':>8} {'ratio':>8} {'target':>8}  ok")
    failed = 0
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "data", "regressions", "*.yaml"))):
        name = os.path.basename(path)
        with open(path) as fh:
            seconds = best_time(fh.read(), args.repeat)
        target = TARGETS.get(name)
        ratio = seconds / base
        ok = target is None or ratio <= target
        failed += not ok
        print(f"{name:<36} {seconds:>8.3f} {ratio:>8.0f} {target if target else '-':>8}  {'yes' if ok else 'NO'}")
    missing = sorted(set(TARGETS) - {os.path.basename(p) for p in glob.glob(os.path.join(
        ROOT, "tests", "data", "regressions", "*.yaml"))})
    if missing:
        print(f"targets for missing files: {missing}")
        failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
