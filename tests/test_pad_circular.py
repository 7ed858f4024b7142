"""F.pad(mode='circular') and Conv{1,2,3}d(padding_mode='circular') against real torch (float64):
at::_pad_circular's graph (CopySlices over SliceBackward0 nodes: one copy into the middle, one per
positive pad), values and gradients, negative pads that crop, PyTorch's errors; the CircularPad{1,2,3}d
modules (tests/data/regressions/pad_circular.yaml and circular_pad_modules.yaml check hooks and
saved tensors through verify)."""

import pytest

from conftest import require_torch

torch = require_torch()
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from nn_harness import (Case, assert_close, assert_error_matches_torch, assert_expr_matches_torch,  # noqa: E402
                        assert_root_module, distinct, expr_problem, lit, module_problem, t64, torch_chain,
                        torch_module_run)

X = distinct((2, 3, 4), 1)


@pytest.mark.parametrize("expr, torch_fn", [
    ("F.pad(x, (2, 1), mode='circular')", lambda x: F.pad(x, (2, 1), mode="circular")),
    ("F.pad(x, (0, 4), mode='circular')", lambda x: F.pad(x, (0, 4), mode="circular")),
    ("F.pad(x, (1, 2, 3, 0), mode='circular')", lambda x: F.pad(x, (1, 2, 3, 0), mode="circular")),
    ("F.pad(x * 2, (-1, 2), mode='circular')", lambda x: F.pad(x * 2, (-1, 2), mode="circular")),
    ("F.pad(x, (1, -2, -1, 1), mode='circular')", lambda x: F.pad(x, (1, -2, -1, 1), mode="circular")),
    ("F.pad(x.unsqueeze(0), (1, 1, 0, 2, 1, 1), mode='circular')",
     lambda x: F.pad(x.unsqueeze(0), (1, 1, 0, 2, 1, 1), mode="circular")),
    ("F.pad(x.transpose(1, 2), (2, 0, 1, 1), mode='circular')",
     lambda x: F.pad(x.transpose(1, 2), (2, 0, 1, 1), mode="circular")),
    ("F.pad(x[0], (3, 3), mode='circular')", lambda x: F.pad(x[0], (3, 3), mode="circular")),
])
def test_circular_matches_torch(expr, torch_fn):
    assert_expr_matches_torch(expr, torch_fn, X)


@pytest.mark.parametrize("rank, kernel, padding", [(1, 3, 2), (2, (2, 3), (1, 2)), (2, 3, "same"), (3, 2, 1)])
def test_circular_padded_conv_matches_torch(rank, kernel, padding):
    shape = (1, 2) + (3,) * rank
    ks = (kernel,) * rank if isinstance(kernel, int) else kernel
    w = distinct((1, 2) + ks, 2)
    x_value = distinct(shape, 3)
    text = f"""name: t
dtype: float64
inputs:
  x: {{value: {lit(x_value)}, requires_grad: true}}
model:
  children:
    conv: {{type: Conv{rank}d, args: {{in_channels: 2, out_channels: 1, kernel_size: {lit(kernel)},
            padding: {lit(padding)}, padding_mode: circular}}, params: {{weight: {lit(w)}, bias: [0.5]}}}}
  forward: |
    h = conv(x)
    return h
loss: "sum(y * y)"
"""
    case = Case(text)
    conv = getattr(nn, f"Conv{rank}d")(2, 1, kernel, padding=padding, padding_mode="circular").double()
    with torch.no_grad():
        conv.weight.copy_(t64(w))
        conv.bias.fill_(0.5)
    x = t64(x_value, True)
    h = conv(x)
    (h * h).sum().backward()
    leaves = {"x": x, "conv.weight": conv.weight, "conv.bias": conv.bias}
    assert case.chain("h") == torch_chain(h, leaves)
    assert_close(case.value("h"), h, "h")
    for name, t in leaves.items():
        assert_close(case.grad(name), t.grad, f"grad of {name}")


