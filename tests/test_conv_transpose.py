"""``F.conv_transpose1d`` / ``F.conv_transpose2d`` and ``nn.ConvTranspose1d`` / ``nn.ConvTranspose2d``
against real torch: one ``ConvolutionBackward0`` with ``transposed=True`` (unbatched: unsqueeze
and squeeze around it), compared on the node chain, values, grads, the legacy hook's grad_input and
the saved-tensor packs (``input``, ``weight``: tests/opcheck.py); ATen's argument errors after the
packs, with its messages."""

import pytest
from conftest import require_torch

torch = require_torch()
import torch.nn.functional as F  # noqa: E402

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402
from opcheck import case  # noqa: E402
from gen import check  # noqa: E402

X = ([[[[1, -2, 0.5], [3, 0.25, -1], [2, 1, -0.5]], [[0, 1, 2], [-1, 0.5, 1], [1, 1, 1]]]], True)
W = ([[[[1, 2], [-1, 0.5]], [[0.5, 0], [1, -1]], [[2, 1], [0, 1]]],
      [[[1, -1], [0.5, 2]], [[0, 1], [1, 0]], [[-0.5, 1], [2, 1]]]], True)
B = ([0.5, -1, 2], True)
XWB = {"a": X, "w": W, "b": B}
XW = {"a": X, "w": W}
W_GROUPS = ([[[[1, 2], [-1, 0.5]]], [[[0.5, 0], [1, -1]]]], True)
X1 = ([[1, -2, 0.5], [3, 0.25, -1]], True)
W1 = ([[[1, 2], [-1, 0.5]], [[0.5, 0], [1, -1]]], True)


@pytest.mark.parametrize("expr,fn,inputs", [
    ("F.conv_transpose2d(a, w, b)", lambda a, w, b: F.conv_transpose2d(a, w, b), XWB),
    ("F.conv_transpose2d(a, w, b, stride=2)", lambda a, w, b: F.conv_transpose2d(a, w, b, stride=2), XWB),
    ("F.conv_transpose2d(a, w, b, stride=2, padding=1, output_padding=1)",
     lambda a, w, b: F.conv_transpose2d(a, w, b, stride=2, padding=1, output_padding=1), XWB),
    ("F.conv_transpose2d(a, w, stride=(2, 1), dilation=(1, 2))",
     lambda a, w: F.conv_transpose2d(a, w, stride=(2, 1), dilation=(1, 2)), XW),
    ("torch.conv_transpose2d(a[0], w, b, 1, 0, 0, 1, 1)",
     lambda a, w, b: torch.conv_transpose2d(a[0], w, b, 1, 0, 0, 1, 1), XWB),
    ("F.conv_transpose2d(a, w, b, groups=2, stride=2)", lambda a, w, b: F.conv_transpose2d(a, w, b, groups=2, stride=2),
     {"a": X, "w": W_GROUPS, "b": ([1, 2], True)}),
    ("F.conv_transpose1d(a, w, stride=3, padding=1, output_padding=2, dilation=2)",
     lambda a, w: F.conv_transpose1d(a, w, stride=3, padding=1, output_padding=2, dilation=2), {"a": X1, "w": W1}),
    ("F.conv_transpose1d(a.unsqueeze(0), w, stride=2)",
     lambda a, w: F.conv_transpose1d(a.unsqueeze(0), w, stride=2), {"a": X1, "w": W1}),
])
def test_functional_against_torch(expr, fn, inputs):
    assert case(inputs, expr, fn) == []


@pytest.mark.parametrize("args", [
    "{in_channels: 2, out_channels: 3, kernel_size: 2, stride: 2}",
    "{in_channels: 2, out_channels: 2, kernel_size: [2, 3], stride: [2, 1], padding: 1, output_padding: [1, 0], "
    "groups: 2, bias: false, dilation: [1, 2]}",
])
def test_module_against_torch(args):
    """nn.ConvTranspose2d: its parameters' shapes (weight (in, out / groups, *kernel)), drawn by
    init:, and its forward (F.conv_transpose2d with its arguments), run in torch by verify (tests/gen):
    values, grads, the hook calls and the node names."""
    text = f"""
name: m
dtype: float64
init: {{seed: 0}}
inputs:
  a: {{value: {X[0]}, requires_grad: true}}
model:
  children:
    m: {{type: ConvTranspose2d, args: {args}}}
  inputs: [a]
  forward: "return m(a) * 2"
loss: "(y * y).sum()"
hooks:
  - {{module: m, kind: full_backward}}
  - {{tensor: m.weight}}
  - {{saved_tensors: {{pack: "x", unpack: "x"}}}}
"""
    assert adjoint.loads(text).solve().variants[0].error is None
    outcome = check(text, timeout=120)
    assert outcome.ok, outcome.report()


