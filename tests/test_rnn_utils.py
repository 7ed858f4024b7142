"""nn.utils.rnn.pad_sequence, pack_sequence, unpad_sequence and unpack_sequence against real
torch 2.13: the node graph (names, edges, creation order) behind each result, values, the
leaves' gradients, PyTorch's errors, and what adjoint refuses (exit 2)."""

import numpy as np
import pytest
from conftest import require_torch

torch = require_torch()
from torch.nn.utils import rnn  # noqa: E402

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402
from nn_harness import lit  # noqa: E402
from nodechain import leaf_names  # noqa: E402
from test_recurrent_layers import _graph  # noqa: E402

F64 = torch.float64
A = [[1, -0.5], [0.25, 1], [0.5, 0.5]]
B = [[-1, 0.5]]
C = [[0.75, -0.25], [2, 1]]


def _text(forward: str, grads=(True, True, False)) -> str:
    rg = ["true" if g else "false" for g in grads]
    body = "".join(f"    {line}\n" for line in forward.strip().splitlines())
    return f"""
name: rnn_utils
dtype: float64
inputs:
  a: {{value: {lit(A)}, requires_grad: {rg[0]}}}
  b: {{value: {lit(B)}, requires_grad: {rg[1]}}}
  c: {{value: {lit(C)}, requires_grad: {rg[2]}}}
model:
  inputs: [a, b, c]
  forward: |
{body}loss: "y"
"""


def _leaves(grads=(True, True, False)):
    return {n: torch.tensor(v, dtype=F64, requires_grad=g) for n, v, g in zip("abc", (A, B, C), grads)}


def _cube(t):
    return (t * t * t).sum()


# (forward program, the same in torch over the leaves dict: (result name -> tensor), loss)
PAD = [
    ("p = nn.utils.rnn.pad_sequence([a, b, c])\nreturn (p * p * p).sum()",
     lambda L: {"p": rnn.pad_sequence([L["a"], L["b"], L["c"]])}),
    ("p = nn.utils.rnn.pad_sequence((c, a, b), batch_first=True, padding_value=-1.0)\nreturn (p * p * p).sum()",
     lambda L: {"p": rnn.pad_sequence((L["c"], L["a"], L["b"]), batch_first=True, padding_value=-1.0)}),
    ("p = nn.utils.rnn.pad_sequence([a, b, c], padding_side='left', padding_value=0.5)\nreturn (p * p * p).sum()",
     lambda L: {"p": rnn.pad_sequence([L["a"], L["b"], L["c"]], padding_side="left", padding_value=0.5)}),
    ("p = torch.nn.utils.rnn.pad_sequence([b, a, c], True, 2.0, 'left')\nreturn (p * p * p).sum()",
     lambda L: {"p": rnn.pad_sequence([L["b"], L["a"], L["c"]], True, 2.0, "left")}),
    ("p = nn.utils.rnn.pad_sequence(a * 2, padding_side='left')\nreturn (p * p * p).sum()",
     lambda L: {"p": rnn.pad_sequence(L["a"] * 2, padding_side="left")}),
    ("p = nn.utils.rnn.pad_sequence([c, a])\nreturn (p * p * p).sum()",
     lambda L: {"p": rnn.pad_sequence([L["c"], L["a"]])}),
]


def _check(forward: str, torch_fn, grads=(True, True, False)):
    v = adjoint.loads(_text(forward, grads)).solve(mode="float64").variants[0]
    names = v.run.forward.names
    leaves = _leaves(grads)
    outs = torch_fn(leaves)
    y = sum(_cube(t) for t in outs.values() if isinstance(t, torch.Tensor))
    if y.requires_grad:
        y.backward()
    ours = leaf_names({k: names[k] for k in leaves})
    theirs = leaf_names(leaves)
    for name, t in outs.items():
        mine = names[name]
        assert tuple(mine.shape) == tuple(t.shape), name
        assert mine.strides == t.stride(), name
        assert np.allclose(np.array(mine.value.floats()).reshape(t.shape), t.detach().numpy(), rtol=1e-12), name
        if t.grad_fn is not None:
            assert _graph(mine, ours) == _graph(t, theirs), name
    for name, t in leaves.items():
        if t.grad is None:
            assert v.grads.get(name) is None, name
        else:
            assert np.allclose(np.array(v.grads[name].floats()), t.grad.numpy(), rtol=1e-12), name
    return v


