"""nn.utils.rnn.pack_padded_sequence / pad_packed_sequence feeding nn.RNN, nn.GRU and nn.LSTM,
against real torch 2.13: the whole node graph (names, edges, creation order) behind the padded
output and the final states, for enforce_sorted True and False, batch_first, a given state and two
layers; values and grads; a full backward hook on the module (grad_input ``(None,)``: the
PackedSequence is no tensor to BackwardHook), read from a torch run; PyTorch's errors; and what
adjoint refuses (exit 2)."""

import warnings

import numpy as np
import pytest
from conftest import require_torch

torch = require_torch()
from torch import nn  # noqa: E402
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence  # noqa: E402

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402
from nodechain import leaf_names  # noqa: E402
from test_recurrent_layers import _graph, _vals  # noqa: E402

F64 = torch.float64

# (type, module args, input shape, lengths, pack keywords, pad keywords, given state)
CASES = [
    ("RNN", {}, (3, 3, 2), [3, 2, 1], {}, {}, False),
    ("RNN", {"nonlinearity": "relu", "num_layers": 2}, (3, 3, 2), [1, 3, 2], {"enforce_sorted": False},
     {"total_length": 4}, True),
    ("GRU", {"batch_first": True}, (3, 3, 2), [2, 3, 3], {"enforce_sorted": False, "batch_first": True},
     {"batch_first": True, "padding_value": -1.0}, False),
    ("GRU", {}, (2, 2, 2), [2, 2], {}, {}, True),
    ("LSTM", {}, (3, 3, 2), [3, 1, 2], {"enforce_sorted": False}, {}, True),
    ("LSTM", {"num_layers": 2, "batch_first": True}, (2, 3, 2), [3, 2], {"batch_first": True},
     {"batch_first": True, "total_length": 3}, False),
    # bidirectional: ATen's PackedBidirectionalLayer (PackedLayer, then ReversedPackedLayer)
    ("RNN", {"bidirectional": True}, (3, 3, 2), [3, 2, 1], {}, {}, False),
    ("RNN", {"bidirectional": True}, (2, 2, 2), [2, 2], {}, {}, True),   # the reverse state narrowed, all rows
    ("RNN", {"bidirectional": True, "num_layers": 2, "nonlinearity": "relu"}, (3, 3, 2), [1, 3, 2],
     {"enforce_sorted": False}, {}, True),
    ("GRU", {"bidirectional": True, "batch_first": True}, (3, 4, 2), [2, 4, 4], {"enforce_sorted": False,
     "batch_first": True}, {"batch_first": True}, True),
    ("LSTM", {"bidirectional": True}, (4, 3, 2), [4, 2, 1], {}, {"total_length": 5}, True),
    ("LSTM", {"bidirectional": True, "num_layers": 2, "batch_first": True}, (3, 3, 2), [1, 3, 3],
     {"batch_first": True, "enforce_sorted": False}, {"batch_first": True}, False),
]


def _kw(d: dict) -> str:
    return "".join(f", {k}={v!r}" for k, v in d.items())


def _text(kind, args, xs, lengths, pack, pad, state, hooks: str = "") -> str:
    lstm = kind == "LSTM"
    layers = args.get("num_layers", 1) * (2 if args.get("bidirectional") else 1)
    batch = xs[0] if pack.get("batch_first") else xs[1]
    hs = (layers, batch, 3)
    margs = "".join(f", {k}: {str(v).lower() if isinstance(v, bool) else v}" for k, v in args.items())
    states = f"  h: {{value: {_vals(hs, 1)}, requires_grad: true}}\n" if state else ""
    states += f"  c: {{value: {_vals(hs, 2)}, requires_grad: true}}\n" if state and lstm else ""
    given = (", (h, c)" if lstm else ", h") if state else ""
    outs = "out, (hn, cn)" if lstm else "out, hn"
    extra = " + (cn * cn).sum()" if lstm else ""
    return f"""
name: packed
dtype: float64
init: {{seed: 3}}
inputs:
  x: {{value: {_vals(xs, 0)}, requires_grad: true}}
{states}model:
  children:
    m: {{type: {kind}, args: {{input_size: 2, hidden_size: 3{margs}}}}}
  inputs: [x{', h' if state else ''}{', c' if state and lstm else ''}]
  forward: |
    p = nn.utils.rnn.pack_padded_sequence(x, {lengths}{_kw(pack)})
    {outs} = m(p{given})
    o, lengths = nn.utils.rnn.pad_packed_sequence(out{_kw(pad)})
    return (o * o).sum() + (hn * 3).sum(){extra}
loss: "y"
{hooks}"""


