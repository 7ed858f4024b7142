"""A hook that returns a Python list where PyTorch asks for a tuple (``PyTuple_Check`` in
PyFunctionPreHook / PyFunctionPostHook, ``check_single_result``, the unpack hook's check) or
takes any non-tuple as one value (``_call_impl`` wraps a forward pre-hook's non-tuple result as
``(result,)``). adjoint read ``[a]`` as the tuple ``(a,)``: the legacy and node hooks ran with
doubled gradients, a forward pre-hook's list became the inputs, and messages said 'tuple'.
Found by a user trial; the expected outcome of each variant is real torch's, run here."""

from __future__ import annotations

import warnings

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from gen import check  # noqa: E402

TEXT = """
name: list_hook_returns
dtype: float64
inputs:
  x: {value: [[1, -2]], requires_grad: true}
model:
  children:
    pre: {type: Linear, params: {weight: [[1, 0.5], [0, 1]], bias: [0, 1]}}
    act: {type: Tanh}
  forward: |
    h = pre(x)
    return act(h).sum()
variants:
  legacy:
    hooks: [{module: act, kind: backward, returns: "[grad_input[0] * 2]"}]
  full:
    hooks: [{module: act, kind: full_backward, returns: "[grad_input[0] * 2]"}]
  node_pre:
    hooks: [{node: h, kind: pre, returns: "[grad_outputs[0] * 2]"}]
  node_post:
    hooks: [{node: h, kind: post, returns: "[grad_inputs[0] * 2, grad_inputs[1], grad_inputs[2]]"}]
  tensor:
    hooks: [{tensor: h, returns: "[grad * 2]"}]
  forward_pre:
    hooks: [{module: pre, kind: forward_pre, returns: "[input[0] * 2]"}]
  forward:
    hooks: [{module: pre, kind: forward, returns: "[output * 2]"}]
  unpack:
    hooks: [{saved_tensors: {pack: "x", unpack: "[x]"}, scope: [act]}]
"""


def layers():
    """The files' pre (a Linear) and act (a Tanh), in torch."""
    pre = torch.nn.Linear(2, 2).double()
    with torch.no_grad():
        pre.weight.copy_(torch.tensor([[1, 0.5], [0, 1]]))
        pre.bias.copy_(torch.tensor([0., 1]))
    return pre, torch.nn.Tanh()


def _torch(variant: str):
    pre, act = layers()
    x = torch.tensor([[1., -2]], dtype=torch.float64, requires_grad=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if variant == "legacy":
                act.register_backward_hook(lambda m, gi, go: [gi[0] * 2])
            if variant == "full":
                act.register_full_backward_hook(lambda m, gi, go: [gi[0] * 2])
            if variant == "forward_pre":
                pre.register_forward_pre_hook(lambda m, i: [i[0] * 2])
            if variant == "forward":
                pre.register_forward_hook(lambda m, i, o: [o * 2])
            h = pre(x)
            if variant == "node_pre":
                h.grad_fn.register_prehook(lambda go: [go[0] * 2])
            if variant == "node_post":
                h.grad_fn.register_hook(lambda gi, go: [gi[0] * 2, gi[1], gi[2]])
            if variant == "tensor":
                h.register_hook(lambda g: [g * 2])
            if variant == "unpack":
                with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: [t]):
                    a = act(h)
            else:
                a = act(h)
            a.sum().backward()
    except Exception as e:
        return type(e).__name__, str(e)
    return None, x.grad.tolist()


VARIANTS = ["legacy", "full", "node_pre", "node_post", "tensor", "forward_pre", "forward", "unpack"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_list_is_what_torch_makes_of_it(variant):
    got = adjoint.loads(TEXT).solve().to_json()["variants"][variant]
    kind, detail = _torch(variant)
    if kind is None:
        assert got.get("error") is None
        assert got["grads"]["x"]["value"][0] == pytest.approx(detail[0], rel=1e-12)
    else:
        assert (got["error"]["type"], got["error"]["message"]) == (kind, detail)


def test_verify_agrees():
    outcome = check(TEXT, timeout=90)
    assert outcome.ok, outcome.report()
