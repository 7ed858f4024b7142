"""The large differential sweep: random valid problems, solved exactly and run in PyTorch.

    python benchmarks/sweep.py --n 2000 --seed 1            # the target sweep
    python benchmarks/sweep.py --n 200 --seed 7 --jobs 2    # quicker, on two cores

Problem ``i`` of seed ``s`` is ``tests/gen.generate(random.Random(f"{s}-{i}"))``, so
any one can be regenerated alone (``--only i``). Each is checked like tests/test_differential.py
does (:func:`gen.check`: every variant solved, run in real torch, compared). Prints
how many problems and variants were tried, how many disagreed (mismatch, solve refusing
what PyTorch runs, a traceback), timeouts, timings, and the features covered with counts;
writes every disagreeing or timed-out problem, with what went wrong appended as comments,
to a temporary directory (``--out`` to choose it). Exit code 1 when anything disagreed.
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

import gen as G  # noqa: E402
from gen.second import generate_second  # noqa: E402
from gen.complexgen import generate_complex  # noqa: E402
from gen.checkpoint import generate_checkpoint  # noqa: E402
from gen.recurrent import generate_rnn_spec  # noqa: E402

DISAGREE = ("crash", "harness", "invalid", "refused", "mismatch")


def one(job):
    seed, i, budget, timeout = job[:4]
    if len(job) > 4 and job[4] == "second":   # tests/gen/second.py: create_graph, grad of grad
        text, cov = generate_second(random.Random(f"{seed}-{i}"))
        return i, text, G.check(text, timeout=timeout), cov
    if len(job) > 4 and job[4] in ("complex", "checkpoint"):   # tests/gen/complexgen.py, tests/gen/checkpoint.py
        make = generate_complex if job[4] == "complex" else generate_checkpoint
        text, cov = make(random.Random(f"{seed}-{i}"))
        return i, text, G.check(text, timeout=timeout), cov
    if len(job) > 4 and job[4] == "rnn":   # tests/gen/recurrent.py: a recurrent layer in each
        spec = generate_rnn_spec(random.Random(f"{seed}-{i}"), budget)
    else:   # train: tests/gen/train.py's loops over gen's problems
        spec = G.generate_spec(random.Random(f"{seed}-{i}"), budget, train=len(job) > 4 and job[4] == "train")
    text = G.to_yaml(spec)
    outcome = G.check(text, timeout=timeout)
    return i, text, outcome, G.coverage(spec)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2000, help="problems to try (default 2000)")
    ap.add_argument("--seed", default="1", help="sweep seed (default 1)")
    ap.add_argument("--start", type=int, default=0, help="first problem index (default 0)")
    ap.add_argument("--only", type=int, default=None, help="check just problem INDEX and print it")
    ap.add_argument("--budget", type=int, default=G.TRANSCENDENTAL_BUDGET,
                    help=f"transcendental ops per problem (default {G.TRANSCENDENTAL_BUDGET})")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per variant (default 60)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    ap.add_argument("--out", default=None, help="where to write disagreeing problems (default: a new temp dir)")
    ap.add_argument("--quiet", action="store_true", help="no progress line")
    ap.add_argument("--kind", choices=("all", "second", "complex", "checkpoint", "rnn", "train"), default="all",
                    help="second: only second-order problems (tests/gen/second.py); complex: complex tensors "
                         "(tests/gen/complexgen.py); checkpoint: only torch.utils.checkpoint problems "
                         "(tests/gen/checkpoint.py); rnn: layer problems each with an nn.RNN / LSTM / GRU "
                         "(tests/gen/recurrent.py); train: training loops (clipping, torch.optim steps, "
                         "optimizers in post_accumulate_grad hooks: tests/gen/train.py); default all: tests/gen")
    args = ap.parse_args(argv)

    if args.only is not None:
        i, text, outcome, _ = one((args.seed, args.only, args.budget, args.timeout, args.kind))
        print(text)
        print(f"# problem {i} of seed {args.seed}: {outcome.status} ({outcome.seconds:.2f}s)")
        print("\n".join("# " + line for line in outcome.report().splitlines()))
        return 0 if outcome.ok and outcome.status != "timeout" else 1

    out_dir = args.out
    jobs = [(args.seed, i, args.budget, args.timeout, args.kind) for i in range(args.start, args.start + args.n)]
    statuses: Counter = Counter()       # per variant
    problem_status: Counter = Counter()
    coverage: Counter = Counter()
    seconds: list[float] = []
    solve_seconds = 0.0
    written: list[str] = []
    start = time.perf_counter()

    def record(result) -> None:
        nonlocal solve_seconds
        i, text, outcome, cov = result
        coverage.update(cov)
        for _, st, _ in outcome.variants:
            statuses[st] += 1
        problem_status[outcome.status] += 1
        seconds.append(outcome.seconds)
        solve_seconds += outcome.solve_seconds
        if outcome.status in DISAGREE or outcome.status == "timeout":
            nonlocal out_dir
            if out_dir is None:
                out_dir = tempfile.mkdtemp(prefix=f"adjoint-sweep-{args.seed}-")
            os.makedirs(out_dir, exist_ok=True)
            path = os.path.join(out_dir, f"{outcome.status}-{args.seed}-{i}.yaml")
            with open(path, "w") as fh:
                fh.write(text)
                fh.write(f"# problem {i} of seed {args.seed}: {outcome.status}\n")
                fh.write("".join(f"# {line}\n" for line in outcome.report().splitlines()))
            written.append(path)
        if not args.quiet and sys.stderr.isatty():
            done = len(seconds)
            bad = sum(problem_status[s] for s in DISAGREE)
            print(f"\r{done}/{len(jobs)} problems, {bad} disagreeing, {problem_status['timeout']} timeouts, "
                  f"{time.perf_counter() - start:.0f}s", end="", file=sys.stderr, flush=True)

    if args.jobs > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(args.jobs) as pool:
            for result in pool.imap_unordered(one, jobs, chunksize=4):
                record(result)
    else:
        for job in jobs:
            record(one(job))
    wall = time.perf_counter() - start
    if not args.quiet and sys.stderr.isatty():
        print(file=sys.stderr)

    n_bad = sum(problem_status[s] for s in DISAGREE)
    seconds.sort()
    q = (lambda f: seconds[min(len(seconds) - 1, int(f * len(seconds)))]) if seconds else (lambda f: 0.0)
    print(f"adjoint differential sweep: seed {args.seed}, problems {args.start}..{args.start + args.n - 1} "
          f"(transcendental budget {args.budget}, timeout {args.timeout:g}s per variant, {args.jobs} job(s))")
    print(f"problems tried:    {len(seconds)}")
    print(f"variants checked:  {sum(statuses.values())}: " +
          ", ".join(f"{k} {v}" for k, v in statuses.most_common()))
    print("                   (ok: every item matched; both_raise: solve predicts PyTorch's error exactly (type, message, phase, the calls before it); nonfinite: solve "
          "refuses a non-finite forward, skipped;\n                   f32/f64_rounding: PyTorch's rounding, at least "
          "1000x larger in float32 than in float64 (or solve --float64 gives it); overflow: an exact value beyond the dtype's range;\n"
          "                   torch_crashes: solve refuses a problem PyTorch segfaults on, and a child process running it "
          "does crash)")
    print(f"disagreements:     {n_bad} problem(s)" +
          (" (" + ", ".join(f"{s} {problem_status[s]}" for s in DISAGREE if problem_status[s]) + ")" if n_bad else ""))
    print(f"timeouts:          {problem_status['timeout']} problem(s)")
    print(f"time:              {wall:.1f}s wall; per problem median {q(0.5):.2f}s, p90 {q(0.9):.2f}s, "
          f"p99 {q(0.99):.2f}s, max {q(1.0):.2f}s; exact solve {solve_seconds:.1f}s in all")
    print("coverage (occurrences over all problems):")
    groups = [("v2 problems", lambda k: k == "v2 problem"),
              ("v2 forms (views, copies, methods, keyword arguments, indexing)", lambda k: k.startswith("v2 form ")),
              ("v2 statements", lambda k: k.startswith(("v2 statement ", "stmt ", "v2 forward "))),
              ("v2 steps", lambda k: k.startswith("steps ")),
              ("comparisons (masks, where, bool tensors, ties, nan gradients; tests/gen/cmpexprs.py)",
               lambda k: k.startswith("cmp ")),
              ("modules", lambda k: k.startswith("module ") or k in ("child called twice",
                                                                      "multi-input call, mixed requires_grad",
                                                                      "param requires_grad false")),
              ("hooks", lambda k: k.startswith(("hook ", "tensor hook on", "retain_grad on"))),
              ("backward", lambda k: k.startswith("backward") or k in ("loss", "no loss", "targets", "variants",
                                                                       "input requires grad", "input no grad"))]
    seen = set()
    for title, pick in groups:
        keys = sorted(k for k in coverage if pick(k))
        seen.update(keys)
        print(f"  {title}: " + ", ".join(f"{k} {coverage[k]}" for k in keys))
    ops = sorted(k for k in coverage if k not in seen)
    print("  ops: " + ", ".join(f"{k} {coverage[k]}" for k in ops))
    if written:
        print(f"{len(written)} problem(s) written to {out_dir}/")
    else:
        print("no problem to write (nothing disagreed or timed out)")
    return 1 if n_bad else 0


if __name__ == "__main__":
    sys.exit(main())