def _torch_run(kind, args, xs, lengths, pack, pad, state, names):
    lstm = kind == "LSTM"
    m = getattr(nn, kind)(2, 3, **args).double()
    with torch.no_grad():
        for name, p in m.named_parameters():
            p.copy_(torch.tensor(np.array(names[f"m.{name}"].value.floats()), dtype=F64))
    x = torch.tensor(_vals(xs, 0), dtype=F64, requires_grad=True)
    leaves = {"x": x}
    layers = args.get("num_layers", 1) * (2 if args.get("bidirectional") else 1)
    batch = xs[0] if pack.get("batch_first") else xs[1]
    hx = None
    if state:
        leaves["h"] = torch.tensor(_vals((layers, batch, 3), 1), dtype=F64, requires_grad=True)
        hx = leaves["h"]
        if lstm:
            leaves["c"] = torch.tensor(_vals((layers, batch, 3), 2), dtype=F64, requires_grad=True)
            hx = (leaves["h"], leaves["c"])
    leaves.update({f"m.{k}": p for k, p in m.named_parameters()})
    return m, leaves, hx


def _loss(kind, o, hidden):
    """The files' loss in torch: ``(o * o).sum() + (hn * 3).sum()`` (LSTM: ``+ (cn * cn).sum()``)."""
    if kind == "LSTM":
        return (o * o).sum() + (hidden[0] * 3).sum() + (hidden[1] * hidden[1]).sum()
    return (o * o).sum() + (hidden * 3).sum()


@pytest.mark.parametrize("kind,args,xs,lengths,pack,pad,state", CASES,
                         ids=[f"{c[0]}{'-bi' if c[1].get('bidirectional') else ''}-{c[3]}-{'-'.join(c[4])}-{'-'.join(c[5])}"
                              for c in CASES])
def test_graph_values_and_grads_against_torch(kind, args, xs, lengths, pack, pad, state):
    v = adjoint.loads(_text(kind, args, xs, lengths, pack, pad, state)).solve(mode="float64").variants[0]
    names = v.run.forward.names
    m, leaves, hx = _torch_run(kind, args, xs, lengths, pack, pad, state, names)
    packed = pack_padded_sequence(leaves["x"], lengths, **pack)
    out, hidden = m(packed, hx) if hx is not None else m(packed)
    o, lens = pad_packed_sequence(out, **pad)
    y = _loss(kind, o, hidden)
    y.backward()
    assert names["lengths"].value.floats() == lens.tolist()
    assert tuple(names["o"].shape) == tuple(o.shape)
    assert names["o"].strides == o.stride()
    ours = {k: names[k] for k in leaves}
    if _graph(names["model"], leaf_names(ours)) != _graph(y, leaf_names(leaves)):
        pytest.fail("the node graphs differ")
    assert np.allclose(np.array(names["o"].value.floats()), o.detach().numpy(), rtol=1e-12, atol=1e-14)
    finals = {"hn": hidden[0], "cn": hidden[1]} if kind == "LSTM" else {"hn": hidden}
    for name, t in finals.items():   # h_n's rows: layer by layer, forward direction before reverse
        assert tuple(names[name].shape) == tuple(t.shape)
        assert np.allclose(np.array(names[name].value.floats()), t.detach().numpy(), rtol=1e-12, atol=1e-14), name
    for name, t in leaves.items():
        assert np.allclose(np.array(v.grads[name].floats()), t.grad.numpy(), rtol=1e-10, atol=1e-13), name


