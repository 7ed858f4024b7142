"""AdaptiveAvgPool1d and F.adaptive_avg_pool1d / torch.adaptive_avg_pool1d against real torch.

The global average pool of 1-D CNNs (audio, text): at::adaptive_avg_pool1d checks its input (2-D
or 3-D) and its one output size, then runs adaptive_avg_pool2d on the input unsqueezed at -2
(UnsqueezeBackward0, AdaptiveAvgPool2DBackward0, or MeanBackward1 for an output of 1, then
SqueezeBackward1). It was refused as a module and as a function. An ``output_size`` of None (or
a list holding None) is ATen's argument parser's TypeError, for the 1-D max pool too (its None
was read as "keep the length", an answer where PyTorch raises). Each case: the loss, the input's
gradient, the node chain, a module hook's grad_input, or the error's type and message.
"""

import numpy as np
import pytest

import adjoint
from conftest import require_torch

X = [[[1, 5, 2, 5, 0, 3, 1], [3, -1, 4, 4, 2, 1, 0]], [[0, 2, 2, -3, 1, 1, 2], [1, 1, 6, 0, 2, 2, 1]]]

TEMPLATE = """
name: case
dtype: float64
inputs:
  a: {{value: {x}, requires_grad: true}}
model:
  children:
    p: {{type: {module}, args: {{output_size: {size}}}}}
  inputs: [a]
  forward: "{forward}"
loss: "sum(y * y)"
hooks:
  - {{module: p, kind: full_backward}}
"""

CASES = [   # (module, its output_size, forward)
    ("AdaptiveAvgPool1d", "3", "p(a)"),
    ("AdaptiveAvgPool1d", "1", "p(a) * 2"),
    ("AdaptiveAvgPool1d", "[5]", "p(a[0])"),
    ("AdaptiveAvgPool1d", "10", "p(a * a)"),
    ("AdaptiveAvgPool1d", "4", "p(a) + F.adaptive_avg_pool1d(a, 4) + torch.adaptive_avg_pool1d(a, output_size=(4,))"),
    ("AdaptiveAvgPool1d", "2", "p(a[None])"),
    ("AdaptiveAvgPool1d", "2", "p(a) + F.adaptive_avg_pool1d(a, (2, 2))"),
    ("AdaptiveAvgPool1d", "null", "p(a)"),
    ("AdaptiveAvgPool1d", "[null]", "p(a)"),
    ("AdaptiveAvgPool1d", "2", "p(a) + F.adaptive_avg_pool1d(a, -1)"),
    ("AdaptiveAvgPool1d", "2", "p(a) + F.adaptive_avg_pool1d(a, (None,))"),
    ("AdaptiveMaxPool1d", "null", "p(a)"),
    ("AdaptiveMaxPool1d", "[null]", "p(a)"),
    ("AdaptiveMaxPool1d", "2", "p(a) + F.adaptive_max_pool1d(a, [2, None])"),
    ("AdaptiveMaxPool1d", "2", "p(a) + torch.adaptive_max_pool1d(a, (1, 2))[0]"),
    ("AdaptiveAvgPool1d", "2", "p(a) + F.adaptive_avg_pool1d(a, [None, 2])"),
]


def _torch(module, size, forward):
    torch = require_torch()
    import torch.nn.functional as F
    a = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    size = eval(size, {"null": None})
    p = getattr(torch.nn, module)(size)
    seen = []
    p.register_full_backward_hook(lambda m, gi, go: seen.append([g.tolist() for g in gi]))
    try:
        y = eval(forward, {"torch": torch, "F": F, "a": a, "p": p})
        loss = (y * y).sum()
        chain, fn = [], y.grad_fn
        while fn is not None and fn.name() != "torch::autograd::AccumulateGrad":
            chain.append(fn.name())
            fn = fn.next_functions[0][0]
        loss.backward()
    except (TypeError, RuntimeError) as e:
        return {"type": type(e).__name__, "message": str(e)}
    return loss.item(), a.grad.tolist(), seen, chain


@pytest.mark.parametrize("module,size,forward", CASES)
def test_adaptive_pool1d(module, size, forward):
    want = _torch(module, size, forward)
    text = TEMPLATE.format(x=X, module=module, size=size, forward=forward)
    doc = adjoint.loads(text).solve().variants[0].to_json()
    if isinstance(want, dict):
        assert {k: doc["error"][k] for k in ("type", "message")} == want
        return
    assert "error" not in doc
    loss, grad, seen, chain = want
    close = dict(rel=1e-12, abs=1e-12)   # PyTorch's float64 rounding against the exact values
    assert doc["loss"]["value"] == pytest.approx(loss, **close)
    assert np.ravel(doc["grads"]["a"]["value"]) == pytest.approx(np.ravel(grad), **close)
    calls = [[g["value"] for g in c["args"]["grad_input"]] for c in doc["hook_calls"]]
    assert len(calls) == len(seen)
    for got, want in zip(calls, seen):
        assert np.ravel(got) == pytest.approx(np.ravel(want), **close)
    assert doc["values"]["y"]["grad_fn"] == chain[0]
