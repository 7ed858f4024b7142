"""The rounding bounds of a variant: the engine run once more on the rounding-bound backend.

``verify`` holds PyTorch's floats to the exact prediction within these bounds
(:mod:`adjoint.values.backends.bound`, docs/verify.md). The run is the same engine, op rules and
hooks as the exact one, on float64 values carrying bounds; its contract JSON has the same
skeleton as the prediction's, with each VALUE's ``exact`` field holding its elements' bounds,
and ``branch_points``: how many decisions (a sign at a kink or a mask, a comparison, a max's tie)
PyTorch's floats may take either way, whose bounds therefore cover both sides.
"""

from __future__ import annotations

from adjoint.answer.solve import assemble
from adjoint.engine.passes import run_variant
from adjoint.format.problem import Problem
from adjoint.values.backends.bound import BoundBackend


def bound_json(problem: Problem, variant: str, dtype: str) -> dict:
    """The contract JSON of ``variant`` run on the bound backend for a PyTorch run in ``dtype``.
    A file with complex tensors has none (ValueError): the bound backend's rules are real ones,
    and a complex product's rounding is not theirs; such a file keeps the fixed tolerance."""
    if any(d.dtype in ("complex64", "complex128") for d in problem.all_tensors()):
        raise ValueError("no rounding bounds for complex tensors yet (the bound backend is real)")
    symbols = problem.symbols if problem.free_symbols() else None
    backend = BoundBackend(problem.dtype, symbols, compared=dtype)
    doc = assemble(run_variant(problem, problem.variant(variant), backend)).to_json()
    doc["branch_points"] = backend.branch_points   # decisions PyTorch's floats may take either way
    return doc
