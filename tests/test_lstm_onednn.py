"""nn.LSTM in float32 against real torch: PyTorch 2.13's CPU runs oneDNN's fused kernel
(aten/src/ATen/native/mkldnn/RNN.cpp, ``mkldnn_rnn``): per layer and direction the states' rows
``hx[index]``, ``cx[index]`` (SelectBackward0) and one ``mkldnn_rnn_layer`` node,
``MkldnnRnnLayerBackward0`` (edges: input, w_ih, w_hh, b_ih, b_hh, h, c); a bidirectional
layer's outputs ``cat``ed; ``stack`` of h_n before c_n; ``batch_first``: the input transposed and
cloned (contiguous), the output a transposed view. Compared node for node with torch's graph,
values and grads against torch's float32 (oneDNN's own arithmetic: held to float32 rounding), hook
arguments through ``adjoint verify``; an LSTM with proj_size falls back to ATen's loop with
PyTorch's once-per-process warning; oneDNN's logistic is 0 below -86.99."""

import json

import numpy as np
import pytest
from conftest import require_torch

torch = require_torch()
from torch import nn  # noqa: E402

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402
from adjoint.torchside import verify  # noqa: E402
from nodechain import leaf_names  # noqa: E402
from test_recurrent_layers import _graph  # noqa: E402

F32 = torch.float32


def _vals(shape, k):
    n = int(np.prod(shape))
    return (np.array([((i * 5 + k) % 9 - 4) / 4 for i in range(n)]).reshape(shape)).tolist()


# (args, input shape, state shape or None)
CASES = [
    ({}, (3, 2, 2), None),
    ({"num_layers": 2}, (2, 1, 2), (2, 1, 3)),
    ({"bidirectional": True, "batch_first": True}, (2, 3, 2), (2, 2, 3)),
    ({"num_layers": 2, "bidirectional": True, "bias": False}, (3, 1, 2), None),
    ({"batch_first": True, "num_layers": 2}, (1, 2, 2), None),
    ({}, (3, 2), (1, 3)),                                       # unbatched
    ({"bidirectional": True}, (2, 2), None),                    # unbatched, two directions
]


def _text(args, xs, hs, training=True, extra=""):
    arg_text = ", ".join(f"{k}: {json.dumps(v)}" for k, v in args.items())
    state = ""
    if hs is not None:
        state = f"  h: {{value: {_vals(hs, 1)}, requires_grad: true}}\n  c: {{value: {_vals(hs, 2)}, requires_grad: true}}\n"
    call = "m(x, (h, c))" if hs is not None else "m(x)"
    return f"""
name: lstm32
dtype: float32
init: {{seed: 3}}
inputs:
  x: {{value: {_vals(xs, 0)}, requires_grad: true}}
{state}model:
  children:
    m: {{type: LSTM, args: {{input_size: 2, hidden_size: 3{', ' + arg_text if arg_text else ''}}}{'' if training else ', training: false'}}}
  inputs: [x{', h, c' if hs is not None else ''}]
  forward: |
    out, (hn, cn) = {call}
    return (out * out).sum() + (hn * 3).sum() + (cn * cn).sum()
loss: "y"
{extra}"""


@pytest.mark.parametrize("args,xs,hs", CASES, ids=[f"{'-'.join(f'{k}={v}' for k, v in c[0].items())}-{len(c[1])}d"
                                                   for c in CASES])
def test_onednn_graph_values_and_grads_against_torch(args, xs, hs):
    v = adjoint.loads(_text(args, xs, hs)).solve().variants[0]
    names = v.run.forward.names
    torch.manual_seed(0)
    m = nn.LSTM(2, 3, **args)
    with torch.no_grad():
        for name, p in m.named_parameters():
            p.copy_(torch.tensor(np.array(names[f"m.{name}"].value.floats()), dtype=F32))
    x = torch.tensor(_vals(xs, 0), dtype=F32, requires_grad=True)
    theirs, ours = {"x": x}, {"x": names["x"]}
    if hs is not None:
        h = torch.tensor(_vals(hs, 1), dtype=F32, requires_grad=True)
        c = torch.tensor(_vals(hs, 2), dtype=F32, requires_grad=True)
        theirs.update(h=h, c=c)
        ours.update(h=names["h"], c=names["c"])
        out, (hn, cn) = m(x, (h, c))
    else:
        out, (hn, cn) = m(x)
    theirs.update({f"m.{k}": p for k, p in m.named_parameters()})
    ours.update({f"m.{k}": names[f"m.{k}"] for k, _ in m.named_parameters()})
    y = (out * out).sum() + (hn * 3).sum() + (cn * cn).sum()
    y.backward()
    assert "MkldnnRnnLayerBackward0" in str(_graph(y, leaf_names(theirs)))
    if _graph(names["model"], leaf_names(ours)) != _graph(y, leaf_names(theirs)):
        pytest.fail("the node chains differ")
    for name, t in (("out", out), ("hn", hn), ("cn", cn)):
        assert names[name].strides == t.stride(), name
        assert np.allclose(np.array(names[name].value.floats()), t.detach().double().numpy(), rtol=2e-6, atol=2e-7)
    for name, t in theirs.items():
        assert np.allclose(np.array(v.grads[name].floats()), t.grad.double().numpy(), rtol=1e-5, atol=1e-6), name


