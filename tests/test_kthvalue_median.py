"""``torch.kthvalue`` and ``torch.median`` (and the methods) against real torch 2.13:
KthvalueBackward0 / MedianBackward1 along a dim (saving only the int64 indices, the gradient
written at them), MedianBackward0 of every element (saving self and result: the lower median,
the gradient split evenly among the elements equal to it). Along a dim, the CPU kernel's
quickselect returns no documented index among equal selected values (probed: kthvalue of
[3, 1, 2, 1, 5] with k=2 gives index 3, the median of [0, 5, -4, 4, 0] index 4), so such ties
are refused. Compared on the node chain, values, grads, the legacy hook's grad_input and the
saved-tensor packs (tests/opcheck.py); numbers pinned from torch."""

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402
from opcheck import case  # noqa: E402

X = [[3.0, 1.0, 2.0, 1.5, 5.0], [0.0, 5.0, -4.0, 4.0, 0.5]]


@pytest.mark.parametrize("x, expr, fn", [
    (X, "torch.kthvalue(x, 2, 1)[0]", lambda x: torch.kthvalue(x, 2, 1)[0]),
    (X, "x.kthvalue(4, dim=1, keepdim=True).values", lambda x: x.kthvalue(4, dim=1, keepdim=True).values),
    (X, "torch.kthvalue(x, 1, 0).values", lambda x: torch.kthvalue(x, 1, 0).values),
    (X, "x.median(1).values", lambda x: x.median(1).values),
    (X, "torch.median(x, dim=0, keepdim=True)[0]", lambda x: torch.median(x, dim=0, keepdim=True)[0]),
    (X, "x.median()", lambda x: x.median()),
    ([1.0, 2.0, 2.0, 3.0], "torch.median(x)", lambda x: torch.median(x)),
    ([[2.0, 2.0], [2.0, 1.0]], "x.median()", lambda x: x.median()),
])
def test_kthvalue_and_median_match_torch(x, expr, fn):
    assert case({"x": (x, True)}, expr, fn) == []


def _solve(forward: str, value):
    text = (f"name: s\ndtype: float64\ninputs:\n  x: {{value: {value}, requires_grad: true}}\n"
            f"model:\n  inputs: [x]\n  forward: |\n    {forward}\nloss: \"y\"\n")
    return adjoint.loads(text).solve().variants[0]


# torch 2.13.0 CPU: the lower median of [1, 2, 2, 3] is 2, its gradient split between the two 2s
GRAD = [0.0, 0.5, 0.5, 0.0]


def test_expected_numbers_are_torchs():
    z = torch.tensor([1.0, 2.0, 2.0, 3.0], requires_grad=True)
    m = z.median()
    m.backward()
    assert m.item() == 2.0 and z.grad.tolist() == GRAD and m.grad_fn.name() == "MedianBackward0"
    assert torch.kthvalue(torch.tensor([3.0, 1, 2, 1, 5]), 2).indices.item() == 3   # not the first 1
    assert torch.tensor([0.0, 5, -4, 4, 0]).median(0).indices.item() == 4           # not the first 0


def test_median_of_every_element_splits_ties():
    v = _solve("return torch.median(x)", [1.0, 2.0, 2.0, 3.0]).to_json()
    assert v["grads"]["x"]["value"] == GRAD and v["values"]["y"]["grad_fn"] == "MedianBackward0"


@pytest.mark.parametrize("forward, value", [
    ("return torch.kthvalue(x, 2).values.sum()", [3.0, 1.0, 2.0, 1.0, 5.0]),
    ("return x.median(0).values", [0.0, 5.0, -4.0, 4.0, 0.0]),
])
def test_ties_at_the_selected_value_are_refused(forward, value):
    with pytest.raises(ProblemError, match="more than once"):
        _solve(forward, value)


def test_k_out_of_range_is_pytorchs_error():
    v = _solve("return torch.kthvalue(x, 6, 1).values.sum()", X).to_json()
    assert v["error"]["type"] == "RuntimeError"
    assert v["error"]["message"] == "kthvalue(): selected number k out of range for dimension 1"
