"""Layouts a hook's result keeps, and the phase of warnings a forward hook's backward issues.
Expected values copied from real torch 2.13 runs (not produced by adjoint)."""

from __future__ import annotations

from pathlib import Path

import adjoint

DATA = Path(__file__).parent / "data" / "regressions"


def _variants(name: str) -> dict:
    return adjoint.loads((DATA / name).read_text()).solve().to_json()["variants"]


def _close(a, b, tol=1e-9):
    return all(abs(x - y) <= tol for x, y in zip(a, b, strict=True))


def test_in_place_accumulation_keeps_a_hook_results_layout():
    # torch: InputBuffer adds into the hook's g * 2 (strides (4, 1, 2, 1)) in place; the eval batch
    # norm's fast path then reads it in NCHW order
    v = _variants("hook_result_keeps_its_layout_through_in_place_accumulation.yaml")
    for name in ("doubled_first", "node_post_hook"):
        g = v[name]["grads"]
        assert _close(g["bn0.weight"]["value"], [-0.2876014829079169, 0.14106417540275998]), name
        assert _close(g["bn0.bias"]["value"], [-0.14219060896977975, -0.28086411705898345]), name


def test_clone_in_a_hook_body_preserves_the_layout():
    g = _variants("hook_result_keeps_its_layout_through_in_place_accumulation.yaml")["cloned_first"]["grads"]
    assert _close(g["bn0.weight"]["value"], [-0.27666583970961206, 0.1366284664183474])
    assert _close(g["bn0.bias"]["value"], [-0.10951478879201537, -0.2288978426823396])


def test_preserve_format_strides():
    from adjoint.values.strides import preserve_format_strides
    # checked with torch.empty_strided(shape, strides).clone().stride()
    assert preserve_format_strides((1, 2, 2, 1), (4, 1, 2, 1)) == (4, 1, 2, 1)
    assert preserve_format_strides((2, 3), (1, 2)) == (1, 2)
    assert preserve_format_strides((2, 2), (4, 1)) == (2, 1)


def test_a_forward_hooks_backward_warns_during_the_forward():
    (v,) = _variants("warnings_in_a_forward_hooks_backward_are_the_forwards.yaml").values()
    # torch: the first in the forward hook's backward, the second in the backward step
    assert [(w["category"], w["during"]) for w in v["warnings"]] == [("UserWarning", "forward"), ("UserWarning", "backward")]
    assert v["warnings"][0]["message"].startswith("Full backward hook is firing when gradients are computed")
