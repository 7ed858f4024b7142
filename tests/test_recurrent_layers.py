"""nn.RNN (tanh, relu), nn.LSTM, nn.GRU against real torch: the node chain PyTorch 2.13's CPU path
builds (ATen's RNN.cpp: the input projection over all steps, unbind, per-step cells, stack, cat for
two directions, the state's unbind and stack, batch_first's transposes, the module's unsqueeze and
squeeze for unbatched input), compared node for node with creation order over everything the
outputs reach; values and grads (the float64 answer mode); PyTorch's errors; and exact runs
through ``adjoint verify`` with module hooks on an LSTM returning ``(out, (h, c))``."""

import json

import numpy as np
import pytest
from conftest import require_torch

torch = require_torch()
from torch import nn  # noqa: E402

import adjoint  # noqa: E402
from adjoint.torchside import verify  # noqa: E402
from nodechain import leaf_names  # noqa: E402

F64 = torch.float64


def _vals(shape, k):
    n = int(np.prod(shape))
    return (np.array([((i * 5 + k) % 9 - 4) / 4 for i in range(n)]).reshape(shape)).tolist()


# (type, args, input shape, state shape or None, forward, torch forward)
_SUM = "(out * out).sum() + (hn * 3).sum()"
CASES = [
    ("RNN", {}, (3, 1, 2), None, "out, hn = m(x)", lambda m, x, h, c: m(x)),
    ("RNN", {"nonlinearity": "relu", "num_layers": 2, "bidirectional": True}, (2, 1, 2), (4, 1, 3),
     "out, hn = m(x, h)", lambda m, x, h, c: m(x, h)),
    ("RNN", {"batch_first": True, "bias": False}, (2, 2, 2), (1, 2, 3), "out, hn = m(x, h)",
     lambda m, x, h, c: m(x, h)),
    ("RNN", {}, (2, 2), (1, 3), "out, hn = m(x, hx=h)", lambda m, x, h, c: m(x, hx=h)),
    ("LSTM", {}, (2, 1, 2), None, "out, (h1, c1) = m(x)\n    hn = h1 + c1", lambda m, x, h, c: _hc(m(x))),
    ("LSTM", {"num_layers": 2, "bidirectional": True}, (2, 1, 2), (4, 1, 3),
     "out, (h1, c1) = m(x, (h, c))\n    hn = h1 + c1", lambda m, x, h, c: _hc(m(x, (h, c)))),
    ("LSTM", {"batch_first": True, "bias": False}, (2, 2, 2), None, "out, (h1, c1) = m(x)\n    hn = h1 * c1",
     lambda m, x, h, c: _hc(m(x), mul=True)),
    ("LSTM", {}, (2, 2), (1, 3), "out, (h1, c1) = m(x, (h, c))\n    hn = h1 + c1",
     lambda m, x, h, c: _hc(m(x, (h, c)))),
    ("LSTM", {"proj_size": 2, "num_layers": 2, "bidirectional": True, "batch_first": True}, (1, 2, 2), None,
     "out, (h1, c1) = m(x)\n    hn = h1.sum() + c1.sum()", lambda m, x, h, c: _hc(m(x), total=True)),
    ("GRU", {}, (3, 1, 2), (1, 1, 3), "out, hn = m(x, h)", lambda m, x, h, c: m(x, h)),
    ("GRU", {"bidirectional": True, "batch_first": True}, (1, 2, 2), None, "out, hn = m(x)",
     lambda m, x, h, c: m(x)),
    ("GRU", {"num_layers": 2, "bias": False, "dropout": 0.5}, (2, 2), None, "out, hn = m(x)",
     lambda m, x, h, c: m(x)),
]


def _graph(root, names: dict) -> list:
    """The graph behind ``root`` flat (nodechain's tree form is exponential in a deep LSTM): each
    node in creation order as (name, [edge: the next node's rank and input_nr, a leaf's name, or
    None])."""
    from nodechain import _children, _name, _seq
    nodes, stack = {}, [root.grad_fn]
    while stack:
        n = stack.pop()
        if n is None or id(n) in nodes or _name(n) == "AccumulateGrad":
            continue
        nodes[id(n)] = n
        stack.extend(_children(n))
    order = sorted(nodes.values(), key=_seq)
    rank = {id(n): i for i, n in enumerate(order)}

    def nrs(n):
        if callable(getattr(n, "name", None)):   # torch
            return [nr for _, nr in n.next_functions]
        return [e.input_nr if e is not None else 0 for e in n.edges]

    def edge(child, nr):
        if child is None:
            return None
        if _name(child) == "AccumulateGrad":
            return names.get(id(child.variable), "?")
        return rank[id(child)], nr
    return [(_name(n), [edge(ch, nr) for ch, nr in zip(_children(n), nrs(n))]) for n in order]


def _hc(res, mul=False, total=False):
    out, (h, c) = res
    return out, (h.sum() + c.sum() if total else h * c if mul else h + c)


