"""F.pixel_shuffle / F.pixel_unshuffle and their modules against real torch (float64): node
chains (PixelShuffleBackward0, PixelUnshuffleBackward0), values, gradients, and PyTorch's shape
checks in its order (tests/data/regressions/pixel_shuffle_modules.yaml checks hooks through verify)."""

import pytest

from conftest import require_torch

torch = require_torch()
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from nn_harness import (Case, assert_error_matches_torch, assert_expr_matches_torch, assert_root_module,  # noqa: E402
                        distinct, expr_problem, module_problem, t64, torch_module_run)


@pytest.mark.parametrize("expr, torch_fn, shape", [
    ("F.pixel_shuffle(x, 2)", lambda x: F.pixel_shuffle(x, 2), (2, 8, 2, 3)),
    ("F.pixel_shuffle(x, 3)", lambda x: F.pixel_shuffle(x, 3), (9, 1, 2)),
    ("F.pixel_unshuffle(x, 2)", lambda x: F.pixel_unshuffle(x, 2), (1, 2, 4, 6)),
    ("F.pixel_unshuffle(x.transpose(2, 3), 2)", lambda x: F.pixel_unshuffle(x.transpose(2, 3), 2), (1, 2, 4, 6)),
])
def test_functions_match_torch(expr, torch_fn, shape):
    assert_expr_matches_torch(expr, torch_fn, distinct(shape, 1))


@pytest.mark.parametrize("type_, args, cls, shape", [
    ("PixelShuffle", {"upscale_factor": 2}, lambda: nn.PixelShuffle(2), (1, 4, 2, 2)),
    ("PixelUnshuffle", {"downscale_factor": 2}, lambda: nn.PixelUnshuffle(2), (1, 1, 4, 2)),
])
def test_modules_match_torch(type_, args, cls, shape):
    x = distinct(shape, 2)
    case = Case(module_problem(type_, args, {}, x))
    y, names, rec = torch_module_run(cls(), {}, x)
    assert_root_module(case, y, names, rec)


@pytest.mark.parametrize("expr, torch_fn, shape", [
    ("F.pixel_shuffle(x, 2)", lambda x: F.pixel_shuffle(x, 2), (6, 2, 3)),
    ("F.pixel_shuffle(x, 2)", lambda x: F.pixel_shuffle(x, 2), (4, 3)),
    ("F.pixel_shuffle(x, 0)", lambda x: F.pixel_shuffle(x, 0), (4, 2, 3)),
    ("F.pixel_unshuffle(x, 2)", lambda x: F.pixel_unshuffle(x, 2), (1, 3, 4)),
    ("F.pixel_unshuffle(x, 4)", lambda x: F.pixel_unshuffle(x, 4), (1, 2, 4)),
    ("F.pixel_unshuffle(x, -1)", lambda x: F.pixel_unshuffle(x, -1), (1, 2, 4)),
])
def test_torchs_errors(expr, torch_fn, shape):
    xv = distinct(shape, 1)
    assert_error_matches_torch(expr_problem(expr, xv), lambda: torch_fn(t64(xv, True)))
