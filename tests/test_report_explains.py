"""The report explains what did not happen: a non-leaf's .grad that stays None (and why), every
hook that never fired (with the reason the engine's records give), a post_accumulate_grad hook
handed the tensor itself, and a "why" that says each thing once. Every claim is checked in real
torch next to it."""

from __future__ import annotations

import os
import warnings

import pytest

import adjoint
from adjoint.render.console import render
from adjoint.render.report import build

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "firsthour")
SILENT = os.path.join(DATA, "silent_hooks.yaml")
TIE = os.path.join(DATA, "maxpool_tie.yaml")
TENSOR_HOOKS = os.path.join(ROOT, "problems", "tensor_hooks.yaml")
HOOK_ORDER = os.path.join(ROOT, "problems", "hook_order.yaml")
POST_ACC = """
name: post_acc
inputs:
  x: {value: [1.5, -2], requires_grad: true}
model:
  type: Linear
  params: {weight: [[1, 2]], bias: [0.5]}
loss: "sum(y ** 2)"
variants:
  v:
    hooks:
      - {tensor: weight, kind: post_accumulate_grad}
"""


def _flat(text: str) -> str:
    return " ".join(text.split())


# ----------------------------------------------------------------------------- hooks that never fired

SILENT_REASONS = [
    (0, "hook", "tensor", "u", "its tensor got no gradient: u's grad_fn BackwardHookFunctionBackward never ran"),
    (1, "post", "node", "u", "its node BackwardHookFunctionBackward never ran: no gradient reached u"),
    (2, "full_backward", "module", "a",
     "its node never ran: no gradient reached the module's output (BackwardHookFunctionBackward did not run)"),
    (3, "hook", "tensor", "v", "removed (handle.remove()) before it could fire"),
    (4, "forward", "module", "unused", "its module was never called"),
]


def test_every_hook_that_never_fired_is_listed_with_its_reason():
    pred = adjoint.load(SILENT).solve()
    vv = build(pred).variants[0]
    assert [c.hook.index for g in vv.groups for c in g.calls] == [5]
    assert [(s.index, s.kind, s.on, s.target, s.reason) for s in vv.silent] == SILENT_REASONS
    text = _flat(render(pred, width=200))
    assert "hooks that never fired" in text
    for _, kind, on, target, reason in SILENT_REASONS:
        assert f"{kind} on {on} {target}" in text and reason in text
    html = pred._repr_html_()
    assert "hooks that never fired" in html and "its module was never called" in html


def test_a_module_hook_registered_after_the_call_is_said_so():
    vv = build(adjoint.load(SILENT).solve(variant="late")).variants[0]
    assert [(s.kind, s.target, s.reason) for s in vv.silent] == [
        ("full_backward", "b", "registered after its module's call: a call hands the backward the module hooks it "
                               "had then (BackwardHook's user_hooks)")]


@pytest.mark.torch
def test_in_torch_a_full_backward_hook_registered_after_the_forward_never_fires():
    import torch

    b = torch.nn.Linear(2, 1)
    fired = []
    x = torch.tensor([1.5, -2.0], requires_grad=True)
    y = b(x) * 2
    b.register_full_backward_hook(lambda m, gi, go: fired.append("b"))
    x.register_hook(lambda g: fired.append("x"))
    (y ** 2).sum().backward()
    assert fired == ["x"]


def test_what_the_graph_shows_comes_before_a_later_removal():
    vv = build(adjoint.load(SILENT).solve(variant="removed_after")).variants[0]
    assert [s.reason for s in vv.silent] == [
        "its tensor got no gradient: u's grad_fn ViewBackward0 never ran"]


def test_a_variant_whose_hooks_all_fire_lists_none():
    vv = build(adjoint.load(TENSOR_HOOKS).solve()).variants[0]
    assert vv.silent == [] and "never fired" not in render(adjoint.load(TENSOR_HOOKS).solve())