def _text(kind, args, xs, hs, forward, training=True):
    arg_text = ", ".join(f"{k}: {json.dumps(v)}" for k, v in args.items())
    state = ""
    if hs is not None:
        state = f"  h: {{value: {_vals(hs, 1)}, requires_grad: true}}\n  c: {{value: {_vals(hs, 2)}, requires_grad: true}}\n"
    return f"""
name: rnn
dtype: float64
init: {{seed: 3}}
inputs:
  x: {{value: {_vals(xs, 0)}, requires_grad: true}}
{state}model:
  children:
    m: {{type: {kind}, args: {{input_size: 2, hidden_size: 3{', ' + arg_text if arg_text else ''}}}{'' if training else ', training: false'}}}
  inputs: [x{', h, c' if hs is not None else ''}]
  forward: |
    {forward}
    return {_SUM}
loss: "y"
"""


@pytest.mark.parametrize("kind,args,xs,hs,forward,fn", CASES,
                         ids=[f"{c[0]}-{'-'.join(f'{k}={v}' for k, v in c[1].items())}-{len(c[2])}d" for c in CASES])
def test_layer_chain_values_and_grads_against_torch(kind, args, xs, hs, forward, fn):
    training = "dropout" not in args
    v = adjoint.loads(_text(kind, args, xs, hs, forward, training)).solve(mode="float64").variants[0]
    names = v.run.forward.names
    m = getattr(nn, kind)(2, 3, **args).double()
    if not training:
        m.eval()
    with torch.no_grad():
        for name, p in m.named_parameters():
            p.copy_(torch.tensor(np.array(names[f"m.{name}"].value.floats()), dtype=F64))
    x = torch.tensor(_vals(xs, 0), dtype=F64, requires_grad=True)
    h = c = None
    theirs = {"x": x}
    ours = {"x": names["x"]}
    if hs is not None:
        h = torch.tensor(_vals(hs, 1), dtype=F64, requires_grad=True)
        c = torch.tensor(_vals(hs, 2), dtype=F64, requires_grad=True)
        theirs.update(h=h, c=c)
        ours.update(h=names["h"], c=names["c"])
    theirs.update({f"m.{k}": p for k, p in m.named_parameters()})
    ours.update({f"m.{k}": names[f"m.{k}"] for k, _ in m.named_parameters()})
    out, hn = fn(m, x, h, c)
    y = (out * out).sum() + (hn * 3).sum()
    y.backward()
    assert names["m[0]"].strides == out.stride()
    if _graph(names["model"], leaf_names(ours)) != _graph(y, leaf_names(theirs)):   # (pytest's diff of two
        pytest.fail("the node chains differ")                                       # graphs takes minutes)
    assert np.allclose(np.array(names["model"].value.floats()), y.detach().numpy(), rtol=1e-12, atol=1e-14)
    for name, t in theirs.items():
        if t.grad is None:   # c of an RNN or GRU: not used
            assert v.grads.get(name) is None, name
            continue
        assert np.allclose(np.array(v.grads[name].floats()), t.grad.numpy(), rtol=1e-10, atol=1e-13), name


def test_parameter_names_and_shapes_are_pytorchs():
    from adjoint.format import module_signatures as sig
    for kind, args in (("LSTM", {"num_layers": 2, "bidirectional": True}), ("GRU", {"bias": False}),
                       ("RNN", {"num_layers": 3, "nonlinearity": "relu"})):
        t = sig.lookup(kind)
        ours = [(p.name, p.shape) for p in t.params(sig.resolved_args(t, {"input_size": 2, "hidden_size": 3, **args}))]
        theirs = [(n, tuple(p.shape)) for n, p in getattr(nn, kind)(2, 3, **args).named_parameters()]
        assert ours == theirs


def _verify(tmp_path, text) -> None:
    path = tmp_path / "rnn.yaml"
    path.write_text(text)
    out: list[str] = []
    assert verify.run([str(path)], None, False, False, None, out.append) == 0, "\n".join(out)


def test_lstm_module_hooks_verify_exactly(tmp_path):
    """Full backward hooks on a module returning ``(out, (h, c))``: BackwardHook wraps only the
    top-level tensors (``out``), the nested tuple is a None slot of grad_output; forward hooks
    see the nested output; the legacy hook sits on ``out``'s grad_fn (and PyTorch warns)."""
    text = _text("LSTM", {"num_layers": 2}, (2, 1, 2), (2, 1, 3),
                 "out, (h1, c1) = m(x, (h, c))\n    hn = h1 + c1") + """variants:
  full: {hooks: [{module: m, kind: full_backward}, {module: m, kind: forward}, {module: m, kind: full_backward_pre}]}
  legacy: {hooks: [{module: m, kind: backward}]}
"""
    _verify(tmp_path, text)


def test_gru_batch_first_relu_rnn_verify_exactly(tmp_path):
    _verify(tmp_path, _text("GRU", {"batch_first": True, "bidirectional": True}, (1, 2, 2), (2, 1, 3),
                            "out, hn = m(x, h)") + """variants:
  full: {hooks: [{module: m, kind: full_backward}]}
""")


