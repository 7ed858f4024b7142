"""A custom Function whose backward formula reads a name its ``does:`` lines bind (``s =
saved[0]; s.add_(1); return g * 2 * s``) was refused ("unknown name 's' in the backward formula")
when adjoint computed the adjoint recursion (J^T of each module call), which did not run the
lines. Expected numbers from a torch 2.13 run (by hand: Sq gives 2 * (x + 1) = [4, 6, 8], the
x * x beside it 2 * x = [2, 4, 6], run first, before the write; the write reaches the leaf x,
so the second forward's loss is sum((x + 1) ** 2 * 2) = 58)."""

from __future__ import annotations

from pathlib import Path

import adjoint

FILE = Path(__file__).parent / "data" / "regressions" / "function_does_binds_a_name_the_formula_reads.yaml"


def test_the_formula_sees_what_does_binds():
    got = adjoint.load(str(FILE)).solve().to_json()["variants"]
    hooked = got["hooked"]
    assert hooked.get("error") is None
    assert hooked["grads"]["x"]["value"] == [6, 10, 14]
    assert hooked["adjoints"]["f"]["grad_input"][0]["value"] == [4, 6, 8]
    post = [c for c in hooked["hook_calls"] if c["kind"] == "post"][0]
    assert post["args"]["grad_inputs"][0]["value"] == [4, 6, 8]
    twice = got["twice"]
    assert twice["loss"]["value"] == 58
    assert twice["grads"]["x"]["value"] == [16, 24, 32]
