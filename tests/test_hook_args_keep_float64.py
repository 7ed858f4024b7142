"""A module's next backward hook is handed the float64 tensor an earlier full backward pre-hook
returned in a float32 problem (BackwardHook passes the returned tuple on); adjoint recorded the
handed tensor without its dtype (as float32). Expected values from a plain torch 2.13 script:

    act.register_full_backward_pre_hook(lambda m, go: (go[0].double(),))
    act.register_full_backward_pre_hook(lambda m, go: seen.append(go[0].dtype))   # torch.float64
    act(lin(x)).sum().backward()   # RuntimeError: hook 'hook' has changed the type of value
                                   # (was torch.FloatTensor got torch.DoubleTensor)
"""

from __future__ import annotations

import adjoint

FILE = """
name: f64_handed_on
inputs:
  x: {value: [[0.5, -1]], requires_grad: true}
model:
  children:
    lin: {type: Linear, params: {weight: [[1, 2], [0.5, -1]], bias: [0.25, 0.5]}}
    act: {type: Tanh}
  forward: |
    return act(lin(x))
loss: "sum(y)"
hooks:
  - {module: act, kind: full_backward_pre, returns: "(grad_output[0].double(),)"}
  - {module: act, kind: full_backward_pre}
"""


def test_next_pre_hook_is_handed_float64():
    got = adjoint.loads(FILE).solve().to_json()["variants"]["default"]
    assert got["error"]["message"] == ("hook 'hook' has changed the type of value (was torch.FloatTensor got "
                                       "torch.DoubleTensor)")
    assert got["error"]["after_call"] == 1
    handed = got["hook_calls"][1]["args"]["grad_output"][0]
    assert handed["dtype"] == "float64"
    assert handed["value"] == [[1.0, 1.0]]
