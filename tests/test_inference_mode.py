"""``with torch.inference_mode():`` in a forward (refused before: "only 'with no_grad():' ...
blocks are allowed"): grad mode off inside, inference tensors made there, and PyTorch's refusals
when one is later saved for backward, written in place, made to require grad or asked its
_version, and handle_view_on_rebase's words for a normal view made in inference mode. Every
expected value and message comes from the real torch run here
(tests/data/regressions/inference_mode_tensors.yaml)."""

from __future__ import annotations

import os
import warnings

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402

FILE = os.path.join(os.path.dirname(__file__), "data", "regressions", "inference_mode_tensors.yaml")

#: each variant's forward-hook body on head, as a plain script writes it (names of the forward)
BODIES = {
    "saved": lambda n, output: output * n["f"],
    "written": lambda n, output: n["f"].mul_(2),
    "view_written": lambda n, output: n["f"][0].add_(1),
    "requires_grad": lambda n, output: n["f"].requires_grad_(),
    "requires_grad_setter": lambda n, output: setattr(n["f"], "requires_grad", True),
    "version": lambda n, output: n["f"]._version,
    "normal_view_written": lambda n, output: n["v"].mul_(2),
    "base_of_normal_view_written": lambda n, output: (n["h"].mul_(2), n["v"] * 2),
}


def _torch(variant: str) -> dict:
    dt = torch.float64
    x = torch.tensor([[1.0, 2], [3, -1]], dtype=dt, requires_grad=True)
    backbone, head = torch.nn.Linear(2, 2).double(), torch.nn.Linear(2, 1).double()
    with torch.no_grad():
        backbone.weight.copy_(torch.tensor([[0.5, -0.25], [1, 0.75]]))
        backbone.bias.copy_(torch.tensor([0.125, -0.5]))
        head.weight.copy_(torch.tensor([[1.0, -2]]))
        head.bias.copy_(torch.tensor([0.5]))
    names: dict = {}
    calls: list = []
    if variant == "cloned":
        backbone.register_full_backward_hook(lambda m, gi, go: calls.append("backbone"))
        head.register_full_backward_hook(lambda m, gi, go: calls.append(("head", gi, [g.tolist() for g in go])))
    if variant in BODIES:
        head.register_forward_hook(lambda m, i, o: BODIES[variant](names, o) and None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            h = x * 1
            names["h"] = h
            with torch.inference_mode():
                f = backbone(x)
                v = h[0]
            names.update(f=f, v=v)
            assert f.is_inference() and not v.is_inference()
            g = head(f.clone()) + (f * 2).sum()
            ((g * h) ** 2).sum().backward()
        except RuntimeError as e:
            return {"error": str(e)}
    return {"calls": calls, "warnings": [str(w.message) for w in caught],
            "grads": {"x": x.grad.tolist(), "backbone.weight": backbone.weight.grad,
                      "head.weight": head.weight.grad.tolist(), "head.bias": head.bias.grad.tolist()}}


@pytest.fixture(scope="module")
def answers():
    with open(FILE) as fh:
        return adjoint.loads(fh.read()).solve().to_json()["variants"]


@pytest.mark.parametrize("variant", ["cloned", *BODIES])
def test_inference_mode_as_torch_runs_it(answers, variant):
    want = _torch(variant)
    got = answers[variant]
    if "error" in want:
        assert got["error"]["type"] == "RuntimeError"
        assert got["error"]["message"] == want["error"]
        return
    assert got.get("error") is None
    grads = got["grads"]
    assert grads["x"]["value"] == want["grads"]["x"]
    assert grads["head.weight"]["value"] == want["grads"]["head.weight"]
    assert grads["head.bias"]["value"] == want["grads"]["head.bias"]
    assert grads["backbone.weight"] is None and want["grads"]["backbone.weight"] is None
    # the backbone's full backward hook never fires; the head's fires from its output, grad_input (None,)
    (name, grad_input, grad_output), = want["calls"]
    call, = got["hook_calls"]
    assert (call["target"], call["args"]["grad_input"]) == (name, list(grad_input)) == ("head", [None])
    assert [g["value"] for g in call["args"]["grad_output"]] == grad_output
    assert [w["message"] for w in got["warnings"]] == want["warnings"]


def test_the_feature_used_as_is_cannot_be_saved():
    """head(f) on the inference tensor itself: addmm saves f (its weight requires grad)."""
    text = open(FILE).read().replace("g = head(f.clone()) + (f * 2).sum()", "g = head(f)")
    got = adjoint.loads(text).solve().to_json()["variants"]["cloned"]
    with torch.inference_mode():
        f = torch.ones(2, 2, dtype=torch.float64)
    with pytest.raises(RuntimeError) as info:
        torch.nn.Linear(2, 1).double()(f)
    assert got["error"]["message"] == str(info.value)


@pytest.mark.parametrize("line, message", [
    ("    with torch.inference_mode():\n        with no_grad():\n            f = backbone(x)\n",
     r"a block inside 'with inference_mode\(\):' is not modelled"),
    ("    with torch.inference_mode(False):\n        f = backbone(x)\n", "blocks are allowed"),
])
def test_refused_forms(line, message):
    text = open(FILE).read().replace("    with torch.inference_mode():\n        f = backbone(x)\n", line)
    with pytest.raises(adjoint.ProblemError, match=message):   # (at load: the forward is parsed)
        adjoint.loads(text)
