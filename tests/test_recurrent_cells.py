"""RNNCell (tanh, relu), GRUCell, LSTMCell against real torch: the node chain PyTorch 2.13's CPU
path builds (ATen's cells are compositions: addmm, unsafe_split, in-place sigmoid_ / tanh_ /
add_ / mul_, with their sequence numbers), values and grads (the float64 answer mode, the same
engine on doubles), batched and unbatched, with and without a state, chained over two steps;
and one exact run through ``adjoint verify`` with full and legacy hooks on the cells."""

import numpy as np
import pytest
from conftest import require_torch

torch = require_torch()
from torch import nn  # noqa: E402

import adjoint  # noqa: E402
from adjoint.torchside import verify
from nodechain import chain, leaf_names  # noqa: E402

F64 = torch.float64
X = [[1, -0.5], [0.25, 1]]
H = [[0.5, -1], [1, 0.5]]


def _params(gates: int, h: int = 2, i: int = 2, bias: bool = True) -> dict:
    n = gates * h
    vals = lambda rows, cols, k: [[((r * cols + c + k) % 7 - 3) / 4 for c in range(cols)] for r in range(rows)]  # noqa
    out = {"weight_ih": vals(n, i, 0), "weight_hh": vals(n, h, 3)}
    if bias:
        out["bias_ih"] = [((r + 1) % 5 - 2) / 8 for r in range(n)]
        out["bias_hh"] = [((r + 2) % 5 - 2) / 8 for r in range(n)]
    return out


CASES = [
    # (type, args, gates, forward, torch forward)
    ("RNNCell", {}, 1, "a = m(x)\n    return m(x, a) * h", lambda m, x, h: m(x, m(x)) * h),
    ("RNNCell", {"nonlinearity": "relu"}, 1, "return m(x, h)", lambda m, x, h: m(x, h)),
    ("RNNCell", {"bias": False}, 1, "return m(x[0], h[1])", lambda m, x, h: m(x[0], h[1])),
    ("GRUCell", {}, 3, "return m(x, h)", lambda m, x, h: m(x, h)),
    ("GRUCell", {}, 3, "a = m(x)\n    return m(x[1], a[0])", lambda m, x, h: (lambda a: m(x[1], a[0]))(m(x))),
    ("LSTMCell", {}, 4, "a, c = m(x)\n    return a * c", lambda m, x, h: (lambda r: r[0] * r[1])(m(x))),
    ("LSTMCell", {}, 4, "a, c = m(x, (h, h * 2))\n    b, d = m(x, (a, c))\n    return b + d",
     lambda m, x, h: (lambda r: (lambda s: s[0] + s[1])(m(x, r)))(m(x, (h, h * 2)))),
    ("LSTMCell", {"bias": False}, 4, "a, c = m(x[0], (h[0], h[1]))\n    return a - c",
     lambda m, x, h: (lambda r: r[0] - r[1])(m(x[0], (h[0], h[1])))),
]


def _text(kind, args, gates, forward) -> str:
    import json
    bias = args.get("bias", True)
    params = _params(gates, bias=bias)
    arg_text = ", ".join(f"{k}: {json.dumps(v) if not isinstance(v, bool) else str(v).lower()}" for k, v in args.items())
    return f"""
name: cell
dtype: float64
inputs:
  x: {{value: {X}, requires_grad: true}}
  h: {{value: {H}, requires_grad: true}}
model:
  children:
    m: {{type: {kind}, args: {{input_size: 2, hidden_size: 2{', ' + arg_text if arg_text else ''}}}, params: {json.dumps(params)}}}
  inputs: [x, h]
  forward: |
    {forward}
loss: "(y * y).sum()"
"""


def _torch(kind, args, gates, fn):
    m = getattr(nn, kind)(2, 2, **args).double()
    with torch.no_grad():
        for name, v in _params(gates, bias=args.get("bias", True)).items():
            getattr(m, name).copy_(torch.tensor(v, dtype=F64))
    x = torch.tensor(X, dtype=F64, requires_grad=True)
    h = torch.tensor(H, dtype=F64, requires_grad=True)
    y = fn(m, x, h)
    (y * y).sum().backward()
    return m, x, h, y


@pytest.mark.parametrize("kind,args,gates,forward,fn", CASES, ids=[f"{c[0]}-{c[3].splitlines()[0]}" for c in CASES])
def test_cell_chain_values_and_grads_against_torch(kind, args, gates, forward, fn):
    v = adjoint.loads(_text(kind, args, gates, forward)).solve(mode="float64").variants[0]
    m, x, h, y = _torch(kind, args, gates, fn)
    names = v.run.forward.names
    ours = {"x": names["x"], "h": names["h"], **{f"m.{k}": names[f"m.{k}"] for k, _ in m.named_parameters()}}
    theirs = {"x": x, "h": h, **{f"m.{k}": p for k, p in m.named_parameters()}}
    if chain(names["model"], leaf_names(ours)) != chain(y, leaf_names(theirs)):   # (pytest's diff of two
        pytest.fail("the node chains differ")                                     # chains takes minutes)
    assert np.allclose(np.array(names["model"].value.floats()), y.detach().numpy(), rtol=1e-12, atol=1e-14)
    for name, t in theirs.items():
        if t.grad is None:
            assert v.grads.get(name) is None, name
            continue
        assert np.allclose(np.array(v.grads[name].floats()), t.grad.numpy(), rtol=1e-10, atol=1e-14), name


def test_cells_verify_exactly_with_hooks(tmp_path):
    text = _text("LSTMCell", {}, 4, "a, c = m(x, (h, h))\n    return a * c") + """variants:
  full: {hooks: [{module: m, kind: full_backward}, {module: m, kind: forward}]}
  legacy: {hooks: [{module: m, kind: backward}]}
"""
    path = tmp_path / "cell.yaml"
    path.write_text(text)
    out: list[str] = []
    assert verify.run([str(path)], None, False, False, None, out.append) == 0, "\n".join(out)


def test_a_wrong_input_size_is_pytorchs_error():
    """An answer (the cell's check before any op), with PyTorch's type and message."""
    with pytest.raises(RuntimeError) as theirs:
        nn.GRUCell(3, 2).double()(torch.tensor(X, dtype=F64))
    import json
    text = _text("GRUCell", {}, 3, "return m(x, h)").replace("input_size: 2", "input_size: 3")
    text = text.replace(json.dumps(_params(3)["weight_ih"]), json.dumps(_params(3, i=3)["weight_ih"]))
    error = adjoint.loads(text).solve().variants[0].error
    assert (error.type, error.message, error.during) == ("RuntimeError", str(theirs.value), "forward") == \
        ("RuntimeError", "input has inconsistent input_size: got 2 expected 3", "forward")
