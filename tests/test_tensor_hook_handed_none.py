"""A tensor hook handed None (an output of a multi-output custom Function that no gradient
reached, while another output's did) may only return None: PyTorch's check_single_result
raises RuntimeError "can't replace a None gradient with a non-None value" whatever else it
returns (a tensor, a tuple, a number), before it reads the result's type. adjoint handed a
returned tensor on to the node (x.grad [7, 7, 7]) and named a tuple or a number's type in a
TypeError. Expected messages copied from a torch 2.13 run."""

from __future__ import annotations

import adjoint

TEXT = """
name: hook_handed_none
dtype: float64
inputs:
  x: {value: [1, 2, 3], requires_grad: true}
model:
  children:
    f:
      inputs: [a]
      forward: "a * 1, a * 2"
      function:
        name: M
        save: []
        backward:
          a: "grad_output[0] + grad_output[1] * 2"
  forward: |
    p, q = f(x)
    return q
loss: "sum(y)"
variants:
  tensor:
    hooks: [{tensor: p, returns: "torch.ones(3, dtype=torch.float64) * 5"}, {tensor: q}]
  tuple:
    hooks: [{tensor: p, returns: "(grad,)"}]
  number:
    hooks: [{tensor: p, returns: "3"}]
  none:
    hooks: [{tensor: p, returns: "None"}]
"""


def test_a_hook_handed_none_may_return_only_none():
    got = adjoint.loads(TEXT).solve().to_json()["variants"]
    for name in ("tensor", "tuple", "number"):
        error = got[name]["error"]
        assert (error["type"], error["message"]) == \
            ("RuntimeError", "can't replace a None gradient with a non-None value"), name
        assert len(got[name]["hook_calls"]) == 1   # raised right after the first hook returned
        assert got[name]["hook_calls"][0]["args"]["grad"] is None
    assert got["none"].get("error") is None
    assert got["none"]["grads"]["x"]["value"] == [2, 2, 2]   # torch: x.grad [2., 2., 2.]