@pytest.mark.parametrize("kind,xs,hs,call", [
    ("LSTM", (2, 1, 4), None, "m(x)"),                  # input_size
    ("GRU", (2, 1, 2), (1, 2, 3), "m(x, h)"),           # hidden size
    ("RNN", (2, 2), (1, 1, 3), "m(x, h)"),              # unbatched input, 3-D state
    ("LSTM", (2, 1, 2), (1, 1, 2), "m(x, (h, c))"),     # hidden[0] size
    ("RNN", (2,), None, "m(x)"),                        # 1-D input
    ("LSTM", (2, 1, 2), (1, 1, 3), "mp(x, (h, c))"),    # proj_size: hidden[0] size (1, 1, 2)
])
def test_pytorchs_errors_are_the_answer(kind, xs, hs, call):
    x = torch.tensor(_vals(xs, 0), dtype=F64)
    h = torch.tensor(_vals(hs, 1), dtype=F64) if hs else None
    c = torch.tensor(_vals(hs, 2), dtype=F64) if hs else None
    m = getattr(nn, kind)(2, 3).double()
    mp = nn.LSTM(2, 3, proj_size=2).double()
    with pytest.raises(Exception) as theirs:
        eval(call, {"m": m, "mp": mp, "x": x, "h": h, "c": c})
    args = {"proj_size": 2} if call.startswith("mp") else {}
    call = call.replace("mp(", "m(")
    text = _text(kind, args, xs, hs, f"out, hn = {call}" if kind != "LSTM" else f"out, (hn, cn) = {call}")
    answer = adjoint.loads(text).solve().variants[0].to_json()["error"]
    assert (answer["type"], answer["message"]) == (type(theirs.value).__name__, str(theirs.value))


def test_lstm_lm_problem_by_hand_in_torch():
    """problems/lstm_lm.yaml written out in torch by hand (its init values read from the answer):
    loss, the LSTM's full backward hook (grad_output's nested-tuple slot None, one call), the
    scores' gradient (exactly 0 above the diagonal), the tied weight's one .grad."""
    answer = adjoint.load("problems/lstm_lm.yaml").solve()
    v = next(x for x in answer.variants if x.name == "lstm_hooks")
    names = v.run.forward.names
    emb = nn.Embedding(5, 3).double()
    lstm = nn.LSTM(3, 3, num_layers=2, batch_first=True).double()
    with torch.no_grad():
        emb.weight.copy_(torch.tensor(np.array(names["emb.weight"].value.floats()), dtype=F64))
        for n, p in lstm.named_parameters():
            p.copy_(torch.tensor(np.array(names[f"lstm.{n}"].value.floats()), dtype=F64))
    calls = []
    lstm.register_full_backward_hook(lambda m, gi, go: calls.append((gi, go)))
    ids = torch.tensor([[2, 0, 3]])
    causal = torch.tensor([[False, True, True], [False, False, True], [False, False, False]])
    o, (hn, cn) = lstm(emb(ids))
    s = (o @ o.transpose(1, 2)) * 0.5
    s.retain_grad()
    p = s.masked_fill(causal, float("-inf")).softmax(-1)
    h = o + p @ o
    logits = (h @ emb.weight.t()).view(3, 5)
    loss = nn.functional.cross_entropy(logits, torch.tensor([0, 3, 1]))
    loss.backward()
    assert np.isclose(float(np.array(v.loss.floats()).reshape(-1)[0]), loss.item(), rtol=1e-12)
    [(gi, go)] = calls
    assert go[1] is None
    full = [c for c in v.hook_calls if c.kind == "full_backward"]
    assert len(full) == 1 and full[0].args["grad_output"][1] is None
    assert np.allclose(np.array(full[0].args["grad_output"][0].floats()), go[0].numpy(), rtol=1e-10, atol=1e-15)
    assert (s.grad[0].triu(1) == 0).all()
    assert np.allclose(np.array(v.grads["emb.weight"].floats()), emb.weight.grad.numpy(), rtol=1e-10, atol=1e-15)


def test_init_draws_at_pytorchs_recurrent_scale():
    """RNNBase.reset_parameters: every parameter from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)),
    input_size and the parameter's own shape aside; init: {seed: N} draws at the largest power of
    two below that bound (docs/format.md)."""
    from adjoint.format import init_draw
    for kind, gates, hidden in (("LSTM", 4, 5), ("GRU", 3, 2), ("RNN", 1, 17), ("GRUCell", 3, 5)):
        m = getattr(nn, kind)(7, hidden)
        stdv = 1 / np.sqrt(hidden)
        assert all(float(p.detach().abs().max()) <= stdv for p in m.parameters())
        shapes = {n: tuple(p.shape) for n, p in m.named_parameters()}
        for name in shapes:
            fan = init_draw.param_fan_in(kind, name, shapes)
            bound = init_draw.bound_of_fan_in(fan)
            assert fan == hidden and bound <= stdv < 2 * bound, (kind, name)
