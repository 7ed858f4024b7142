"""Longer robustness sweep: mutate valid problem files N times and count outcomes.

    python benchmarks/fuzz.py --n 3000 [--seed 1] [--verify]

Prints how many mutants were tried, how many were answered (exit 0), refused (exit 2: one
line, or one located line per independent mistake), and how many broke the rule (anything
else: a traceback, exit 3, unlocated extra lines, a run over the time limit). Each broken mutant is written to a temp dir."""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from click.testing import CliRunner  # noqa: E402
from hypothesis import HealthCheck, given, settings, seed as hseed  # noqa: E402

from adjoint.cli import main  # noqa: E402
from adjoint.format.errors import MAX_REPORTED  # noqa: E402
from fuzzing import mutated_text  # noqa: E402

LOCATED = re.compile(r".+:\d+:\d+: \S")


def classify(path: str, args: list[str], limit: float) -> str:
    start = time.perf_counter()
    result = CliRunner().invoke(main, args + [path])
    elapsed = time.perf_counter() - start
    if elapsed > limit:
        return f"slow ({elapsed:.1f}s)"
    if result.exit_code == 0:
        return "answered"
    lines = result.stderr.splitlines()
    if result.exit_code == 2 and len(lines) == 1 and not result.stdout:
        return "refused in one line"
    if result.exit_code == 2 and 1 < len(lines) <= MAX_REPORTED + 1 and not result.stdout \
            and all(LOCATED.match(line) for line in lines):
        return "refused, one located line per mistake"
    return f"BROKEN exit={result.exit_code}: {result.stderr.strip()[:200]} {result.exception!r}"[:300]


def run(n: int, seed: int, verify: bool, limit: float) -> int:
    out_dir = tempfile.mkdtemp(prefix="adjoint-fuzz-")
    counts: collections.Counter = collections.Counter()
    broken: list[str] = []

    @hseed(seed)
    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(text=mutated_text())
    def sweep(text):
        path = os.path.join(out_dir, f"mutant-{sum(counts.values()):05d}.yaml")
        with open(path, "w", encoding="utf-8", errors="surrogatepass") as fh:
            fh.write(text)
        verdict = classify(path, ["solve", "--json"], limit)
        if verdict == "answered":
            for extra in (["latex", "-o", path + ".tex"],) + ((["verify"],) if verify else ()):
                second = classify(path, extra, limit * 3)
                if extra[0] == "verify" and second.startswith("BROKEN exit=1"):
                    verdict = "verify found a mismatch (prediction vs torch)"
                elif second not in ("answered", "refused in one line"):
                    verdict = f"{extra[0]}: {second}"
        key = verdict if not verdict.startswith(("BROKEN", "slow", "latex", "verify:")) else "broken"
        if key.startswith("verify found"):
            broken.append(f"{path}: {verdict}")
        counts[key] += 1
        if key == "broken":
            broken.append(f"{path}: {verdict}")
        elif not key.startswith("verify found"):
            os.unlink(path)

    start = time.perf_counter()
    sweep()
    total = sum(counts.values())
    print(f"mutants tried: {total} in {time.perf_counter() - start:.0f}s (seed {seed})")
    for k, v in counts.most_common():
        print(f"  {k}: {v}")
    print(f"tracebacks / broken / mismatches: {len(broken)}")
    for b in broken[:20]:
        print("  " + b)
    return 1 if broken else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--verify", action="store_true", help="also run verify (real torch) on answered mutants")
    ap.add_argument("--limit", type=float, default=10.0, help="seconds per run before it counts as a hang")
    args = ap.parse_args()
    sys.exit(run(args.n, args.seed, args.verify, args.limit))
