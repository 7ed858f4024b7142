"""``checkpoint(..., preserve_rng_state=False)``: the recomputation draws a training-mode
dropout's mask afresh (PyTorch restores no RNG state), so a file's ``mask:`` would no longer
hold; adjoint refuses such a region in one located line. With the default
(``preserve_rng_state=True``) the same region is answered, and agrees with real torch (the torch
side forces the file's mask on both draws, as a restored RNG state does)."""

from __future__ import annotations

import pytest

import adjoint
from adjoint.format.errors import ProblemError
from gen import check

TEMPLATE = """
name: rng
dtype: float64
inputs:
  x: {{value: [[0.5, -1.0, 2.0, 1.5]], requires_grad: true}}
model:
  inputs: [x]
  children:
    f:
      children:
        drop: {{type: Dropout, args: {{p: {p}}}, mask: {mask}}}
      forward: "drop(x * x)"
  forward: "checkpoint(f, x, use_reentrant={reentrant}{extra}).sum()"
hooks:
  - {{module: f.drop, kind: forward, label: fw_drop}}
  - {{tensor: x, label: tx}}
"""


def _text(p, reentrant, extra):
    mask = "[[1, 1, 1, 1]]" if p == "0" else "[[1, 0, 1, 0]]"   # p = 0 keeps every element
    return TEMPLATE.format(p=p, reentrant=reentrant, extra=extra, mask=mask)


@pytest.mark.parametrize("reentrant", [True, False])
def test_fresh_draw_is_refused_at_the_dropout(reentrant, tmp_path):
    path = tmp_path / "rng.yaml"
    path.write_text(_text("0.5", reentrant, ", preserve_rng_state=False"))
    with pytest.raises(ProblemError) as info:
        adjoint.load(str(path)).solve()
    assert "preserve_rng_state=False" in str(info.value) and "fresh random mask" in str(info.value)
    assert str(info.value).startswith(f"{path}:12:")   # the Dropout's line


@pytest.mark.parametrize("reentrant", [True, False])
@pytest.mark.parametrize("p, extra", [("0.5", ""), ("0.5", ", preserve_rng_state=True"),
                                      ("0", ", preserve_rng_state=False")])
def test_answered_and_torch_agrees(reentrant, p, extra):
    outcome = check(_text(p, reentrant, extra), timeout=120)
    assert outcome.ok, outcome.report()
