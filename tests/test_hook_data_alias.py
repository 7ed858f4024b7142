"""``t.data`` in a hook body (``grad.data.mul_(10)``, ``tensor.grad.data.clamp_(-1, 1)``,
``tensor.data.sub_(lr * tensor.grad)``): the same storage as ``t``, no autograd history, a version
counter of its own. The prediction against a plain torch script written by hand (the torch side
records leaf_values through the alias's counter, so a shared blind spot there would pass the
differential test), and the refusals where the separate counter would show."""

import numpy as np
import pytest

import adjoint
from adjoint.format.errors import ProblemError

FILE = "tests/data/regressions/hook_body_writes_through_data.yaml"


def _script(variant: str):
    import torch
    import torch.nn as nn
    x = torch.tensor([[0.5, -1.0], [2.0, 0.3]], requires_grad=True)
    z = torch.tensor([1.5, 2.0, -2.0, 0.7], requires_grad=True)
    lin, act = nn.Linear(4, 2), nn.Tanh()
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[0.5, 1.0, -1.0, 2.0], [2.0, -1.0, 0.5, 1.0]]))
        lin.bias.copy_(torch.tensor([0.1, 0.2]))

    def step(t):
        t.data.sub_(0.1 * t.grad)
        t.grad = None

    if variant == "grad_clip_and_module_hook":
        lin.weight.register_post_accumulate_grad_hook(lambda t: (t.grad.data.clamp_(-1, 1), None)[1])
        act.register_full_backward_hook(lambda m, gi, go: (gi[0].data.mul_(0.5), None)[1])
    elif variant == "sgd_through_data":
        lin.weight.register_post_accumulate_grad_hook(step)

    def forward():
        b = z * 2
        if variant == "gradient_through_a_view_and_add":
            b.register_hook(lambda g: (g.data.mul_(10), None)[1])
        elif variant == "grad_clip_and_module_hook":
            b.register_hook(lambda g: (g.data[0].zero_(), None)[1])
        s = x.view(4) + b
        y = act(lin(s * s))
        return (y * y).sum()

    before = lin.weight._version
    passes = 2 if variant == "sgd_through_data" else 1
    for _ in range(passes):
        out = forward()
        loss = out.item()
        out.backward()
    version = lin.weight._version - before
    grads = {"x": x.grad, "z": z.grad, "lin.weight": lin.weight.grad, "lin.bias": lin.bias.grad}
    return loss, {k: None if v is None else v.tolist() for k, v in grads.items()}, lin.weight.detach().tolist(), version


@pytest.mark.torch
@pytest.mark.parametrize("variant", ["gradient_through_a_view_and_add", "grad_clip_and_module_hook",
                                     "sgd_through_data"])
def test_writes_through_data_match_a_plain_script(variant):
    out = adjoint.load(FILE).solve(variant=variant).variants[0].to_json()
    loss, grads, weight, version = _script(variant)
    assert version == 0   # PyTorch: a write through .data moves the alias's counter, not the parameter's
    assert out["loss"]["value"] == pytest.approx(loss, rel=1e-5)
    for name, value in grads.items():
        predicted = out["grads"].get(name)
        assert (predicted is None) == (value is None), name
        if value is not None:
            np.testing.assert_allclose(predicted["value"], value, rtol=1e-5, atol=1e-5, err_msg=name)
    if variant == "sgd_through_data":
        np.testing.assert_allclose(out["leaf_values"]["lin.weight"]["value"], weight, rtol=1e-5, atol=1e-6)
    else:
        assert "lin.weight" not in out.get("leaf_values", {})