def _verify(tmp_path, text) -> None:
    path = tmp_path / "lstm32.yaml"
    path.write_text(text)
    out: list[str] = []
    assert verify.run([str(path)], None, False, False, None, out.append) == 0, "\n".join(out)


def test_onednn_hooks_verify(tmp_path):
    """Node hooks on the fused nodes and the rows of the state (grad_inputs: seven, None where an
    input needs no gradient; grad_outputs: three, the workspace is no output), tensor hooks on the
    outputs, module hooks (BackwardHook wraps the output only), a second backward."""
    extra = """hooks:
  - {tensor: out}
  - {tensor: cn}
  - {node: out, next: [0], kind: post}
  - {node: out, next: [0, 0], kind: post}
  - {node: out, next: [0, 0, 5], kind: pre}
  - {node: hn, kind: post}
variants:
  nodes: {}
  module:
    hooks:
      - {module: m, kind: full_backward}
      - {module: m, kind: full_backward_pre}
      - {module: m, kind: forward}
  twice:
    hooks:
      - {node: out, next: [0, 0], kind: post, does: "grad_inputs[3].mul_(2)"}
    steps:
      - forward
      - {backward: {retain_graph: true}}
      - backward
"""
    _verify(tmp_path, _text({"num_layers": 2, "bidirectional": True, "batch_first": True}, (2, 2, 2), (4, 2, 3),
                            extra=extra))


def test_onednn_eval_verify(tmp_path):
    extra = """variants:
  eval: {}
"""
    _verify(tmp_path, _text({"bias": False}, (3, 1, 2), None, training=False, extra=extra))


def test_projections_fall_back_to_atens_loop_and_warn_once():
    text = _text({"proj_size": 2}, (2, 1, 2), None).replace(
        "out, (hn, cn) = m(x)", "out, (hn, cn) = m(x)\n    out2, _ = m(x)")
    v = adjoint.loads(text).solve(mode="float64").variants[0]
    assert [w.message for w in v.warnings] == [
        "LSTM with projections is not supported with oneDNN. Using default implementation. (Triggered internally at "
        "/__w/pytorch/pytorch/aten/src/ATen/native/RNN.cpp:1512.)"]
    assert "MkldnnRnnLayerBackward0" not in str(_graph(v.run.forward.names["model"], {}))


def test_saved_tensor_hooks_around_it_are_refused():
    """The node also saves oneDNN's workspace (a uint8 buffer of oneDNN's size): a pack hook would see it."""
    text = _text({}, (2, 1, 2), None, extra='hooks:\n  - {saved_tensors: {pack: "x", unpack: "x"}}\n')
    with pytest.raises(ProblemError, match="saved-tensor hooks around nn.LSTM in float32"):
        adjoint.loads(text).solve()


def test_onednn_logistic_flushes_to_zero_below_minus_87():
    """oneDNN's float32 logistic is 0 where round(x log2 e) <= -126 (x below -86.9894), though the
    exact sigmoid there is a normal float32 (1.8e-38 at -86.99): the cell state is exactly 0 in torch."""
    text = """
name: flush
dtype: float32
inputs:
  x: {value: [[[-87.5], [-86.5]]], requires_grad: true}
model:
  children:
    m: {type: LSTM, args: {input_size: 1, hidden_size: 1}, params: {weight_ih_l0: [[1.0], [0.0], [0.0], [0.0]],
        weight_hh_l0: [[0.0], [0.0], [0.0], [0.0]], bias_ih_l0: [0.0, 0.0, 30.0, 0.0], bias_hh_l0: [0.0, 0.0, 0.0, 0.0]}}
  inputs: [x]
  forward: |
    out, (hn, cn) = m(x)
    return cn.sum()
loss: "y"
"""
    v = adjoint.loads(text).solve().variants[0]
    m = nn.LSTM(1, 1)
    with torch.no_grad():
        for p in m.parameters():
            p.zero_()
        m.weight_ih_l0[0, 0] = 1.0
        m.bias_ih_l0[2] = 30.0
    _, (_, cn) = m(torch.tensor([[[-87.5], [-86.5]]]))
    theirs = cn.detach().reshape(-1).tolist()
    ours = np.array(v.run.forward.names["cn"].value.floats()).reshape(-1).tolist()
    assert theirs[0] == 0.0 and ours[0] == 0.0
    assert theirs[1] != 0.0 and abs(ours[1] - theirs[1]) <= 1e-5 * abs(theirs[1])