@pytest.mark.parametrize("forward,torch_fn", PAD, ids=[f"pad{i}" for i in range(len(PAD))])
def test_pad_sequence_against_torch(forward, torch_fn):
    _check(forward, torch_fn)


def test_pad_sequence_of_a_first_sequence_without_grad():
    """The output starts without history: the first copy_ of a sequence that requires no grad
    makes no node, the next one CopySlices with no edge to the output's past."""
    _check("p = nn.utils.rnn.pad_sequence([c, b, a])\nreturn (p * p * p).sum()",
           lambda L: {"p": rnn.pad_sequence([L["c"], L["b"], L["a"]])})


def _unpacked(L):
    out, _ = rnn.pad_packed_sequence(rnn.pack_sequence([L["b"], L["a"], L["c"]], enforce_sorted=False),
                                     batch_first=True)
    us = rnn.unpad_sequence(out * 2, torch.tensor([1, 3, 2]), batch_first=True)
    return {"u0": us[0], "u1": us[1], "u2": us[2]}


# (forward, torch): pack_sequence's data, unpack_sequence's and unpad_sequence's pieces
PACK = [
    ("p = nn.utils.rnn.pack_sequence([a, c, b])\nd = p.data\nreturn (d * d * d).sum()",
     lambda L: {"d": rnn.pack_sequence([L["a"], L["c"], L["b"]]).data}),
    ("p = nn.utils.rnn.pack_sequence([b, a, c], enforce_sorted=False)\nd = p.data\nreturn (d * d * d).sum()",
     lambda L: {"d": rnn.pack_sequence([L["b"], L["a"], L["c"]], enforce_sorted=False).data}),
    ("p = nn.utils.rnn.pack_sequence(a * 2)\nd = p.data\nreturn (d * d * d).sum()",
     lambda L: {"d": rnn.pack_sequence(L["a"] * 2).data}),
    ("us = nn.utils.rnn.unpack_sequence(nn.utils.rnn.pack_sequence([b, a, c], enforce_sorted=False))\n"
     "u0 = us[0]\nu1 = us[1]\nu2 = us[2]\nreturn (u0 * u0 * u0).sum() + (u1 * u1 * u1).sum() + (u2 * u2 * u2).sum()",
     lambda L: dict(zip(("u0", "u1", "u2"), rnn.unpack_sequence(
         rnn.pack_sequence([L["b"], L["a"], L["c"]], enforce_sorted=False))))),
    ("o, n = nn.utils.rnn.pad_packed_sequence(nn.utils.rnn.pack_sequence([b, a, c], enforce_sorted=False), "
     "batch_first=True)\nus = nn.utils.rnn.unpad_sequence(o * 2, n, batch_first=True)\n"
     "u0 = us[0]\nu1 = us[1]\nu2 = us[2]\nreturn (u0 * u0 * u0).sum() + (u1 * u1 * u1).sum() + (u2 * u2 * u2).sum()",
     _unpacked),
]


@pytest.mark.parametrize("forward,torch_fn", PACK, ids=[f"pack{i}" for i in range(len(PACK))])
def test_pack_and_unpack_against_torch(forward, torch_fn):
    _check(forward, torch_fn)


def _unpad_time_first(L):
    o, n = rnn.pad_packed_sequence(rnn.pack_sequence([L["b"], L["a"], L["c"]], enforce_sorted=False))
    us = rnn.unpad_sequence(o, n)
    return {"o": o, "u0": us[0], "u1": us[1], "u2": us[2]}


def _unpad_padded(L):
    p = rnn.pad_sequence([L["a"], L["c"], L["b"]]) * 2
    n = rnn.pad_packed_sequence(rnn.pack_sequence([L["a"], L["c"], L["b"]]))[1]
    us = rnn.unpad_sequence(p, n, False)
    return {"p": p, "q": p * p, "u0": us[0], "u2": us[2]}


def _unpad_no_grad(L):
    n = rnn.pad_packed_sequence(rnn.pack_sequence([L["a"], L["c"]]))[1]
    c = L["c"]
    us = rnn.unpad_sequence((c * 1).unsqueeze(2) * 1, n)
    rnn.unpad_sequence(c, n)
    return {"c": c, "u0": us[0], "u1": us[1]}


