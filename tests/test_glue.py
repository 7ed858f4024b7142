"""The glue ops (sizes, dtype conversions, ~, new constants): PyTorch's errors with its exact
words (copied from torch 2.13), the Python ints they read, and what makes no node. The
regression files tests/data/regressions/glue_*.yaml check the rest against real torch."""

import pytest

import adjoint

TEMPLATE = """
name: case
dtype: float64
inputs:
  x: {{value: [[0.5, -1, 2], [1.5, 0.25, -0.75]], requires_grad: true}}
  m: {{value: [[true, false, true], [false, false, true]], dtype: bool}}
model:
  inputs: [x, m]
  forward: "{forward}"
loss: "sum(y)"
"""


def solve(forward: str):
    return adjoint.loads(TEMPLATE.format(forward=forward), name="case").solve().variants[0]


@pytest.mark.parametrize("forward, kind, message", [
    # messages copied from torch 2.13: x float64 (2, 3)
    ("x * x.size(5)", "IndexError", "Dimension out of range (expected to be in range of [-2, 1], but got 5)"),
    ("x * x.size(-3)", "IndexError", "Dimension out of range (expected to be in range of [-2, 1], but got -3)"),
    ("x * x.sum().size(0)", "IndexError", "Dimension specified as 0 but tensor has no dimensions"),
    ("x * x.sum().size(-1)", "IndexError", "Dimension specified as -1 but tensor has no dimensions"),
    ("x * len(x.sum())", "TypeError", "len() of a 0-d tensor"),
    ("x * ~x", "TypeError", "~ (operator.invert) is only implemented on integer and Boolean-type tensors"),
    ("x * x.bitwise_not()", "NotImplementedError", "\"bitwise_not_cpu\" not implemented for 'Double'"),
    ("x * x.new_zeros((2, -1))", "RuntimeError", "Trying to create tensor with negative dimension -1: [2, -1]"),
    ("x * x.new_ones(-1)", "RuntimeError", "Trying to create tensor with negative dimension -1: [-1]"),
])
def test_errors_are_pytorchs(forward, kind, message):
    v = solve(forward)
    assert v.error is not None
    assert (v.error.type, v.error.message) == (kind, message)


@pytest.mark.parametrize("forward, scale", [
    # hand-derived: d/dx sum(x * n) = n
    ("x * x.size(1)", 3), ("x * x.size(-2)", 2), ("x * x.dim()", 2), ("x * x.ndimension()", 2),
    ("x * x.numel()", 6), ("x * torch.numel(x)", 6), ("x * len(x)", 2), ("x * len(x.size())", 2),
    ("x * x.size()[1]", 3), ("x / 4 ** 0.5", 0.5), ("x * 16 ** -0.5", 0.25),
])
def test_sizes_are_python_ints(forward, scale):
    v = solve(forward)
    assert v.error is None
    assert [list(map(float, row)) for row in v.grads["x"].floats()] == [[scale] * 3] * 2


@pytest.mark.parametrize("forward", [
    "x.double()", "x.to(torch.float64)", "x.to(torch.double)", "x.to(x.dtype)", "x.type_as(x)", "x.to(x)",
    "x.to('cpu')",
])
def test_conversion_to_its_own_dtype_is_the_tensor_itself(forward):
    v = solve(f"{forward} * 3")   # no node of its own: MulBackward0 straight to x's AccumulateGrad
    assert v.node_order == ["SumBackward0", "MulBackward0", "torch::autograd::AccumulateGrad"]


@pytest.mark.parametrize("forward, grad", [
    # hand-derived: m as 0/1, ~m its complement
    ("x * m.double()", [[1, 0, 1], [0, 0, 1]]),
    ("x * m.to(x.dtype)", [[1, 0, 1], [0, 0, 1]]),
    ("x * m.type_as(x)", [[1, 0, 1], [0, 0, 1]]),
    ("x * (~m).double()", [[0, 1, 0], [1, 1, 0]]),
    ("x * m.logical_not()", [[0, 1, 0], [1, 1, 0]]),
    ("x * torch.logical_not(m)", [[0, 1, 0], [1, 1, 0]]),
    ("x * ~(x > 1)", [[1, 1, 0], [0, 1, 1]]),
    ("x + x.new_ones(3) * 5", [[1, 1, 1], [1, 1, 1]]),
])
def test_masks_and_constants_make_no_node(forward, grad):
    v = solve(forward)
    assert [list(map(float, row)) for row in v.grads["x"].floats()] == grad
    assert set(v.node_order) <= {"SumBackward0", "MulBackward0", "AddBackward0", "torch::autograd::AccumulateGrad"}


@pytest.mark.parametrize("forward, grad", [
    # Tensor.to's overloads (hand-derived: a conversion to x's own dtype is x; m as 0/1)
    ("x.to('cpu') * 3", [[3] * 3] * 2), ("x.to('cpu', torch.float64) * 3", [[3] * 3] * 2),
    ("x.to(dtype=torch.float64) * 3", [[3] * 3] * 2), ("x.to(device='cpu') * 3", [[3] * 3] * 2),
    ("x * m.to('cpu', torch.float64)", [[1, 0, 1], [0, 0, 1]]), ("x * m.to(x, False, False)", [[1, 0, 1], [0, 0, 1]]),
    ("x * m.to(torch.float64, non_blocking=True)", [[1, 0, 1], [0, 0, 1]]),
])
def test_to_overloads(forward, grad):
    v = solve(forward)
    assert [list(map(float, row)) for row in v.grads["x"].floats()] == grad
