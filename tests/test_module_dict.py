"""``nn.ModuleDict``: a container without a forward whose parent calls its items by attribute
(``blocks.first(x)``, ``transformer.h[0](x)``), as nanoGPT's ``self.transformer.wte(idx)``. It was
not a type of the format, so ``adjoint import`` refused nanoGPT. Expected values: real torch,
run here on the same module."""

from __future__ import annotations

import shutil
import os

import pytest
from conftest import import_and_verify, require_torch

torch = require_torch()

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402
from gen import check  # noqa: E402

DICT = """
name: module_dict
dtype: float64
inputs:
  x: {value: [[1, 2], [0.5, -1]], requires_grad: true}
model:
  children:
    blocks:
      type: ModuleDict
      children:
        first: {type: Linear, params: {weight: [[1, 2], [3, 4]], bias: [0, 1]}}
        act: {type: Tanh}
        rest:
          type: ModuleList
          children:
            - {type: Linear, params: {weight: [[0.5, 1], [-1, 2]], bias: [1, 0]}}
    head: {type: Linear, params: {weight: [[1, -1]], bias: [0.5]}}
  forward: |
    h = blocks.first(x)
    a = blocks.act(h) + h
    g = blocks.rest[0](a)
    return head(g)
loss: "sum(y * y)"
hooks:
  - {module: blocks.first, kind: full_backward}
  - {module: blocks.rest.0, kind: full_backward}
  - {module: blocks, kind: forward}
"""


def _torch_dict():
    nn = torch.nn
    blocks = nn.ModuleDict(dict(first=nn.Linear(2, 2), act=nn.Tanh(), rest=nn.ModuleList([nn.Linear(2, 2)])))
    head = nn.Linear(2, 1)
    blocks.double(), head.double()
    with torch.no_grad():
        blocks.first.weight.copy_(torch.tensor([[1., 2], [3, 4]]))
        blocks.first.bias.copy_(torch.tensor([0., 1]))
        blocks.rest[0].weight.copy_(torch.tensor([[0.5, 1], [-1, 2]]))
        blocks.rest[0].bias.copy_(torch.tensor([1., 0]))
        head.weight.copy_(torch.tensor([[1., -1]]))
        head.bias.copy_(torch.tensor([0.5]))
    fired = []
    blocks.first.register_full_backward_hook(lambda m, gi, go: fired.append(("blocks.first", gi[0].tolist())))
    blocks.rest[0].register_full_backward_hook(lambda m, gi, go: fired.append(("blocks.rest.0", gi[0].tolist())))
    blocks.register_forward_hook(lambda *a: fired.append(("blocks", None)))   # never called: never fires
    x = torch.tensor([[1., 2], [0.5, -1]], dtype=torch.float64, requires_grad=True)
    h = blocks.first(x)
    y = head(blocks.rest[0](blocks.act(h) + h))
    (y * y).sum().backward()
    return fired, x.grad.tolist(), blocks.rest[0].weight.grad.tolist()


def test_items_called_by_attribute_as_torch_calls_them():
    got = adjoint.loads(DICT).solve().to_json()["variants"]["default"]
    fired, x_grad, rest_grad = _torch_dict()
    assert [c["target"] for c in got["hook_calls"]] == [name for name, _ in fired] == ["blocks.rest.0", "blocks.first"]
    for call, (_, grad_input) in zip(got["hook_calls"], fired):
        assert _flat(call["args"]["grad_input"][0]["value"]) == pytest.approx(_flat(grad_input), rel=1e-12)
    assert _flat(got["grads"]["x"]["value"]) == pytest.approx(_flat(x_grad), rel=1e-12)
    assert _flat(got["grads"]["blocks.rest.0.weight"]["value"]) == pytest.approx(_flat(rest_grad), rel=1e-12)


def _flat(rows):
    return [v for row in rows for v in row]


def test_verifies_against_torch():
    outcome = check(DICT, timeout=60)
    assert outcome.ok, outcome.report()


def test_a_module_dict_called_is_torchs_error():
    """A ModuleDict has no forward: calling it is _forward_unimplemented's NotImplementedError (it was refused)."""
    got = adjoint.loads(DICT.replace("    return head(g)", "    return head(blocks(x))")).solve().to_json()
    error = next(iter(got["variants"].values()))["error"]
    assert (error["type"], error["message"]) == ("NotImplementedError",
                                                 'Module [ModuleDict] is missing the required "forward" function')


