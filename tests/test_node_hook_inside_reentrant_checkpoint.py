"""A node hook on a module's output made inside a reentrant checkpoint (a no-grad forward): the
output has no grad_fn when it is bound, so registering on its grad_fn is Python's AttributeError,
as a plain torch script shows (the hook used to be skipped silently on both sides)."""

import pytest
import torch
from torch.utils.checkpoint import checkpoint

import adjoint

pytestmark = pytest.mark.torch

TEXT = """name: t
inputs:
  x: {value: [1, 2], requires_grad: true}
model:
  params: {w: [3, 4]}
  children:
    f: {type: Tanh}
  forward: |
    h = w * x
    return checkpoint(f, h, use_reentrant=True)
loss: "sum(y)"
hooks:
  - {module: f, kind: forward}
  - {node: f, kind: pre}
"""


def test_registering_on_the_output_inside_the_checkpoint_is_pythons_attribute_error():
    f = torch.nn.Tanh()
    x = torch.tensor([1., 2.], requires_grad=True)
    w = torch.tensor([3., 4.], requires_grad=True)
    seen = []

    def register(module, args, output):   # where the forward binds the output's name
        seen.append(output.grad_fn)
        output.grad_fn.register_prehook(lambda g: None)

    f.register_forward_hook(register)
    with pytest.raises(AttributeError) as err:
        checkpoint(f, w * x, use_reentrant=True)
    assert seen == [None]
    answer = adjoint.loads(TEXT).solve().to_json()["variants"]["default"]
    assert answer["error"]["type"] == "AttributeError"
    assert answer["error"]["message"] == str(err.value)
    assert answer["error"]["during"] == "forward"
    assert len(answer["hook_calls"]) == 1 and answer["hook_calls"][0]["kind"] == "forward"
