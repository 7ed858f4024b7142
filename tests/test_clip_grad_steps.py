"""``{clip_grad_norm: ...}`` / ``{clip_grad_value: ...}`` steps (adjoint/engine/clip.py) against the
plain torch loop a user writes -- backward, torch.nn.utils.clip_grad_norm_ (or clip_grad_value_)
over model.parameters(), optimizer.step(), zero_grad(), three times, then a last backward --
every hook argument and every .grad of each pass, bit for bit in --float64, within float64
rounding exactly; and error_if_nonfinite's RuntimeError. The file:
tests/data/regressions/clip_grad_norm_and_value_steps.yaml."""

from __future__ import annotations

import os
from fractions import Fraction

import pytest
from blas_rounding import assert_float64_agrees
import torch

import adjoint

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILE = os.path.join(ROOT, "tests", "data", "regressions", "clip_grad_norm_and_value_steps.yaml")
NAMES = ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")
D = torch.float64
clip = torch.nn.utils

CLIPS = {
    "norm_2": lambda ps: clip.clip_grad_norm_(iter(ps), 1.0),
    "norm_inf": lambda ps: clip.clip_grad_norm_(iter(ps), 0.5, norm_type=float("inf")),
    "norm_1_adamw": lambda ps: clip.clip_grad_norm_(iter(ps), 2.0, norm_type=1.0, foreach=False),
    "value": lambda ps: clip.clip_grad_value_(iter(ps), 0.3),
}


def _model(inp=0.8):
    fc1, fc2 = torch.nn.Linear(1, 3).to(D), torch.nn.Linear(3, 1).to(D)
    with torch.no_grad():
        fc1.weight.copy_(torch.tensor([[0.3], [-0.7], [0.45]], dtype=D))
        fc1.bias.copy_(torch.tensor([0.05, -0.15, 0.3], dtype=D))
        fc2.weight.copy_(torch.tensor([[1.1, -0.6, 0.35]], dtype=D))
        fc2.bias.copy_(torch.tensor([0.2], dtype=D))
    return fc1, fc2, torch.tensor([[inp]], dtype=D)


def _loop(variant):
    fc1, fc2, x = _model()
    ps = [fc1.weight, fc1.bias, fc2.weight, fc2.bias]
    opt = torch.optim.AdamW(ps, lr=0.01) if variant == "norm_1_adamw" else torch.optim.SGD(ps, lr=0.05, momentum=0.9)
    seen, grads = [], []
    for i in range(4):
        h = fc1(x) * 2
        h.register_hook(lambda g: (seen.append(g.tolist()), g * 3)[1])
        y = fc2(h)
        (y * y).sum().backward()
        grads.append({n: p.grad.tolist() for n, p in zip(NAMES, ps)})
        if i < 3:
            CLIPS[variant](ps)
            opt.step()
            opt.zero_grad()
    return seen, grads


@pytest.fixture(scope="module")
def float64():
    return adjoint.load(FILE).solve(mode="float64").to_json()["variants"]


@pytest.mark.parametrize("variant", list(CLIPS))
def test_float64_agrees_with_torch_bit_for_bit(float64, variant):
    seen, grads = _loop(variant)
    got = float64[variant]
    assert_float64_agrees([p["hook_calls"][0]["args"]["grad"]["value"] for p in got["passes"]], seen)
    assert_float64_agrees([{n: p["grads"][n]["value"] for n in NAMES} for p in got["passes"]], grads)


def test_clipping_before_any_backward_clips_nothing(float64):
    fc1, fc2, x = _model()
    ps = [fc1.weight, fc1.bias, fc2.weight, fc2.bias]
    for i in range(2):
        h = fc1(x) * 2
        h.register_hook(lambda g: g * 3)
        y = fc2(h)
        if i == 0:
            assert clip.clip_grad_norm_(iter(ps), 1.0).item() == 0.0
        (y * y).sum().backward()
        if i == 0:
            clip.clip_grad_value_(iter(ps), 0.1)
    assert {n: float64["before_backward"]["grads"][n]["value"] for n in NAMES} == \
        {n: p.grad.tolist() for n, p in zip(NAMES, ps)}


