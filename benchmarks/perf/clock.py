"""Timing: both sides of a ratio in one process, interleaved; whole processes from outside.

A ratio is only as good as the machine's steadiness between its two sides, so every ratio
here is measured in one run: each round times every side once, in turn, and a side's figure
is the median over the rounds (median-of-k, interleaved). A side much faster than the
timer's useful resolution (torch: about a millisecond) is run ``inner`` times per round and
its round figure is the mean of those calls.

Every timed call starts with the garbage of the calls before it collected (``gc.collect()``,
untimed). A solve's graph is full of reference cycles (tensors and their nodes, as in PyTorch's
own object graph), so a dropped prediction waits for Python's cyclic collector; without the
collection each round ran beside every earlier round's unreleased arrays (700 MB per GPT-2 solve)
and paid for touching fresh memory, which no single ``adjoint`` process does: the GPT-2
``--float64`` solve measured 1.7-1.9 s that way and 0.45-0.92 s with the collection.
"""

from __future__ import annotations

import gc
import statistics
import subprocess
import time
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Side:
    """One thing to time: ``run`` is called with no arguments; ``before`` (untimed) runs first
    each time, e.g. to clear SymPy's cache so that every call pays what a fresh process pays."""

    name: str
    run: Callable[[], object]
    inner: int = 1
    before: Callable[[], object] | None = None


def seconds(fn: Callable[[], object]) -> float:
    """Wall-clock seconds of one call."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _round_figure(side: Side) -> float:
    total = 0.0
    for _ in range(side.inner):
        if side.before is not None:
            side.before()
        gc.collect()
        total += seconds(side.run)
    return total / side.inner


def interleaved(sides: list[Side], rounds: int, warmup: bool = True) -> dict[str, float]:
    """Median seconds per call of each side over ``rounds`` interleaved rounds (one untimed call
    of each side first when ``warmup``)."""
    if warmup:
        for side in sides:
            if side.before is not None:
                side.before()
            side.run()
    figures: dict[str, list[float]] = {side.name: [] for side in sides}
    for _ in range(rounds):
        for side in sides:
            figures[side.name].append(_round_figure(side))
    return {name: statistics.median(values) for name, values in figures.items()}


def process_seconds(commands: dict[str, list[str]], rounds: int, env: dict[str, str], cwd: str) -> dict[str, float]:
    """Median wall-clock seconds of each command run as a whole process, interleaved over
    ``rounds`` rounds after one untimed warm-up run each (the OS file cache). Output is thrown
    away; a command that exits non-zero is an error (it did not do the work being timed)."""

    def run(name: str, argv: list[str]) -> float:
        start = time.perf_counter()
        done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)
        elapsed = time.perf_counter() - start
        if done.returncode != 0:
            tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
            raise RuntimeError(f"{name}: {' '.join(argv)} exited {done.returncode}: {tail[0]}")
        return elapsed

    for name, argv in commands.items():
        run(name, argv)
    figures: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(rounds):
        for name, argv in commands.items():
            figures[name].append(run(name, argv))
    return {name: statistics.median(values) for name, values in figures.items()}