@pytest.mark.torch
def test_in_torch_exactly_the_listed_hooks_never_fire():
    """silent_hooks.yaml written in torch: only hook 5 fires; u's grad_fn is the
    BackwardHookFunctionBackward of a's full hook, and it never runs."""
    import torch
    from torch import nn

    fired = []

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.unused = nn.Linear(2, 1), nn.Linear(2, 1), nn.Tanh()
            with torch.no_grad():
                self.a.weight.copy_(torch.tensor([[1.0, 2.0]]))
                self.a.bias.copy_(torch.tensor([0.5]))
                self.b.weight.copy_(torch.tensor([[-1.0, 0.5]]))
                self.b.bias.zero_()
            self.handles = {}

        def forward(self, x):
            u = self.a(x)
            self.u = u
            u.register_hook(lambda g: fired.append(0))
            u.grad_fn.register_hook(lambda gi, go: fired.append(1))
            v = self.b(x)
            self.handles[3] = v.register_hook(lambda g: fired.append(3))
            v.register_hook(lambda g: fired.append(5))
            return v * 2

    model = Model()
    model.a.register_full_backward_hook(lambda m, gi, go: fired.append(2))
    model.unused.register_forward_hook(lambda m, i, o: fired.append(4))
    x = torch.tensor([1.5, -2.0], requires_grad=True)
    y = model(x)
    loss = (y ** 2).sum()
    model.handles[3].remove()            # remove: before_backward
    loss.backward()
    assert fired == [5]
    assert model.u.grad_fn.name() == "BackwardHookFunctionBackward"
    assert model.a.weight.grad is None and torch.equal(x.grad, torch.tensor([20.0, -10.0]))


GRAD_INPUTS = """
name: grad_inputs
inputs:
  x: {value: [[1, -1]], requires_grad: true}
model:
  type: Linear
  params: {weight: [[0.5, -1], [1, 0.25]], bias: [0, 0.5]}
loss: "y.sum()"
variants:
  grad:
    backward: {method: grad, inputs: [x]}
    hooks:
      - {tensor: weight}
      - {tensor: x}
      - {node: x, kind: pre}
  backward_inputs:
    backward: {inputs: [x]}
    hooks:
      - {tensor: bias}
"""


def test_a_leaf_autograd_grad_does_not_need_is_said_so():
    """torch.autograd.grad(loss, [x]): weight's AccumulateGrad is not executed (its hook stays
    silent), and x's gradient is captured without running x's AccumulateGrad (x's tensor hook
    fires, its node pre-hook does not): "no gradient reached the leaf x" would contradict the
    tensor hook's call."""
    pred = adjoint.loads(GRAD_INPUTS).solve()
    vv = build(pred).variants[0]
    assert [c.hook.index for g in vv.groups for c in g.calls] == [1]
    assert [(s.index, s.reason) for s in vv.silent] == [
        (0, "torch.autograd.grad computes only the gradients of its inputs (x): nothing needs this leaf's gradient, "
            "so its AccumulateGrad is not executed"),
        (2, "x is an input of torch.autograd.grad, which takes its gradient as the result (its tensor hooks run) "
            "without running its AccumulateGrad, so .grad and node hooks are untouched")]
    vv = build(adjoint.loads(GRAD_INPUTS).solve(variant="backward_inputs")).variants[0]
    assert [(s.index, s.reason) for s in vv.silent] == [
        (0, "backward(inputs=...) computes only the gradients of its inputs (x): nothing needs this leaf's "
            "gradient, so its AccumulateGrad is not executed")]


