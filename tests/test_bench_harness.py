"""benchmarks/run.py generates its problem files from code: check that they are files adjoint
loads and solves, with the hooks the workloads say they have, so the harness cannot rot
silently when the format or the loader changes. Small sizes only; nothing here is timed."""

from __future__ import annotations

import os
import sys

import pytest

import adjoint
from adjoint.format.loader import MAX_FILE_BYTES

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))

from perf.problems import (chain_case, cnn_case, gpt2_case, mlp_case, resnet18_case, symbolic_case,  # noqa: E402
                           transformer_case, write_model)


def _hook_targets(prediction) -> list[tuple[str, str]]:
    return [(call.kind, call.target) for call in prediction.variants[0].hook_calls]


@pytest.mark.parametrize("activation", ["ReLU", "Tanh"])
def test_mlp_files_solve_with_a_full_hook_per_linear_and_a_tensor_hook_per_activation(activation):
    case = mlp_case(width=3, layers=3, batch=2, activation=activation)
    prediction = adjoint.loads(case.text).solve()
    fired = sorted(_hook_targets(prediction))
    assert fired == sorted([("full_backward", f"fc{i}") for i in range(3)] + [("hook", "act0"), ("hook", "act1")])
    assert prediction.variants[0].grads["x"].shape == (2, 3)


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_chain_files_solve_with_a_full_hook_per_layer(activation):
    prediction = adjoint.loads(chain_case(3, activation).text).solve()
    assert sorted(_hook_targets(prediction)) == [("full_backward", f"l{i}") for i in range(3)]
    assert prediction.variants[0].grads["u"].shape == (4,)


def test_symbolic_file_gives_a_closed_form_gradient_per_parameter():
    variant = adjoint.loads(symbolic_case(3).text).solve().variants[0]
    for i in range(3):
        for param, symbol in (("weight", f"w_{i}"), ("bias", f"b_{i}")):
            (element,) = variant.grads[f"fc{i}.{param}"].flat()
            assert symbol in {s.name for s in element.free_symbols}  # the loss depends on it through tanh


def test_full_size_files_are_within_the_loaders_size_limit():
    """The 4096-layer chains are the largest files the harness writes; a generator change that
    pushed them over the limit would make those runs fail instead of measuring."""
    for text in (mlp_case().text, chain_case(4096, "relu").text, chain_case(4096, "tanh").text):
        assert len(text.encode()) <= MAX_FILE_BYTES


@pytest.mark.parametrize("case, hooked", [(cnn_case(batch=2, size=4), ["block"]),
                                          (transformer_case(width=4, seq=2, batch=1), ["attn", "mlp"])])
def test_model_files_solve_with_their_hooks(case, hooked):
    prediction = adjoint.loads(case.text).solve()
    assert sorted(_hook_targets(prediction)) == sorted(("full_backward", m) for m in hooked)


@pytest.mark.parametrize("make, kwargs, hooked", [
    (resnet18_case, {"size": 16}, "layer4_1"),
    (gpt2_case, {"layers": 2, "width": 8, "heads": 2, "seq": 3}, "h1.attn")])
def test_large_model_files_load_from_side_files_and_solve_in_both_modes(tmp_path, make, kwargs, hooked):
    """The real sizes differ only in the numbers passed here (the benchmark's units pass them)."""
    problem = adjoint.load(write_model(make(**kwargs), str(tmp_path)))
    for mode in ("structure", "float64"):
        assert _hook_targets(problem.solve(mode=mode)) == [("full_backward", hooked)]


@pytest.mark.torch
def test_the_torch_reference_computes_the_problems_loss(tmp_path):
    """reference.torch_problem builds the same model as verify's torch side: its loss is the
    float64 answer's (the check the model units also make before timing)."""
    from perf.reference import torch_problem

    for i, case in enumerate((cnn_case(batch=2, size=4), gpt2_case(layers=2, width=8, heads=2, seq=3))):
        problem = adjoint.load(write_model(case, str(tmp_path / str(i))))
        ours = problem.solve(mode="float64").variants[0].loss.item()
        theirs = torch_problem(problem)().item()
        assert abs(ours - theirs) <= 1e-12 * max(1.0, abs(ours))