def test_module_1d_and_unbatched_against_torch():
    text = f"""
name: m
dtype: float32
init: {{seed: 1}}
inputs:
  a: {{value: {X1[0]}, requires_grad: true}}
model:
  children:
    m: {{type: ConvTranspose1d, args: {{in_channels: 2, out_channels: 3, kernel_size: 2, stride: 2, padding: 1}}}}
  inputs: [a]
  forward: "return m(a)"
loss: "(y * y).sum()"
hooks:
  - {{module: m, kind: full_backward}}
"""
    outcome = check(text, timeout=120)
    assert outcome.ok, outcome.report()


ERRORS = [
    (dict(output_padding=2, stride=2), "2d"),
    (dict(output_padding=1), "2d"),
    (dict(output_padding=-1), "2d"),
    (dict(groups=3), "2d"),
    (dict(padding=-1), "2d"),
    (dict(padding=3), "2d"),
    (dict(padding=(3, 0)), "2d"),
    (dict(stride=0), "2d"),
    (dict(dilation=0), "2d"),
    (dict(dilation=-1), "2d"),
    (dict(stride=(1, 2, 3)), "2d"),
    (dict(output_padding=(1, 0), stride=(1, 2)), "2d"),
    (dict(output_padding=1), "1d"),
    (dict(padding=3), "1d"),
    (dict(dilation=0), "1d"),
]


@pytest.mark.parametrize("kwargs,rank", ERRORS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_argument_errors_are_pytorchs_after_the_packs(kwargs, rank, dtype):
    x, w = (X[0], W[0]) if rank == "2d" else ([X1[0]], [[[1, 2], [-1, 0.5]], [[0.5, 0], [1, -1]]])
    args = ", ".join(f"{k}={v}" for k, v in kwargs.items())
    text = f"""
name: e
dtype: {dtype}
inputs:
  a: {{value: {x}, requires_grad: true}}
  w: {{value: {w}, requires_grad: true}}
model:
  inputs: [a, w]
  forward: "F.conv_transpose{rank}(a, w, {args}).sum()"
hooks:
  - {{saved_tensors: {{pack: "x", unpack: "x"}}}}
"""
    v = adjoint.loads(text).solve().variants[0]
    packs = []
    dt = getattr(torch, dtype)
    fn = getattr(F, f"conv_transpose{rank}")
    with pytest.raises(RuntimeError) as theirs:
        with torch.autograd.graph.saved_tensors_hooks(lambda t: packs.append(tuple(t.shape)) or t, lambda t: t):
            fn(torch.tensor(x, dtype=dt, requires_grad=True), torch.tensor(w, dtype=dt, requires_grad=True), **kwargs)
    assert (v.error.type, v.error.message) == ("RuntimeError", str(theirs.value))
    assert [c.kind for c in v.hook_calls] == ["pack"] * len(packs)


def test_input_rank_is_checked_before_any_node():
    text = f"""
name: e
inputs:
  a: {{value: [[1, 2], [3, 4]], requires_grad: true}}
  w: {{value: {W[0]}, requires_grad: true}}
model:
  inputs: [a, w]
  forward: "F.conv_transpose2d(a, w).sum()"
"""
    v = adjoint.loads(text).solve().variants[0]
    with pytest.raises(RuntimeError) as theirs:
        F.conv_transpose2d(torch.ones(2, 2), torch.tensor(W[0]))
    assert (v.error.type, v.error.message) == ("RuntimeError", str(theirs.value))


def test_output_padding_past_the_stride_is_refused():
    text = f"""
name: r
inputs:
  a: {{value: {X1[0]}, requires_grad: true}}
  w: {{value: {W1[0]}, requires_grad: true}}
model:
  inputs: [a, w]
  forward: "F.conv_transpose1d(a, w, output_padding=1, dilation=2).sum()"
"""
    with pytest.raises(ProblemError) as err:
        adjoint.loads(text).solve()
    assert "output_padding" in str(err.value) and "\n" not in str(err.value)
