"""nn.TransformerEncoder (adjoint/format/validate_encoder.py, engine/layers/transformer_stack.py):
the module tree and the constructor's warning against the real class, the causal-mask detection
against torch's own ``_detect_is_causal_mask``, and a whole file against real torch (one run)."""

from __future__ import annotations

import os
import warnings

import pytest

import adjoint
from adjoint.format.validate_encoder import nested_tensor_warning

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
STACK = os.path.join(ROOT, "problems", "encoder_stack.yaml")

_FILE = """
name: enc
init: {{seed: 0}}
dtype: float64
inputs:
  x: {{value: [[[0.5, -1, 0.25, 0], [1, 0, -0.5, 0.5], [0, 0.75, 0.5, -1]]]}}
model:
  children:
    enc:
      type: TransformerEncoder
      args: {{encoder_layer: {layer}, num_layers: {n}{extra}}}
  inputs: [x]
  forward: "enc(x)"
loss: "y.sum()"
"""


def _load(layer: str, n: int = 2, extra: str = ""):
    return adjoint.loads(_FILE.format(layer=layer, n=n, extra=extra))


LAYERS = [
    ("{d_model: 4, nhead: 2, dim_feedforward: 4, dropout: 0}", dict(d_model=4, nhead=2, dim_feedforward=4, dropout=0.0)),
    ("{d_model: 4, nhead: 2, dim_feedforward: 4, dropout: 0, batch_first: true}",
     dict(d_model=4, nhead=2, dim_feedforward=4, dropout=0.0, batch_first=True)),
    ("{d_model: 4, nhead: 2, dim_feedforward: 4, dropout: 0, batch_first: true, norm_first: true}",
     dict(d_model=4, nhead=2, dim_feedforward=4, dropout=0.0, batch_first=True, norm_first=True)),
    ("{d_model: 4, nhead: 2, dim_feedforward: 4, dropout: 0, batch_first: true, bias: false}",
     dict(d_model=4, nhead=2, dim_feedforward=4, dropout=0.0, batch_first=True, bias=False)),
    ("{d_model: 3, nhead: 1, dim_feedforward: 4, dropout: 0, batch_first: true}",
     dict(d_model=3, nhead=1, dim_feedforward=4, dropout=0.0, batch_first=True)),
    ("{d_model: 4, nhead: 2, dim_feedforward: 4, dropout: 0, batch_first: true, activation: gelu}",
     dict(d_model=4, nhead=2, dim_feedforward=4, dropout=0.0, batch_first=True, activation="gelu")),
]


@pytest.mark.torch
def test_tree_and_construction_warning_match_torch():
    """named_modules / named_parameters (names, shapes, order) and the constructor's UserWarning,
    for each layer configuration, with and without a final norm and enable_nested_tensor."""
    from torch import nn
    for text, kwargs in LAYERS:
        for n, extra, norm, nested in ((2, "", False, True), (3, ", norm: {normalized_shape: %d}" % kwargs["d_model"],
                                                              True, True),
                                       (1, ", enable_nested_tensor: false", False, False)):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(**kwargs), n,
                                            norm=nn.LayerNorm(kwargs["d_model"]) if norm else None,
                                            enable_nested_tensor=nested)
            problem = _load(text, n, extra)
            decl = problem.model.children[0]
            got_modules = [m.path[len("enc."):] for m in decl.walk()][1:]
            want_modules = [name for name, m in enc.named_modules() if name and not name.endswith("out_proj")]
            assert got_modules == want_modules
            got = [(p.name[len("enc."):], tuple(p.value.shape)) for m in decl.walk() for p in m.params]
            assert got == [(name, tuple(p.shape)) for name, p in enc.named_parameters()]
            want = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
            mine = nested_tensor_warning(decl.args)
            assert want == ([mine] if mine is not None else []), text


def test_copies_start_equal_and_given_values_win():
    """layers.1 takes layers.0's value where the file leaves it out (copy.deepcopy), its own where given."""
    text = _FILE.format(layer="{d_model: 4, nhead: 2, dim_feedforward: 4, dropout: 0}", n=2, extra="").replace(
        'args: {encoder_layer', 'params: {layers.1.linear2.bias: [1, 2, 3, 4]}\n      args: {encoder_layer')
    problem = adjoint.loads(text)
    params = {p.name: p for m in problem.model.walk() for p in m.params}
    def items(name):
        return [float(x) for x in params[name].value.items]
    assert items("enc.layers.1.linear1.weight") == items("enc.layers.0.linear1.weight")
    assert items("enc.layers.1.linear2.bias") == [1, 2, 3, 4] != items("enc.layers.0.linear2.bias")


@pytest.mark.torch
def test_causal_detection_matches_torch():
    """The engine's mask comparison against torch.nn.modules.transformer._detect_is_causal_mask."""
    import torch
    from torch.nn.modules.transformer import _detect_is_causal_mask
    from adjoint.engine.layers.transformer_stack import _is_square_subsequent
    from adjoint.engine.ops.masking import infinity
    from adjoint.engine.runtime import Runtime
    from adjoint.values.backends.exact import ExactBackend
    rt = Runtime(ExactBackend("float64"), "float64")
    inf = float("-inf")
    masks = [[[0, inf, inf], [0, 0, inf], [0, 0, 0]], [[0, inf, inf], [0, 0, 0], [0, 0, 0]],
             [[0, -1e9, -1e9], [0, 0, -1e9], [0, 0, 0]], [[0, 0, 0], [0, 0, 0], [0, 0, 0]], [[0, inf, 0], [0, 0, inf], [0, 0, 0]]]
    for rows in masks:
        t = torch.tensor(rows, dtype=torch.float64)
        B = rt.B
        value = B.stack([B.concat([B.zeros((1,)) if x == 0 else (infinity(B, True, (1,)) if x == inf else
                                   B.full((1,), int(x))) for x in row], 0) for row in rows], 0)
        mine = _is_square_subsequent(rt, rt.tensor(value, dtype="float64"), 3)
        assert mine == _detect_is_causal_mask(t, None, 3), rows
    square = rt.tensor(rt.B.zeros((3, 3)), dtype="float64")
    assert _is_square_subsequent(rt, square, 2) is _detect_is_causal_mask(torch.zeros(3, 3, dtype=torch.float64),
                                                                         None, 2) is False


@pytest.mark.torch
def test_encoder_files_match_torch():
    """problems/encoder_stack.yaml against real torch: nodes, hooks on layers.i's submodules, the
    setup and mask warnings, values and grads (tests/data/regressions/transformer_encoder_*.yaml run
    in tests/test_differential.py)."""
    from gen import check
    with open(STACK) as fh:
        outcome = check(fh.read(), timeout=120)
    assert outcome.ok, outcome.report()
