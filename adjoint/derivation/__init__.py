"""The derivation of a prediction, computed once on the engine side and typeset by the renderers.

:func:`derive` turns a solved :class:`~adjoint.answer.prediction.Prediction` into a
:class:`~.record.ProblemDerivation`: per variant, per backward pass, the forward pass as
numbered equations over tensor versions, the symbols, the steps x_k = Phi_k(atoms) as
:mod:`adjoint.mathtree` trees, the hook-free multipliers, the gradients PyTorch carried, local
derivatives and chain-rule paths of one-element problems, and what every hook call involved.
``VariantPrediction.derivation`` computes (and keeps) one variant's.

This package is all the LaTeX renderer imports from the engine: the record types, the tree IR
and the value types the record holds are re-exported here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adjoint.values.exact import Exact, Real
from adjoint.engine.graph import Typed
from adjoint.values.complexes import Cx
from adjoint.derivation import values
from adjoint.values import mathtree

if TYPE_CHECKING:
    from adjoint.derivation.record import (Arrival, ArrivalTerm, Boundary, BoundaryInput, CallInfo, Chain, ChainFactor, Change,
                         DeclaredHook, ErrorInfo, FunctionNote, Gradient, HookArg, HookCall, Ident, LegacyRow,
                         LocalDerivative, ProblemDerivation, Step, StepInfo, Symbol, TensorInfo, Unit,
                         VariantDerivation, Version)

#: the record types, re-exported from :mod:`.record` on first use: the op registry imports
#: :mod:`.mathtree` (and so this package) at every start, and a solve that never asks for its
#: derivation (``solve``, ``solve --json``) does not pay for creating the record classes
_RECORD = ("Arrival", "ArrivalTerm", "Boundary", "BoundaryInput", "CallInfo", "Chain", "ChainFactor", "Change",
           "DeclaredHook", "ErrorInfo", "FunctionNote", "Gradient", "HookArg", "HookCall", "Ident", "LegacyRow",
           "LocalDerivative", "ProblemDerivation", "Step", "StepInfo", "Symbol", "TensorInfo", "Unit",
           "VariantDerivation", "Version")


def __getattr__(name: str):
    if name in _RECORD:
        from adjoint.derivation import record

        return getattr(record, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def derive(prediction) -> ProblemDerivation:
    """The derivation of every variant of a solved problem."""
    from adjoint.derivation.record import ProblemDerivation

    problem = prediction.problem
    symbols = dict(problem.symbols) if prediction.numeric and problem.symbols else {}
    variants = [v.derivation for v in prediction.variants]
    used = notations(variants)
    if any(d.dtype in ("complex64", "complex128") for d in problem.all_tensors()):
        used.add("complex")   # complex tensors: the document states PyTorch's convention for their gradients
    return ProblemDerivation(problem.name, problem.description, symbols, variants, used, problem.path)


#: the same function under a name no submodule shadows: importing ``adjoint.derivation.derive``
#: (the module, as ``adjoint.answer.solve`` does) rebinds the package's ``derive`` attribute to it
derive_problem = derive


def notations(variants: list) -> set:
    """The notations beyond v1's algebra that the derivation's formulas use (index views, placements,
    writes through a view, named functions of PyTorch's, generic J^T lambda, derivatives f'), so that
    the document explains exactly those."""
    used: set = set()
    trees = []
    for v in variants:
        for u in v.units:
            for st in u.steps:
                trees += [st.tree] + list(st.vjp.values()) + list(st.vjp_tilde.values())
            trees += [a.slot_formula for h in u.hook_calls for a in h.args if a.slot_formula is not None]
            trees += [f for g in u.gradients for _, _, f in g.terms]
    for tree in trees:
        for n in mathtree.walk(tree):
            kind = type(n).__name__
            if kind in ("TSub", "TPlace", "TPut", "TJac"):
                used.add(kind)
            elif kind == "TFn" and n.fn.name.endswith("'"):
                used.add("prime")
            elif kind == "TFn" and n.fn.name in ("reshape", "expand", "permute", "transpose", "cat", "stack", "bmm"):
                used.add(n.fn.name)
    return used


__all__ = ["Arrival", "ArrivalTerm", "Boundary", "BoundaryInput", "CallInfo", "Chain", "ChainFactor", "Change",
           "DeclaredHook", "ErrorInfo", "Exact", "FunctionNote", "Gradient", "HookArg", "HookCall", "Ident",
           "LegacyRow",
           "LocalDerivative", "ProblemDerivation", "Step", "StepInfo", "Symbol", "TensorInfo", "Typed", "Unit",
           "VariantDerivation", "Version", "derive", "derive_problem", "mathtree", "values", "Cx"]
