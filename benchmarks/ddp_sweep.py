"""Random DistributedDataParallel problems (tests/gen/ddp.py) solved and verified on real gloo
processes: ``python benchmarks/ddp_sweep.py --n 100 --seed 1``. Problem ``i`` of seed ``s`` is
``generate(random.Random(f"{s}-{i}"))``; a disagreeing problem (or one that fails to solve or
run) is written to ``--out`` with what went wrong. Exit code 0 when every problem agreed."""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

import adjoint  # noqa: E402
from adjoint.torchside.verify_ddp import verify_ranks  # noqa: E402
from gen.ddp import generate  # noqa: E402
from gen.fsdp import generate as generate_fsdp  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--seed", default="1")
    ap.add_argument("--only", type=int, default=None, help="check just problem INDEX and print it")
    ap.add_argument("--out", default=None)
    ap.add_argument("--kind", choices=("ddp", "fsdp"), default="ddp",
                    help="ddp: tests/gen/ddp.py; fsdp: fully_shard files (tests/gen/fsdp.py)")
    args = ap.parse_args(argv)
    out = args.out or tempfile.mkdtemp(prefix="ddp-sweep-")
    os.makedirs(out, exist_ok=True)
    indices = [args.only] if args.only is not None else range(args.n)
    bad = 0
    refused = 0
    t0 = time.perf_counter()
    for i in indices:
        text = (generate_fsdp if args.kind == "fsdp" else generate)(random.Random(f"{args.seed}-{i}"))
        if args.only is not None:
            print(text)
        try:
            problem = adjoint.loads(text, f"{args.kind}-{args.seed}-{i}.yaml")
            pred = problem.solve()
        except adjoint.ProblemError as exc:
            refused += 1
            print(f"{i}: refused: {exc}")
            continue
        try:
            detail = []
            for vp in pred.variants:
                rows, _ = verify_ranks(problem, vp, problem.dtype, False)
                detail += [f"{r.item}: {r.detail}" for r in rows if not r.ok]
        except Exception:
            detail = [traceback.format_exc()]
        if detail:
            bad += 1
            path = os.path.join(out, f"{args.kind}-{args.seed}-{i}.yaml")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text + "".join(f"# {line}\n" for d in detail for line in d.splitlines()))
            print(f"{i}: DISAGREES ({len(detail)} rows): {path}")
    n = len(indices)
    print(f"{n} {args.kind.upper()} problems, seed {args.seed}: {n - bad - refused} agreed, {bad} disagreed, {refused} refused; "
          f"{time.perf_counter() - t0:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
