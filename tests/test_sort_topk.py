"""``torch.sort`` / ``torch.topk`` (and the methods) against real torch 2.13: SortBackward0 (or
SortBackward1 when ``stable=`` is given) and TopkBackward0, each saving only the int64 indices,
the values' gradient written at them. Ties: PyTorch's CPU sort keeps equal elements in index
order when stable, and for a dim of at most 16 elements (std::sort's insertion sort); longer
unstable sorts with ties, and topk with ties among the selected values, are refused. Compared on
the node chain, values, grads, the legacy hook's grad_input and the saved-tensor packs
(tests/opcheck.py); tie orders pinned with indices copied from torch."""

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402
from opcheck import case  # noqa: E402

X = [[3.0, 1.0, 2.0, 1.0, -0.5], [0.0, 5.0, -4.0, 4.0, 0.0]]
LONG = [float((k * 7) % 5) for k in range(20)]   # 20 elements, each value 4 times


@pytest.mark.parametrize("x, expr, fn", [
    (X, "torch.sort(x)[0]", lambda x: torch.sort(x)[0]),
    (X, "x.sort(dim=1, descending=True).values", lambda x: x.sort(dim=1, descending=True).values),
    (X, "torch.sort(x, 0, True)[0]", lambda x: torch.sort(x, 0, True)[0]),
    (X, "torch.sort(x, stable=True, descending=True).values", lambda x: torch.sort(x, stable=True, descending=True).values),
    (LONG, "torch.sort(x, stable=True)[0]", lambda x: torch.sort(x, stable=True)[0]),
    (LONG, "x.sort(descending=True, stable=True).values", lambda x: x.sort(descending=True, stable=True).values),
    (X, "torch.topk(x, 2).values", lambda x: torch.topk(x, 2).values),
    (X, "x.topk(1, dim=0, largest=False)[0]", lambda x: x.topk(1, dim=0, largest=False)[0]),
    (X, "torch.topk(x, 2, 0).values", lambda x: torch.topk(x, 2, 0).values),
])
def test_sort_and_topk_match_torch(x, expr, fn):
    assert case({"x": (x, True)}, expr, fn) == []


def _solve(forward: str, value=X):
    text = (f"name: s\ndtype: float64\ninputs:\n  x: {{value: {value}, requires_grad: true}}\n"
            f"model:\n  inputs: [x]\n  forward: |\n    {forward}\nloss: \"y\"\n")
    return adjoint.loads(text).solve().variants[0]


# torch 2.13.0 CPU: torch.sort(x, dim=1, descending=True).indices of X (the two 1s and the two
# 0s in index order), and the gradient of (values * w).sum() with w = [[1, 2, 3, 4, 5]] * 2
INDICES = [[0, 2, 1, 3, 4], [1, 3, 0, 4, 2]]
GRAD = [[1.0, 3.0, 2.0, 4.0, 5.0], [3.0, 1.0, 5.0, 2.0, 4.0]]


def test_expected_numbers_are_torchs():
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    v, i = torch.sort(x, dim=1, descending=True)
    (v * torch.tensor([[1, 2, 3, 4, 5.0]] * 2, dtype=torch.float64)).sum().backward()
    assert i.tolist() == INDICES and x.grad.tolist() == GRAD
    assert v.grad_fn.name() == "SortBackward0" and i.grad_fn is None


TIES = """
name: ties
dtype: float64
inputs:
  x: {value: [[3, 1, 2, 1, -0.5], [0, 5, -4, 4, 0]], requires_grad: true}
  w: {value: [[1, 2, 3, 4, 5], [1, 2, 3, 4, 5]]}
model:
  inputs: [x, w]
  forward: |
    v, i = torch.sort(x, dim=1, descending=True)
    return (v * w).sum()
loss: "y"
"""


def test_ties_take_the_index_order():
    v = adjoint.loads(TIES).solve().variants[0]
    assert v.to_json()["grads"]["x"]["value"] == GRAD
    assert v.to_json()["values"]["v"]["grad_fn"] == "SortBackward0"
    assert v.to_json()["values"]["i"]["value"] == INDICES and v.to_json()["values"]["i"]["dtype"] == "int64"


@pytest.mark.parametrize("forward, words", [
    ("return torch.sort(x)[0].sum()", "pass stable=True"),
    ("return torch.topk(x, 2).values.sum()", "topk of equal values"),
    ("return torch.topk(x, 2, sorted=False).values.sum()", "sorted=False"),
    ("return torch.sort(x, 0, stable=True).values.sum()", "by keyword"),
])
def test_ties_pytorch_leaves_undocumented_are_refused(forward, words):
    value = LONG if "sort" in forward else [[1.0, 3.0, 1.0, 3.0]]
    if "sorted=False" in forward:
        value = [[1.0, 3.0, 2.0]]
    with pytest.raises(ProblemError, match=words):
        _solve(forward, value)


def test_k_out_of_range_is_pytorchs_error():
    v = _solve("return torch.topk(x, 6).values.sum()").to_json()
    assert v["error"]["type"] == "RuntimeError" and v["error"]["message"] == "selected index k out of range"
