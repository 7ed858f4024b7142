"""Issue 15's performance harness: every workload, one table, each ratio next to its target.

    python benchmarks/run.py [--quick] [--json] [--only NAME ...] [--timeout SECONDS]

Workloads (``--only`` takes these names, or a unit's own name such as ``deep_relu``):
``mlp`` (ReLU MLP, width 64, 8 layers, batch 8, full hooks on every Linear, tensor hooks on
every activation: load vs libyaml's bare compose, solve + JSON vs torch float64 with the same
hooks, solve vs the same arithmetic written directly in python-flint, the engine's reverse vs
forward phase), ``mlp_tanh`` (the same with Tanh, vs torch), ``deep`` (residual chains
``u + tanh(A @ u)`` and ``u + relu(A @ u)``, width 4: time(512) / time(256), and one run at
N = 4096), ``symbolic`` (free w_i, b_i, depth 16, vs ``sympy.diff`` per parameter, answers
compared at random rational points), ``startup`` (``adjoint solve problems/slinear.yaml``
as a process vs ``python -c "import sympy"``), ``memory`` (peak RSS of solving ``mlp``), and
the models: issue 11's ``models`` (``cnn``: Conv2d, BatchNorm2d, ReLU, MaxPool2d, Linear,
CrossEntropyLoss at batch 4, 8x8; ``transformer``: one pre-LN block at width 16, seq 8, batch 2:
exact solve + JSON vs torch's forward + backward of the same model, no target) and issue 12's
``large`` (``resnet18`` on 3x32x32 and a 12-block ``gpt2`` of width 768, seq 16, weights in
float32 side files: ``--structure`` and ``--float64`` solve vs one torch forward + backward;
targets under 10x and under 20x; the file's load time reported on its own).

Every problem file is generated into a temporary directory. Each unit runs in its own
process under a time limit: a unit that does not finish is reported as "timeout after N s"
(what it measured before that is kept). Each ratio is measured in one process, its sides
interleaved, median of k rounds (k = 7 for mlp, 5 for the slower workloads, 9 process runs for
start-up). ``--quick`` (about a minute) uses 3 rounds, fewer torch calls per round, time limits
of 6-25 s instead of 2-10 min (45-90 s for the large models: one round each), and skips the
N = 4096 runs.

``--json`` prints ``{"machine": {...}, "results": [{"name", "value", "target", "met"}]}``;
a metric's name ends in ``_s`` (seconds) or ``_mb``, a name with ``/`` is a ratio; ``value``
is a string when there is no number (a timeout, a failure, a skipped unit). Exit code 0 when
every target is met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))  # this checkout's adjoint, not another installed one

from perf import report, units  # noqa: E402
from perf.context import ROOT, Context  # noqa: E402
from perf.spec import Outcome  # noqa: E402

#: how a worker process reports one metric on stdout
PREFIX = "RESULT "
#: numpy's BLAS (the --float64 mode's matrix products) on one thread, as torch is
#: (reference.TORCH_THREADS): OpenBLAS's spinning threads on a shared two-core machine made a
#: product 4-8x slower than on one thread, and the ratio would time the machine's load. Units
#: with ``own_threads`` (issue 29's float64 MLP) run as a user runs them instead: adjoint sizes
#: its BLAS pool itself (threadpoolctl), torch uses its default intra-op threads.
BLAS_THREADS = {"OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def worker(name: str, quick: bool, tmpdir: str) -> int:
    """Run one unit in this process, printing each metric as it is measured."""
    unit = units.unit(name)
    declared = {m.name for m in unit.metrics}

    def emit(metric: str, value: float) -> None:
        if metric not in declared:
            raise ValueError(f"unit {name} emitted {metric!r}, which it does not declare")
        print(PREFIX + json.dumps({"name": metric, "value": float(value)}), flush=True)

    unit.measure(Context(quick, tmpdir, emit))
    return 0


def _parse(stdout: str) -> dict[str, float]:
    values = {}
    for line in stdout.splitlines():
        if line.startswith(PREFIX):
            item = json.loads(line[len(PREFIX):])
            values[item["name"]] = item["value"]
    return values


def run_unit(unit: units.Unit, quick: bool, timeout: float | None) -> list[Outcome]:
    """Run ``unit`` in a child process under its time limit; one Outcome per declared metric."""
    if quick and unit.full_only:
        return [Outcome(m, "skipped (--quick)") for m in unit.metrics]
    limit = timeout if timeout is not None else unit.timeout(quick)
    tmpdir = tempfile.mkdtemp(prefix=f"adjoint-bench-{unit.name}-")
    argv = [sys.executable, os.path.abspath(__file__), "--worker", unit.name, "--tmpdir", tmpdir]
    argv += ["--quick"] if quick else []
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    if not unit.own_threads:
        env.update(BLAS_THREADS)
    started = time.perf_counter()
    print(f"{unit.name} ...", end="", file=sys.stderr, flush=True)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)  # its own process group: a timeout kills its children too
    timed_out = False
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    elapsed = time.perf_counter() - started
    values = _parse(out)
    if timed_out:
        missing = f"timeout after {limit:g} s"
    elif proc.returncode != 0:
        last = err.strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
        missing = f"failed: {last[0][:80]}"
    else:
        missing = "not measured (a harness bug)"
    status = "timeout" if timed_out else ("failed" if proc.returncode else "done")
    print(f" {status} in {elapsed:.1f} s", file=sys.stderr, flush=True)
    if proc.returncode and not timed_out:
        sys.stderr.write("".join(f"    {line}\n" for line in err.strip().splitlines()[-6:]))
    return [Outcome(m, values.get(m.name, missing)) for m in unit.metrics]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="about a minute: 3 rounds (the large models 1), short time limits, no N = 4096")
    ap.add_argument("--json", action="store_true", help="print the machine and results as JSON")
    ap.add_argument("--only", action="append", metavar="NAME",
                    help="only this workload (repeatable): mlp, mlp_tanh, deep, symbolic, startup, memory, models, "
                         "large, or a unit such as deep_relu or gpt2")
    ap.add_argument("--timeout", type=float, help="seconds per unit, instead of each unit's own limit")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--tmpdir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker, args.quick, args.tmpdir)
    try:
        chosen = units.select(args.only)
    except ValueError as exc:
        ap.error(str(exc))
    info = report.machine()
    outcomes = [o for unit in chosen for o in run_unit(unit, args.quick, args.timeout)]
    if args.json:
        print(json.dumps(report.to_json(info, outcomes), indent=2))
    else:
        print(report.table(info, outcomes, "quick" if args.quick else "full"), end="")
    return 0 if all(o.met is not False for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
