"""A multi_grad hook over several leaves, listed before a tensor hook on one of them, is
registered before it: a script registers every leaf's hooks before its forward, in order, so
``register_multi_grad_hook((x, lin.weight), ...)`` puts its inner hook on ``x`` ahead of a later
``x.register_hook(...)``. The multi-grad hook then sees ``x``'s raw gradient and fires before the
tensor hook. adjoint (and verify's torch side, alike) once waited for the second leaf to be
bound before registering the multi_grad hook, so the tensor hook went on first. Expected values
come from the plain torch runs below; tests/data/regressions/multi_grad_over_leaves_before_a_tensor_hook.yaml."""

from conftest import require_torch

torch = require_torch()
from torch import nn  # noqa: E402

import numpy as np  # noqa: E402

import adjoint  # noqa: E402
from adjoint.torchside.run import run_variant  # noqa: E402

LEAVES = """
name: multi_grad_leaves
dtype: float64
inputs:
  x: {value: [0.5, -1], requires_grad: true}
model:
  children:
    lin: {type: Linear, args: {in_features: 2, out_features: 2}, params: {weight: [[1, 2], [0.5, -1]], bias: [0.25, 0]}}
  forward: "lin(x)"
loss: "(y * y).sum()"
hooks:
  - {multi_grad: [x, lin.weight]}
  - {tensor: x, returns: "grad + 1"}
"""

TIED = """
name: multi_grad_tied
dtype: float64
inputs:
  ids: {value: [2, 0, 2], dtype: int64}
model:
  children:
    emb: {type: Embedding, args: {num_embeddings: 3, embedding_dim: 2}, params: {weight: [[0.5, -1], [1, 0.25], [-0.5, 2]]}}
    head:
      params: {w: {tied: emb.weight}}
      inputs: [h]
      forward: "h @ w.T"
  inputs: [ids]
  forward: "head(emb(ids))"
loss: "(y * y).sum()"
hooks:
  - {multi_grad: [head.w]}
  - {tensor: emb.weight, returns: "grad + 1"}
"""


def _torch_leaves():
    lin = nn.Linear(2, 2).double()
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1, 2], [0.5, -1]]))
        lin.bias.copy_(torch.tensor([0.25, 0]))
    x = torch.tensor([0.5, -1], dtype=torch.float64, requires_grad=True)
    seen = []
    torch.autograd.graph.register_multi_grad_hook((x, lin.weight), lambda grads: seen.append(("multi", grads[0].clone())))
    x.register_hook(lambda g: (seen.append(("hook", g.clone())), g + 1)[1])
    y = lin(x)
    (y * y).sum().backward()
    return seen, x.grad


def _torch_tied():
    emb = nn.Embedding(3, 2).double()
    emb.weight = nn.Parameter(torch.tensor([[0.5, -1], [1, 0.25], [-0.5, 2]], dtype=torch.float64))
    w = emb.weight   # head.w: the same Parameter
    seen = []
    torch.autograd.graph.register_multi_grad_hook((w,), lambda grads: seen.append(("multi", grads[0].clone())))
    emb.weight.register_hook(lambda g: (seen.append(("hook", g.clone())), g + 1)[1])
    y = emb(torch.tensor([2, 0, 2])) @ w.T
    (y * y).sum().backward()
    return seen, w.grad


def _check(text, seen, grad, leaf):
    v = adjoint.loads(text).solve().variants[0]
    calls = [c for c in v.hook_calls]
    assert [s[0] for s in seen] == ["multi", "hook"]
    assert [c.on for c in calls] == ["multi_grad", "tensor"]
    multi_grad = calls[0].args["grads"][0]
    assert np.allclose(np.array(multi_grad.floats()), seen[0][1].numpy(), rtol=0, atol=1e-12)
    assert np.allclose(np.array(v.grads[leaf].floats()), grad.numpy(), rtol=0, atol=1e-12)


def test_multi_grad_over_two_leaves_goes_on_before_a_later_tensor_hook():
    seen, grad = _torch_leaves()
    assert seen[0][1].tolist() == [-1.25, -7.5]   # the raw gradient: the +1 hook comes after
    _check(LEAVES, seen, grad, "x")


def test_multi_grad_on_a_tied_parameters_other_name():
    seen, grad = _torch_tied()
    assert seen[0][1].tolist() == [[9.75, -31.875], [0.25, -0.5], [-23.75, 81.5]]
    _check(TIED, seen, grad, "emb.weight")


def test_verifys_torch_side_registers_them_in_the_same_order():
    for text, (seen, _) in ((LEAVES, _torch_leaves()), (TIED, _torch_tied())):
        problem = adjoint.loads(text)
        observed = run_variant(problem, problem.variant(problem.solve().variants[0].name), "float64")
        calls = observed["hook_calls"]
        assert [c["label"].split("@")[0] for c in calls] == ["multi_grad", "hook"]
        first = calls[0]["args"]["grads"][0]
        assert np.allclose(np.array(first["value"], dtype=float), seen[0][1].numpy(), rtol=0, atol=1e-12)
