"""The one place that knows how adjoint is driven and where its phases are.

Everything the benchmarks time in adjoint goes through these functions, so that when the
engine changes (new phases, a new loader) only this module is re-pointed and the
workloads, their targets and the table stay as they are.

* ``load``: what reading a problem file costs: read, YAML compose, validate (the CLI's
  ``load`` also traces every variant, which ``solve`` then repeats; that trace is counted in
  ``solve`` here, not twice).
* ``solve`` / ``to_json``: ``Problem.solve()`` and the JSON text the CLI prints
  (``json.dumps(prediction.to_json(), indent=2)``).
* ``phase_seconds``: the engine's phases, each timed: today ``graph.trace``,
  ``forward.evaluate``, ``reverse.run_backward`` and the assembly of the Prediction
  (``solve._assemble``, which recomputes each module boundary's adjoint).
"""

from __future__ import annotations

import json
import time

import adjoint

#: the phase names ``phase_seconds`` reports, in pipeline order
PHASES = ("trace", "forward", "reverse", "assemble")


def load(path: str):
    """Read, compose and validate a problem file (no trace)."""
    return adjoint.load(path, check=False)


def solve(problem):
    """Every variant of ``problem``, solved exactly."""
    return problem.solve()


def to_json(prediction) -> str:
    """The JSON text ``adjoint solve --json`` prints."""
    return json.dumps(prediction.to_json(), indent=2)


def grad_elements(prediction, tensor: str) -> list:
    """The exact elements (row-major) of ``tensor``'s final ``.grad`` in the first variant."""
    return prediction.variants[0].grads[tensor].flat()


def grad_floats(prediction, tensor: str) -> list[float]:
    """``tensor``'s final ``.grad`` in the first variant, as floats (row-major)."""
    return [float(v) for v in _flatten(prediction.variants[0].grads[tensor].floats())]


def _flatten(nested) -> list:
    if isinstance(nested, list):
        return [v for item in nested for v in _flatten(item)]
    return [nested]


def phase_seconds(problem) -> dict[str, float]:
    """Seconds spent in each of :data:`PHASES` solving every variant of ``problem`` once."""
    from adjoint.forward import evaluate
    from adjoint.graph import trace
    from adjoint.reverse import run_backward
    from adjoint.solve import _assemble

    spent = dict.fromkeys(PHASES, 0.0)
    for variant in problem.variants:
        start = time.perf_counter()
        graph = trace(problem, variant)
        traced = time.perf_counter()
        fwd = evaluate(graph, None, problem.dtype)
        evaluated = time.perf_counter()
        bwd = run_backward(graph, fwd, None)
        reversed_ = time.perf_counter()
        _assemble(problem, variant, graph, fwd, bwd)
        done = time.perf_counter()
        spent["trace"] += traced - start
        spent["forward"] += evaluated - traced
        spent["reverse"] += reversed_ - evaluated
        spent["assemble"] += done - reversed_
    return spent