# (forward, torch): unpad_sequence(batch_first=False): transpose_ of the padded tensor itself (TransposeBackward1)
UNPAD = [
    ("o, n = nn.utils.rnn.pad_packed_sequence(nn.utils.rnn.pack_sequence([b, a, c], enforce_sorted=False))\n"
     "us = nn.utils.rnn.unpad_sequence(o, n)\nu0 = us[0]\nu1 = us[1]\nu2 = us[2]\n"
     "return (o * o * o).sum() + (u0 * u0 * u0).sum() + (u1 * u1 * u1).sum() + (u2 * u2 * u2).sum()",
     _unpad_time_first),
    ("p = nn.utils.rnn.pad_sequence([a, c, b]) * 2\n"
     "n = nn.utils.rnn.pad_packed_sequence(nn.utils.rnn.pack_sequence([a, c, b]))[1]\n"
     "us = nn.utils.rnn.unpad_sequence(p, n, False)\nq = p * p\nu0 = us[0]\nu2 = us[2]\n"
     "return (p * p * p).sum() + (q * q * q).sum() + (u0 * u0 * u0).sum() + (u2 * u2 * u2).sum()",
     _unpad_padded),
    ("n = nn.utils.rnn.pad_packed_sequence(nn.utils.rnn.pack_sequence([a, c]))[1]\n"
     "us = nn.utils.rnn.unpad_sequence((c * 1).unsqueeze(2) * 1, n)\nnn.utils.rnn.unpad_sequence(c, n)\n"
     "u0 = us[0]\nu1 = us[1]\nreturn (c * c * c).sum() + (u0 * u0 * u0).sum() + (u1 * u1 * u1).sum()",
     _unpad_no_grad),
]


@pytest.mark.parametrize("forward,torch_fn", UNPAD, ids=[f"unpad{i}" for i in range(len(UNPAD))])
def test_unpad_sequence_time_first_against_torch(forward, torch_fn):
    """The padded tensor takes (B, T, *) sizes and strides in place; its grad_fn is TransposeBackward1."""
    _check(forward, torch_fn)


def test_unpad_sequence_time_first_moves_the_version():
    """transpose_ bumps the padded tensor's version: a node that saved it refuses its backward."""
    forward = ("p = nn.utils.rnn.pad_sequence([a, b]) * 1\nq = p * p\nv = p._version\n"
               "us = nn.utils.rnn.unpad_sequence(p, nn.utils.rnn.pad_packed_sequence(nn.utils.rnn.pack_sequence("
               "[a, b]))[1])\nw = p._version\nreturn q.sum() * (w - v)")
    v = adjoint.loads(_text(forward)).solve(mode="float64").variants[0]
    L = _leaves()
    p = rnn.pad_sequence([L["a"], L["b"]]) * 1
    q = p * p
    before = p._version
    rnn.unpad_sequence(p, rnn.pad_packed_sequence(rnn.pack_sequence([L["a"], L["b"]]))[1])
    assert (before, p._version) == (0, 1)
    with pytest.raises(RuntimeError) as theirs:
        (q.sum() * (p._version - before)).backward()
    assert v.error is not None and (v.error.type, v.error.message) == ("RuntimeError", str(theirs.value))


def _error(forward: str):
    v = adjoint.loads(_text(forward + "\nreturn a.sum()")).solve(mode="float64").variants[0]
    assert v.error is not None
    return v.error.type, v.error.message


