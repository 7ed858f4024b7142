"""``torch.atan2`` (``Tensor.atan2``, ``arctan2``, in place ``atan2_``) was refused ("a PyTorch
method / function adjoint does not model yet"). It is one Atan2Backward0 (saves other, then self),
the operands broadcast; its backward is atan2_backward's ``grad * other * recip`` and
``grad * -self * recip`` with ``recip`` the reciprocal of ``self^2 + other^2`` masked to 0 where
that is 0 (both gradients 0 at the origin). The forward follows C's atan2 at signed zeros
(atan2(-0.0, -1) = -pi, atan2(0, -0.0) = pi). Expected values come from real torch, run here:
the node, the forward values (signs of zeros included), the hooks' gradients, the leaves'
gradients, what a saved-tensors pack hook sees in which order, and PyTorch's errors."""

from __future__ import annotations

import math

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402

VALUES = {
    "quadrants": ([[1, -2, 0.5, -3], [3, 0.25, -1, 2]], [2, -1, -4, 0.5]),
    "zeros": ([[1, -2, 0, -0.0], [3, 0, -0.0, 2]], [2, -1, -1, 0]),
    "negative_zero_x": ([[0, -0.0, 1, -1], [0, -0.0, 0, 2]], [-0.0, -0.0, -0.0, 0]),
    "origin": ([[0, 0, 1, 0], [0, -1, 0, 0]], [0, 0, 0, 0]),
}

TEXT = """
name: atan2
dtype: DTYPE
inputs:
  b: {value: BVAL, requires_grad: true}
  x: {value: XVAL, requires_grad: true}
model:
  inputs: [b, x]
  forward: |
    h = b * 1
    k = x * 1
    o = FORWARD
    return (o * o).sum() + (o * h).sum()
loss: "y"
hooks:
  - {tensor: h, label: on_h}
  - {tensor: k, label: on_k}
  - {tensor: o, label: on_o}
"""

FORMS = {
    "function": "torch.atan2(h, k)",
    "method": "h.atan2(k)",
    "arctan2": "torch.arctan2(h, k)",
    "arctan2_method": "h.arctan2(k)",
    "broadcast_self": "torch.atan2(k, h)",
    "keyword": "torch.atan2(h, other=k)",
    "same_shape": "torch.atan2(h, k.expand(2, 4))",
    "inplace": "h.clone().atan2_(k)",
    "inplace_arctan2": "h.clone().arctan2_(k)",
}


def _torch(form, values, dtype):
    bv, xv = values
    b = torch.tensor(bv, dtype=dtype, requires_grad=True)
    x = torch.tensor(xv, dtype=dtype, requires_grad=True)
    h, k = b * 1, x * 1
    calls = {"on_h": [], "on_k": [], "on_o": []}
    h.register_hook(lambda g: calls["on_h"].append(g.tolist()))
    k.register_hook(lambda g: calls["on_k"].append(g.tolist()))
    o = eval(FORMS[form], {"torch": torch, "h": h, "k": k})   # noqa: S307 -- the test's own expressions
    o.register_hook(lambda g: calls["on_o"].append(g.tolist()))
    ((o * o).sum() + (o * h).sum()).backward()
    return {"o": o.tolist(), "grad_fn": type(o.grad_fn).__name__, "b": b.grad.tolist(), "x": x.grad.tolist(),
            "calls": [calls["on_o"], calls["on_h"], calls["on_k"]]}


def _solve(form, values, dtype):
    bv, xv = values
    text = TEXT.replace("DTYPE", dtype).replace("BVAL", str(bv)).replace("XVAL", str(xv)).replace(
        "FORWARD", FORMS[form])
    got = adjoint.loads(text).solve().to_json()["variants"]["default"]
    assert got.get("error") is None, got.get("error")
    by = {}
    for c in got["hook_calls"]:
        by.setdefault(c["label"], []).append(c["args"]["grad"]["value"])
    return {"o": got["values"]["o"]["value"], "grad_fn": got["values"]["o"]["grad_fn"],
            "b": got["grads"]["b"]["value"], "x": got["grads"]["x"]["value"],
            "calls": [by.get("on_o", []), by.get("on_h", []), by.get("on_k", [])]}


def _flat(v):
    if isinstance(v, list):
        return [e for item in v for e in _flat(item)]
    return [v]


def _same(a, b, rel, signs=False):
    """Equal within ``rel``; with ``signs``, a zero's sign too (atan2(-0.0, 1) is -0.0: the forward
    values; a gradient's zero sign is not modelled by adjoint for any op)."""
    fa, fb = _flat(a), _flat(b)
    assert len(fa) == len(fb)
    for p, q in zip(fa, fb):
        assert p == pytest.approx(q, rel=rel, abs=rel), (a, b)
        if signs and q == 0:
            assert math.copysign(1, p) == math.copysign(1, q), (a, b)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("values", sorted(VALUES))
@pytest.mark.parametrize("form", sorted(FORMS))
def test_atan2_matches_torch(form, values, dtype):
    want = _torch(form, VALUES[values], getattr(torch, dtype))
    got = _solve(form, VALUES[values], dtype)
    rel = 1e-13 if dtype == "float64" else 1e-6
    assert got["grad_fn"] == want["grad_fn"] == "Atan2Backward0"
    _same(got["o"], want["o"], rel, signs=True)
    for key in ("b", "x"):
        _same(got[key], want[key], rel)
    assert [len(c) for c in got["calls"]] == [len(c) for c in want["calls"]]
    for g, w in zip(got["calls"], want["calls"]):
        _same(g, w, rel)


