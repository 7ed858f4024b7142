"""Version counters of the parameters and buffers a file does not write: a built-in's
constructor initialises each in place (``reset_parameters``: ``init.ones_``, ``uniform_``...;
``reset_running_stats``: ``zero_``, ``fill_``), so a fresh module's are at 1, and
MultiheadAttention's ``out_proj.bias`` at 2 (Linear's ``uniform_``, then ``constant_``). The
format's defaults start there; a version error on one quotes PyTorch's numbers. Expected values
are a fresh torch module's own counters."""

import pytest
import torch
from torch import nn

import adjoint

pytestmark = pytest.mark.torch

ROOT_CASES = [
    ("BatchNorm1d", "{num_features: 2}", lambda: nn.BatchNorm1d(2)),
    ("BatchNorm2d", "{num_features: 2, affine: false}", lambda: nn.BatchNorm2d(2, affine=False)),
    ("LayerNorm", "{normalized_shape: [2]}", lambda: nn.LayerNorm(2)),
    ("GroupNorm", "{num_groups: 1, num_channels: 2}", lambda: nn.GroupNorm(1, 2)),
]


def _defaults(text: str) -> dict[str, int]:
    problem = adjoint.loads(text)
    return {d.name: d.version for m in problem.model.walk() for d in tuple(m.params) + tuple(m.buffers)
            if d.default}


@pytest.mark.parametrize("type_,args,make", ROOT_CASES, ids=[c[0] for c in ROOT_CASES])
def test_a_default_starts_at_the_constructors_version(type_, args, make):
    text = (f"name: t\ndtype: float32\ninputs:\n  x: {{value: [[1, 2], [3, 5]], requires_grad: true}}\n"
            f"model:\n  type: {type_}\n  args: {args}\nloss: \"sum(y)\"\n")
    fresh = make()
    torch_versions = {n: t._version for n, t in list(fresh.named_parameters()) + list(fresh.named_buffers())}
    assert torch_versions and set(torch_versions.values()) == {1}
    assert _defaults(text) == torch_versions


def test_attention_biases_start_at_one_and_two():
    text = """name: t
dtype: float32
inputs:
  x: {value: [[[1, 2]], [[3, 5]]], requires_grad: true}
model:
  inputs: [x]
  children:
    attn:
      type: MultiheadAttention
      args: {embed_dim: 2, num_heads: 1}
      params:
        in_proj_weight: [[1, 0], [0, 1], [1, 1], [0, 1], [1, 0], [1, 1]]
        out_proj.weight: [[1, 0], [0, 1]]
  forward: |
    out, w = attn(x, x, x)
    return out
loss: "sum(y)"
"""
    fresh = nn.MultiheadAttention(2, 1)
    assert fresh.in_proj_bias._version == 1 and fresh.out_proj.bias._version == 2
    assert _defaults(text) == {"attn.in_proj_bias": 1, "attn.out_proj.bias": 2}


def test_a_version_error_on_a_default_buffer_quotes_pytorchs_numbers():
    """running_mean saved by NativeBatchNormBackward0 at the constructor's 1, then add_ (2)."""
    text = """name: t
dtype: float32
inputs:
  x: {value: [[1, 2], [3, 5], [0, 1]], requires_grad: true}
model:
  inputs: [x]
  children:
    bn: {type: BatchNorm1d, args: {num_features: 2}}
  forward: |
    h = bn(x)
    bn.running_mean.add_(1)
    return h
loss: "sum(y * y)"
"""
    bn = nn.BatchNorm1d(2)
    h = bn(torch.tensor([[1., 2], [3, 5], [0, 1]], requires_grad=True))
    bn.running_mean.add_(1)
    with pytest.raises(RuntimeError) as err:
        (h * h).sum().backward()
    assert "is at version 2; expected version 1 instead" in str(err.value)
    answer = adjoint.loads(text).solve().to_json()
    variant = answer["variants"]["default"]
    assert variant["error"]["type"] == "RuntimeError"
    assert variant["error"]["message"] == str(err.value)
