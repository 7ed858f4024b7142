"""Parameters PyTorch makes the same whatever the random state (reset_parameters: a norm's weight
ones and bias zeros, MultiheadAttention's in_proj_bias and out_proj.bias zeros) may be left out
of a file without init:; each is compared with a freshly constructed torch module. A parameter
drawn at random (a Linear's weight, attention's in_proj_weight) must still be given."""

import pytest

import adjoint
from adjoint.format.errors import ProblemError

FILE = """
name: defaults
dtype: float64
inputs:
  x: {value: [[[0.5, -1, 2, 0.25], [2, 0.25, -0.5, 1]]], requires_grad: true}
model:
  children:
    bn1: {type: BatchNorm1d, args: {num_features: 2}}
    ln: {type: LayerNorm, args: {normalized_shape: [4]}}
    gn: {type: GroupNorm, args: {num_groups: 1, num_channels: 2}}
    bn2: {type: BatchNorm2d, args: {num_features: 1}}
    attn:
      type: MultiheadAttention
      args: {embed_dim: 4, num_heads: 2, batch_first: true}
      params:
        in_proj_weight: WEIGHTS
        out_proj.weight: [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
  forward: |
    a = gn(ln(bn1(x)))
    b = bn2(a.unsqueeze(0))
    return attn(a, a, a, need_weights=False)[0] + b.squeeze(0)
loss: "sum(y * y)"
"""
WEIGHTS = "[" + ", ".join("[" + ", ".join(str((i * 4 + j) % 5 - 2) for j in range(4)) + "]" for i in range(12)) + "]"


@pytest.mark.torch
def test_left_out_parameters_are_pytorchs_own():
    import torch
    problem = adjoint.loads(FILE.replace("WEIGHTS", WEIGHTS), name="defaults.yaml")
    values = problem.solve().variants[0].to_json()["values"]
    made = {
        "bn1": torch.nn.BatchNorm1d(2), "ln": torch.nn.LayerNorm([4]), "gn": torch.nn.GroupNorm(1, 2),
        "bn2": torch.nn.BatchNorm2d(1), "attn": torch.nn.MultiheadAttention(4, 2, batch_first=True),
    }
    checked = 0
    for path, module in made.items():
        for name, p in module.named_parameters():
            if path == "attn" and name in ("in_proj_weight", "out_proj.weight"):
                continue   # random in PyTorch: the file gives them
            assert values[f"{path}.{name}"]["value"] == p.detach().tolist(), f"{path}.{name}"
            checked += 1
    assert checked == 10
    # and the run agrees with torch on the whole file
    from adjoint.torchside import run_variant
    from adjoint.torchside.compare import compare
    observed = run_variant(problem, problem.variants[0], "float64")
    bad = [r for r in compare(problem.solve().variants[0].to_json(), observed, "float64") if not r.ok]
    assert bad == [], [r.detail for r in bad]


def test_a_random_parameter_left_out_is_still_refused():
    text = FILE.replace("        in_proj_weight: WEIGHTS\n", "")
    with pytest.raises(ProblemError, match="has no values for in_proj_weight; give them under params"):
        adjoint.loads(text, name="defaults.yaml")
