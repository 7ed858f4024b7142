"""An in-place op whose operand does not fit the written tensor (PyTorch 2.13): TensorIterator's
RuntimeError comes from the kernel, after the node packed what it saves. Checked against real
torch under saved_tensors_hooks (the pack calls' shapes and values, in order, then the error):
verify cannot name the node of such a pack for mul_, div_ and pow_ (their Tensor and Scalar
overloads take as many arguments), so the regression file inplace_shape_errors_after_packs.yaml
checks them with module hooks only."""

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402

CASES = [(op, shape) for op in ("mul_", "div_", "pow_", "add_", "copy_") for shape in ((2, 3), (2,), (1, 3))]


def _operand(shape):
    return torch.arange(1, 1 + int(torch.tensor(shape).prod()), dtype=torch.float64).reshape(shape)


@pytest.mark.parametrize("op,shape", CASES)
def test_the_error_comes_after_the_packs_as_in_torch(op, shape):
    packs = []

    def pack(t):
        packs.append(t.detach().tolist())
        return t

    x = torch.tensor([1., 2, 3], dtype=torch.float64, requires_grad=True)
    o = _operand(shape).requires_grad_()
    with pytest.raises(RuntimeError) as theirs:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            h = x * 2
            getattr(h, op)(o * 3)
    text = f"""
name: ip
dtype: float64
inputs:
  x: {{value: [1, 2, 3], requires_grad: true}}
  o: {{value: {_operand(shape).tolist()}, requires_grad: true}}
model:
  inputs: [x, o]
  forward: |
    h = x * 2
    h.{op}(o * 3)
    return h.sum()
hooks:
  - {{saved_tensors: {{pack: "x", unpack: "x"}}}}
"""
    answer = adjoint.loads(text).solve().variants[0].to_json()
    assert (answer["error"]["type"], answer["error"]["message"]) == ("RuntimeError", str(theirs.value))
    ours = [c["args"]["x"]["value"] for c in answer["hook_calls"] if c["kind"] == "pack"]
    assert ours == packs
