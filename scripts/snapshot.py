"""Snapshot what adjoint answers for every problem file, to prove a refactor changed nothing.

    python scripts/snapshot.py OUT_DIR            # write OUT_DIR/<file>.json (+ .tex)
    python scripts/snapshot.py OUT_DIR --compare BASE_DIR

For each problem file in problems/, tests/data/ (recursively) and tests/pytorch/, it writes
`solve --json` (or the one-line error) and, for problems/, `adjoint latex`. With --compare,
every file is checked byte for byte against BASE_DIR and the differences are listed; the
exit code is the number of differing files (capped at 100).
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys

ROOTS = ["problems", "tests/data", "tests/pytorch"]


def problem_files() -> list[str]:
    files = []
    for root in ROOTS:
        files += glob.glob(os.path.join(root, "**", "*.yaml"), recursive=True)
    return sorted(files)


def run(args: list[str]) -> str:
    proc = subprocess.run([sys.executable, "-m", "adjoint.cli", *args], capture_output=True, text=True)
    return f"exit {proc.returncode}\n{proc.stdout}{proc.stderr}"


def snapshot(out: str) -> None:
    for path in problem_files():
        key = path.replace("/", "__")
        with open(os.path.join(out, key + ".json"), "w") as fh:
            fh.write(run(["solve", "--json", path]))
        if path.startswith("problems/"):
            tex = os.path.join(out, key + ".tex")
            text = run(["latex", path, "-o", tex])
            if os.path.exists(tex):
                with open(tex) as fh:
                    text += fh.read()
            with open(tex, "w") as fh:
                fh.write(text.replace(tex, "OUT.tex"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--compare")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    snapshot(a.out)
    if not a.compare:
        return 0
    differ = []
    for name in sorted(set(os.listdir(a.out)) | set(os.listdir(a.compare))):
        p, q = os.path.join(a.out, name), os.path.join(a.compare, name)
        if not (os.path.exists(p) and os.path.exists(q)):
            differ.append(f"{name}: only in {'new' if os.path.exists(p) else 'base'}")
            continue
        if open(p, "rb").read() != open(q, "rb").read():
            differ.append(f"{name}: differs")
    print("\n".join(differ) or "identical")
    print(f"{len(differ)} of {len(os.listdir(a.out))} files differ")
    return min(len(differ), 100)


if __name__ == "__main__":
    sys.exit(main())
