"""``Tensor.fill_(value)`` was refused ("a PyTorch method adjoint does not model yet"), in a
forward and in a hook body (``does: "grad.fill_(3)"``). It is PyTorch's in-place op now: a number
is ``FillBackward2`` (one edge, nothing flows back to what the tensor was; no overlap check, so a
stride-0 expanded gradient is filled; the number converted checked, float32's range), a 0-d tensor
``FillBackward3`` (the value gets the gradient's sum; TensorIterator's overlap check), a tensor
with dimensions PyTorch's RuntimeError; the version bump, a view's CopySlices and the leaf errors
as every in-place op. Found by a trial with forum-style files; expected values from real torch,
run here (and through verify, which runs the same file in torch)."""

from __future__ import annotations

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from gen import check  # noqa: E402

TEXT = """
name: fill
dtype: DTYPE
inputs:
  x: {value: [[1, 2], [-1, 0.5]], requires_grad: true}
  w: {value: 0.75, requires_grad: true}
model:
  inputs: [x, w]
  forward: |
FORWARD
loss: "y.sum()"
hooks: HOOKS
"""

#: name -> (forward lines, hooks, the same in torch: (x, w, hook) -> the model's output; the hook on h
#: registered right after h's line, as the file's is: it stays on the node fill_ replaces)
CASES = {
    "number": ("h = x * 2\nh.fill_(0.1)\nreturn h * x", "[{tensor: h}]",
               lambda x, w, hook: (lambda h: (h.register_hook(hook), h.fill_(0.1), h * x)[-1])(x * 2)),
    "tensor": ("h = x * 2\nh.fill_(w)\nreturn h * x", "[{tensor: h}]",
               lambda x, w, hook: (lambda h: (h.register_hook(hook), h.fill_(w), h * x)[-1])(x * 2)),
    "view": ("h = x * 2\nh[0].fill_(value=3)\nreturn h * x", "[{tensor: h}]",
             lambda x, w, hook: (lambda h: (h.register_hook(hook), h[0].fill_(value=3), h * x)[-1])(x * 2)),
    "aliased_value": ("h = x * 2\nh.fill_(h[0, 1])\nreturn h * x", "[{tensor: h}]",
                      lambda x, w, hook: (lambda h: (h.register_hook(hook), h.fill_(h[0, 1]), h * x)[-1])(x * 2)),
    "infinite": ("h = x * 2\nh.fill_(float(\"-inf\"))\nreturn x * h.exp()", "[{tensor: h}]",
                 lambda x, w, hook: (lambda h: (h.register_hook(hook), h.fill_(float("-inf")), x * h.exp())[-1])(x * 2)),
}


def _torch(case, dtype):
    x = torch.tensor([[1, 2], [-1, 0.5]], dtype=dtype, requires_grad=True)
    w = torch.tensor(0.75, dtype=dtype, requires_grad=True)
    calls = []
    out = CASES[case][2](x, w, lambda g: calls.append(g.tolist()))
    node = type(out.grad_fn.next_functions[0][0]).__name__ if case != "infinite" else None
    out.sum().backward()
    return calls, x.grad.tolist(), None if w.grad is None else w.grad.item(), node


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_fill_in_a_forward(case, dtype):
    forward, hooks, _ = CASES[case]
    text = (TEXT.replace("DTYPE", dtype).replace("HOOKS", hooks)
            .replace("FORWARD\n", "".join(f"    {line}\n" for line in forward.split("\n"))))
    calls, x_grad, w_grad, node = _torch(case, getattr(torch, dtype))
    got = adjoint.loads(text).solve().to_json()["variants"]["default"]
    assert got.get("error") is None, got.get("error")

    def value(v):   # the float32 value adjoint prints shortest, as torch's tolist() gives its double
        return None if v is None else torch.tensor(v["value"], dtype=getattr(torch, dtype)).tolist()
    assert [value(c["args"]["grad"]) for c in got["hook_calls"]] == calls
    assert value(got["grads"]["x"]) == x_grad
    assert value(got["grads"].get("w")) == w_grad
    if node is not None:   # the node the fill made (CopySlices for a view's)
        assert got["values"]["h"]["grad_fn"] == node
    assert check(text, timeout=60).ok


def _raised(fn):
    try:
        fn()
    except Exception as exc:   # noqa: BLE001 -- the error PyTorch raises is the expected value
        return type(exc).__name__, str(exc)
    return None


ERRORS = {
    "leaf": ("x.fill_(1)\nreturn x * 2", lambda x: x.fill_(1)),
    "view_of_leaf": ("x[0].fill_(1)\nreturn x * 2", lambda x: x[0].fill_(1)),
    "dimensions": ("h = x * 2\nh.fill_(x[0])\nreturn h", lambda x: (x * 2).fill_(x[0])),
    "float32_range": ("h = x * 2\nh.fill_(1e39)\nreturn h", lambda x: (x * 2).fill_(1e39)),
    "version": ("h = x * 2\nz = h.pow(2)\nh.fill_(1)\nreturn z",
                lambda x: (lambda h: (lambda z: (h.fill_(1), z.sum().backward()))(h.pow(2)))(x * 2)),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_fill_errors_are_pytorchs(case):
    forward, run = ERRORS[case]
    want = _raised(lambda: run(torch.tensor([[1, 2], [-1, 0.5]], requires_grad=True)))
    assert want is not None
    text = (TEXT.replace("DTYPE", "float32").replace("HOOKS", "[]")
            .replace("FORWARD\n", "".join(f"    {line}\n" for line in forward.split("\n"))))
    error = adjoint.loads(text).solve().to_json()["variants"]["default"]["error"]
    assert (error["type"], error["message"]) == want


HOOKED = """
name: fill_in_a_hook
inputs:
  x: {value: [[1, 2], [-1, 0.5]], requires_grad: true}
model:
  children:
    lin: {type: Linear, params: {weight: [[1, -1], [2, 0.5]], bias: [0, 0.25]}}
  forward: "lin(x)"
loss: "y.sum()"
hooks:
  - {tensor: model, does: "BODY"}
"""


@pytest.mark.parametrize("body", ["grad.fill_(3)", "grad.fill_(grad.sum())", "grad.mul_(3)", "grad.fill_(-1e39)"])
def test_fill_of_sums_expanded_gradient_in_a_hook(body):
    """The output's gradient is sum's, stride 0: fill_ of a number writes it (every element is
    the one memory location, so the written value flows on), where mul_ and fill_ of a tensor
    meet TensorIterator's overlap error."""
    lin = torch.nn.Linear(2, 2)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1., -1], [2, 0.5]]))
        lin.bias.copy_(torch.tensor([0, 0.25]))
    x = torch.tensor([[1., 2], [-1, 0.5]], requires_grad=True)
    h = lin(x)
    h.register_hook(lambda grad: exec(body, {"grad": grad}))
    error = _raised(lambda: h.sum().backward())
    got = adjoint.loads(HOOKED.replace("BODY", body)).solve().to_json()["variants"]["default"]
    if error is not None:
        assert (got["error"]["type"], got["error"]["message"]) == error
        return
    assert got.get("error") is None, got.get("error")
    assert got["grads"]["x"]["value"] == x.grad.tolist()
    assert got["grads"]["lin.weight"]["value"] == lin.weight.grad.tolist()
    assert got["grads"]["lin.bias"]["value"] == lin.bias.grad.tolist()
