"""nn.TransformerDecoder and nn.Transformer (adjoint/format/validate_encoder.py,
engine/layers/transformer_stack.py), nn.Transformer.generate_square_subsequent_mask
(engine/bindings/factories.py), and the version counters of every stack's deep copies. Expected
values come from real torch: the module trees, constructor warnings and version counters of
freshly built modules, _detect_is_causal_mask, the static method, and a seq2seq training step
run as a plain script."""

from __future__ import annotations

import os
import warnings

import pytest

import adjoint

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REG = os.path.join(HERE, "data", "regressions")

_FILE = """
name: stack
{init}dtype: float64
inputs:
  x: {{value: [[[0.5, -1, 0.25, 0]], [[1, 0, -0.5, 0.5]], [[0, 0.75, 0.5, -1]]]}}
model:
  children:
    m:
      type: {type}
      args: {args}
{params}  inputs: [x]
  forward: "m(x, x)"
loss: "y.sum()"
"""

LAYER = "{d_model: 4, nhead: 2, dim_feedforward: 4, dropout: 0}"

CASES = [
    ("TransformerDecoder", f"{{decoder_layer: {LAYER}, num_layers: 2}}",
     lambda: nn.TransformerDecoder(nn.TransformerDecoderLayer(4, 2, 4, 0.0), 2)),
    ("TransformerDecoder", f"{{decoder_layer: {LAYER}, num_layers: 3, norm: {{normalized_shape: 4, eps: 0.5}}}}",
     lambda: nn.TransformerDecoder(nn.TransformerDecoderLayer(4, 2, 4, 0.0), 3, norm=nn.LayerNorm(4, eps=0.5))),
    ("Transformer", "{d_model: 4, nhead: 2, num_encoder_layers: 2, num_decoder_layers: 1, dim_feedforward: 4, "
                    "dropout: 0}",
     lambda: nn.Transformer(4, 2, 2, 1, 4, 0.0)),
    ("Transformer", "{d_model: 4, nhead: 2, num_encoder_layers: 1, num_decoder_layers: 2, dim_feedforward: 4, "
                    "dropout: 0, batch_first: true, bias: false}",
     lambda: nn.Transformer(4, 2, 1, 2, 4, 0.0, batch_first=True, bias=False)),
    ("Transformer", "{d_model: 4, nhead: 2, num_encoder_layers: 1, num_decoder_layers: 1, dim_feedforward: 4, "
                    "dropout: 0, batch_first: true, norm_first: true}",
     lambda: nn.Transformer(4, 2, 1, 1, 4, 0.0, batch_first=True, norm_first=True)),
    ("TransformerEncoder", f"{{encoder_layer: {LAYER}, num_layers: 2, norm: {{normalized_shape: 4}}}}",
     lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, 4, 0.0), 2, norm=nn.LayerNorm(4))),
]


def _load(type_, args, init=True, params=""):
    return adjoint.loads(_FILE.format(type=type_, args=args, init="init: {seed: 0}\n" if init else "",
                                      params=params))


def _zeros(shape) -> str:
    return "0" if not shape else "[" + ", ".join(_zeros(shape[1:]) for _ in range(shape[0])) + "]"


def _built(make):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = make()
    return module, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


