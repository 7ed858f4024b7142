"""F.glu, F.softmin and the GLU, Softsign, Tanhshrink, Softmin modules against real torch
(float64): node chains (GluBackward0; NegBackward0 then SoftmaxBackward0), values, gradients,
saved tensors, and PyTorch's errors and warnings (tests/data/regressions/glu_softmin_modules.yaml
checks hooks through verify)."""

import warnings

import pytest

from conftest import require_torch

torch = require_torch()
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import adjoint  # noqa: E402
from nn_harness import (Case, assert_error_matches_torch, assert_expr_matches_torch, assert_root_module,  # noqa: E402
                        distinct, expr_problem, module_problem, t64, torch_module_run)

X = distinct((2, 4, 2), 1)


@pytest.mark.parametrize("expr, torch_fn", [
    ("F.glu(x)", F.glu),
    ("F.glu(x, 1)", lambda x: F.glu(x, 1)),
    ("F.glu(x.transpose(0, 1), dim=0)", lambda x: F.glu(x.transpose(0, 1), dim=0)),
    ("F.softmin(x, 1)", lambda x: F.softmin(x, 1)),
    ("F.softmin(x, dim=-1)", lambda x: F.softmin(x, dim=-1)),
])
def test_functions_match_torch(expr, torch_fn):
    assert_expr_matches_torch(expr, torch_fn, X)


@pytest.mark.parametrize("type_, args, cls", [
    ("GLU", {}, lambda: nn.GLU()),
    ("GLU", {"dim": 1}, lambda: nn.GLU(1)),
    ("Softsign", {}, nn.Softsign),
    ("Tanhshrink", {}, nn.Tanhshrink),
    ("Softmin", {"dim": 2}, lambda: nn.Softmin(2)),
])
def test_modules_match_torch(type_, args, cls):
    case = Case(module_problem(type_, args, {}, X))
    y, names, rec = torch_module_run(cls(), {}, X)
    assert_root_module(case, y, names, rec)


def test_softmin_without_dim_warns_as_torch():
    js = adjoint.loads(module_problem("Softmin", {}, {}, X)).solve().variants[0].to_json()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        nn.Softmin()(t64(X, True))
    implicit = [w["message"] for w in js["warnings"] if w["message"].startswith("Implicit")]
    assert implicit == [str(w.message) for w in caught] and len(implicit) == 1


@pytest.mark.parametrize("expr, torch_fn, x", [
    ("F.glu(x)", F.glu, [[1.0, 2.0, 3.0]]),                         # odd halving size
    ("F.glu(x)", F.glu, 1.5),                                       # a 0-d input: F.glu's own check
    ("F.glu(x, 3)", lambda x: F.glu(x, 3), X),                      # dim out of range
])
def test_glu_errors(expr, torch_fn, x):
    assert_error_matches_torch(expr_problem(expr, x), lambda: torch_fn(t64(x, True)))