def test_packed_sequence_fields_are_pytorchs():
    text = _text(*CASES[1]).replace("    o, lengths = nn.utils.rnn.pad_packed_sequence(out, total_length=4)\n",
                                    "    o, lengths = nn.utils.rnn.pad_packed_sequence(out, total_length=4)\n"
                                    "    bs = p.batch_sizes\n    si = p.sorted_indices\n    ui = out.unsorted_indices\n"
                                    "    d = out.data\n")
    names = adjoint.loads(text).solve(mode="float64").variants[0].run.forward.names
    x = torch.zeros(3, 3, 2, dtype=F64)
    theirs = pack_padded_sequence(x, [1, 3, 2], enforce_sorted=False)
    assert names["bs"].value.floats() == theirs.batch_sizes.tolist()
    assert names["si"].value.floats() == theirs.sorted_indices.tolist()
    assert names["ui"].value.floats() == theirs.unsorted_indices.tolist()
    assert names["d"].grad_fn.name == "CatBackward0" and tuple(names["d"].shape) == (6, 3)


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
def test_full_backward_hook_arguments_against_torch(kind, bidirectional):
    """BackwardHook sees the module's args ``(packed,)`` or ``(packed, h_0)`` and output ``(packed,
    h_n)``: the PackedSequence is no tensor, so its grad_input slot is None (without h_0 the hook
    fires at h_n's BackwardHookFunctionBackward, with PyTorch's warning); an LSTM's ``(packed, (h_n, c_n))`` holds no top-level tensor, so
    its hook never fires."""
    case = next(c for c in CASES if c[0] == kind and c[4].get("enforce_sorted") is False
                and bool(c[1].get("bidirectional")) == bidirectional)
    hooks = "variants:\n  full: {hooks: [{module: m, kind: full_backward}]}\n"
    v = adjoint.loads(_text(*case, hooks=hooks)).solve(mode="float64").variants[0]
    names = v.run.forward.names
    m, leaves, hx = _torch_run(*case[:7], names)
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append((gi, go)))
    kind, args, xs, lengths, pack, pad, state = case
    out, hidden = m(pack_padded_sequence(leaves["x"], lengths, **pack), *([hx] if hx is not None else []))
    o, _ = pad_packed_sequence(out, **pad)
    with warnings.catch_warnings():   # RNN, GRU: "Full backward hook is firing when ..." (the answer's too)
        warnings.simplefilter("ignore")
        _loss(kind, o, hidden).backward()
    assert len(v.hook_calls) == len(seen) == (0 if kind == "LSTM" else 1)
    for ours, (gi, go) in zip(v.hook_calls, seen):
        assert ours.node == "BackwardHookFunctionBackward"
        assert gi[0] is None and go[0] is None   # the PackedSequence's slots
        for mine, theirs in ((ours.args["grad_input"], gi), (ours.args["grad_output"], go)):
            assert len(mine) == len(theirs)
            for a, b in zip(mine, theirs):
                assert (a is None) == (b is None)
                if b is not None:
                    assert np.allclose(np.array(a.floats()), b.numpy(), rtol=1e-12, atol=1e-14)


_X = "[[[1, 2], [3, 4]], [[5, 6], [7, 8]], [[1, 1], [2, 2]]]"


def _pack_text(call: str, model_type: str = "") -> str:
    child = model_type or "{type: RNN, args: {input_size: 2, hidden_size: 2}}"
    return f"""
name: err
dtype: float64
init: {{seed: 0}}
inputs:
  x: {{value: {_X}, requires_grad: true}}
  L: {{value: [[3, 2]], dtype: int64}}
model:
  children:
    m: {child}
  inputs: [x, L]
  forward: |
    {call}
    return x.sum()
loss: "y"
"""


