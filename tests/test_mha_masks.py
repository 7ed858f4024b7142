"""MultiheadAttention with bool masks (attn_mask, key_padding_mask: PyTorch's _canonical_mask
makes 0 / -inf float masks of them), is_causal, both paths (need_weights: baddbmm + softmax;
need_weights=False: the CPU flash kernel with a -inf mask), and hooks on its own submodule
``out_proj`` (registered, never fired: MultiheadAttention never calls it), against real torch
through ``adjoint verify`` (every hook call, value and grad) and by hand."""

import pytest
from conftest import require_torch

torch = require_torch()
from torch import nn  # noqa: E402

import adjoint  # noqa: E402
from adjoint.torchside import verify

HEAD = """
name: mha
dtype: float64
init: {seed: 1}
inputs:
  x: {value: [[[1, 0.5, -1, 2]], [[0.25, -0.5, 1, 1]], [[2, 1, 0, -1]]], requires_grad: true}
  causal: {value: [[false, true, true], [false, false, true], [false, false, false]], dtype: bool}
  pad: {value: [[false, false, true]], dtype: bool}
model:
  children:
    attn: {type: MultiheadAttention, args: {embed_dim: 4, num_heads: 2}}
  inputs: [x, causal, pad]
"""

FORWARDS = [
    "a, w = attn(x, x, x, attn_mask=causal)\n    return (a * a).sum() + (w * w).sum()",
    "a = attn(x, x, x, attn_mask=causal, need_weights=False)[0]\n    return (a * a).sum()",
    "a = attn(x, x, x, attn_mask=causal, need_weights=False, is_causal=True)[0]\n    return (a * x).sum()",
    "a = attn(x, x, x, key_padding_mask=pad, need_weights=False)[0]\n    return (a * a).sum()",
    "a, w = attn(x, x, x, key_padding_mask=pad, attn_mask=causal, average_attn_weights=False)\n"
    "    return (a * a).sum() + (w * w).sum()",
    "a = attn(x[0], x[0], x[0], attn_mask=causal)[0]\n    return (a * a).sum()",
]
VARIANTS = """variants:
  plain: {}
  hooked:
    hooks:
      - {module: attn.out_proj, kind: full_backward}
      - {module: attn.out_proj, kind: forward}
      - {module: attn.out_proj, kind: forward_pre}
      - {module: attn, kind: full_backward}
  legacy: {hooks: [{module: attn, kind: backward}, {module: attn.out_proj, kind: backward}]}
"""


def _text(forward: str) -> str:
    return HEAD + f"  forward: |\n    {forward}\n" + VARIANTS


@pytest.mark.parametrize("forward", FORWARDS, ids=[f.split("\n")[0] for f in FORWARDS])
def test_bool_masks_verify_against_torch(forward, tmp_path):
    if "x[0]" in forward:   # unbatched: a 2-D query, the 2-D causal mask fits (3 x 3)
        forward = forward.replace("x[0], x[0], x[0]", "x[:, 0], x[:, 0], x[:, 0]")
    path = tmp_path / "mha.yaml"
    path.write_text(_text(forward))
    out: list[str] = []
    assert verify.run([str(path)], None, False, False, None, out.append) == 0, "\n".join(out)


def test_out_proj_hooks_are_registered_and_never_fire():
    v = adjoint.loads(_text(FORWARDS[0])).solve(variant="hooked").variants[0]
    assert [c.target for c in v.hook_calls] == ["attn"]
    m = nn.MultiheadAttention(4, 2)
    fired = []
    m.out_proj.register_full_backward_hook(lambda *a: fired.append("bwd"))
    m.out_proj.register_forward_hook(lambda *a: fired.append("fwd"))
    x = torch.randn(3, 1, 4, requires_grad=True)
    for nw in (True, False):
        m(x, x, x, need_weights=nw)[0].sum().backward()
    assert fired == [] and "out_proj" in dict(m.named_modules())


def test_a_bool_mask_is_minus_infinity_on_the_scores():
    # the weights of masked keys are exactly 0, as exp(-inf) is
    v = adjoint.loads(_text(FORWARDS[0])).solve(variant="plain").variants[0]
    w = v.run.forward.names["w"].value
    assert [w.strings()[0][i][j] for i in range(3) for j in range(3) if j > i] == ["0", "0", "0"]


def test_a_hook_on_a_submodule_nobody_has_is_still_refused():
    text = _text(FORWARDS[0]).replace("{module: attn.out_proj, kind: forward}", "{module: attn.in_proj, kind: forward}")
    with pytest.raises(adjoint.ProblemError if hasattr(adjoint, "ProblemError") else Exception) as err:
        adjoint.loads(text).solve()
    assert "hook target module 'attn.in_proj' does not exist" in str(err.value)
