"""nn.TransformerEncoderLayer, nn.TransformerDecoderLayer and F.scaled_dot_product_attention
against real torch (float64).

The layer: the slow path a backward takes, its submodules called as modules. Compared with a
real ``nn.TransformerEncoderLayer`` holding the file's parameters: the node chain behind the
output (tests/nodechain.py), the output, every gradient, which submodule hooks fire in which
order, and the saved tensors packed. The whole hook log of several layers (masks, is_causal,
norm_first, gelu, eval mode, the mismatched-mask warning) is checked by ``adjoint verify`` on
tests/data/regressions/transformer_encoder_layers.yaml (tests/test_differential.py).
"""

import warnings

import pytest
from conftest import require_torch

torch = require_torch()
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import adjoint  # noqa: E402
from nn_harness import assert_close, lit, torch_chain  # noqa: E402
from nodechain import chain, leaf_names  # noqa: E402
from adjoint.torchside.values import literal_tensor  # noqa: E402

X = [[[1, 0.5, -1, 2], [0.25, -0.5, 1, 1], [2, 1, 0, -1]]]          # (1, 3, 4)
CAUSAL = [[False, True, True], [False, False, True], [False, False, False]]
PAD = [[False, False, True]]
SOFT = [[0, -1, -0.5], [0.5, 0, -2], [0, 0.25, 0]]

CASES = {
    "post_norm_relu_bool_masks": ({"d_model": 4, "nhead": 2, "dim_feedforward": 6, "dropout": 0},
                                  "src_mask=causal, src_key_padding_mask=pad", False),
    "pre_norm_gelu_float_mask_causal": ({"d_model": 4, "nhead": 2, "dim_feedforward": 3, "dropout": 0,
                                         "activation": "gelu", "batch_first": True, "norm_first": True},
                                        "soft, is_causal=True", True),
}
HOOKED = ("self_attn", "linear1", "linear2", "norm1", "norm2", "dropout", "dropout1", "dropout2", "self_attn.out_proj")


def _text(args: dict, call: str, batch_first: bool) -> str:
    x = X if batch_first else [[row] for row in X[0]]
    hooks = "".join(f"  - {{module: layer.{h}, kind: full_backward}}\n" for h in HOOKED)
    return (f"name: t\ndtype: float64\ninit: {{seed: 5}}\ninputs:\n  x: {{value: {lit(x)}, requires_grad: true}}\n"
            f"  causal: {{value: {lit(CAUSAL)}, dtype: bool}}\n  pad: {{value: {lit(PAD)}, dtype: bool}}\n"
            f"  soft: {{value: {lit(SOFT)}}}\n"
            f"model:\n  children:\n    layer: {{type: TransformerEncoderLayer, args: {lit(args)}}}\n"
            f"  inputs: [x, causal, pad, soft]\n  forward: |\n    return layer(x, {call})\n"
            "loss: \"sum(y * y)\"\nhooks:\n" + hooks + "  - {saved_tensors: {pack: \"x\", unpack: \"x\"}}\n")


def _torch_layer(problem, args: dict, cls=nn.TransformerEncoderLayer) -> tuple[nn.Module, dict]:
    m = cls(**args).double()
    layer = problem.model.child("layer")
    with torch.no_grad():
        for kid in layer.children:
            for d in kid.params:
                m.get_parameter(d.name[len("layer."):]).copy_(literal_tensor(d.value, torch.float64, {}))
    return m, {f"layer.{n}": p for n, p in m.named_parameters()}


