"""A max pool whose dilation steps over the whole input from the padding, against real torch.

``MaxPool2d(2, dilation=3, padding=1)`` of a 2 x 3 plane: each window reads rows -1 and 2 (and
columns -1, 2), none of them in the input, and PyTorch accepts it (the padding is at most half
the effective kernel). ATen's CPU kernel then starts the scan past the window's end
(``while (ih0 < 0) ih0 += dilationH``): the output is -inf and the index ``ih0 * W + iw0``
points past the plane, where the backward adds the gradient (into the next plane, or outside
the tensor for the last one). That is no answer to predict: adjoint refuses the call at its
place in the file (it crashed with an internal error). Windows that keep one element of the
input, the same kernel and dilation over a larger plane, are predicted as before.
"""

import pytest

import adjoint
from conftest import counting

TEMPLATE = """
name: case
dtype: float64
inputs:
  a: {{value: {x}, requires_grad: true}}
model:
  inputs: [a]
  forward: "{forward}"
loss: "sum(y)"
"""

EMPTY = [
    ((1, 2, 3), "F.max_pool2d(a, 2, dilation=3, padding=1)", "max_pool2d"),
    ((1, 3, 2), "F.max_pool2d(a, (1, 2), 1, (0, 1), (1, 3))", "max_pool2d"),
    ((2, 2), "F.max_pool1d(a, 2, dilation=3, padding=1)", "max_pool2d"),
    ((1, 1, 2, 2, 2), "F.max_pool3d(a, 2, dilation=3, padding=1)", "max_pool3d"),
    ((1, 2, 5), "F.max_pool2d(a * 2, 2, 1, 1, (3, 1), True, True)[0]", "max_pool2d"),
]


@pytest.mark.parametrize("shape,forward,what", EMPTY)
def test_a_window_without_input_is_refused(shape, forward, what):
    from conftest import require_torch
    torch = require_torch()
    import torch.nn.functional as F
    a = torch.tensor(counting(shape), dtype=torch.float64)
    out = eval(forward, {"F": F, "a": a})
    # PyTorch: some output is -inf although every element of the input is finite
    assert torch.isneginf(out).any()
    text = TEMPLATE.format(x=counting(shape), forward=forward)
    with pytest.raises(adjoint.ProblemError) as err:
        adjoint.loads(text).solve()
    assert f"{what} with a window that holds no element of the input" in str(err.value)
    assert ":8:" in str(err.value).split(" ")[0]   # located at the forward


@pytest.mark.parametrize("shape,forward", [
    ((1, 4, 5), "F.max_pool2d(a, 2, dilation=3, padding=1)"),
    ((1, 6, 6), "F.max_pool2d(a, 2, 2, 1, 4, ceil_mode=True)"),
    ((2, 5), "F.max_pool1d(a * a, 2, dilation=3, padding=1) * 3"),
])
def test_dilated_windows_that_keep_an_element_are_predicted(shape, forward):
    from conftest import require_torch
    torch = require_torch()
    import torch.nn.functional as F
    a = torch.tensor(counting(shape), dtype=torch.float64, requires_grad=True)
    y = eval(forward, {"F": F, "a": a}).sum()
    y.backward()
    doc = adjoint.loads(TEMPLATE.format(x=counting(shape), forward=forward)).solve().variants[0].to_json()
    assert doc["loss"]["value"] == y.item()
    assert doc["grads"]["a"]["value"] == a.grad.tolist()
