"""A parent's forward reads a child's parameter or buffer: ``F.linear(h, lin.weight)``, a tied
head ``h @ emb.weight.T``, ``transformer.wte.weight`` through a ModuleDict, ``bn.running_mean``.
Legal PyTorch, refused as "reaches inside the child module". The tensor read is the Parameter
itself (its hooks, its ``.grad``). Found by a user trial; expected values from real torch, run
here."""

from __future__ import annotations

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from gen import check  # noqa: E402

TEXT = """
name: child_parameter_reads
dtype: float64
inputs:
  x: {value: [[1, -2], [0.5, 1]], requires_grad: true}
  idx: {value: [2, 0], dtype: int64}
model:
  children:
    lin: {type: Linear, params: {weight: [[1, 0.5], [0, 1]], bias: [0, 1]}}
    blocks:
      type: ModuleDict
      children:
        wte: {type: Embedding, args: {num_embeddings: 3, embedding_dim: 2}, params: {weight: [[1, 2], [3, -1], [0.5, 0.25]]}}
    bn: {type: BatchNorm1d, args: {num_features: 2}, training: false, buffers: {running_mean: [0.5, -1], running_var: [4, 1]}}
  inputs: [x, idx]
  forward: |
    h = lin(x) + blocks.wte(idx)
    a = F.linear(h, lin.weight)
    logits = a @ blocks.wte.weight.T
    c = bn(h) + bn.running_mean
    return (logits * logits).sum() + (c * lin.bias).sum()
variants:
  plain: {}
  hooked:
    hooks:
      - {tensor: lin.weight, returns: "grad * 2"}
"""


def _torch(hooked: bool):
    lin = torch.nn.Linear(2, 2).double()
    wte = torch.nn.Embedding(3, 2).double()
    bn = torch.nn.BatchNorm1d(2).double().eval()
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1, 0.5], [0, 1]]))
        lin.bias.copy_(torch.tensor([0., 1]))
        wte.weight.copy_(torch.tensor([[1, 2], [3, -1], [0.5, 0.25]]))
        bn.running_mean.copy_(torch.tensor([0.5, -1]))
        bn.running_var.copy_(torch.tensor([4., 1]))
    if hooked:
        lin.weight.register_hook(lambda g: g * 2)
    x = torch.tensor([[1, -2], [0.5, 1]], dtype=torch.float64, requires_grad=True)
    idx = torch.tensor([2, 0])
    h = lin(x) + wte(idx)
    a = torch.nn.functional.linear(h, lin.weight)
    logits = a @ wte.weight.T
    c = bn(h) + bn.running_mean
    ((logits * logits).sum() + (c * lin.bias).sum()).backward()
    return {"x": x.grad, "lin.weight": lin.weight.grad, "lin.bias": lin.bias.grad, "blocks.wte.weight": wte.weight.grad}


def _flat(v):
    return [x for row in v for x in (row if isinstance(row, list) else [row])]


@pytest.mark.parametrize("variant", ["plain", "hooked"])
def test_reads_are_the_childs_tensors_as_in_torch(variant):
    got = adjoint.loads(TEXT).solve().to_json()["variants"][variant]["grads"]
    for name, g in _torch(variant == "hooked").items():
        assert _flat(got[name]["value"]) == pytest.approx(_flat(g.tolist()), rel=1e-12), name


def test_verify_agrees():
    outcome = check(TEXT, timeout=60)
    assert outcome.ok, outcome.report()


def test_writing_a_childs_parameter_in_place_is_torchs_error():
    """``lin.weight.mul_(2)`` in the parent's forward: a leaf that requires grad written in place."""
    text = TEXT.replace("    a = F.linear(h, lin.weight)\n", "    lin.weight.mul_(2)\n    a = F.linear(h, lin.weight)\n")
    lin = torch.nn.Linear(2, 2)
    with pytest.raises(RuntimeError) as caught:
        lin.weight.mul_(2)
    got = adjoint.loads(text).solve().to_json()["variants"]["plain"]["error"]
    assert (got["type"], got["message"]) == ("RuntimeError", str(caught.value))


MODEL = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Enc(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x)


class TiedHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(5, 3)
        self.layers = nn.ModuleList([nn.Linear(3, 3), nn.Linear(3, 3)])
        self.enc = Enc()

    def forward(self, idx):
        h = torch.tanh(self.layers[0](self.emb(idx)))
        h = h @ self.layers[1].weight + self.enc.lin.bias
        return F.linear(h, self.emb.weight)


def make():
    torch.manual_seed(0)
    return TiedHead()
'''


def test_import_writes_a_childs_parameter_by_its_path(tmp_path):
    """import refused ``F.linear(h, self.emb.weight)`` ("not one of its own parameters")."""
    from conftest import import_and_verify
    (tmp_path / "tied.py").write_text(MODEL)
    text = import_and_verify(f"{tmp_path / 'tied.py'}:make", ["idx=2x4:int64:0-5"], "sum(y * y)",
                             str(tmp_path / "p.yaml"), origin=True)
    assert "emb.weight)" in text and "layers[1].weight" in text and "enc.lin.bias" in text