@pytest.mark.parametrize("type_,args,make", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_tree_and_construction_warnings_match_torch(type_, args, make):
    """named_modules / named_parameters (names, shapes, order) and the constructor's UserWarnings."""
    from adjoint.engine.runtime import Runtime
    from adjoint.engine.layers.setup_warnings import construct
    from adjoint.values.backends.exact import ExactBackend
    module, warned = _built(make)
    problem = _load(type_, args)
    decl = problem.model.children[0]
    got_modules = [m.path[len("m."):] for m in decl.walk()][1:]
    want = [name for name, _ in module.named_modules() if name and not name.endswith("out_proj")]
    assert got_modules == want
    got = [(p.name[len("m."):], tuple(p.value.shape)) for m in decl.walk() for p in m.params]
    assert got == [(name, tuple(p.shape)) for name, p in module.named_parameters()]
    rt = Runtime(ExactBackend("float64"), "float64")
    construct(rt, problem.model)
    assert [w.message for w in rt.warnings] == warned


@pytest.mark.parametrize("type_,args,make", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_parameters_the_file_leaves_out_start_at_torchs_versions(type_, args, make):
    """Every parameter PyTorch makes the same whatever the random state (norms, attention biases)
    starts at the counter a fresh module has: 0 in the deep copies (TransformerEncoder's too:
    adjoint said 1, and 2 for out_proj.bias), LayerNorm's 1 in a Transformer's final norms."""
    module, _ = _built(make)
    drawn = _load(type_, args)   # which parameters PyTorch draws at random: given here, the rest left out
    given = {p.name[len("m."):]: p.value.shape for m in drawn.model.walk() for p in m.params
             if len(p.value.shape) > 1 or p.name.endswith(("linear1.bias", "linear2.bias"))}
    params = "      params:\n" + "".join(f"        {n}: {_zeros(shape)}\n" for n, shape in given.items())
    problem = _load(type_, args, init=False, params=params)
    defaults = {d.name[len("m."):]: d.version for m in problem.model.walk() for d in m.params if d.default}
    versions = dict((n, p._version) for n, p in module.named_parameters())
    assert defaults and {n: versions[n] for n in defaults} == defaults


def test_which_parameters_of_the_copies_start_equal():
    """A stack's copies are deep copies (every left-out parameter is layers.0's); nn.Transformer's
    _reset_parameters then redraws every matrix (xavier_uniform_), as torch shows: its copies
    share their vectors only."""
    tf, _ = _built(lambda: nn.Transformer(4, 2, 2, 2, 4, 0.0))
    shared = {n for n, p in tf.named_parameters() if ".layers.1." in n
              and torch.equal(p, dict(tf.named_parameters())[n.replace(".layers.1.", ".layers.0.")])}
    assert shared == {n for n, p in tf.named_parameters() if ".layers.1." in n and p.dim() == 1}
    problem = _load("Transformer", "{d_model: 4, nhead: 2, num_encoder_layers: 2, num_decoder_layers: 2, "
                                   "dim_feedforward: 4, dropout: 0}")
    params = {p.name[len("m."):]: p for m in problem.model.walk() for p in m.params}
    same = {n for n, p in params.items() if ".layers.1." in n
            and list(p.value.items) == list(params[n.replace(".layers.1.", ".layers.0.")].value.items)}
    assert same == shared
    dec = _load(*CASES[0][:2])
    params = {p.name[len("m."):]: p for m in dec.model.walk() for p in m.params}
    assert all(list(p.value.items) == list(params[n.replace("layers.1.", "layers.0.")].value.items)
               for n, p in params.items() if n.startswith("layers.1."))


def test_a_copys_version_error_is_torchs():
    """tests/data/regressions/transformer_encoder_copies_start_at_version_0.yaml against the plain
    script: an in-place write on a copy's norm weight after the forward."""
    torch.set_default_dtype(torch.float64)
    try:
        enc, _ = _built(lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(2, 1, 2, 0.0), 2))
    finally:
        torch.set_default_dtype(torch.float32)
    x = torch.tensor([[[0.5, -1]], [[1, 0.25]]], dtype=torch.float64, requires_grad=True)
    out = enc(x)
    with torch.no_grad():
        enc.layers[0].norm2.weight.mul_(2)
    with pytest.raises(RuntimeError) as err:
        out.sum().backward()
    assert "is at version 1; expected version 0 instead" in str(err.value)
    from adjoint.torchside.verify import predict
    problem = adjoint.load(os.path.join(REG, "transformer_encoder_copies_start_at_version_0.yaml"))
    js = predict(problem, None, "float64").variants[0].to_json()
    assert js["error"]["type"] == "RuntimeError" and js["error"]["message"] == str(err.value)


def test_causal_detection_of_bool_and_int_masks_matches_torch():
    """_detect_is_causal_mask on the mask as TransformerDecoder hands it (no canonicalization):
    a bool mask is compared with the causal mask made bool; an int64 one raises."""
    from torch.nn.modules.transformer import _detect_is_causal_mask
    from adjoint.engine.layers.transformer_stack import _is_square_subsequent
    from adjoint.engine.runtime import Runtime
    from adjoint.engine.torch_errors import TorchError
    from adjoint.format.problem import Literal
    from adjoint.values.backends.exact import ExactBackend
    from fractions import Fraction
    rt = Runtime(ExactBackend("float64"), "float64")
    masks = [[[0, 1, 1], [0, 0, 1], [0, 0, 0]], [[0, 1, 1], [0, 0, 0], [0, 0, 0]], [[0, 0, 0], [0, 0, 0], [0, 0, 0]],
             [[1, 1, 1], [0, 1, 1], [0, 0, 1]]]
    for rows in masks:
        value = rt.B.literal(Literal((3, 3), tuple(Fraction(v) for row in rows for v in row), None))
        mine = _is_square_subsequent(rt, rt.tensor(value, dtype="bool"), 3)
        assert mine == _detect_is_causal_mask(torch.tensor(rows, dtype=torch.bool), None, 3), rows
    with pytest.raises(RuntimeError) as err:
        _detect_is_causal_mask(torch.zeros(3, 3, dtype=torch.int64), None, 3)
    with pytest.raises(TorchError) as mine:
        _is_square_subsequent(rt, rt.tensor(rt.B.zeros((3, 3)), dtype="int64"), 3)
    assert mine.value.message == str(err.value)


def _mask_file(call: str, use: str) -> str:
    return f"""
name: m
dtype: float64
inputs:
  x: {{value: [[1, 2, 3], [4, 5, 6], [7, 8, 9]], requires_grad: true}}
model:
  inputs: [x]
  forward: |
    m = {call}
    return {use}
loss: "y.sum()"
"""


@pytest.mark.parametrize("call", [
    "nn.Transformer.generate_square_subsequent_mask(3, dtype=torch.float64)",
    "torch.nn.Transformer.generate_square_subsequent_mask(3, dtype=torch.bool)",
    "nn.Transformer.generate_square_subsequent_mask(-2, dtype=torch.float64)",
    "nn.Transformer.generate_square_subsequent_mask(3, dtype=torch.int64)",
])
def test_generate_square_subsequent_mask_is_torchs(call):
    """The static method's values (through masked_fill / clamp) and its errors, against torch's."""
    from adjoint.torchside.verify import predict
    x = torch.tensor([[1., 2, 3], [4, 5, 6], [7, 8, 9]], dtype=torch.float64, requires_grad=True)
    kwargs = {"dtype": {"float64": torch.float64, "bool": torch.bool, "int64": torch.int64}[call.split("torch.")[-1][:-1]]}
    size = int(call.split("(")[1].split(",")[0])
    use = "x.masked_fill(m, 0)" if "bool" in call else "x + m.clamp(min=-1)"
    js = predict(adjoint.loads(_mask_file(call, use)), None, "float64").variants[0].to_json()
    try:
        m = nn.Transformer.generate_square_subsequent_mask(size, **kwargs)
    except RuntimeError as err:
        assert js["error"] == {"type": "RuntimeError", "message": str(err), "during": "forward"} or \
            (js["error"]["type"], js["error"]["message"]) == ("RuntimeError", str(err))
        return
    y = x.masked_fill(m, 0) if m.dtype == torch.bool else x + m.clamp(min=-1)
    assert js["loss"]["value"] == y.sum().item()


def test_seq2seq_step_with_hooks_matches_a_plain_script():
    """tests/data/regressions/transformer_whole_model.yaml as a user's script runs it: nn.Transformer
    with the file's parameter values, generate_square_subsequent_mask, full backward hooks on the
    decoder's copies (one scaling grad_input), a forward_pre hook with kwargs, clip_grad_norm_ and
    SGD between two iterations. Losses, every .grad and every hook argument."""
    from adjoint.torchside.verify import predict
    problem = adjoint.load(os.path.join(REG, "transformer_whole_model.yaml"))
    values = {p.name: torch.tensor([float(v) for v in p.value.items], dtype=torch.float64).reshape(p.value.shape)
              for m in problem.model.walk() for p in m.params}
    tf, _ = _built(lambda: nn.Transformer(4, 2, 1, 2, 4, 0.0))
    tf = tf.double()
    with torch.no_grad():
        for n, p in tf.named_parameters():
            p.copy_(values["tf." + n])
    calls = []

    def observe(mod, gi, go):
        calls.append(("decoder.layers.1", [None if g is None else g.clone() for g in gi], [g.clone() for g in go]))

    def scale(mod, gi, go):
        calls.append(("decoder.layers.0", [None if g is None else g.clone() for g in gi], [g.clone() for g in go]))
        return tuple(g * 2 if g is not None else None for g in gi)

    kwargs_seen = []
    tf.decoder.layers[1].register_full_backward_hook(observe)
    tf.decoder.layers[0].register_full_backward_hook(scale)
    tf.encoder.register_forward_hook(lambda m, i, o: None)
    tf.decoder.layers[0].register_forward_pre_hook(lambda m, a, k: kwargs_seen.append(dict(k)), with_kwargs=True)
    src = torch.tensor([[[0.5, -1, 0.25, 0]], [[1, 0, -0.5, 0.5]]], dtype=torch.float64)
    tgt = torch.tensor([[[0.25, 0.5, -1, 1]], [[-0.5, 1, 0, 0.25]], [[0, 0.75, 0.5, -1]]], dtype=torch.float64)
    t = torch.tensor([[[0.5, 0, 0, 0.5]], [[0, 1, 0, 0]], [[0, 0, 0, 0]]], dtype=torch.float64)
    opt = torch.optim.SGD(tf.parameters(), lr=0.1)
    for it in range(2):
        mask = nn.Transformer.generate_square_subsequent_mask(3, dtype=torch.float64)
        loss = F.mse_loss(tf(src, tgt, tgt_mask=mask), t)
        loss.backward()
        if it == 0:
            torch.nn.utils.clip_grad_norm_(tf.parameters(), 0.5)
            opt.step()
            opt.zero_grad()
    js = predict(problem, None, "float64").variants[0].to_json()
    assert abs(js["loss"]["value"] - loss.item()) <= 1e-12
    for n, p in tf.named_parameters():
        got = torch.tensor(js["grads"]["tf." + n]["value"], dtype=torch.float64)
        assert torch.allclose(got, p.grad, rtol=0, atol=1e-12), n
    assert all(k["tgt_is_causal"] is True and k["memory_is_causal"] is False for k in kwargs_seen)
    mine = [h for h in js["hook_calls"] if h["kind"] == "full_backward"]
    assert [h["target"] for h in mine] == ["tf." + c[0] for c in calls]
    for h, (_, gi, go) in zip(mine, calls):
        for got, want in zip(h["args"]["grad_input"], gi):
            assert (got is None) == (want is None)
            if want is not None:
                assert torch.allclose(torch.tensor(got["value"], dtype=torch.float64), want, rtol=0, atol=1e-12)
        for got, want in zip(h["args"]["grad_output"], go):
            assert torch.allclose(torch.tensor(got["value"], dtype=torch.float64), want, rtol=0, atol=1e-12)
    pre = [h for h in js["hook_calls"] if h["kind"] == "forward_pre"]
    assert len(pre) == 2 and all(h["args"]["kwargs"]["tgt_is_causal"] is True for h in pre)
    assert js["warnings"][0]["message"] == _built(lambda: nn.Transformer(4, 2, 1, 2, 4, 0.0))[1][0]


def test_transformer_and_decoder_import_as_built_ins(tmp_path):
    """nn.Transformer and nn.TransformerDecoder were refused by adjoint import as torch.nn modules
    adjoint does not model; they are written as the built-in types, and verify against the module."""
    from conftest import import_to_file
    from adjoint.torchside.verify import verify_variant
    path = tmp_path / "model.py"
    path.write_text(
        "import torch\nfrom torch import nn\n\n\n"
        "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.tf = nn.Transformer(4, 2, 1, 2, 4, dropout=0.0, batch_first=True)\n"
        "        self.dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(4, 2, 4, 0.0, batch_first=True), 2)\n"
        "        self.register_buffer('mask', nn.Transformer.generate_square_subsequent_mask(2))\n\n"
        "    def forward(self, x):\n        h = self.tf(x, x[:, :2], tgt_mask=self.mask)\n"
        "        return self.dec(h, x)\n\n\n"
        "def make():\n    torch.manual_seed(0)\n    return M().double()\n")
    out, text, problem = import_to_file(str(path), "make", ("x=1x3x4",), "translate", None)
    assert "type: Transformer\n" in text and "type: TransformerDecoder" in text, text
    from adjoint.torchside.verify import predict
    vp = predict(problem, None, "float64").variants[0]
    assert verify_variant(out, problem, vp, "float64", False, origin=True).ok
