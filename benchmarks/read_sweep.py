"""A differential sweep of read steps: random problems of tests/gen (without steps of their
own) given ``steps: [forward, {read: model.grad_fn._saved_SLOT, as: r1},
{read: torch._C._autograd._saved_tensors_hooks_is_enabled(), as: r2}, backward]`` (and, for
every other problem, a read of the same slot after the backward: the freed error), each
checked like the sweep (:func:`gen.check`: solved, run in real torch, compared, reads included).

    python benchmarks/read_sweep.py --n 250 --seed s1                  # v1 problems
    python benchmarks/read_sweep.py --n 150 --seed v2a --v2-share 1    # v2 (saved-tensor hooks)

SLOT is one the output's node saves in adjoint's run (so most reads give values), and for one
problem in four self/other/result in turn (most of those are PyTorch's AttributeError). A
problem whose output is not one tensor makes both sides refuse the read (``invalid``: the
harness's choice, not a disagreement). Prints the outcomes per variant; writes each
disagreeing problem, with what went wrong appended, to ``--out``.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
sys.path.insert(0, os.path.dirname(HERE))   # this checkout's adjoint, not an installed one

import adjoint  # noqa: E402
import gen as G  # noqa: E402

SLOTS = ("self", "other", "result")


def with_reads(text: str, i: int) -> str | None:
    if "steps:" in text:
        return None
    slot = SLOTS[i % 3]
    try:   # a slot the output's node saves, in adjoint's run of the first variant
        node = adjoint.loads(text).solve().variants[0].run.reg.names["model"].grad_fn
        names = [sv.name for sv in node.saved] if node is not None else []
        if names and i % 4 != 3:
            slot = names[i % len(names)]
    except Exception:   # noqa: BLE001 (the check below reports whatever this problem does)
        pass
    after = f", {{read: model.grad_fn._saved_{slot}, as: r3}}" if i % 2 == 0 else ""
    return text.rstrip("\n") + (f"\nsteps: [forward, {{read: model.grad_fn._saved_{slot}, as: r1}}, "
                                f"{{read: torch._C._autograd._saved_tensors_hooks_is_enabled(), as: r2}}, "
                                f"backward{after}]\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=250)
    ap.add_argument("--seed", default="s1")
    ap.add_argument("--v2-share", type=float, default=0.0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="read-sweep-")
    counts: Counter = Counter()
    bad = 0
    start = time.time()
    for i in range(args.n):
        text = with_reads(G.generate(random.Random(f"{args.seed}-{i}"), budget=2, v2_share=args.v2_share), i)
        if text is None:
            counts["skipped (steps of its own)"] += 1
            continue
        outcome = G.check(text, timeout=60)
        for name, status, detail in outcome.variants:
            counts[status] += 1
            if status not in G.GOOD and status != "invalid":
                bad += 1
                with open(os.path.join(out, f"read_{args.seed}_{i}.yaml"), "w", encoding="utf-8") as fh:
                    fh.write(text + ("\n" + f"{name}: {status}: {detail}").replace("\n", "\n# ") + "\n")
    print(f"{args.n} problems, {time.time() - start:.0f}s: {dict(counts)}; {bad} disagreeing variants in {out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