def test_gradient_written_through_data_reaches_the_view_accumulate_grad_took():
    """Numbers from torch 2.13 (x.view(4) + b, b's hook grad.data.mul_(10) after x's
    AccumulateGrad took the view of the shared gradient as .grad)."""
    text = """
name: view-steal
inputs:
  x: {value: [[0.5, -1.0], [2.0, 0.3]], requires_grad: true}
  z: {value: [1.5, 2.0, -2.0, 0.7], requires_grad: true}
model:
  inputs: [x, z]
  forward: |
    b = z * 2
    h = x.view(4)
    s = h + b
    return s * s
loss: "sum(y * y)"
hooks:
  - {tensor: b, does: "grad.data.mul_(10)"}
"""
    out = adjoint.loads(text).solve().variants[0].to_json()
    np.testing.assert_allclose(out["grads"]["x"]["value"], [[1715.0, 1080.0], [-320.0, 196.52]], rtol=1e-6)
    np.testing.assert_allclose(out["grads"]["z"]["value"], [3430.0, 2160.0, -640.0, 393.04], rtol=1e-6)


_SAVED = """
name: data-of-a-saved-weight
inputs:
  x: {value: [[0.5, -1.0], [2.0, 0.3]], requires_grad: true}
model:
  children:
    lin: {type: Linear, params: {weight: [[0.5, 1.0], [2.0, -1.0]], bias: [0.1, 0.2]}}
  forward: |
    h = lin(x)
    return h * h
loss: "sum(y)"
hooks:
  - {tensor: h, does: "lin.weight.data.mul_(2)"}
"""


def test_data_of_a_tensor_a_pending_node_saved_is_refused():
    """PyTorch raises no version error there (the alias has its own counter) and AddmmBackward0
    reads the doubled weight: adjoint's saved values are the values when saved, so it refuses."""
    with pytest.raises(ProblemError, match=r"AddmmBackward0\) holds this tensor saved"):
        adjoint.loads(_SAVED).solve()


def test_version_read_of_the_alias_itself_is_refused():
    text = _SAVED.replace('"lin.weight.data.mul_(2)"', '["d = lin.bias.data", "assert d._version == 0"]')
    with pytest.raises(ProblemError, match="reading _version of a .data alias is not modelled"):
        adjoint.loads(text).solve()


_STEPPED = """
name: data-then-version
inputs:
  x: {value: [[0.5, -1]], requires_grad: true}
  W: {value: [[1, 2], [0.5, -1]], requires_grad: true}
model:
  inputs: [x, W]
  forward: |
    h = x @ W
    return h * h
loss: "sum(y)"
hooks:
  - {tensor: W, kind: post_accumulate_grad, does: "W.data.mul_(0.5)"}
  - {tensor: h, does: "W.mul_(2)"}
steps: [forward, backward, {register: [1]}, forward, backward]
"""


def test_a_version_error_after_a_data_write_quotes_pytorchs_counts():
    """torch 2.13 (W.data.mul_(0.5) in pass 1, W.mul_(2) before MmBackward0 in pass 2): the .data
    write moved the alias's counter only, so W is saved at 0 and found at 1."""
    out = adjoint.loads(_STEPPED).solve().variants[0].to_json()
    assert out["error"]["type"] == "RuntimeError"
    assert "[torch.FloatTensor [2, 2]] is at version 1; expected version 0 instead." in out["error"]["message"]


def test_version_read_after_a_data_write_is_pytorchs():
    """torch 2.13: W._version is still 0 after W.data.mul_(0.5) (the assert holds)."""
    text = _STEPPED.replace('"W.mul_(2)"', '"assert W._version == 0, \'moved\'"').replace(
        "{register: [1]}, ", "")
    out = adjoint.loads(text).solve().variants[0].to_json()
    assert out.get("error") is None
    np.testing.assert_allclose(out["leaf_values"]["W"]["value"], [[0.25, 0.5], [0.125, -0.25]])


def test_a_write_through_data_keeps_a_views_grad_fn():
    """torch 2.13: o = f(x) with f returning h.view(2) and a forward hook output.data.mul_(2):
    o.grad_fn is ViewBackward0 (the view's version did not move), o is [3, -6], x.grad [[18, -36]]."""
    out = adjoint.load("tests/data/regressions/data_alias_write_keeps_a_views_grad_fn.yaml").solve() \
        .variants[0].to_json()
    assert out["values"]["o"]["grad_fn"] == "ViewBackward0"
    np.testing.assert_allclose(out["values"]["o"]["value"], [3.0, -6.0])
    np.testing.assert_allclose(out["grads"]["x"]["value"], [[18.0, -36.0]])
