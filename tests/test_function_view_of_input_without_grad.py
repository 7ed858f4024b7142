"""A custom Function returning as is an input that does not require grad (while another input
does) makes a view with the Function's node as grad_fn; its base written in place, then the view
used: VariableHooks::grad_fn returns early only for a view *without* a grad_fn of a base that
does not require grad, so PyTorch raises handle_view_on_rebase's RuntimeError. adjoint answered
loss 110 (verify caught it). Message copied from a torch 2.13 run."""

from __future__ import annotations

import adjoint

TEXT = """
name: view_of_input_without_grad
dtype: float64
inputs:
  x: {value: [1, 2, 3], requires_grad: true}
  c: {value: [4, 5, 6]}
model:
  inputs: [x, c]
  children:
    f:
      inputs: [a, b]
      forward: "a"
      function:
        name: P
        save: []
        backward: {a: "grad_output", b: "grad_output * 2"}
  forward: |
    z = f(c, x)
    c.add_(1)
    return z * z
loss: "sum(y)"
"""

MESSAGE = ("Output 0 of P is a view and its base or another view of its base has been modified inplace. This view "
           "was created inside a custom Function (or because an input was returned as-is) and the autograd logic to "
           "handle view+inplace would override the custom backward associated with the custom Function, leading to "
           "incorrect gradients. This behavior is forbidden. You can fix this by cloning the output of the custom "
           "Function.")


def test_using_the_view_after_its_base_was_written_raises():
    got = adjoint.loads(TEXT).solve().to_json()["variants"]["default"]
    assert (got["error"]["type"], got["error"]["message"]) == ("RuntimeError", MESSAGE)
    assert got.get("loss") is None
