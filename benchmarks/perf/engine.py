"""The one place that knows how adjoint is driven and where its phases are.

Everything the benchmarks time in adjoint goes through these functions, so that when the
engine changes (new phases, a new loader) only this module is re-pointed and the
workloads, their targets and the table stay as they are.

* ``load``: what reading a problem file costs: read, YAML compose, validate (the CLI's
  ``load`` also traces every variant, which ``solve`` then repeats; that trace is counted in
  ``solve`` here, not twice).
* ``solve`` / ``to_json``: ``Problem.solve()`` and the JSON text the CLI prints
  (``adjoint.render.jsontext.dumps(prediction.to_json())``: json's indented layout, strict).
* ``phase_seconds``: the engine's phases, each timed: the eager forward (``Model.forward``),
  the backward (``passes.run_backward``) and the assembly of the Prediction (``solve.assemble``).
"""

from __future__ import annotations

import time

import adjoint

#: the phase names ``phase_seconds`` reports, in pipeline order
PHASES = ("forward", "reverse", "assemble")


def load(path: str):
    """Read, compose and validate a problem file (no trace)."""
    return adjoint.load(path)


def solve(problem):
    """Every variant of ``problem``, solved exactly."""
    return problem.solve()


def solve_mode(problem, mode: str):
    """Every variant of ``problem`` in answer mode ``mode`` (exact, float64, structure:
    ``solve --float64`` / ``--structure``)."""
    return problem.solve(mode=mode)


def to_json(prediction) -> str:
    """The JSON text ``adjoint solve --json`` prints, made as it makes it (streamed, a tensor's
    lists at a time; the pieces joined here only to hand back one string)."""
    from adjoint.render.jsontext import dump
    parts: list[str] = []
    dump(prediction.to_json(lazy=True), parts.append)
    return "".join(parts)


def to_compact_json(prediction) -> str:
    """The JSON text ``adjoint solve --json --compact`` prints (rational tensors over their shared
    denominator), made as :func:`to_json` makes the contract's."""
    from adjoint.render.jsontext import dump
    parts: list[str] = []
    dump(prediction.to_json(lazy=True, compact=True), parts.append)
    return "".join(parts)


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
    """Seconds spent in each of :data:`PHASES` solving every variant of ``problem`` once: the
    eager forward (ops, nodes and values together), the engine's backward, and the assembly
    of the Prediction (which recomputes each module boundary's adjoint)."""
    from adjoint.values.backends.exact import ExactBackend
    from adjoint.engine.hook_runner import HookRunner
    from adjoint.engine.forward import Model
    from adjoint.engine.passes import VariantRun, backward_request, run_backward
    from adjoint.engine.hook_registration import Registrations
    from adjoint.engine.runtime import Runtime
    from adjoint.answer.solve import assemble

    spent = dict.fromkeys(PHASES, 0.0)
    for variant in problem.variants:
        backend = ExactBackend(problem.dtype, None, bool(problem.free_symbols()))  # as solve_variant makes it
        rt = Runtime(backend, problem.dtype)
        reg = Registrations(variant.hooks, rt)
        model = Model(problem, variant.inputs, rt, reg)
        reg.model = model
        rt.hooks_runner = HookRunner(rt, reg)
        run = VariantRun(problem, variant, rt, model, reg=reg)
        for hook in variant.hooks:
            reg.register(hook.index)
        start = time.perf_counter()
        run.forwards.append(model.forward())
        forwarded = time.perf_counter()
        run_backward(run, backward_request(problem, variant.backward, run, backend))
        reversed_ = time.perf_counter()
        assemble(run)
        done = time.perf_counter()
        spent["forward"] += forwarded - start
        spent["reverse"] += reversed_ - forwarded
        spent["assemble"] += done - reversed_
    return spent