@pytest.mark.parametrize("name", list(CASES))
def test_encoder_layer_matches_torch(name):
    args, call, batch_first = CASES[name]
    problem = adjoint.loads(_text(args, call, batch_first))
    v = problem.solve().variants[0]
    js = v.to_json()
    m, names = _torch_layer(problem, args)
    x = torch.tensor(X if batch_first else [[row] for row in X[0]], dtype=torch.float64, requires_grad=True)
    env = {"causal": torch.tensor(CAUSAL), "pad": torch.tensor(PAD), "soft": torch.tensor(SOFT, dtype=torch.float64)}
    fired, packs = [], []
    for h in HOOKED:
        m.get_submodule(h).register_full_backward_hook(lambda mod, gi, go, h=h: fired.append(f"layer.{h}"))
    kwargs = {}
    positional = [x]
    for part in call.split(", "):
        if "=" in part:
            k, val = part.split("=")
            kwargs[k] = True if val == "True" else env[val]
        else:
            positional.append(env[part])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.autograd.graph.saved_tensors_hooks(lambda t: packs.append(t.detach().clone()) or t, lambda t: t):
            y = m(*positional, **kwargs)
            loss = (y * y).sum()
        loss.backward()
    names["x"] = x
    ours = v.run.forward.names
    assert chain(ours["layer"], leaf_names(ours)) == torch_chain(y, names)
    assert_close(js["values"]["layer"]["value"], y, "output")
    for n, t in names.items():
        assert_close(js["grads"][n]["value"], t.grad, f"grad of {n}")
    assert [c["target"] for c in js["hook_calls"] if c["kind"] == "full_backward"] == fired
    ours_packs = [c for c in js["hook_calls"] if c["kind"] == "pack"]
    assert [tuple(c["args"]["x"]["shape"]) for c in ours_packs] == [tuple(t.shape) for t in packs], [(c.get("node"), c["args"]["x"]["shape"]) for c in ours_packs]
    for c, t in zip(ours_packs, packs):
        assert_close(c["args"]["x"]["value"], t, "packed")


def test_out_proj_is_never_called_so_its_hook_never_fires():
    args, call, batch_first = CASES["post_norm_relu_bool_masks"]
    js = adjoint.loads(_text(args, call, batch_first)).solve().variants[0].to_json()
    targets = {c["target"] for c in js["hook_calls"] if c["kind"] == "full_backward"}
    assert "layer.linear1" in targets and "layer.self_attn.out_proj" not in targets


def _refused(text: str) -> str:
    with pytest.raises(Exception) as err:
        adjoint.loads(text).solve()
    return str(err.value)


def test_fast_path_and_random_dropout_are_refused():
    base = _text({"d_model": 4, "nhead": 2, "dim_feedforward": 6, "batch_first": True}, "soft", True)
    # training with the default dropout 0.1: random
    assert "give args: {dropout: 0} or training: false" in _refused(base)
    # eval, batch_first, nothing requiring grad: torch._transformer_encoder_layer_fwd (checked in torch: no node)
    frozen = base.replace("requires_grad: true}", "requires_grad: false}").replace(
        "dim_feedforward\": 6, \"batch_first\": true}}", "dim_feedforward\": 6, \"batch_first\": true}, "
        "training: false, requires_grad: false}")
    assert "fast path" in _refused(frozen)
    m = nn.TransformerEncoderLayer(4, 2, 6, batch_first=True).eval().requires_grad_(False)
    assert m(torch.ones(1, 3, 4)).grad_fn is None


SDPA = """name: sdpa
dtype: float64
inputs:
  q: {value: [[[[1, 0.5], [-1, 2], [0.25, -0.5]], [[2, 1], [0, -1], [1, 1]]]], requires_grad: true}
  keep: {value: [[true, false, true], [false, false, false], [true, true, false]], dtype: bool}
model:
  inputs: [q, keep]
  forward: |
    return F.scaled_dot_product_attention(q, q * 2, q, attn_mask=keep, scale=0.5)
loss: "sum(y * y)"
"""


def test_sdpa_fully_masked_row_and_bool_mask_against_torch():
    """keep's middle row masks every key: the kernel's output row and gradient are 0, not nan;
    True means attend (the opposite of MultiheadAttention's masks)."""
    js = adjoint.loads(SDPA).solve().variants[0].to_json()
    q = torch.tensor([[[[1, 0.5], [-1, 2], [0.25, -0.5]], [[2, 1], [0, -1], [1, 1]]]], dtype=torch.float64,
                     requires_grad=True)
    keep = torch.tensor([[True, False, True], [False, False, False], [True, True, False]])
    y = F.scaled_dot_product_attention(q, q * 2, q, attn_mask=keep, scale=0.5)
    assert y.grad_fn.name() == "ScaledDotProductFlashAttentionForCpuBackward0"
    (y * y).sum().backward()
    assert_close(js["values"]["y"]["value"], y, "output")
    assert_close(js["grads"]["q"]["value"], q.grad, "grad q")
    assert y[0, :, 1].abs().sum() == 0


