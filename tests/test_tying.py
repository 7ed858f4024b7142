"""Weight tying (``params: {weight: {tied: emb.weight}}``): one Parameter in two modules, against
a hand-written torch model that ties for real (``head.weight = emb.weight``): one leaf, its
``.grad`` the sum over both uses, listed under both names; a tensor hook on either name is a
hook on the one Parameter (one call); an SGD step updates it once; and the refusals."""

import pytest
from conftest import require_torch

torch = require_torch()
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import numpy as np  # noqa: E402

import adjoint  # noqa: E402
from adjoint.torchside import verify
from adjoint.format.errors import ProblemError  # noqa: E402

W = [[0.5, -1], [1, 0.25], [-0.5, 2], [1.5, 1]]
TEXT = """
name: tied
dtype: float64
inputs:
  ids: {value: [[1, 3, 0]], dtype: int64}
targets:
  t: {value: [3, 0, 2], dtype: int64}
model:
  children:
    emb: {type: Embedding, args: {num_embeddings: 4, embedding_dim: 2}, params: {weight: %s}}
    head: {type: Linear, args: {in_features: 2, out_features: 4, bias: false}, params: {weight: {tied: emb.weight}}}
  inputs: [ids]
  forward: "head(emb(ids)).view(3, 4)"
loss: "F.cross_entropy(y, t)"
""" % (W,)


def close(ours, theirs) -> bool:
    return np.allclose(np.array(ours, dtype=float), np.array(theirs, dtype=float), rtol=1e-12, atol=0)


def _torch_model():
    emb = nn.Embedding(4, 2).double()
    head = nn.Linear(2, 4, bias=False).double()
    emb.weight = nn.Parameter(torch.tensor(W, dtype=torch.float64))
    head.weight = emb.weight
    return emb, head


def _torch_loss(emb, head):
    return F.cross_entropy(head(emb(torch.tensor([[1, 3, 0]]))).view(3, 4), torch.tensor([3, 0, 2]))


def test_one_grad_under_both_names():
    v = adjoint.loads(TEXT).solve().variants[0]
    emb, head = _torch_model()
    _torch_loss(emb, head).backward()
    assert close(v.grads["emb.weight"].floats(), emb.weight.grad.tolist())
    assert v.grads["head.weight"] is v.grads["emb.weight"]
    assert head.weight.grad is emb.weight.grad


def test_a_hook_on_either_name_is_one_hook_on_the_parameter():
    text = TEXT + "hooks: [{tensor: head.weight, returns: \"grad * 2\"}, {tensor: emb.weight}]\n"
    v = adjoint.loads(text).solve().variants[0]
    emb, head = _torch_model()
    seen = []
    head.weight.register_hook(lambda g: (seen.append(("head", g.clone())), g * 2)[1])
    emb.weight.register_hook(lambda g: seen.append(("emb", g.clone())))
    _torch_loss(emb, head).backward()
    calls = [c for c in v.hook_calls if c.kind == "hook"]
    assert [c.target for c in calls] == ["head.weight", "emb.weight"] and [s[0] for s in seen] == ["head", "emb"]
    assert close(calls[1].args["grad"].floats(), seen[1][1].tolist())
    assert close(v.grads["head.weight"].floats(), emb.weight.grad.tolist())


def test_an_sgd_step_updates_the_parameter_once():
    text = TEXT + "steps: [forward, backward, {step: {lr: 0.5}}, zero_grad, forward, backward]\n"
    v = adjoint.loads(text).solve().variants[0]
    emb, head = _torch_model()
    assert len({id(p) for p in [*emb.parameters(), *head.parameters()]}) == 1   # one Parameter, updated once
    _torch_loss(emb, head).backward()
    with torch.no_grad():
        emb.weight -= 0.5 * emb.weight.grad
    emb.weight.grad = None
    _torch_loss(emb, head).backward()
    assert close(v.grads["emb.weight"].floats(), emb.weight.grad.tolist())


def test_verify_ties_the_torch_side_for_real(tmp_path):
    path = tmp_path / "tied.yaml"
    path.write_text(TEXT + "variants:\n  plain: {}\n  sgd: {steps: [forward, backward, {step: {lr: 0.5}}, forward, "
                           "backward]}\n  hooked: {hooks: [{module: head, kind: full_backward}, "
                           "{tensor: head.weight, kind: post_accumulate_grad}, {tensor: emb.weight}, {tensor: head.weight}]}\n")
    out: list[str] = []
    assert verify.run([str(path)], None, False, False, None, out.append) == 0, "\n".join(out)


def test_a_custom_module_can_tie_too():
    text = """
name: tied2
dtype: float64
inputs:
  x: {value: [[1, 2]], requires_grad: true}
model:
  children:
    a: {params: {w: [[0.5, -1], [2, 1]]}, forward: "x @ w"}
    b: {params: {w: {tied: a.w}}, forward: "x @ w.t()"}
  forward: "b(a(x)).sum()"
"""
    v = adjoint.loads(text).solve().variants[0]
    w = torch.tensor([[0.5, -1], [2, 1]], dtype=torch.float64, requires_grad=True)
    x = torch.tensor([[1., 2]], dtype=torch.float64, requires_grad=True)
    ((x @ w) @ w.t()).sum().backward()
    assert v.grads["a.w"].floats() == w.grad.tolist() and v.grads["b.w"].floats() == w.grad.tolist()
    assert v.grads["x"].floats() == x.grad.tolist()


@pytest.mark.parametrize("tied,needle", [
    ("emb.wieght", "is tied to 'emb.wieght', which is no (untied) parameter of the model"),
    ("head.weight", "cannot be tied to itself"),
])
def test_bad_ties_are_refused(tied, needle):
    with pytest.raises(ProblemError) as err:
        adjoint.loads(TEXT.replace("{tied: emb.weight}", f"{{tied: {tied}}}")).solve()
    assert needle in str(err.value)


def test_a_tie_of_another_shape_is_refused():
    text = TEXT.replace("out_features: 4", "out_features: 3").replace("view(3, 4)", "view(3, 3)")
    with pytest.raises(ProblemError) as err:
        adjoint.loads(text).solve()
    assert "has shape [3, 2] but 'emb.weight', which it is tied to, has [4, 2]" in str(err.value)