@pytest.mark.torch
def test_in_torch_autograd_grad_runs_an_inputs_tensor_hook_and_no_other_leaf_hook():
    import torch

    lin = torch.nn.Linear(2, 2)
    fired = []
    x = torch.tensor([[1.0, -1.0]], requires_grad=True)
    lin.weight.register_hook(lambda g: fired.append(0))
    x.register_hook(lambda g: fired.append(1))
    loss = lin(x).sum()
    x_acc = loss.grad_fn.next_functions[0][0].next_functions[1][0]   # SumBackward0 -> AddmmBackward0 -> x
    assert x_acc.name() == "torch::autograd::AccumulateGrad" and x_acc.variable is x
    x_acc.register_prehook(lambda go: fired.append(2))
    torch.autograd.grad(loss, [x])
    assert fired == [1] and x.grad is None and lin.weight.grad is None
    lin.bias.register_hook(lambda g: fired.append(3))
    lin(x).sum().backward(inputs=[x])
    assert fired == [1, 1, 2] and lin.bias.grad is None


# ----------------------------------------------------------------------------- a non-leaf's .grad

def test_a_non_leaf_grad_is_said_to_be_none_and_why():
    pred = adjoint.load(TENSOR_HOOKS).solve()
    vv = build(pred).variants[0]
    assert vv.unkept == ["z", "model"]
    text = _flat(render(pred, width=200))
    assert ("z.grad, model.grad: None -- not leaves, and retain_grad() was not called on them (PyTorch fills "
            ".grad of leaves only; reading it warns)") in text
    assert "z.grad, model.grad: None" in pred._repr_html_()
    # every variant shares it: said once, in the first
    assert [vv.unkept for vv in build(pred).variants] == [["z", "model"], [], []] and text.count("not leaves") == 1


def test_a_retained_non_leaf_is_not_in_that_list():
    pred = adjoint.load(HOOK_ORDER).solve()
    vv = build(pred).variants[0]
    assert "lin" in vv.v.grads and "lin" not in vv.unkept and vv.unkept    # lin has retain_grad


@pytest.mark.torch
def test_in_torch_a_non_leaf_grad_is_none_and_reading_it_warns():
    import torch

    x, y, w = (torch.tensor(v, requires_grad=True) for v in (2.0, 3.0, 4.0))
    z = x + y
    o = w * z
    o.backward()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert z.grad is None and o.grad is None
    assert any("is not a leaf Tensor is being accessed" in str(c.message) for c in caught)
    z2 = x + y
    z2.retain_grad()
    (w * z2).backward()
    assert z2.grad is not None


# ----------------------------------------------------------------------------- post_accumulate_grad

def test_a_post_accumulate_grad_hook_is_shown_handed_the_tensor():
    pred = adjoint.loads(POST_ACC, "post_acc.yaml").solve()
    text = render(pred, width=200)
    assert "tensor       weight itself (the leaf, not a gradient)" in text
    assert "weight.grad  [[-6, 8]]" in text
    assert "tensor = <b>weight</b> itself" in pred._repr_html_()
    # the contract's JSON is unchanged: the record holds the tensor's .grad
    assert pred.to_json()["variants"]["v"]["hook_calls"][0]["args"]["tensor"]["exact"] == [["-6", "8"]]


@pytest.mark.torch
def test_in_torch_a_post_accumulate_grad_hook_is_handed_the_parameter():
    import torch

    lin = torch.nn.Linear(2, 1)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1.0, 2.0]]))
        lin.bias.copy_(torch.tensor([0.5]))
    handed = []
    lin.weight.register_post_accumulate_grad_hook(lambda p: handed.append((p, p.grad.clone())))
    (lin(torch.tensor([1.5, -2.0], requires_grad=True)) ** 2).sum().backward()
    ((p, grad),) = handed
    assert p is lin.weight and torch.equal(grad, torch.tensor([[-6.0, 8.0]]))


# ----------------------------------------------------------------------------- why, once

def test_the_why_says_a_located_note_once():
    pred = adjoint.load(TIE).solve()
    notes = build(pred).variants[0].notes
    fact = "a max-pool window holds its maximum more than once: PyTorch routes the gradient to the first (row-major) of them"
    assert len(notes) == 1 and notes[0].endswith(": " + fact) and "MaxPool2DWithIndicesBackward0 at " in notes[0]
    assert _flat(render(pred, width=200)).count(fact) == 1