def test_sdpa_math_path_is_predicted():
    # 3-D inputs: PyTorch's math path (SafeSoftmaxBackward0 among its nodes): predicted since
    # adjoint/engine/bindings/sdpa_math.py (tests/test_sdpa_math.py pins its node chains)
    text = SDPA.replace("F.scaled_dot_product_attention(q, q * 2, q,", "F.scaled_dot_product_attention(q[0], q[0], q[0],")
    js = adjoint.loads(text.replace("attn_mask=keep, ", "")).solve().variants[0].to_json()
    q = torch.tensor([[[[1, 0.5], [-1, 2], [0.25, -0.5]], [[2, 1], [0, -1], [1, 1]]]], dtype=torch.float64,
                     requires_grad=True)
    y = F.scaled_dot_product_attention(q[0], q[0], q[0], scale=0.5)
    assert "Bmm" in str(y.grad_fn.next_functions)
    (y * y).sum().backward()
    assert_close(js["values"]["y"]["value"], y, "output")
    assert_close(js["grads"]["q"]["value"], q.grad, "grad q")


DECODER = """name: t
dtype: float64
init: {seed: 2}
inputs:
  x: {value: [[[1, 0.5, -1, 2]], [[0.25, -0.5, 1, 1]], [[2, 1, 0, -1]]], requires_grad: true}
  mem: {value: [[[0.5, 1, -1, 0]], [[1, -0.5, 0.25, 1]]], requires_grad: true}
  causal: {value: [[false, true, true], [false, false, true], [false, false, false]], dtype: bool}
model:
  children:
    layer: {type: TransformerDecoderLayer, args: {d_model: 4, nhead: 2, dim_feedforward: 2, dropout: 0}}
  inputs: [x, mem, causal]
  forward: |
    return layer(x, mem, tgt_mask=causal)
loss: "sum(y * y)"
"""


def test_decoder_layer_node_chain_and_grads_match_torch():
    problem = adjoint.loads(DECODER)
    v = problem.solve().variants[0]
    js = v.to_json()
    m, names = _torch_layer(problem, {"d_model": 4, "nhead": 2, "dim_feedforward": 2, "dropout": 0},
                            nn.TransformerDecoderLayer)
    x = torch.tensor([[[1, 0.5, -1, 2]], [[0.25, -0.5, 1, 1]], [[2, 1, 0, -1]]], dtype=torch.float64,
                     requires_grad=True)
    mem = torch.tensor([[[0.5, 1, -1, 0]], [[1, -0.5, 0.25, 1]]], dtype=torch.float64, requires_grad=True)
    y = m(x, mem, tgt_mask=torch.tensor([[False, True, True], [False, False, True], [False, False, False]]))
    (y * y).sum().backward()
    names.update({"x": x, "mem": mem})
    ours = v.run.forward.names
    assert chain(ours["layer"], leaf_names(ours)) == torch_chain(y, names)
    for n, t in names.items():
        assert_close(js["grads"][n]["value"], t.grad, f"grad of {n}")


def test_import_writes_the_layers_as_their_type():
    """``adjoint import``: the layers' constructor arguments read back from their submodules,
    their parameters under named_parameters()'s names; the solved gradients are torch's."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.TransformerEncoderLayer(4, 2, 3, dropout=0.0, activation="gelu", norm_first=True)
            self.dec = nn.TransformerDecoderLayer(4, 1, 2, dropout=0.0, bias=False)

        def forward(self, x):
            h = self.enc(x)
            return self.dec(h, x)

    torch.manual_seed(0)
    m = Model().double()
    x = torch.tensor([[[0.5, -1, 0.25, 1]], [[1, 0, -0.5, 0.75]]], dtype=torch.float64, requires_grad=True)
    text = adjoint.from_module_text(m, x)
    assert "type: TransformerEncoderLayer" in text and "activation: \"gelu\"" in text
    assert "type: TransformerDecoderLayer" in text and "bias: false" in text
    js = adjoint.loads(text).solve().variants[0].to_json()
    m(x).sum().backward()
    for n, p in m.named_parameters():
        assert_close(js["grads"][n]["value"], p.grad, f"grad of {n}")
    from adjoint.torchside.importer.builtins import type_name
    assert type_name(nn.TransformerEncoderLayer(4, 2, activation=torch.tanh)) is None   # a callable activation