@pytest.mark.parametrize("expr, torch_fn", [
    ("F.pad(x, (5, 0), mode='circular')", lambda x: F.pad(x, (5, 0), mode="circular")),
    ("F.pad(x, (1, 1, 0, 4), mode='circular')", lambda x: F.pad(x, (1, 1, 0, 4), mode="circular")),
    ("F.pad(x, (-3, -2), mode='circular')", lambda x: F.pad(x, (-3, -2), mode="circular")),
    ("F.pad(x, (1, 1), mode='circular', value=1.0)", lambda x: F.pad(x, (1, 1), mode="circular", value=1.0)),
    ("F.pad(x[0, 0], (1, 1), mode='circular')", lambda x: F.pad(x[0, 0], (1, 1), mode="circular")),
    ("F.pad(x, (1, 1, 1), mode='circular')", lambda x: F.pad(x, (1, 1, 1), mode="circular")),
    ("F.pad(x, (1, 1, 1), mode='wrap')", lambda x: F.pad(x, (1, 1, 1), mode="wrap")),
])
def test_torchs_errors(expr, torch_fn):
    assert_error_matches_torch(expr_problem(expr, X), lambda: torch_fn(t64(X, True)))


def test_the_result_version_counts_the_copies():
    """new_empty, then one copy into the middle and one per positive pad: version 3 for (2, 1)."""
    y = F.pad(t64(X, True), (2, 1), mode="circular")
    case = Case(expr_problem("F.pad(x, (2, 1), mode='circular')", X))
    assert case.tensor("h").version.shown == y._version


@pytest.mark.parametrize("rank, padding, shape", [
    (1, 2, (2, 3)), (1, (0, 3), (1, 2, 3)), (1, (-1, 2), (2, 4)),
    (2, 1, (2, 3, 4)), (2, (1, 0, 2, 3), (1, 2, 3, 4)), (2, (0, -2, 1, 1), (2, 2, 3)),
    (3, 1, (1, 2, 2, 3)), (3, (1, 0, 0, 2, 1, 1), (1, 1, 2, 3, 2)),
])
def test_circular_pad_modules_match_torch(rank, padding, shape):
    """CircularPad{1,2,3}d: _check_input_dim, then F.pad(input, self.padding, 'circular'): the
    chain, values, gradient, the legacy hook's arguments and the saved tensors, as in torch."""
    x = distinct(shape, rank)
    case = Case(module_problem(f"CircularPad{rank}d", {"padding": padding}, {}, x, loss="sum(y * y * y)"))
    y, names, rec = torch_module_run(getattr(nn, f"CircularPad{rank}d")(padding), {}, x,
                                     loss=lambda out: (out * out * out).sum())
    assert_root_module(case, y, names, rec)


@pytest.mark.parametrize("rank, padding, shape", [
    (1, 1, (3,)), (1, 1, (1, 2, 3, 4)), (2, 1, (2, 3)), (2, 1, (1, 1, 2, 3, 4)), (3, 1, (2, 3, 4)),
    (3, 1, (1, 1, 2, 2, 2, 2)), (1, 4, (2, 3)), (2, (1, 1, 0, 3), (1, 2, 2)),
])
def test_circular_pad_module_errors_are_torchs(rank, padding, shape):
    """_check_input_dim's ValueError ("expected 2D or 3D input (got 1D input)"), and F.pad's wrap-around
    RuntimeError, as torch raises them."""
    x = distinct(shape, 1)
    text = module_problem(f"CircularPad{rank}d", {"padding": padding}, {}, x)
    assert_error_matches_torch(text, lambda: getattr(nn, f"CircularPad{rank}d")(padding)(t64(x, True)))


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_circular_pad_module_handed_a_tuple_reads_dim(rank):
    """``_check_input_dim`` calls ``input.dim()`` first: a tuple is Python's AttributeError."""
    x = distinct((1, 2, 2, 2), 1)
    text = (f"name: t\ndtype: float64\ninputs:\n  x: {{value: {lit(x)}, requires_grad: true}}\nmodel:\n  children:\n"
            f"    p: {{type: CircularPad{rank}d, args: {{padding: 1}}}}\n  forward: |\n    h = p((x, x))\n"
            f"    return h\nloss: \"sum(y)\"\n")
    xt = t64(x, True)
    assert_error_matches_torch(text, lambda: getattr(nn, f"CircularPad{rank}d")(1)((xt, xt)))
