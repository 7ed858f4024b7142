"""Answer values used as data, as a PyTorch tensor is used: numpy.asarray, torch.as_tensor,
indexing, len and iteration, float() of one element -- with PyTorch's own errors, the
expected messages taken from real torch next to them."""

from __future__ import annotations

import os

import numpy as np
import pytest

import adjoint

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBLEM = """
name: data
inputs:
  x: {value: [1.5, -2], requires_grad: true}
model:
  type: Linear
  params: {weight: [[1, 2], [0.5, -1]], bias: [0.5, 0]}
loss: "sum(tanh(y) ** 2)"
"""
# hand-derived in exact arithmetic below where needed; the loss is transcendental (tanh): certified values


def _grads(mode="exact"):
    return adjoint.loads(PROBLEM, "data.yaml").solve(mode=mode).variants[0].grads


@pytest.mark.parametrize("mode", ["exact", "float64"])
def test_index_len_iterate_and_convert(mode):
    w = _grads(mode)["weight"]
    a = np.asarray(w)
    assert a.dtype == np.float64 and a.shape == (2, 2)
    assert float(w[0, 1]) == a[0, 1] and float(w[1, 0]) == a[1, 0]
    assert np.array_equal(np.asarray(w[0]), a[0]) and np.array_equal(np.asarray(w[:, 1]), a[:, 1])
    assert np.array_equal(np.asarray(w[..., 0]), a[..., 0]) and np.asarray(w[None]).shape == (1, 2, 2)
    assert np.asarray(w[-1, -1]) == a[-1, -1]
    assert len(w) == 2 and [np.asarray(r).tolist() for r in w] == a.tolist()
    assert w[0, 1].shape == () and w[0].shape == (2,)
    assert np.array_equal(np.asarray(w[[1, 0]]), a[[1, 0]]) and np.array_equal(np.asarray(w[:, [True, False]]),
                                                                                a[:, [True, False]])


def test_an_exact_element_stays_exact():
    """weight.grad = outer(dL/dy, x) with x = (3/2, -2): element [0, 1] is -4/3 of element [0, 0]."""
    w = _grads()["weight"]
    first, second = w[0, 0], w[0, 1]
    assert type(first).__name__ == "Exact"
    assert np.asarray(second) == pytest.approx(float(first) * -2 / 1.5, rel=1e-15)
    assert not isinstance(first.item(), float)       # certified (tanh): the exact number, not a decimal


def test_a_rational_element_is_the_exact_number():
    pred = adjoint.load(os.path.join(ROOT, "problems", "slinear.yaml")).solve()
    g = pred["rescaled"].grads["x"]
    assert str(g[0].item()) == "-11951973/48828125" and float(g[0]) == -11951973 / 48828125


def test_torch_errors_for_bad_uses():
    w = _grads()["weight"]
    with pytest.raises(IndexError, match=r"^index 2 is out of bounds for dimension 0 with size 2$"):
        w[2]
    with pytest.raises(IndexError, match=r"^index -3 is out of bounds for dimension 1 with size 2$"):
        w[0, -3]
    with pytest.raises(IndexError, match=r"^too many indices for tensor of dimension 2$"):
        w[0, 0, 0]
    with pytest.raises(TypeError, match=r"^len\(\) of a 0-d tensor$"):
        len(w[0, 0])
    with pytest.raises(TypeError, match=r"^iteration over a 0-d tensor$"):
        iter(w[0, 0])
    with pytest.raises(IndexError, match=r"^invalid index of a 0-dim tensor"):
        w[0, 0][0]
    with pytest.raises(ValueError, match=r"^only one element tensors can be converted to Python scalars$"):
        float(w)


@pytest.mark.torch
def test_torch_as_tensor_and_the_same_errors_in_torch():
    import torch

    w = _grads()["weight"]
    t = torch.as_tensor(w)
    assert t.dtype == torch.float64 and torch.equal(t, torch.from_numpy(np.asarray(w)))
    assert torch.as_tensor(w, dtype=torch.float32).dtype == torch.float32
    assert torch.as_tensor(w[0, 1]).shape == ()
    real = torch.zeros(2, 2)
    for bad, kind in ((lambda v: v[2], IndexError), (lambda v: v[0, -3], IndexError), (lambda v: v[0, 0, 0], IndexError),
                      (lambda v: len(v[0, 0]), TypeError), (lambda v: iter(v[0, 0]), TypeError),
                      (lambda v: float(v), ValueError), (lambda v: v[0, 0][0], IndexError),
                      (lambda v: v[0, 0][1], IndexError), (lambda v: v[0, 0][-1], IndexError)):
        with pytest.raises(kind) as ours:
            bad(w)
        with pytest.raises(kind) as theirs:
            bad(real)
        assert str(ours.value) == str(theirs.value)


def test_truth_is_unchanged():
    """A value is an object that is true, whatever its contents (the engine tests for None only)."""
    w = _grads()["weight"]
    assert bool(w) and bool(w[0, 0])
