"""``leaf_values`` in every entry of ``passes`` (contract v3, section 9: "`leaf_values`: {leaf:
VALUE} after the run and in each passes[i], for leaves a hook wrote"). A pass that ran before any
hook wrote a leaf has it too, empty; adjoint left the key out there, so a grader reading
``passes[0]["leaf_values"]`` found no field. Expected values from torch 2.13 (the same steps as a
script: gx = autograd.grad((w*x).pow(2).sum(), x, create_graph=True); w's post-accumulate hook
does w.sub_(w.grad / 8) under the backward's no-grad; (gx ** 2).sum().backward()):
gx's hook is handed [36, 128], w.grad is [432, 4096], w after is [-51, -508], x.grad [648, 4096]."""

from __future__ import annotations

import os

import adjoint

HERE = os.path.dirname(os.path.abspath(__file__))
FILE = os.path.join(HERE, "data", "regressions", "leaf_values_in_each_pass.yaml")


def test_every_pass_has_leaf_values_once_a_hook_wrote_a_leaf():
    answer = adjoint.load(FILE).solve().to_json()["variants"]["default"]
    first, second = answer["passes"]
    assert first["leaf_values"] == {}   # nothing written yet
    assert second["leaf_values"]["w"]["exact"] == ["-51", "-508"]
    assert answer["leaf_values"]["w"]["exact"] == ["-51", "-508"]
    assert second["grads"]["w"]["exact"] == ["432", "4096"]
    assert second["grads"]["x"]["exact"] == ["648", "4096"]
    assert second["hook_calls"][0]["args"]["grad"]["exact"] == ["36", "128"]


def test_no_leaf_written_no_leaf_values(tmp_path):
    """Without a write, neither the variant nor its passes carry the field (as before)."""
    with open(FILE) as f:
        text = f.read().replace(', does: "tensor.sub_(tensor.grad / 8)"', "")
    path = tmp_path / "leaf_values_none_written.yaml"
    path.write_text(text)
    answer = adjoint.load(str(path)).solve().to_json()["variants"]["default"]
    assert "leaf_values" not in answer
    assert all("leaf_values" not in p for p in answer["passes"])
