"""Each forward value of the answer says ``requires_grad`` and ``grad_fn`` (the type name of its
node) as the pass left it, as the contract's v3 answer fields ask (they were missing). The
expected names are read from the same program run in plain torch, written out below."""

from __future__ import annotations

import pytest

import adjoint

torch = pytest.importorskip("torch")

FILE = """
name: meta
inputs:
  x: {value: [[1, -2]], requires_grad: true}
  c: {value: [[3, 4]]}
model:
  inputs: [x, c]
  children:
    lin: {type: Linear, params: {weight: [[0.5, 0.25], [1, -1]], bias: [0, 1]}}
  forward: |
    h = lin(x)
    r = h + 1
    r.mul_(2)
    v = r[0]
    with no_grad():
      n = h * 2
    k = c * 3
    return sum(v) + sum(k)
loss: "y * 1"
variants:
  plain: {}
  hooked:
    hooks:
      - {module: lin, kind: full_backward}
"""


def _torch(hooked: bool) -> dict:
    x = torch.tensor([[1.0, -2.0]], requires_grad=True)
    c = torch.tensor([[3.0, 4.0]])
    lin = torch.nn.Linear(2, 2)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[0.5, 0.25], [1.0, -1.0]]))
        lin.bias.copy_(torch.tensor([0.0, 1.0]))
    if hooked:
        lin.register_full_backward_hook(lambda m, gi, go: None)
    h = lin(x)
    r = h + 1
    r.mul_(2)
    v = r[0]
    with torch.no_grad():
        n = h * 2
    k = c * 3
    y = v.sum() + k.sum()
    loss = y * 1
    names = dict(x=x, c=c, h=h, r=r, v=v, n=n, k=k, y=y, loss=loss)
    return {name: (t.requires_grad, type(t.grad_fn).__name__ if t.grad_fn is not None else None)
            for name, t in names.items()}


EXPECTED = {
    "plain": {"x": (True, None), "c": (False, None), "h": (True, "AddmmBackward0"), "r": (True, "MulBackward0"),
              "v": (True, "SelectBackward0"), "n": (False, None), "k": (False, None), "y": (True, "AddBackward0"),
              "loss": (True, "MulBackward0")},
}
EXPECTED["hooked"] = dict(EXPECTED["plain"], h=(True, "BackwardHookFunctionBackward"))


@pytest.mark.parametrize("variant", ["plain", "hooked"])
def test_torch_reads_these(variant):
    assert _torch(variant == "hooked") == EXPECTED[variant]


@pytest.mark.parametrize("variant", ["plain", "hooked"])
def test_the_answer_says_them(tmp_path, variant):
    path = tmp_path / "p.yaml"
    path.write_text(FILE)
    doc = adjoint.load(str(path)).solve(variant=variant).variants[0].to_json()
    got = {name: (v["requires_grad"], v["grad_fn"]) for name, v in doc["values"].items()
           if name in EXPECTED[variant]}
    assert got == EXPECTED[variant]