def _flat(x):
    return [y for z in x for y in _flat(z)] if isinstance(x, list) else [x]


def test_exact_is_within_rounding_of_torch():
    got = adjoint.load(FILE).solve(variant="norm_2").to_json()["variants"]["norm_2"]["passes"][-1]["grads"]
    _, grads = _loop("norm_2")
    for n in NAMES:
        for e, t in zip(_flat(got[n]["exact"]), _flat(grads[-1][n])):
            assert abs(float(Fraction(e.lstrip("~"))) - t) < 1e-13


def test_nonfinite_total_norm_is_torchs_error_or_nan_gradients():
    fc1, fc2, x = _model(1e200)
    ps = [fc1.weight, fc1.bias, fc2.weight, fc2.bias]
    (fc2(fc1(x)) ** 2).sum().backward()
    with pytest.raises(RuntimeError) as err:
        clip.clip_grad_norm_(iter(ps), 1.0, error_if_nonfinite=True)
    clip.clip_grad_norm_(iter(ps), 1.0)   # scaled by 1 / inf: 0, so an infinite element becomes nan
    clipped = {n: p.grad.tolist() for n, p in zip(NAMES, ps)}
    with open(FILE) as f:
        text = f.read().split("variants:")[0].replace("h = fc1(x) * 2", "h = fc1(x)").replace(
            "returns: \"grad * 3\"", "returns: \"grad\"")
    text += ("variants:\n  raises:\n    inputs: {x: {value: [[1e200]]}}\n"
             "    steps: [forward, backward, {clip_grad_norm: {max_norm: 1.0, error_if_nonfinite: true}}]\n"
             "  scales:\n    inputs: {x: {value: [[1e200]]}}\n"
             "    steps: [forward, backward, {clip_grad_norm: {max_norm: 1.0}}]\n")
    got = adjoint.loads(text, FILE).solve(mode="float64").to_json()["variants"]
    assert (got["raises"]["error"]["type"], got["raises"]["error"]["message"]) == ("RuntimeError", str(err.value))
    assert {n: [repr(v) for v in _flat(got["scales"]["grads"][n]["value"])] for n in NAMES} == \
        {n: [repr(v) for v in _flat(vals)] for n, vals in clipped.items()}   # nan as 'nan', -0.0 kept


def _no_grad_error():
    fc1, _, _ = _model()
    with pytest.raises(RuntimeError) as err:
        clip.clip_grad_value_(fc1.parameters(), 0.1)
    return str(err.value)


def test_clip_grad_value_with_no_grad_is_torchs_error():
    message = _no_grad_error()
    fc1, _, x = _model()
    assert clip.clip_grad_norm_(fc1.parameters(), 1.0).item() == 0.0   # clip_grad_norm_ does not raise
    (fc1(x) ** 2).sum().backward()
    fc1.zero_grad()
    with pytest.raises(RuntimeError) as again:   # after zero_grad (set to None), and with foreach=False
        clip.clip_grad_value_(fc1.parameters(), 0.1, foreach=False)
    assert str(again.value) == message
    got = adjoint.load(os.path.join(ROOT, "tests", "data", "regressions", "clip_grad_value_no_grads.yaml")).solve(
        mode="float64").to_json()["variants"]
    for name in ("value_first_step", "value_foreach_false", "value_after_zero_grad"):
        assert (got[name]["error"]["type"], got[name]["error"]["message"]) == ("RuntimeError", message)
    assert "error" not in got["norm_no_grads"] and got["norm_no_grads"]["warnings"] == []


def test_clipping_a_model_without_parameters():
    import warnings
    empty = torch.nn.Tanh()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert clip.clip_grad_norm_(empty.parameters(), 0.1).item() == 0.0
    got = adjoint.load(os.path.join(ROOT, "tests", "data", "regressions", "clip_grad_model_without_parameters.yaml")
                       ).solve(mode="float64").to_json()["variants"]
    assert [(w["category"], w["message"]) for w in got["norm"]["warnings"]] == \
        [(w.category.__name__, str(w.message)) for w in seen]
    assert (got["value"]["error"]["type"], got["value"]["error"]["message"]) == ("RuntimeError", _no_grad_error())