@pytest.mark.parametrize("call,torch_call", [
    ("nn.utils.rnn.pad_sequence([])", lambda L: rnn.pad_sequence([])),
    ("nn.utils.rnn.pad_sequence([a, b], padding_side='middle')",
     lambda L: rnn.pad_sequence([L["a"], L["b"]], padding_side="middle")),
    ("nn.utils.rnn.pad_sequence(a.sum())", lambda L: rnn.pad_sequence(L["a"].sum())),
    ("nn.utils.rnn.pack_sequence([b, a])", lambda L: rnn.pack_sequence([L["b"], L["a"]])),
    ("nn.utils.rnn.unpad_sequence(a.unsqueeze(1), nn.utils.rnn.pad_packed_sequence(nn.utils.rnn.pack_sequence([a]))[1])",
     lambda L: rnn.unpad_sequence(L["a"].unsqueeze(1), rnn.pad_packed_sequence(rnn.pack_sequence([L["a"]]))[1])),
    ("nn.utils.rnn.pack_sequence([])", lambda L: rnn.pack_sequence([])),
    ("nn.utils.rnn.unpad_sequence(a, nn.utils.rnn.pad_packed_sequence(nn.utils.rnn.pack_sequence([a]))[1])",
     lambda L: rnn.unpad_sequence(L["a"], rnn.pad_packed_sequence(rnn.pack_sequence([L["a"]]))[1])),
    ("nn.utils.rnn.unpad_sequence(a[0] * 1, nn.utils.rnn.pad_packed_sequence(nn.utils.rnn.pack_sequence([a]))[1])",
     lambda L: rnn.unpad_sequence(L["a"][0] * 1, rnn.pad_packed_sequence(rnn.pack_sequence([L["a"]]))[1])),
    ("nn.utils.rnn.unpad_sequence(a[0], nn.utils.rnn.pad_packed_sequence(nn.utils.rnn.pack_sequence([a]))[1], "
     "batch_first=True)", lambda L: rnn.unpad_sequence(L["a"][0], rnn.pad_packed_sequence(
         rnn.pack_sequence([L["a"]]))[1], batch_first=True)),
    ("nn.utils.rnn.unpad_sequence(a.unsqueeze(0), [3], batch_first=True)",
     lambda L: rnn.unpad_sequence(L["a"].unsqueeze(0), [3], batch_first=True)),
    ("nn.utils.rnn.unpad_sequence(a.unsqueeze(0), nn.utils.rnn.pad_packed_sequence("
     "nn.utils.rnn.pack_sequence([a, c]))[1], batch_first=True)",
     lambda L: rnn.unpad_sequence(L["a"].unsqueeze(0), rnn.pad_packed_sequence(
         rnn.pack_sequence([L["a"], L["c"]]))[1], batch_first=True)),
    ("nn.utils.rnn.unpad_sequence(a.unsqueeze(1).expand(3, 3, 2), nn.utils.rnn.pad_packed_sequence("
     "nn.utils.rnn.pack_sequence([a, c]))[1], batch_first=True)",
     lambda L: rnn.unpad_sequence(L["a"].unsqueeze(1).expand(3, 3, 2), rnn.pad_packed_sequence(
         rnn.pack_sequence([L["a"], L["c"]]))[1], batch_first=True)),
])
def test_pytorchs_errors_are_the_answer(call, torch_call):
    with pytest.raises(Exception) as theirs:
        torch_call(_leaves())
    assert _error(f"p = {call}") == (type(theirs.value).__name__, str(theirs.value))


@pytest.mark.parametrize("call", [
    "p = pad_sequence([a, b])",
    "p = nn.utils.rnn.pad_sequence([a, 2])",
    "p = nn.utils.rnn.pad_sequence([a, b], padding_value='x')",
    "p = nn.utils.rnn.pack_sequence([a.sum(), b.sum()])",
    "p = nn.utils.rnn.unpad_sequence((a * 2).unsqueeze(1), nn.utils.rnn.pad_packed_sequence("
    "nn.utils.rnn.pack_sequence([a]))[1])",
    "p = a * 1\nv = p[0]\nus = nn.utils.rnn.unpad_sequence(p, nn.utils.rnn.pad_packed_sequence("
    "nn.utils.rnn.pack_sequence([a]))[1])",
    "p = nn.utils.rnn.unpack_sequence(a)",
    "p = nn.utils.rnn.invert_permutation(a)",
])
def test_what_is_not_modelled_is_refused(call):
    with pytest.raises(ProblemError):
        adjoint.loads(_text(f"{call}\nreturn a.sum()")).solve(mode="float64")


def test_the_padded_outputs_version_is_pytorchs():
    """ATen's at::full inside pad_sequence and _pad_packed_sequence fills through ADInplaceOrView:
    the padded output starts at _version 1, then one per copy_ (torch.full from Python: 0)."""
    text = _text("p = nn.utils.rnn.pad_sequence([a, b, c])\nv = p._version\n"
                 "o, n = nn.utils.rnn.pad_packed_sequence(nn.utils.rnn.pack_sequence([a, c, b]))\nw = o._version\n"
                 "return p.sum() * v + o.sum() * w")
    v = adjoint.loads(text).solve(mode="float64").variants[0]
    L = _leaves()
    p = rnn.pad_sequence([L["a"], L["b"], L["c"]])
    o, _ = rnn.pad_packed_sequence(rnn.pack_sequence([L["a"], L["c"], L["b"]]))
    assert (p._version, o._version) == (4, 4)
    y = p.sum() * p._version + o.sum() * o._version
    assert v.to_json()["loss"]["value"] == pytest.approx(y.item(), rel=1e-12)
