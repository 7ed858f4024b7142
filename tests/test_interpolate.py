"""``F.interpolate`` and ``nn.Upsample`` against real torch: modes 'nearest' (UpsampleNearest1D /
2DBackward0), 'linear' and 'bilinear' (UpsampleLinear1D / UpsampleBilinear2DBackward0), with
align_corners, size, scale_factor (the kernel's float32 index and weight arithmetic) and
recompute_scale_factor, compared on the node chain, values, grads, the legacy hook's grad_input
and the saved-tensor packs (none: tests/opcheck.py); float32 through verify (tests/gen); the
Python checks' ValueError / NotImplementedError and the kernel's size check as PyTorch words them;
the modes whose kernels are not modelled refused."""

import pytest
from conftest import require_torch

torch = require_torch()
import torch.nn.functional as F  # noqa: E402

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402
from gen import check  # noqa: E402
from opcheck import case  # noqa: E402

X = ([[[[1, -2, 0.5], [3, 0.25, -1]], [[0, 1, 2], [-1, 0.5, 1]]]], True)
X1 = ([[1, -2, 0.5, 3], [0.25, -1, 2, 1]], True)

CASES = [
    ("F.interpolate(a, scale_factor=2, mode='nearest')", lambda a: F.interpolate(a, scale_factor=2, mode="nearest"), X),
    ("F.interpolate(a, scale_factor=3)", lambda a: F.interpolate(a, scale_factor=3), X),
    ("F.interpolate(a, size=(3, 5))", lambda a: F.interpolate(a, size=(3, 5)), X),
    ("F.interpolate(a, size=a.shape[-2:])", lambda a: F.interpolate(a, size=a.shape[-2:]), X),
    ("F.interpolate(a, scale_factor=1.5)", lambda a: F.interpolate(a, scale_factor=1.5), X),
    ("F.interpolate(a, scale_factor=(2, 0.7))", lambda a: F.interpolate(a, scale_factor=(2, 0.7)), X),
    ("F.interpolate(a, size=4, mode='bilinear', align_corners=False)",
     lambda a: F.interpolate(a, size=4, mode="bilinear", align_corners=False), X),
    ("F.interpolate(a, size=(3, 7), mode='bilinear', align_corners=True)",
     lambda a: F.interpolate(a, size=(3, 7), mode="bilinear", align_corners=True), X),
    ("F.interpolate(a, scale_factor=1.7, mode='bilinear')",
     lambda a: F.interpolate(a, scale_factor=1.7, mode="bilinear"), X),
    ("F.interpolate(a, scale_factor=2.5, mode='bilinear', recompute_scale_factor=True)",
     lambda a: F.interpolate(a, scale_factor=2.5, mode="bilinear", recompute_scale_factor=True), X),
    ("F.interpolate(a, size=(2, 3), mode='bilinear')", lambda a: F.interpolate(a, size=(2, 3), mode="bilinear"), X),
    ("F.interpolate(a.unsqueeze(0), size=7, mode='linear')",
     lambda a: F.interpolate(a.unsqueeze(0), size=7, mode="linear"), X1),
    ("F.interpolate(a.unsqueeze(0), scale_factor=0.6, mode='linear', align_corners=True)",
     lambda a: F.interpolate(a.unsqueeze(0), scale_factor=0.6, mode="linear", align_corners=True), X1),
    ("F.interpolate(a.unsqueeze(0), size=6)", lambda a: F.interpolate(a.unsqueeze(0), size=6), X1),
    ("F.interpolate(a.unsqueeze(0), size=1, mode='linear', align_corners=True)",
     lambda a: F.interpolate(a.unsqueeze(0), size=1, mode="linear", align_corners=True), X1),
]


@pytest.mark.parametrize("expr,fn,inputs", CASES)
def test_functional_against_torch(expr, fn, inputs):
    assert case({"a": inputs}, expr, fn) == []


