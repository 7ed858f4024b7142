"""The machine the numbers were taken on, and the table / JSON that show them."""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import subprocess

from .context import ROOT
from .reference import TORCH_THREADS
from .spec import Outcome


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _libyaml() -> str:
    import yaml  # only to ask which libyaml PyYAML's C loader is built against

    if not getattr(yaml, "__with_libyaml__", False):
        return "absent"
    from yaml import _yaml

    return _yaml.get_version_string()


def _flint_library() -> str:
    import flint

    return getattr(flint, "__FLINT_VERSION__", "unknown")


def _commit() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return rev.stdout.strip() + ("+changes" if dirty.stdout.strip() else "") if rev.returncode == 0 else "unknown"


def machine() -> dict:
    """Cores, CPU, OS and the versions that decide the numbers."""
    return {
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu": _cpu_model(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "torch": _version("torch"),
        "torch_threads": TORCH_THREADS,
        "sympy": _version("sympy"),
        "python_flint": _version("python-flint"),
        "flint": _flint_library(),
        "pyyaml": _version("PyYAML"),
        "libyaml": _libyaml(),
        "numpy": _version("numpy"),
        "adjoint_commit": _commit(),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
    }


def to_json(info: dict, outcomes: list[Outcome]) -> dict:
    return {"machine": info, "results": [o.to_json() for o in outcomes]}


def _value_text(name: str, value) -> str:
    if isinstance(value, str):
        return value
    if name.endswith("_s"):
        return f"{value * 1000:.3g} ms" if value < 1 else f"{value:.3g} s"
    if name.endswith("_mb"):
        return f"{value:.0f} MB"
    if abs(value) < 1e-3 and value != 0:
        return f"{value:.1e}"
    return f"{value:.3g}"


def table(info: dict, outcomes: list[Outcome], mode: str) -> str:
    """The header (machine, method) and one row per metric: value, target, met."""
    header = [
        f"adjoint benchmarks (issue 15), {mode} run, {info['date']}, adjoint {info['adjoint_commit']}",
        f"machine: {info['cores']} cores ({info['cores_usable']} usable), {info['cpu']}, {info['os']}",
        f"versions: Python {info['python']}, torch {info['torch']} ({info['torch_threads']} thread; numpy's BLAS 1 "
        f"thread too), "
        f"SymPy {info['sympy']}, python-flint {info['python_flint']} (FLINT {info['flint']}), "
        f"PyYAML {info['pyyaml']} (libyaml {info['libyaml']}), numpy {info['numpy']}",
        "method: each ratio measured in one process, its sides interleaved, median of k rounds "
        "(torch: mean of its calls within a round); start-up: whole processes, medians",
        "terms: load = read + compose + validate; json = the text `solve --json` prints; torch = float64 eager "
        "forward + backward with the same hooks (the models: built by verify's torch side from the same file); "
        "structure / float64 = `solve --structure` / `--float64`",
    ]
    if mode == "quick":
        header.append("quick: 3 rounds (not 5-9; the large models 1, not 3), half the torch calls per round, time "
                      "limits of 6-25 s per workload (45-90 s for the large models; not 2-10 min), N = 4096 skipped")
    width = max(len(o.metric.name) for o in outcomes) if outcomes else 10
    rows = [f"{'metric':<{width}}  {'value':>22}  {'target':>9}  met"]
    for o in outcomes:
        target = str(o.metric.target) if o.metric.target else ""
        met = {True: "yes", False: "NO", None: ""}[o.met]
        rows.append(f"{o.metric.name:<{width}}  {_value_text(o.metric.name, o.value):>22}  {target:>9}  {met}")
    met = [o.met for o in outcomes if o.met is not None]
    footer = f"targets met: {sum(met)} of {len(met)}"
    return "\n".join(header + [""] + rows + ["", footer]) + "\n"