SAVED = """
name: atan2_saved
dtype: float64
inputs:
  b: {value: [[1, -2, 0.5], [3, 0.25, -1]], requires_grad: true}
  x: {value: [2, -1, -4], requires_grad: true}
model:
  inputs: [b, x]
  forward: |
    o = torch.atan2(b * 1, x * 1)
    return o.sum()
loss: "y"
hooks:
  - {saved_tensors: {pack: "x", unpack: "x * 2"}, label: doubled}
"""


def test_saved_other_then_self_as_torch_packs_them():
    b = torch.tensor([[1, -2, 0.5], [3, 0.25, -1]], dtype=torch.float64, requires_grad=True)
    x = torch.tensor([2, -1, -4], dtype=torch.float64, requires_grad=True)
    packed = []

    def pack(t):
        packed.append(list(t.shape))
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t * 2):
        h, k = b * 1, x * 1
        o = torch.atan2(h, k)
        o.sum().backward()
    assert packed[-2:] == [[3], [2, 3]]    # other, then self
    got = adjoint.loads(SAVED).solve().to_json()["variants"]["default"]
    assert got.get("error") is None, got.get("error")
    _same(got["grads"]["b"]["value"], b.grad.tolist(), 1e-13)
    _same(got["grads"]["x"]["value"], x.grad.tolist(), 1e-13)


ERRORS = {
    "sizes": "torch.atan2(h, k[:2])",
    "inplace_broadcast": "k.clone().atan2_(h)",
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_atan2_errors_are_torchs(case):
    b = torch.tensor([[1.0, -2, 0.5, 3]], dtype=torch.float64, requires_grad=True)
    x = torch.tensor([2.0, -1, -4, 1], dtype=torch.float64, requires_grad=True)
    h, k = b * 1, x * 1
    with pytest.raises((RuntimeError, TypeError)) as caught:
        eval(ERRORS[case], {"torch": torch, "h": h, "k": k})   # noqa: S307 -- the test's own expressions
    text = TEXT.replace("DTYPE", "float64").replace("BVAL", "[[1, -2, 0.5, 3]]").replace(
        "XVAL", "[2, -1, -4, 1]").replace("FORWARD", ERRORS[case])
    got = adjoint.loads(text).solve().to_json()["variants"]["default"]
    assert (got["error"]["type"], got["error"]["message"]) == (type(caught.value).__name__, str(caught.value))


@pytest.mark.parametrize("forward", ["torch.atan2(h, 2.0)", "h.clone().atan2_(2.0)", "h.atan2(2)",
                                     "torch.atan2(h, k.masked_fill(k > 0, float('-inf')))",
                                     "torch.atan2(k.masked_fill(k > 0, float('inf')), h)"])
def test_a_number_or_non_finite_operand_is_refused(forward):
    """A number ``other``: PyTorch's TypeError (worded by how the number is written); an infinite or
    nan operand (C's atan2 has its own values there): refused in one line, not guessed."""
    from adjoint.format.errors import ProblemError
    if "inf" not in forward:
        with pytest.raises(TypeError):
            eval(forward, {"torch": torch, "h": torch.ones(2), "k": torch.ones(2)})   # noqa: S307
    text = TEXT.replace("DTYPE", "float64").replace("BVAL", "[[1, -2, 0.5, 3]]").replace(
        "XVAL", "[2, -1, -4, 1]").replace("FORWARD", forward)
    with pytest.raises(ProblemError):
        adjoint.loads(text).solve()


LAYOUT = """
name: atan2_layout
dtype: float32
inputs:
  b: {value: [[1, -2, 0.5], [3, 0.25, -1]], requires_grad: true}
  c: {value: [[2, -1, -4], [1, 2, 3]], requires_grad: true}
model:
  inputs: [b, c]
  forward: |
    p = (b * 1).t()
    q = (c * 1).t()
    o = FORM
    return LOSS
loss: "y"
hooks:
  - {tensor: p, label: on_p, does: "v = grad.view(-1)"}
  - {tensor: q, label: on_q, does: "v = grad.view(-1)"}
"""

LAYOUTS = ["torch.atan2(p, q)", "torch.atan2(p, q * 1)", "torch.atan2(p, (c * 1).t().contiguous())",
           "torch.atan2((c * 1).t().contiguous(), p)", "torch.atan2(p, q[0])", "torch.atan2(q[0], p)",
           "torch.atan2(p.contiguous(), q)", "torch.atan2(p.contiguous(), q.contiguous())"]


@pytest.mark.parametrize("loss", ["(o * o).sum()", "(o * torch.ones(3, 2)).sum()"])
@pytest.mark.parametrize("form", LAYOUTS)
def test_the_gradients_layout_is_atan2_backwards(form, loss):
    """atan2_backward's products are TensorIterator kernels: a gradient laid out transposed (the
    incoming one, or the operands') is handed on transposed, and a hook's ``grad.view(-1)`` raises."""
    b = torch.tensor([[1, -2, 0.5], [3, 0.25, -1]], dtype=torch.float32, requires_grad=True)
    c = torch.tensor([[2, -1, -4], [1, 2, 3]], dtype=torch.float32, requires_grad=True)
    p, q = (b * 1).t(), (c * 1).t()
    calls = []
    p.register_hook(lambda g: (calls.append("on_p"), g.view(-1), None)[2])
    q.register_hook(lambda g: (calls.append("on_q"), g.view(-1), None)[2])
    want = None
    try:
        o = eval(form, {"torch": torch, "p": p, "q": q, "c": c})   # noqa: S307 -- the test's own expressions
        eval(loss, {"torch": torch, "o": o}).backward()               # noqa: S307
    except RuntimeError as exc:
        want = str(exc)
    got = adjoint.loads(LAYOUT.replace("FORM", form).replace("LOSS", loss)).solve().to_json()["variants"]["default"]
    assert (got["error"]["message"] if got.get("error") else None) == want
    assert [c["label"] for c in got["hook_calls"]] == calls
