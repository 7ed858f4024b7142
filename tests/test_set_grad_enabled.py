"""``with torch.set_grad_enabled(False):`` / ``(True)`` in a forward and in a hook body: PyTorch's
``set_grad_enabled`` sets the grad mode when made and restores the previous one on exit, so the
block is ``no_grad()`` / ``enable_grad()``. adjoint refused it (exit 2). Expected values from the
plain torch script run here (tests/data/regressions/set_grad_enabled_blocks.yaml)."""

from __future__ import annotations

import warnings
from pathlib import Path

from conftest import require_torch

torch = require_torch()
import torch.nn as nn  # noqa: E402 (after the check)

import adjoint  # noqa: E402

F64 = torch.float64
FILE = Path(__file__).parent / "data" / "regressions" / "set_grad_enabled_blocks.yaml"


def _modules():
    backbone, head = nn.Linear(2, 2).double(), nn.Linear(2, 1).double()
    with torch.no_grad():
        backbone.weight.copy_(torch.tensor([[0.5, -0.25], [1, 0.75]]))
        backbone.bias.copy_(torch.tensor([0.125, -0.5]))
        head.weight.copy_(torch.tensor([[1.0, -2]]))
        head.bias.copy_(torch.tensor([0.5]))
    return backbone, head


def _forward(backbone, head, x):
    with torch.set_grad_enabled(False):
        h = backbone(x)
        with torch.set_grad_enabled(mode=True):
            s = (x * h).sum()
    return head(h) * s


def _x():
    return torch.tensor([[1.0, 2], [3, -1]], dtype=F64, requires_grad=True)


def _solved(variant: str) -> dict:
    return adjoint.load(FILE).solve().to_json()["variants"][variant]


def test_a_backbone_under_set_grad_enabled_false_is_frozen():
    backbone, head = _modules()
    calls = []
    backbone.register_full_backward_hook(lambda m, gi, go: calls.append(("backbone", gi, go)))
    head.register_full_backward_hook(lambda m, gi, go: calls.append(("head", gi, go)))
    x = _x()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = _forward(backbone, head, x)
        loss = (y ** 2).sum()
        loss.backward()
    got = _solved("frozen_backbone")
    assert got.get("error") is None
    assert got["loss"]["value"] == loss.item()
    assert [(c["target"], c["args"]["grad_input"]) for c in got["hook_calls"]] == [("head", [None])]
    assert [c[0] for c in calls] == ["head"] and calls[0][1] == (None,)
    assert got["hook_calls"][0]["args"]["grad_output"][0]["value"] == calls[0][2][0].tolist()
    assert [(w["category"], w["message"]) for w in got["warnings"]] == \
        [(type(w.message).__name__, str(w.message)) for w in caught]
    assert got["grads"]["x"]["value"] == x.grad.tolist()
    assert backbone.weight.grad is None and got["grads"]["backbone.weight"] is None
    assert got["grads"]["head.weight"]["value"] == head.weight.grad.tolist()
    assert got["values"]["h"]["requires_grad"] is False and got["values"]["s"]["grad_fn"] == "SumBackward0"


def test_set_grad_enabled_true_in_a_hook_body_records():
    backbone, head = _modules()
    x = _x()

    def hook(grad):
        with torch.set_grad_enabled(True):
            g = grad.detach().requires_grad_()
            (g * g).sum().backward()
        return grad + g.grad

    x.register_hook(hook)
    (_forward(backbone, head, x) ** 2).sum().backward()
    got = _solved("hook_body")
    assert got.get("error") is None
    assert got["grads"]["x"]["value"] == x.grad.tolist()
    assert got["hook_calls"][0]["returned"]["value"] == x.grad.tolist()