@pytest.mark.torch
def test_in_torch_a_max_pool_tie_goes_to_the_first():
    import torch

    x = torch.tensor([[[[1.0, 1.0], [0.0, 0.5]]]], requires_grad=True)
    (torch.nn.MaxPool2d(2)(x) * 3).sum().backward()
    assert torch.equal(x.grad, torch.tensor([[[[3.0, 0.0], [0.0, 0.0]]]]))


@pytest.mark.torch
@pytest.mark.parametrize("path", [SILENT, TIE], ids=os.path.basename)
def test_the_problems_here_verify_against_torch(path):
    from adjoint.torchside import verify

    lines = []
    assert verify.run([path], None, False, False, None, lines.append) == 0, "\n".join(lines)


REFUSED_REGISTRATION = """
name: refused_registration
inputs: {x: {value: [1.0], requires_grad: false}}
model:
  children:
    f: {type: Tanh}
    g: {type: Linear, params: {weight: [[2.0]], bias: [0.0]}}
  forward: |
    h = checkpoint(f, x, use_reentrant=True)
    return g(h)
hooks:
  - {tensor: g.weight}
  - {tensor: h}
"""


def test_the_report_names_the_hook_whose_registration_pytorch_refuses():
    """A reentrant checkpoint of an input without grad returns a tensor that does not require grad,
    so h.register_hook raises in the forward; the error line names that registration, not only the
    message (which names nothing). The error itself is checked in torch below."""
    text = _flat(render(adjoint.loads(REFUSED_REGISTRATION).solve(), width=200))
    assert ("PyTorch raises RuntimeError: cannot register a hook on a tensor that doesn't require gradient during "
            "the forward, registering hook@h, before any hook call") in text


@pytest.mark.torch
def test_the_refused_registration_is_pytorchs():
    import torch
    from torch.utils.checkpoint import checkpoint

    h = checkpoint(torch.nn.Tanh(), torch.tensor([1.0]), use_reentrant=True)
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't require gradient"):
        h.register_hook(lambda g: g)


DICT_CHILD = """
name: dict_child
dtype: float64
inputs:
  x: {value: [[1, 2]], requires_grad: true}
model:
  children:
    enc:
      forward: |
        return {"a": x * 2, "b": x * 3}
  forward: |
    d = enc(x)
    return d["a"] * d["b"]
loss: "sum(y)"
hooks:
  - {module: enc, kind: full_backward}
  - {module: enc, kind: forward}
"""


def test_a_full_backward_hook_on_a_module_returning_a_dict_is_said_why_it_never_fires():
    """The input's BackwardHookFunctionBackward runs, but no gradient passed through the output
    (BackwardHook wraps no tensor of a dict): the reason was "no reason recorded"."""
    vv = build(adjoint.loads(DICT_CHILD).solve()).variants[0]
    assert [(s.kind, s.target) for s in vv.silent] == [("full_backward", "enc")]
    assert vv.silent[0].reason.startswith("its module returns a dict: PyTorch's BackwardHook wraps no tensor in it")


@pytest.mark.torch
def test_in_torch_a_full_backward_hook_on_a_module_returning_a_dict_never_fires():
    import torch

    class Enc(torch.nn.Module):
        def forward(self, x):
            return {"a": x * 2, "b": x * 3}

    enc, fired = Enc(), []
    enc.register_full_backward_hook(lambda *a: fired.append("backward"))
    enc.register_forward_hook(lambda *a: fired.append("forward"))
    x = torch.tensor([[1., 2]], dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        d = enc(x)
    (d["a"] * d["b"]).sum().backward()
    assert fired == ["forward"]
    assert x.grad.tolist() == [[12, 24]]
    assert any("module output should be a Tensor or a tuple of Tensors but received <class 'dict'>" in str(w.message)
               for w in caught)