@pytest.mark.parametrize("bad, message", [
    ("    return head(blocks.second(x))", "the ModuleDict 'blocks' has no item 'second' \\(its items: first, act, rest\\)"),
])
def test_what_a_module_dict_refuses(bad, message):
    text = DICT.replace("    return head(g)", bad)
    with pytest.raises(ProblemError, match=message):
        adjoint.loads(text).solve()


def test_a_module_dict_root_is_refused():
    with pytest.raises(ProblemError, match="the root module cannot be a ModuleDict"):
        adjoint.loads("name: r\ninputs: {x: [[1]]}\nmodel:\n  type: ModuleDict\n  children: {a: {type: Tanh}}\n")


GPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "import_gpt", "nanogpt.py")


@pytest.mark.parametrize("factory", ["make", "make_hooked"])
def test_nanogpt_imports_and_verifies_against_the_module(factory, tmp_path):
    """nanoGPT's ModuleDict was refused by import ("use nn.ModuleList or named attributes")."""
    shutil.copy(GPT, tmp_path / "nanogpt.py")
    text = import_and_verify(f"{tmp_path / 'nanogpt.py'}:{factory}", ["idx=2x4:int64:0-11", "targets=2x4:int64:0-11"],
                             "y[1]", str(tmp_path / "p.yaml"), origin=True)
    assert "type: ModuleDict" in text
    assert "transformer.wte(idx)" in text and "transformer.h[0](" in text


NESTED = """
name: module_dict_nesting
dtype: float64
inputs:
  x: {value: [[1, 2]], requires_grad: true}
model:
  children:
    tr:
      type: ModuleDict
      children:
        h:
          type: ModuleList
          children:
            - {type: Linear, params: {weight: [[0.5, 1], [-1, 2]], bias: [1, 0]}}
    layers:
      type: ModuleList
      children:
        - type: ModuleDict
          children:
            lin: {type: Linear, params: {weight: [[1, 2], [3, 4]], bias: [0, 1]}}
            act: {type: Tanh}
  forward: |
    a = layers[0].act(layers[0].lin(x))
    return (F.linear(a, tr.h[0].weight) * tr.h[0](x)).sum()
"""


def test_a_module_list_of_module_dicts_and_a_parameter_through_both():
    """layers[0].lin(x) (a ModuleList of ModuleDicts) and tr.h[0].weight (a parameter through a
    ModuleDict and a ModuleList): both refused ('reaches inside'); found by an adversarial review."""
    nn = torch.nn
    layers = nn.ModuleList([nn.ModuleDict(dict(lin=nn.Linear(2, 2), act=nn.Tanh()))]).double()
    tr = nn.ModuleDict(dict(h=nn.ModuleList([nn.Linear(2, 2)]))).double()
    with torch.no_grad():
        layers[0].lin.weight.copy_(torch.tensor([[1., 2], [3, 4]]))
        layers[0].lin.bias.copy_(torch.tensor([0., 1]))
        tr.h[0].weight.copy_(torch.tensor([[0.5, 1], [-1, 2]]))
        tr.h[0].bias.copy_(torch.tensor([1., 0]))
    x = torch.tensor([[1., 2]], dtype=torch.float64, requires_grad=True)
    a = layers[0].act(layers[0].lin(x))
    (torch.nn.functional.linear(a, tr.h[0].weight) * tr.h[0](x)).sum().backward()
    got = adjoint.loads(NESTED).solve().to_json()["variants"]["default"]["grads"]
    assert _flat(got["x"]["value"]) == pytest.approx(_flat(x.grad.tolist()), rel=1e-12)
    assert _flat(got["tr.h.0.weight"]["value"]) == pytest.approx(_flat(tr.h[0].weight.grad.tolist()), rel=1e-12)
    assert _flat(got["layers.0.lin.weight"]["value"]) == pytest.approx(_flat(layers[0].lin.weight.grad.tolist()),
                                                                       rel=1e-12)


NESTED_MODEL = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.ModuleDict(dict(lin=nn.Linear(2, 2), act=nn.Tanh())) for _ in range(2)])
        self.tr = nn.ModuleDict(dict(h=nn.ModuleList([nn.Linear(2, 2)])))

    def forward(self, x):
        for layer in self.layers:
            x = layer.act(layer.lin(x))
        return F.linear(x, self.tr.h[0].weight)


def make():
    torch.manual_seed(0)
    return M()
'''


def test_import_of_the_nestings(tmp_path):
    (tmp_path / "nested.py").write_text(NESTED_MODEL)
    text = import_and_verify(f"{tmp_path / 'nested.py'}:make", ["x=2x2"], "sum(y * y)", str(tmp_path / "p.yaml"),
                             origin=True)
    assert "layers[1].act(layers[1].lin(" in text and "tr.h[0].weight" in text
