"""adjoint/format/data/saved_attributes.json is what torchgen generates for the installed torch
(regenerated in memory and compared), and a read step uses it: a slot the node class does not
have is PyTorch's AttributeError, a non-tensor one is refused as not modelled."""

import importlib.util
import json
import os

import pytest

import adjoint
from adjoint.format.saved_attributes import saved_attributes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_file_is_what_torchgen_generates():
    spec = importlib.util.spec_from_file_location("gen", os.path.join(ROOT, "scripts", "gen_saved_attributes.py"))
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    with open(gen.OUT, encoding="utf-8") as fh:
        assert json.load(fh) == json.loads(json.dumps(gen.table()))


def test_known_nodes():
    import torch
    a = torch.ones(2, requires_grad=True) * 1
    b = torch.ones(2, requires_grad=True)
    for t, node in ((a * b, "MulBackward0"), (a + b, "AddBackward0"), (a.exp(), "ExpBackward0")):
        assert type(t.grad_fn).__name__ == node
        for name in saved_attributes(node)["tensors"]:
            getattr(t.grad_fn, f"_saved_{name}")   # every tensor listed is an attribute PyTorch has
    assert (a + b).grad_fn._saved_alpha == 1     # a non-tensor one (refused by a read step)
    assert saved_attributes("MulBackward0")["tensors"] == ["other", "self"]
    assert "alpha" in saved_attributes("AddBackward0")["other"]
    assert saved_attributes("torch::autograd::AccumulateGrad") is None


FILE = """
name: reads
dtype: float64
inputs:
  a: {value: [0.5, -1.5], requires_grad: true}
  b: {value: [2, 3], requires_grad: true}
model:
  inputs: [a, b]
  forward: "a + b"
loss: "sum(y)"
steps: [forward, {read: y.grad_fn._saved_SLOT, as: s}]
"""


def test_a_non_tensor_slot_is_refused_and_a_missing_one_is_attribute_error():
    with pytest.raises(adjoint.ProblemError, match="alpha"):
        adjoint.loads(FILE.replace("SLOT", "alpha")).solve()
    err = adjoint.loads(FILE.replace("SLOT", "result")).solve().to_json()["variants"]["default"]["error"]
    assert (err["type"], err["message"], err["during"]) == \
        ("AttributeError", "'AddBackward0' object has no attribute '_saved_result'", "read")
