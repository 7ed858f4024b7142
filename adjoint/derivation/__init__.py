"""The derivation of a prediction, computed once on the engine side and typeset by the renderers.

:func:`derive` turns a solved :class:`~adjoint.prediction.Prediction` into a
:class:`~.record.ProblemDerivation`: per variant, per backward pass, the forward pass as
numbered equations over tensor versions, the symbols, the steps x_k = Phi_k(atoms) as
:mod:`adjoint.mathtree` trees, the hook-free multipliers, the gradients PyTorch carried, local
derivatives and chain-rule paths of one-element problems, and what every hook call involved.
``VariantPrediction.derivation`` computes (and keeps) one variant's.

This package is all the LaTeX renderer imports from the engine: the record types, the tree IR
and the value types the record holds are re-exported here.
"""

from __future__ import annotations

from ..exact import Exact
from ..graph import Typed
from . import mathtree, values
from .record import (Arrival, ArrivalTerm, Boundary, BoundaryInput, CallInfo, Chain, ChainFactor, Change,
                     DeclaredHook, ErrorInfo, FunctionNote, Gradient, HookArg, HookCall, Ident, LegacyRow,
                     LocalDerivative, ProblemDerivation, Step, StepInfo, Symbol, TensorInfo, Unit, VariantDerivation,
                     Version)


def derive(prediction) -> ProblemDerivation:
    """The derivation of every variant of a solved problem."""
    problem = prediction.problem
    symbols = dict(problem.symbols) if prediction.numeric and problem.symbols else {}
    return ProblemDerivation(problem.name, problem.description, symbols,
                             [v.derivation for v in prediction.variants])


__all__ = ["Arrival", "ArrivalTerm", "Boundary", "BoundaryInput", "CallInfo", "Chain", "ChainFactor", "Change",
           "DeclaredHook", "ErrorInfo", "Exact", "FunctionNote", "Gradient", "HookArg", "HookCall", "Ident", "LegacyRow",
           "LocalDerivative", "ProblemDerivation", "Step", "StepInfo", "Symbol", "TensorInfo", "Typed", "Unit",
           "VariantDerivation", "Version", "derive", "mathtree", "values"]
