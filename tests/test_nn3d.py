"""Conv3d, MaxPool3d, AvgPool3d, AdaptiveAvgPool3d and their functions against real torch
(float64), in one solve and one torch run: the node chains (ConvolutionBackward0,
MaxPool3DWithIndicesBackward0, AvgPool3DBackward0, AdaptiveAvgPool3DBackward0, MeanBackward1 for
a 1 x 1 x 1 adaptive output, unbatched conv3d's UnsqueezeBackward0 / SqueezeBackward1), the
max pool's indices (a tie: the first in d, h, w order), values and gradients
(tests/data/regressions/pools_3d.yaml checks hooks and saved tensors through verify)."""

import warnings

from conftest import require_torch

torch = require_torch()
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import adjoint  # noqa: E402
from nn_harness import assert_close, torch_chain  # noqa: E402
from nodechain import chain, leaf_names  # noqa: E402

X = [[[[1, 2, 0.5], [0, -1, 3], [2, 3, 1]], [[0.25, 3, -2], [1, 1, 0], [3, -0.5, 2]]],
     [[[1, 0, 0], [2, 5, 1], [-1, 0.5, 0.75]], [[0, 1, 1], [0.5, 0.5, 2], [1, -2, 0]]]]
W = [[[[[1, -1], [0.5, 0]], [[0, 2], [1, 0.25]]], [[[0, 1], [1, 0]], [[-1, 0], [0, 0.5]]]],
     [[[[0.5, 0.5], [0, 1]], [[1, 0], [0, -1]]], [[[2, 0], [0, 0]], [[0, 0], [1, 1]]]]]

FILE = f"""name: t
dtype: float64
inputs:
  x: {{value: {[X]}, requires_grad: true}}
  u: {{value: {X}, requires_grad: true}}
  k: {{value: {W}, requires_grad: true}}
model:
  children:
    conv: {{type: Conv3d, args: {{in_channels: 2, out_channels: 2, kernel_size: 2, padding: 1}}, params: {{weight: {W}, bias: [0.5, -0.25]}}}}
    mp: {{type: MaxPool3d, args: {{kernel_size: 2, stride: 1, return_indices: true}}}}
    ap: {{type: AvgPool3d, args: {{kernel_size: [2, 2, 1], padding: [1, 0, 0], count_include_pad: false, ceil_mode: true}}}}
    ad: {{type: AdaptiveAvgPool3d, args: {{output_size: [2, 1, 3]}}}}
  inputs: [x, u, k]
  forward: |
    h = conv(x)
    m, i = mp(h)
    a = ap(m)
    d = ad(a)
    g = F.adaptive_avg_pool3d(h, 1)
    q = F.max_pool3d(u, [1, 2, 2], stride=1, padding=[0, 1, 1], dilation=[1, 2, 1])
    s = F.avg_pool3d(u, 2, stride=1, padding=1, divisor_override=3)
    c = F.conv3d(u, k, padding="same")
    return d.sum() + (g * g).sum() + (q * q).sum() + (s * s).sum() + (c * c).sum()
loss: "y"
"""


def test_3d_layers_and_functions_match_torch():
    v = adjoint.loads(FILE).solve().variants[0]
    js = v.to_json()
    x = torch.tensor([X], dtype=torch.float64, requires_grad=True)
    u = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    conv = nn.Conv3d(2, 2, 2, padding=1).double()
    with torch.no_grad():
        conv.weight.copy_(torch.tensor(W, dtype=torch.float64))
        conv.bias.copy_(torch.tensor([0.5, -0.25], dtype=torch.float64))
    h = conv(x)
    m, i = nn.MaxPool3d(2, stride=1, return_indices=True)(h)
    a = nn.AvgPool3d((2, 2, 1), padding=(1, 0, 0), count_include_pad=False, ceil_mode=True)(m)
    d = nn.AdaptiveAvgPool3d((2, 1, 3))(a)
    g = F.adaptive_avg_pool3d(h, 1)
    q = F.max_pool3d(u, [1, 2, 2], stride=1, padding=[0, 1, 1], dilation=[1, 2, 1])
    s = F.avg_pool3d(u, 2, stride=1, padding=1, divisor_override=3)
    k = torch.tensor(W, dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        c = F.conv3d(u, k, padding="same")   # an even kernel: ConstantPadNdBackward0 first, and a warning
    # PyTorch's TORCH_WARN_ONCE: torch warns once per process (an earlier test in the same worker may
    # have taken it), while each prediction is a fresh process's; the text is PyTorch's own words.
    same_warning = ["Using padding='same' with even kernel lengths and odd dilation may require a zero-padded "
                    "copy of the input be created (Triggered internally at "
                    "/__w/pytorch/pytorch/aten/src/ATen/native/Convolution.cpp:1101.)"]
    assert [str(w.message) for w in caught] in (same_warning, [])
    assert [w["message"] for w in js["warnings"]] == same_warning
    (d.sum() + (g * g).sum() + (q * q).sum() + (s * s).sum() + (c * c).sum()).backward()
    ours = v.run.forward.names
    mine = leaf_names(ours)
    theirs = {"x": x, "u": u, "k": k, "conv.weight": conv.weight, "conv.bias": conv.bias}
    for name, t in (("h", h), ("m", m), ("a", a), ("d", d), ("g", g), ("q", q), ("s", s), ("c", c)):
        assert chain(ours[name], mine) == torch_chain(t, theirs), name
        assert_close(js["values"][name]["value"], t.detach(), name)
    assert js["values"]["i"]["value"] == i.tolist()
    for name, t in theirs.items():
        assert_close(js["grads"][name]["value"], t.grad, f"grad of {name}")
