"""AccumulateGrad takes a custom Function's gradient as ``.grad`` itself (no copy), so a
post-accumulate hook writing ``.grad`` in place shows in a node post hook on the same
AccumulateGrad. The reference is a plain script written by hand, not the torch side of
``verify`` (which once held an extra reference to the gradient and saw a copy: sweep seed 83003,
problem 979)."""

from __future__ import annotations

import pytest

import adjoint

#: tests/data/regressions/accumulate_grad_takes_a_custom_function_gradient.yaml cut down to the
#: hooks that decide it (that file, with its other hooks, is checked against torch by verify)
PROBLEM = """\
name: steal
dtype: float64
inputs:
  x0: {value: [-0.5], requires_grad: true}
model:
  inputs: [u]
  params:
    w: {value: 0.25, requires_grad: false}
  forward: |
    h = u * w
    return tanh(h)
  function:
    name: FnF0
    backward:
      u: "grad_output * (1 - output * output) * w"
      w: "grad_output * (1 - output * output) * u"
hooks:
%s  - {node: "x0", kind: post}
  - {tensor: "x0", kind: post_accumulate_grad, does: "tensor.grad *= 0.5"}
backward:
  grad_output: [1.5]
"""


def _script(full_backward_hook: bool):
    """What a user's script sees: the post hook's grad_outputs[0] and x0.grad at the end."""
    import torch

    class FnF0(torch.autograd.Function):
        @staticmethod
        def forward(ctx, u, w):
            out = torch.tanh(u * w)
            ctx.save_for_backward(u, w, out)
            return out

        @staticmethod
        def backward(ctx, grad_output):
            u, w, output = ctx.saved_tensors
            return grad_output * (1 - output * output) * w, grad_output * (1 - output * output) * u

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.tensor(0.25, dtype=torch.float64), requires_grad=False)

        def forward(self, u):
            return FnF0.apply(u, self.w)

    x0 = torch.tensor([-0.5], dtype=torch.float64, requires_grad=True)
    model = Model()
    if full_backward_hook:
        model.register_full_backward_hook(lambda module, grad_input, grad_output: None)
    y = model(x0)
    seen = []
    accumulate = x0.view_as(x0).grad_fn.next_functions[0][0]
    accumulate.register_hook(lambda grad_inputs, grad_outputs: seen.append(grad_outputs[0].clone()))

    def halve(tensor):
        tensor.grad *= 0.5

    x0.register_post_accumulate_grad_hook(halve)
    y.backward(torch.tensor([1.5], dtype=torch.float64))
    return seen[0].item(), x0.grad.item()


@pytest.mark.torch
@pytest.mark.parametrize("full_backward_hook", [False, True])
def test_post_hook_sees_the_halved_grad_as_in_a_plain_script(full_backward_hook):
    post, grad = _script(full_backward_hook)
    assert post == pytest.approx(grad, rel=1e-15)   # taken, not copied: the post hook sees .grad itself
    text = PROBLEM % ('  - {module: "model", kind: full_backward}\n' if full_backward_hook else "")
    (calls,) = adjoint.loads(text).solve().to_json()["variants"].values()
    (post_call,) = [c for c in calls["hook_calls"] if c["label"] == "post@x0"]
    assert post_call["args"]["grad_outputs"][0]["value"][0] == pytest.approx(post, rel=1e-15)
    assert calls["grads"]["x0"]["value"][0] == pytest.approx(grad, rel=1e-15)
