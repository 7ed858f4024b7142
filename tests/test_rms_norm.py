"""nn.RMSNorm and F.rms_norm against real torch (float64): PyTorch 2.13 runs ATen's composite on
the CPU, so the node chain is PowBackward0, MeanBackward1, AddBackward1 (add_ of eps in place),
RsqrtBackward0, MulBackward0 (x * rsqrt), MulBackward0 (* weight); eps=None is the dtype's
machine epsilon (the all-zero row's gradient is rsqrt(2**-52) times its upstream gradient, so
eps=None is checked there). Values, gradients and the full backward hook's arguments compared
(tests/data/regressions/rms_norm*.yaml check hooks, saved tensors and errors through verify)."""

from conftest import require_torch

torch = require_torch()
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from nn_harness import Case, assert_close, lit, t64, torch_chain  # noqa: E402

X = [[[0.5, -1, 2], [1, 0.25, -0.5]], [[0, 0, 0], [2, -2, 1]]]
W = [1, 0.5, -2]

FILE = f"""name: t
dtype: float64
inputs:
  x: {{value: {lit(X)}, requires_grad: true}}
model:
  children:
    norm: {{type: RMSNorm, args: {{normalized_shape: 3}}, params: {{weight: {lit(W)}}}}}
    norm2: {{type: RMSNorm, args: {{normalized_shape: [2, 3], eps: 0.001}}}}
  forward: |
    h = norm(x)
    g = norm2(h * 2)
    k = g + F.rms_norm(x, (3,), eps=0.5)
    return k
loss: "sum(y * y)"
variants:
  hooked:
    hooks:
      - {{module: norm, kind: full_backward}}
"""


def test_rms_norm_matches_torch():
    case = Case(FILE)
    x = t64(X, True)
    norm = nn.RMSNorm(3).double()
    norm2 = nn.RMSNorm([2, 3], eps=0.001).double()
    with torch.no_grad():
        norm.weight.copy_(t64(W))
    seen = []
    norm.register_full_backward_hook(lambda m, gi, go: seen.append((gi, go)))
    h = norm(x)
    g = norm2(h * 2)
    k = g + F.rms_norm(x, (3,), eps=0.5)
    (k * k).sum().backward()
    leaves = {"x": x, "norm.weight": norm.weight, "norm2.weight": norm2.weight}
    for name, t in (("h", h), ("g", g), ("k", k)):
        assert case.chain(name) == torch_chain(t, leaves), name
        assert_close(case.value(name), t, name)
    for name, t in leaves.items():
        assert_close(case.grad(name), t.grad, f"grad of {name}")
    (call,) = case.calls("full_backward")
    assert_close(call["args"]["grad_input"][0]["value"], seen[0][0][0], "grad_input")
    assert_close(call["args"]["grad_output"][0]["value"], seen[0][1][0], "grad_output")