def test_float32_and_the_module_through_verify():
    """float32: the kernel's float32 weights (1.7's, 0.6's) and index arithmetic; nn.Upsample's
    forward (a scale_factor, a size with align_corners)."""
    text = f"""
name: u
dtype: float32
inputs:
  a: {{value: {X[0]}, requires_grad: true}}
  s: {{value: {[X1[0]]}, requires_grad: true}}
model:
  children:
    up: {{type: Upsample, args: {{scale_factor: 2, mode: nearest}}}}
    bi: {{type: Upsample, args: {{size: [3, 5], mode: bilinear, align_corners: true}}}}
  inputs: [a, s]
  forward: |
    u = up(a)
    b = bi(a)
    v = F.interpolate(a, scale_factor=1.7, mode="bilinear")
    w = F.interpolate(s, scale_factor=0.6, mode="linear", align_corners=True)
    n = F.interpolate(s, size=7)
    return (u * u).sum() + (b * b).sum() + (v * v).sum() + (w * w).sum() + (n * n).sum()
hooks:
  - {{module: up, kind: full_backward}}
  - {{module: bi, kind: backward}}
  - {{tensor: v}}
"""
    outcome = check(text, timeout=120)
    assert outcome.ok, outcome.report()


ERRORS = [
    ("F.interpolate(a, scale_factor=2, align_corners=False)", lambda a: F.interpolate(a, scale_factor=2,
                                                                                      align_corners=False)),
    ("F.interpolate(a, size=4, scale_factor=2)", lambda a: F.interpolate(a, size=4, scale_factor=2)),
    ("F.interpolate(a)", lambda a: F.interpolate(a)),
    ("F.interpolate(a, size=a.shape)", lambda a: F.interpolate(a, size=a.shape)),
    ("F.interpolate(a, size=4, recompute_scale_factor=True)",
     lambda a: F.interpolate(a, size=4, recompute_scale_factor=True)),
    ("F.interpolate(a, size=4, mode='linear')", lambda a: F.interpolate(a, size=4, mode="linear")),
    ("F.interpolate(a[0, 0], size=4)", lambda a: F.interpolate(a[0, 0], size=4)),
    ("F.interpolate(a, size=4, mode='cubic')", lambda a: F.interpolate(a, size=4, mode="cubic")),
    ("F.interpolate(a, size=4, mode='nearest', antialias=True)",
     lambda a: F.interpolate(a, size=4, mode="nearest", antialias=True)),
    ("F.interpolate(a, scale_factor=0.3)", lambda a: F.interpolate(a, scale_factor=0.3)),
    ("F.interpolate(a, scale_factor=0.3, mode='bilinear')", lambda a: F.interpolate(a, scale_factor=0.3,
                                                                                     mode="bilinear")),
    ("F.interpolate(a[0], scale_factor=0.3, mode='linear')", lambda a: F.interpolate(a[0], scale_factor=0.3,
                                                                                      mode="linear")),
]


@pytest.mark.parametrize("expr,fn", ERRORS)
def test_errors_are_pytorchs(expr, fn):
    text = f"""
name: e
dtype: float64
inputs:
  a: {{value: {X[0]}, requires_grad: true}}
model:
  inputs: [a]
  forward: "{expr.replace('"', "'")}.sum()"
"""
    v = adjoint.loads(text).solve().variants[0]
    with pytest.raises(Exception) as theirs:
        fn(torch.tensor(X[0], dtype=torch.float64, requires_grad=True))
    assert v.error is not None
    assert (v.error.type, v.error.message) == (type(theirs.value).__name__, str(theirs.value))


@pytest.mark.parametrize("expr", [
    "F.interpolate(a, size=4, mode='bicubic')",
    "F.interpolate(a, size=4, mode='area')",
    "F.interpolate(a, size=4, mode='bilinear', antialias=True)",
    "F.interpolate(a, scale_factor=(2, 2, 2))",
    "F.interpolate(a, size=[4])",
])
def test_unmodelled_kernels_are_refused(expr):
    text = f"""
name: r
inputs:
  a: {{value: {X[0]}, requires_grad: true}}
model:
  inputs: [a]
  forward: "{expr}.sum()"
"""
    with pytest.raises(ProblemError) as err:
        adjoint.loads(text).solve()
    assert "not modelled" in str(err.value) and "\n" not in str(err.value)
