"""The benchmark's units of work: each runs in its own process under its own time limit.

A unit is one measurement function of ``measure`` with the metrics it emits (issue 15's
targets attached; issue 12's for ``large``; issue 11 set none for ``models``; where issue 29
set a newer goal for a row -- ``mlp.solve/torch``, ``mlp.(load+solve+json)/torch``,
``mlp_tanh.solve/torch``, ``f64_mlp``, the large models' ``float64/torch``, ``symbolic``,
``startup`` and ``startup_mlp`` -- the target is issue 29's) and its time limits. ``--only`` selects units by name or by group (the
workload name the issue uses: ``deep`` is four units).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from . import measure
from .context import Context
from .spec import FINISHES, Metric, at_least, at_most, under


@dataclass(frozen=True)
class Unit:
    """``timeouts``: (quick, full) seconds before the unit's process is killed and its missing
    metrics reported as timed out; ``full_only``: skipped under --quick; ``own_threads``: the
    worker runs without the harness's one-thread BLAS environment (run.BLAS_THREADS)."""

    name: str
    group: str
    metrics: tuple[Metric, ...]
    measure: Callable[[Context], None]
    timeouts: tuple[float, float]
    full_only: bool = False
    own_threads: bool = False

    def timeout(self, quick: bool) -> float:
        return self.timeouts[0] if quick else self.timeouts[1]


def _seconds(*names: str) -> tuple[Metric, ...]:
    return tuple(Metric(name) for name in names)


def _decimal_metrics(prefix: str) -> tuple[Metric, ...]:
    """The floor under (solve+json)/torch: writing the answer's decimals alone (no target)."""
    return (Metric(f"{prefix}.answer_decimals"),) + _seconds(f"{prefix}.decimal_text_s") + (
        Metric(f"{prefix}.decimal_text/torch"),)


def _chain_metrics(prefix: str) -> tuple[Metric, ...]:
    return _seconds(f"{prefix}.t256_s", f"{prefix}.t512_s") + (
        Metric(f"{prefix}.t512/t256", at_most(2.2)), Metric(f"{prefix}.json_bytes512/256"))


UNITS: tuple[Unit, ...] = (
    Unit("mlp", "mlp",
         _seconds("mlp.load_s", "mlp.libyaml_compose_s")
         + (Metric("mlp.load/libyaml_compose", at_most(2)),)
         + _seconds("mlp.solve_s", "mlp.json_s", "mlp.torch_fwd_bwd_s", "mlp.flint_floor_s")
         + (Metric("mlp.(solve+json)/torch", at_most(5)), Metric("mlp.solve/flint_floor", at_most(1.3)),
            Metric("mlp.solve/torch", at_most(10)), Metric("mlp.(load+solve+json)/torch", at_most(30)))
         + _seconds("mlp.compact_json_s") + (Metric("mlp.(load+solve+compact)/torch"),)
         + _decimal_metrics("mlp")
         + _seconds("mlp.forward_s", "mlp.reverse_s", "mlp.assemble_s")
         + (Metric("mlp.reverse/forward", at_most(3)),),
         measure.mlp, (25, 300)),
    Unit("mlp_tanh", "mlp_tanh",
         _seconds("mlp_tanh.torch_fwd_bwd_s", "mlp_tanh.solve+json_s")
         + _seconds("mlp_tanh.solve_s")
         + (Metric("mlp_tanh.(solve+json)/torch", at_most(10)), Metric("mlp_tanh.solve/torch", at_most(20)))
         + _decimal_metrics("mlp_tanh"),
         measure.mlp_tanh, (6, 120)),
    Unit("deep_relu", "deep", _chain_metrics("deep_relu"), measure.deep_relu, (15, 300)),
    Unit("deep_tanh", "deep", _chain_metrics("deep_tanh"), measure.deep_tanh, (15, 120)),
    Unit("deep_relu_4096", "deep", (Metric("deep_relu.n4096_s", FINISHES),), measure.deep_relu_4096, (0, 600),
         full_only=True),
    Unit("deep_tanh_4096", "deep", (Metric("deep_tanh.n4096_s", FINISHES),), measure.deep_tanh_4096, (0, 120),
         full_only=True),
    Unit("symbolic", "symbolic",
         _seconds("symbolic.solve_s", "symbolic.json_s", "symbolic.sympy_diff_s")
         + (Metric("symbolic.sympy_diff/solve"), Metric("symbolic.sympy_diff/(solve+json)", at_least(20)),
            Metric("symbolic.max_relative_difference", at_most(1e-30))),
         measure.symbolic, (20, 300)),
    Unit("startup", "startup",
         _seconds("startup.adjoint_solve_s", "startup.import_sympy_s")
         + (Metric("startup.adjoint_solve/import_sympy", at_most(0.6)),),
         measure.startup, (20, 120)),
    Unit("startup_mlp", "startup",
         _seconds("startup_mlp.adjoint_solve_s", "startup_mlp.torch_script_s")
         + (Metric("startup_mlp.adjoint_solve/torch_script", at_most(0.15)),),
         measure.startup_mlp, (30, 180)),
    Unit("cnn", "models",
         _seconds("cnn.torch_fwd_bwd_s", "cnn.solve+json_s") + (Metric("cnn.(solve+json)/torch"),),
         measure.cnn, (20, 120)),
    Unit("transformer", "models",
         _seconds("transformer.torch_fwd_bwd_s", "transformer.solve+json_s")
         + (Metric("transformer.(solve+json)/torch"),),
         measure.transformer, (20, 120)),
    Unit("resnet18", "large",
         _seconds("resnet18.load_s", "resnet18.torch_fwd_bwd_s", "resnet18.structure_s", "resnet18.float64_s")
         + (Metric("resnet18.structure/torch", under(10)), Metric("resnet18.float64/torch", at_most(1.5))),
         measure.resnet18, (45, 300)),
    Unit("gpt2", "large",
         _seconds("gpt2.load_s", "gpt2.torch_fwd_bwd_s", "gpt2.structure_s", "gpt2.float64_s")
         + (Metric("gpt2.structure/torch", under(10)), Metric("gpt2.float64/torch", at_most(1.5))),
         measure.gpt2, (90, 400)),
    Unit("f64_mlp", "float64",
         _seconds("f64_mlp.torch_fwd_bwd_s", "f64_mlp.float64_s", "f64_mlp.loaded_torch_fwd_bwd_s",
                  "f64_mlp.loaded_float64_s", "f64_mlp.load_average_quiet", "f64_mlp.blas_threads_quiet",
                  "f64_mlp.blas_threads_loaded")
         + (Metric("f64_mlp.float64/torch", at_most(1)), Metric("f64_mlp.loaded_float64/torch", at_most(3))),
         measure.f64_mlp, (60, 300), own_threads=True),
    Unit("memory", "memory", (Metric("memory.mlp_peak_mb", under(300)),), measure.memory, (15, 120)),
)


def select(names: list[str] | None) -> list[Unit]:
    """The units named (by unit or group name), in table order; all of them for None.
    Raises ValueError naming the choices for an unknown name."""
    if not names:
        return list(UNITS)
    known = {u.name for u in UNITS} | {u.group for u in UNITS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown workload {unknown[0]!r}; choose from {', '.join(sorted(known))}")
    return [u for u in UNITS if u.name in names or u.group in names]


def unit(name: str) -> Unit:
    for u in UNITS:
        if u.name == name:
            return u
    raise ValueError(f"no unit {name!r}")
