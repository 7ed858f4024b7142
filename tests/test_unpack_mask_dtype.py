"""A saved-tensor unpack hook that gives a saved boolean mask back as another dtype (``x / 2``,
``x.double()``): where, masked_fill, masked_scatter and masked_select's backward kernels refuse it
with their own RuntimeError (torch 2.13's words, which name the dtype in two spellings), once the
node's saved tensors are unpacked; an index kernel's reading of another dtype is not modelled and
refused in one line. Expected errors come from torch."""

import pytest
import torch

import adjoint

FILE = """
name: unpack-mask-dtype
dtype: float64
inputs:
  x: {value: [-0.5, 0.25, 1], requires_grad: true}
  m: {value: [true, false, true], dtype: bool}
model:
  inputs: [x, m]
  forward: |
    return (FORWARD).sum()
loss: "y"
hooks:
  - {saved_tensors: {pack: "x", unpack: "UNPACK"}}
"""

FORWARDS = {
    "torch.where(x > 0, x, x * 2)": lambda x, m: torch.where(x > 0, x, x * 2),
    "(x * 1).masked_fill(m, 0.0)": lambda x, m: (x * 1).masked_fill(m, 0.0),
    "(x * 1).masked_scatter(m, x * 3)": lambda x, m: (x * 1).masked_scatter(m, x * 3),
    "(x * 1).masked_select(m)": lambda x, m: (x * 1).masked_select(m),
}
UNPACKS = {"x / 2": lambda t: t / 2, "x.double()": lambda t: t.double(), "x.clone()": lambda t: t.clone()}


def _torch(forward, unpack):
    x = torch.tensor([-0.5, 0.25, 1], dtype=torch.float64, requires_grad=True)
    m = torch.tensor([True, False, True])
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
        y = forward(x, m).sum()
    try:
        y.backward()
    except RuntimeError as e:
        return ("RuntimeError", str(e)), None
    return None, x.grad.tolist()


@pytest.mark.parametrize("unpack", list(UNPACKS))
@pytest.mark.parametrize("forward", list(FORWARDS))
def test_a_mask_given_back_as_another_dtype_is_the_kernels_error(forward, unpack):
    error, grad = _torch(FORWARDS[forward], UNPACKS[unpack])
    js = adjoint.loads(FILE.replace("FORWARD", forward).replace("UNPACK", unpack)).solve().variants[0].to_json()
    if error is None:
        assert js.get("error") is None
        assert [float(v) for v in js["grads"]["x"]["value"]] == pytest.approx(grad)
    else:
        assert (js["error"]["type"], js["error"]["message"]) == error
        assert js["error"]["during"] == "backward"


def test_an_index_given_back_as_another_dtype_is_refused():
    text = FILE.replace("FORWARD", "torch.gather(x * 1, 0, torch.tensor([2, 0]))").replace("UNPACK", "x / 2")
    with pytest.raises(adjoint.ProblemError, match="returns a float32 tensor for the int64 one GatherBackward0 saved"):
        adjoint.loads(text).solve()
