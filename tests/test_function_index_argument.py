"""A custom Function taking an int64 index tensor: its forward and backward see it as int64
(torch 2.13: x.grad [2, 0, 4]; the node's post-hook sees grad_inputs ([2, 0, 4], [5, 10, 15]),
the gradient for the index kept though the engine drops it). adjoint made the arguments float
tensors for the backward formulas and answered PyTorch's IndexError. With save: [a, k] the
saved index is int64 too."""

from __future__ import annotations

from pathlib import Path

import adjoint

FILE = Path(__file__).parent / "data" / "regressions" / "function_takes_an_index_tensor.yaml"


def _check(text: str) -> None:
    got = adjoint.loads(text).solve().to_json()["variants"]["default"]
    assert got.get("error") is None
    assert got["grads"]["x"]["value"] == [2, 0, 4]
    post = got["hook_calls"][0]["args"]["grad_inputs"]
    assert [p["value"] for p in post] == [[2, 0, 4], [5, 10, 15]]


def test_the_index_stays_int64_in_the_backward():
    _check(FILE.read_text())


def test_a_saved_index_stays_int64():
    text = FILE.read_text().replace("        name: G\n", "        name: G\n        save: [a, k]\n").replace(
        "torch.zeros_like(a).index_add(0, k, grad_output)",
        "torch.zeros_like(saved[0]).index_add(0, saved[1], grad_output)")
    assert "saved[1]" in text
    _check(text)
