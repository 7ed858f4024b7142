"""The gradient a backward starts from is held by the Python caller (``torch.autograd.backward``
keeps it in ``grad_tensors_`` until the engine returns), so an AccumulateGrad it reaches
unchanged copies it into ``.grad`` instead of taking it; with several roots GraphRoot hands
each root its own tensor. Expected numbers are from a plain torch 2.13 script written by hand
(tests/data/regressions/root_gradient_is_held_by_the_caller.yaml has the same cases for verify):

    x = torch.tensor(0.5, requires_grad=True); w = torch.tensor(2., requires_grad=True)
    y = x + w
    acc_x, acc_w = (f for f, _ in y.grad_fn.next_functions)
    acc_w.register_hook(lambda gi, go: go[0].mul_(5))   # returns the tensor: write it as
    acc_x.register_hook(lambda gi, go: go[0].mul_(3))   # (go[0].mul_(k), None)[1] to return None
    y.backward()                      # x.grad 1, w.grad 3 (hooks handed 1 and 3)
"""

from __future__ import annotations

from pathlib import Path

import pytest

import adjoint

FILE = Path(__file__).parent / "data" / "regressions" / "root_gradient_is_held_by_the_caller.yaml"

#: variant -> (hook calls as (label, the one argument's value), grads) from the torch script
EXPECTED = {
    "scalar_default": ([("nx", 1.0), ("nw", 3.0)], {"x": 1.0, "w": 3.0}),
    "given": ([("nx", 2.0), ("nw", 6.0)], {"x": 2.0, "w": 6.0}),
    "leaf_root": ([("paw", 2.0), ("nw", 2.0)], {"x": None, "w": 2.0}),
    "two_roots_leaf": ([("paw", 0.5), ("nw", 0.5)], {"x": 2.0, "w": 0.5}),
    "two_roots_hook_write": ([("th", 1.0), ("tx", 6.5)], {"x": 6.5, "w": None}),
}


def _arg(call: dict) -> float:
    args = call["args"]
    if "grad_outputs" in args:
        return args["grad_outputs"][0]["value"]
    return (args.get("grad") or args.get("tensor"))["value"]


@pytest.mark.parametrize("variant", sorted(EXPECTED))
def test_root_gradient_is_copied_not_taken(variant):
    answer = adjoint.loads(FILE.read_text()).solve().to_json()["variants"][variant]
    calls, grads = EXPECTED[variant]
    assert [(c["label"], _arg(c)) for c in answer["hook_calls"]] == calls
    assert {k: (g["value"] if g else None) for k, g in answer["grads"].items()} == grads
