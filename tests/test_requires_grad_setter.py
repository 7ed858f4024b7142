"""``t.requires_grad = flag`` (the Tensor setter, as fine-tuning scripts freeze a parameter) and
``requires_grad_`` on a view made under no_grad. The setter was refused ("assigning to an
attribute is not allowed"); it sets a leaf's flag as requires_grad_ does and refuses with its own
words (a non-leaf whatever the flag, a value that is not a bool, an integer or bool tensor set to
True). A view made under no_grad of a leaf that requires grad has no grad_fn, so it is a leaf:
requires_grad_(False) on it is fine in PyTorch, where adjoint answered the non-leaf error. Every
expected value comes from the real torch run here (tests/data/regressions/requires_grad_setter.yaml,
requires_grad_off_on_a_no_grad_view.yaml)."""

from __future__ import annotations

import os
import warnings

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402

HERE = os.path.dirname(__file__)
SETTER = os.path.join(HERE, "data", "regressions", "requires_grad_setter.yaml")
NO_GRAD_VIEW = os.path.join(HERE, "data", "regressions", "requires_grad_off_on_a_no_grad_view.yaml")


def _solve(path: str) -> dict:
    with open(path) as fh:
        return adjoint.loads(fh.read()).solve().to_json()["variants"]


def _value(entry):
    return None if entry is None else entry["value"]


def _setter_torch(variant: str):
    """The regression file's model and variant, written as a plain PyTorch script."""
    torch.set_default_dtype(torch.float64)
    try:
        x = torch.tensor([[1.0, 2], [3, -1]], requires_grad=True)
        lin, head = torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)
        with torch.no_grad():
            lin.weight.copy_(torch.tensor([[0.5, -0.25], [1, 0.75]]))
            lin.bias.copy_(torch.tensor([0.125, -0.5]))
            head.weight.copy_(torch.tensor([[1.0, -2]]))
            head.bias.copy_(torch.tensor([0.5]))
        calls: list = []
        state: dict = {}

        def forward_hook(body):
            def hook(_m, _i, output):
                body(output)
            return hook

        if variant == "frozen_after_the_forward":
            lin.register_forward_hook(forward_hook(lambda o: setattr(lin.bias, "requires_grad", False)))
            lin.bias.register_post_accumulate_grad_hook(lambda t: calls.append(t.grad))
        if variant == "frozen_in_a_tensor_hook":
            def th(g):
                calls.append(g.tolist())
                lin.bias.requires_grad = False
            lin.bias.register_hook(th)
        bodies = {"non_leaf_false": lambda o: setattr(o, "requires_grad", False),
                  "non_leaf_true": lambda o: setattr(o, "requires_grad", True),
                  "not_a_bool": lambda o: setattr(lin.bias, "requires_grad", 1),
                  "bool_tensor_true": lambda o: setattr(o > 0, "requires_grad", True),
                  "bool_tensor_false": lambda o: setattr(o > 0, "requires_grad", False)}
        if variant in bodies:
            lin.register_forward_hook(forward_hook(bodies[variant]))

        def forward(inp):
            lin.weight.requires_grad = False
            h = lin(inp)
            with torch.no_grad():
                feat = h * 2
            feat.requires_grad = True
            if variant == "frozen_before_the_forward":
                feat.register_hook(lambda g: calls.append(g.tolist()))
                feat.retain_grad()
            state["feat"] = feat
            return head(feat) + head(h)

        passes = 2 if variant == "frozen_in_a_tensor_hook" else 1
        try:
            for _ in range(passes):
                if variant == "input_frozen_in_a_pre_hook":
                    x.requires_grad = False
                (forward(x) ** 2).sum().backward()
        except RuntimeError as e:
            return {"error": str(e)}
        grads = {"x": x.grad, "lin.weight": lin.weight.grad, "lin.bias": lin.bias.grad,
                 "head.weight": head.weight.grad, "head.bias": head.bias.grad, "feat": state["feat"].grad}
        return {"calls": calls, "grads": {k: None if v is None else v.tolist() for k, v in grads.items()}}
    finally:
        torch.set_default_dtype(torch.float32)


VARIANTS = ("frozen_before_the_forward", "input_frozen_in_a_pre_hook", "frozen_after_the_forward",
            "frozen_in_a_tensor_hook", "non_leaf_false", "non_leaf_true", "not_a_bool", "bool_tensor_true",
            "bool_tensor_false")


@pytest.fixture(scope="module")
def setter_answers():
    return _solve(SETTER)


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_setter_as_torch_runs_it(setter_answers, variant):
    want = _setter_torch(variant)
    got = setter_answers[variant]
    if "error" in want:
        assert got["error"]["type"] == "RuntimeError"
        assert got["error"]["message"] == want["error"]
        return
    assert got.get("error") is None
    assert {k: _value(v) for k, v in got["grads"].items()} == want["grads"]
    calls = [c["args"] for c in got["hook_calls"] if c["kind"] in ("hook", "post_accumulate_grad")]
    if variant == "frozen_after_the_forward":
        assert [a["tensor"] for a in calls] == want["calls"] == [None]
    else:
        assert [_value(a["grad"]) for a in calls] == want["calls"]


def test_the_setters_messages_are_torchs():
    """The words pinned above, as the setter and requires_grad_ give them (they differ)."""
    y = torch.ones(2, requires_grad=True) * 2
    k = torch.ones(2, dtype=torch.int64)
    cases = [(lambda: setattr(y, "requires_grad", True), "you can only change requires_grad flags of leaf variables."),
             (lambda: setattr(y, "requires_grad", None), "requires_grad must be a bool"),
             (lambda: setattr(k, "requires_grad", True),
              "only Tensors of floating point and complex dtype can require gradients"),
             (lambda: k.requires_grad_(True), "only Tensors of floating point dtype can require gradients")]
    for make, message in cases:
        with pytest.raises(RuntimeError) as info:
            make()
        assert str(info.value) == message
    assert y.requires_grad_(True) is y   # requires_grad_(True) on a non-leaf: no error


def test_requires_grad_off_on_a_no_grad_view():
    x = torch.tensor([1.0, 2], dtype=torch.float64, requires_grad=True)
    with torch.no_grad():
        v, w = x[0], x[1]
    assert v.is_leaf and v.requires_grad
    v.requires_grad_(False)
    w.requires_grad = False
    assert v.requires_grad and w.requires_grad   # through the base
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ((x * 2 + v + w) ** 2).sum().backward()
    got = _solve(NO_GRAD_VIEW)["default"]
    assert got.get("error") is None
    assert got["grads"]["x"]["value"] == x.grad.tolist()
    assert v.grad is None and w.grad is None
    assert _value(got["grads"].get("v")) is None and _value(got["grads"].get("w")) is None
    assert got["values"]["v"]["requires_grad"] is True


def test_requires_grad_on_a_no_grad_view_is_refused():
    """PyTorch gives the view an AccumulateGrad of its own (v.grad 16 here), which adjoint left out
    (v.grad None): refused until modelled."""
    x = torch.tensor([1.0, 2], dtype=torch.float64, requires_grad=True)
    with torch.no_grad():
        v = x[0]
    v.requires_grad_(True)
    ((x * 2 + v) ** 2).sum().backward()
    assert v.grad.item() == 16
    text = open(NO_GRAD_VIEW).read().replace("v.requires_grad_(False)", "v.requires_grad_(True)")
    with pytest.raises(adjoint.ProblemError, match="on a view made under no_grad"):
        adjoint.loads(text).solve()
