"""More of what PyTorch makes of a list (or tuple) a hook returns, found by an adversarial review:
a full backward hook on a module none of whose inputs requires grad may return None or a tuple
of None (``isinstance(res, tuple)``: ``[None]`` raises); a post-accumulate-grad hook returning a
list or tuple is ``check_single_result``'s TypeError; a pack hook's list is handed to unpack as a
list; a forward hook's list output meets Python's AttributeError at ``.sum()``. Expected
outcomes from real torch, run here."""

from __future__ import annotations

import warnings

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from test_hook_returns_list import layers  # noqa: E402

TEXT = """
name: list_returns_more
dtype: float64
inputs:
  x: {value: [[1, -2]], requires_grad: true}
  c: [[0.5, 3]]
model:
  inputs: [x, c]
  children:
    pre: {type: Linear, params: {weight: [[1, 0.5], [0, 1]], bias: [0, 1]}}
    act: {type: Tanh}
  forward: |
    h = pre(c) * x
    return act(h).sum()
variants:
  no_input_full_list:
    hooks: [{module: pre, kind: full_backward, returns: "[None]"}]
  no_input_full_tuple:
    hooks: [{module: pre, kind: full_backward, returns: "(None,)"}]
  post_acc_list:
    hooks: [{tensor: x, kind: post_accumulate_grad, returns: "[tensor.grad]"}]
  post_acc_tuple:
    hooks: [{tensor: x, kind: post_accumulate_grad, returns: "(tensor.grad,)"}]
  pack_list:
    hooks: [{saved_tensors: {pack: "[x]", unpack: "x"}, scope: [act]}]
"""

FORWARD_LIST = """
name: forward_list_sum
dtype: float64
inputs:
  x: {value: [[1, -2]], requires_grad: true}
model:
  children:
    act: {type: Tanh}
  forward: "act(x).sum()"
hooks: [{module: act, kind: forward, returns: "[output * 2]"}]
"""


def _torch(variant: str):
    pre, act = layers()
    x = torch.tensor([[1., -2]], dtype=torch.float64, requires_grad=True)
    c = torch.tensor([[0.5, 3]], dtype=torch.float64)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if variant == "no_input_full_list":
                pre.register_full_backward_hook(lambda m, gi, go: [None])
            if variant == "no_input_full_tuple":
                pre.register_full_backward_hook(lambda m, gi, go: (None,))
            if variant == "post_acc_list":
                x.register_post_accumulate_grad_hook(lambda t: [t.grad])
            if variant == "post_acc_tuple":
                x.register_post_accumulate_grad_hook(lambda t: (t.grad,))
            h = pre(c) * x
            if variant == "pack_list":
                with torch.autograd.graph.saved_tensors_hooks(lambda t: [t], lambda t: t):
                    a = act(h)
            else:
                a = act(h)
            a.sum().backward()
    except Exception as e:
        return type(e).__name__, str(e)
    return None, x.grad.tolist()


VARIANTS = ["no_input_full_list", "no_input_full_tuple", "post_acc_list", "post_acc_tuple", "pack_list"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_what_torch_makes_of_it(variant):
    got = adjoint.loads(TEXT).solve().to_json()["variants"][variant]
    kind, detail = _torch(variant)
    if kind is None:
        assert got.get("error") is None
        assert got["grads"]["x"]["value"][0] == pytest.approx(detail[0], rel=1e-9)
    else:
        assert (got["error"]["type"], got["error"]["message"]) == (kind, detail)


def test_a_forward_hooks_list_meets_pythons_attribute_error():
    act = torch.nn.Tanh()
    act.register_forward_hook(lambda m, i, o: [o * 2])
    with pytest.raises(AttributeError) as caught:
        act(torch.tensor([[1., -2]], dtype=torch.float64, requires_grad=True)).sum()
    got = adjoint.loads(FORWARD_LIST).solve().to_json()["variants"]["default"]["error"]
    assert (got["type"], got["message"]) == ("AttributeError", str(caught.value))
