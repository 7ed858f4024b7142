"""A frozen MultiheadAttention in eval mode whose input needs no gradient takes PyTorch's fast
path (torch._native_multi_head_attention) even when a trainable module follows it: no node, the
slow path's values, but a contiguous output, so the Linear after it makes ViewBackward0 (addmm on
a view), not AddBackward0 (matmul and add on the slow path's transposed output). With a mask the
fast path differs in value (a fully masked row is nan), so adjoint refuses it. Expected values
come from the torch runs below; tests/data/regressions/mha_fast_path_output_is_contiguous.yaml."""

import pytest
from conftest import require_torch

torch = require_torch()
from torch import nn  # noqa: E402

import numpy as np  # noqa: E402

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402

IN_W = [[((3 * i + 5 * j) % 7 - 3) / 8 for j in range(4)] for i in range(12)]
IN_B = [((i * 5) % 9 - 4) / 16 for i in range(12)]
OUT_W = [[((2 * i + 3 * j) % 5 - 2) / 4 for j in range(4)] for i in range(4)]
X = [[[1, 0.5, -1, 0.25], [0.5, -0.5, 1, 2]], [[0.25, 0.5, -1, 0.25], [0.5, -0.25, 1, 2]]]

TEXT = """
name: mha_fast
dtype: float64
inputs:
  x: {value: %s, requires_grad: RG}
  pad: {value: [[false, true], [true, true]], dtype: bool}
model:
  children:
    attn: {type: MultiheadAttention, args: {embed_dim: 4, num_heads: 2, batch_first: true}, training: false,
           requires_grad: false, params: {in_proj_weight: %s, in_proj_bias: %s, out_proj.weight: %s}}
    head: {type: Linear, args: {in_features: 4, out_features: 1}, params: {weight: [[1, -0.5, 0.25, 2]], bias: [0.5]}}
  inputs: [x, pad]
  forward: |
    o, w = attn(x, x, xKW)
    return head(o)
loss: "y.sum()"
""" % (X, IN_W, IN_B, OUT_W)


def _text(requires_grad=False, kw=", need_weights=False"):
    return TEXT.replace("RG", "true" if requires_grad else "false").replace("KW", kw)


def _torch(requires_grad=False, **kw):
    attn = nn.MultiheadAttention(4, 2, batch_first=True).double().eval()
    head = nn.Linear(4, 1).double()
    with torch.no_grad():
        attn.in_proj_weight.copy_(torch.tensor(IN_W))
        attn.in_proj_bias.copy_(torch.tensor(IN_B))
        attn.out_proj.weight.copy_(torch.tensor(OUT_W))
        attn.out_proj.bias.zero_()
        head.weight.copy_(torch.tensor([[1, -0.5, 0.25, 2]]))
        head.bias.copy_(torch.tensor([0.5]))
    attn.requires_grad_(False)
    x = torch.tensor(X, dtype=torch.float64, requires_grad=requires_grad)
    o, _ = attn(x, x, x, **kw)
    y = head(o)
    y.sum().backward()
    return o, y, head


@pytest.mark.parametrize("requires_grad", [False, True])
def test_the_linear_after_it_sees_the_paths_layout(requires_grad):
    o, y, head = _torch(requires_grad, need_weights=False)
    assert o.is_contiguous() is (not requires_grad)   # the fast path only without a gradient
    v = adjoint.loads(_text(requires_grad)).solve().variants[0]
    assert v.to_json()["values"]["head"]["grad_fn"] == y.grad_fn.name()
    assert np.allclose(np.array(v.grads["head.weight"].floats()), head.weight.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_a_mask_on_the_fast_path_is_refused():
    o, _, _ = _torch(False, need_weights=False, key_padding_mask=torch.tensor([[False, True], [True, True]]))
    assert o[1].isnan().all()   # the fast path's fully masked batch element; the slow path's is finite
    o_slow, _, _ = _torch(True, need_weights=False, key_padding_mask=torch.tensor([[False, True], [True, True]]))
    assert not o_slow.isnan().any()
    with pytest.raises(ProblemError, match="fast path"):
        adjoint.loads(_text(False, ", key_padding_mask=pad, need_weights=False")).solve()