@pytest.mark.parametrize("call", [
    "p = nn.utils.rnn.pack_padded_sequence(x, [2, 3])",
    "p = nn.utils.rnn.pack_padded_sequence(x, [3, 0])",
    "p = nn.utils.rnn.pack_padded_sequence(x, [3, 2, 1])",
    "p = nn.utils.rnn.pack_padded_sequence(x, L)",
    "o, n = nn.utils.rnn.pad_packed_sequence(nn.utils.rnn.pack_padded_sequence(x, [3, 2]), total_length=2)",
    "o, h = m(nn.utils.rnn.pack_padded_sequence(x, [3, 2]), torch.zeros(1, 3, 2, dtype=torch.float64))",
])
def test_pytorchs_errors_are_the_answer(call):
    x = torch.tensor(eval(_X), dtype=F64)   # the file's own value, a literal
    scope = {"x": x, "L": torch.tensor([[3, 2]]), "torch": torch, "m": nn.RNN(2, 2).double(),
             "nn": type("nn", (), {"utils": type("u", (), {"rnn": torch.nn.utils.rnn})})}
    with pytest.raises(Exception) as theirs:
        exec(call, scope)
    v = adjoint.loads(_pack_text(call)).solve(mode="float64").variants[0]
    assert v.error is not None
    assert (v.error.type, v.error.message) == (type(theirs.value).__name__, str(theirs.value))


@pytest.mark.parametrize("call,model_type", [
    ("p = nn.utils.rnn.invert_permutation(L[0])", ""),
    ("p = pack_padded_sequence(x, [3, 2])", ""),
    ("o = m(nn.utils.rnn.pack_padded_sequence(x, [3, 2]))", "{type: Linear, args: {in_features: 2, out_features: 2}}"),
    ("n = nn.utils.rnn.pack_padded_sequence(x, [3, 2]).to(torch.float64)", ""),
    ("p = nn.utils.rnn.pack_padded_sequence(x, L, enforce_sorted=False)", ""),
    ("p = nn.utils.rnn.pack_padded_sequence(x, [4, 2])", ""),
])
def test_what_is_not_modelled_is_refused(call, model_type):
    with pytest.raises(ProblemError):
        adjoint.loads(_pack_text(call, model_type)).solve(mode="float64")


def test_a_custom_module_handed_the_packed_sequence_verifies(tmp_path):
    """A custom module taking the PackedSequence as its input: its full backward hook's
    grad_input is ``(None,)`` (BackwardHook wraps no tensor of the args), its forward_pre hook
    sees the PackedSequence; checked by ``adjoint verify`` against torch."""
    from adjoint.torchside import verify
    path = tmp_path / "packed.yaml"
    path.write_text("""
name: packed_custom
dtype: float64
inputs:
  x: {value: [[[1, -0.5], [0.25, 1]], [[-1, 0.5], [0.75, -0.25]], [[0.5, 0.25], [0, 0]]], requires_grad: true}
model:
  inputs: [x]
  children:
    enc:
      inputs: [p]
      children:
        rnn: {type: GRU, args: {input_size: 2, hidden_size: 2}}
      forward: |
        out, h = rnn(p)
        return h
  forward: |
    p = nn.utils.rnn.pack_padded_sequence(x, [3, 2])
    h = enc(p)
    return h.sum()
loss: "y"
init: {seed: 0}
variants:
  hooked: {hooks: [{module: enc, kind: full_backward}, {module: enc, kind: forward_pre}]}
""")
    out: list[str] = []
    assert verify.run([str(path)], None, False, False, None, out.append) == 0, "\n".join(out)
    v = adjoint.loads(path.read_text()).solve(mode="float64").variants[0]
    full = [h for h in v.hook_calls if h.kind == "full_backward"]
    assert len(full) == 1 and full[0].args["grad_input"] == (None,)


def test_a_bidirectional_layers_state_check_is_pytorchs():
    """A bidirectional GRU handed a state of one direction: check_forward_args's RuntimeError,
    the expected size counting both directions."""
    m = nn.GRU(2, 2, bidirectional=True).double()
    x = torch.tensor(eval(_X), dtype=F64)
    with pytest.raises(RuntimeError) as theirs:
        m(pack_padded_sequence(x, [3, 2]), torch.zeros(1, 2, 2, dtype=F64))
    text = _pack_text("o, h = m(nn.utils.rnn.pack_padded_sequence(x, [3, 2]), torch.zeros(1, 2, 2, dtype=torch.float64))",
                      "{type: GRU, args: {input_size: 2, hidden_size: 2, bidirectional: true}}")
    v = adjoint.loads(text).solve(mode="float64").variants[0]
    assert (v.error.type, v.error.message) == ("RuntimeError", str(theirs.value))
