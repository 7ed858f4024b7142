"""A pack hook that casts (``x.double()`` in a float32 problem): PyTorch hands the unpack hook
what pack returned, a float64 tensor, in the backward and in a read of ``grad_fn._saved_SLOT``;
the gradients stay float32 (validate_outputs casts each back). adjoint wrote the unpack's
argument and the read's value without their dtype (so as float32), which verify flagged.
Expected dtypes come from the real torch run here, never from adjoint's output.
tests/data/regressions/saved_tensor_hook_handed_what_pack_returned_of_another_dtype.yaml."""

from __future__ import annotations

from pathlib import Path

from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402

FILE = Path(__file__).parent / "data" / "regressions" / "saved_tensor_hook_handed_what_pack_returned_of_another_dtype.yaml"
NAMES = {torch.float32: None, torch.float64: "float64"}   # the answer writes a dtype only when it is not the problem's


def _torch(read: bool):
    """The file's model in plain torch: (kind, dtype handed) per saved-tensor hook call, the read's
    dtype, the hook on h's and the leaves' gradient dtypes."""
    calls = []

    def pack(t):
        calls.append(("pack", t.dtype))
        return t.double()

    def unpack(t):
        calls.append(("unpack", t.dtype))
        return t

    x = torch.tensor([0.5, -1.0], requires_grad=True)
    w = torch.tensor([2.0, 3.0], requires_grad=True)
    seen = []
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        h = x * w
        h.register_hook(lambda g: seen.append(g.dtype))
        y = (h * h).tanh()
        loss = y.sum()
    read = h.grad_fn._saved_self.dtype if read else None
    loss.backward()
    return calls, read, seen[0], x.grad.dtype, w.grad.dtype


def _value_dtype(v):
    return v.get("dtype")


def test_unpack_is_handed_the_cast_tensor():
    calls, _read, hgrad, xg, wg = _torch(read=False)
    answer = adjoint.load(FILE).solve().to_json()["variants"]["backward"]
    got = [(c["kind"], _value_dtype(c["args"]["x"])) for c in answer["hook_calls"] if c["kind"] in ("pack", "unpack")]
    assert got == [(k, NAMES[d]) for k, d in calls]
    assert any(k == "unpack" and d == torch.float64 for k, d in calls)
    hook = next(c for c in answer["hook_calls"] if c["kind"] == "hook")
    assert _value_dtype(hook["args"]["grad"]) == NAMES[hgrad]
    assert _value_dtype(answer["grads"]["x"]) == NAMES[xg] and _value_dtype(answer["grads"]["w"]) == NAMES[wg]


def test_a_read_of_the_cast_tensor_has_its_dtype():
    calls, read, _h, _x, _w = _torch(read=True)
    answer = adjoint.load(FILE).solve().to_json()["variants"]["read"]
    s = answer["reads"]["s"]
    assert s["dtype"] == str(read).removeprefix("torch.")
    assert _value_dtype(s["value"]) == NAMES[read]
    got = [(c["kind"], _value_dtype(c["args"]["x"])) for c in answer["hook_calls"] if c["kind"] in ("pack", "unpack")]
    assert got == [(k, NAMES[d]) for k, d in calls]
