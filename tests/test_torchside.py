"""The torch side of verify: real PyTorch 2.13, no mocks.

Expected numbers are the SLinear hand derivation (see tests/test_slinear.py's docstring:
f0 = 0.19, s = 0.276, y = s**2 = 0.076176, dL/dy = -1.847648, dL/ds = -1.019901696,
dL/dx1 = -0.4079606784, x.grad = -0.1223882035) or plain torch code written out in the test.
"""

import math

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402 (after the check: adjoint.torchside imports torch)
from adjoint import ProblemError
from adjoint.torchside import finite_differences, run_variant
from adjoint.torchside.program import EnvScope, Program
from adjoint.torchside.run import Session

SLINEAR = "problems/slinear.yaml"
TWICE = "tests/data/verify_twice.yaml"


def flat(v):
    if isinstance(v, list):
        return [x for item in v for x in flat(item)]
    return [v]


def val(entry):
    return flat(entry["value"])


@pytest.fixture(scope="module")
def slinear():
    return adjoint.load(SLINEAR)


def test_slinear_full_hook_observed(slinear):
    obs = run_variant(slinear, slinear.variant("full"), "float32")
    assert "error" not in obs
    assert val(obs["loss"]) == pytest.approx([0.853450783], rel=1e-6)
    (call,) = obs["hook_calls"]
    assert {k: call[k] for k in ("hook", "label", "kind", "target")} == \
        {"hook": 0, "label": "SLinear full hook", "kind": "full_backward", "target": "f1"}
    assert "call" not in call  # f1 runs once
    assert set(call["args"]) == {"grad_input", "grad_output"}
    assert val(call["args"]["grad_output"][0]) == pytest.approx([-1.847648], rel=1e-6)
    assert val(call["args"]["grad_input"][0]) == pytest.approx([-0.4079606784], rel=1e-6)
    assert call["returned"] is None
    assert val(obs["grads"]["x"]) == pytest.approx([-0.1223882035], rel=1e-6)
    assert set(obs["grads"]) == {"x", "f0.weight", "f0.bias", "f1.f.weight", "f1.f.bias"}
    assert obs["grads"]["f0.weight"]["shape"] == [1, 1]
    # every named tensor, by the contract's names
    assert set(obs["values"]) >= {"x", "f0", "f1.f", "f1", "model", "y", "loss", "f1.f.weight"}
    assert val(obs["values"]["f1.f"]) == pytest.approx([0.276], rel=1e-6)


def test_slinear_rescaled_and_legacy(slinear):
    obs = run_variant(slinear, slinear.variant("rescaled"), "float64")
    (call,) = obs["hook_calls"]
    assert val(call["returned"][0]) == pytest.approx([-0.8159213568], rel=1e-12)
    assert val(obs["grads"]["x"]) == pytest.approx([-11951973 / 48828125], rel=1e-12)
    assert val(obs["grads"]["f1.f.bias"]) == pytest.approx([-1.019901696], rel=1e-12)  # downstream: unchanged
    legacy = run_variant(slinear, slinear.variant("legacy"), "float64")
    (call,) = legacy["hook_calls"]
    assert call["kind"] == "backward"
    assert val(call["args"]["grad_input"][0]) == pytest.approx([-1.019901696], rel=1e-12)  # PowBackward0's grad


def test_float64_is_float64(slinear):
    obs = run_variant(slinear, slinear.variant("full"), "float64")
    assert val(obs["loss"])[0] == pytest.approx(3333792121 / 3906250000, rel=1e-15)
    obs32 = run_variant(slinear, slinear.variant("full"), "float32")
    assert val(obs32["loss"])[0] != val(obs["loss"])[0]  # float32 rounding is visible


def test_modules_called_twice_are_told_apart():
    problem = adjoint.load(TWICE)
    obs = run_variant(problem, problem.variant("default"), "float64")
    seq = [(c["kind"], c["target"], c.get("call")) for c in obs["hook_calls"]]
    assert seq == [("forward", "lin", 1), ("forward", "lin", 2), ("hook", "lin#2", None),
                   ("full_backward_pre", "lin", 2), ("full_backward", "lin", 2), ("backward", "act", None),
                   ("full_backward_pre", "lin", 1), ("full_backward", "lin", 1)]
    # the same network in plain torch
    x = torch.tensor([[0.5, -1.0]], dtype=torch.float64)
    w = torch.tensor([[1.0, 2.0], [3.0, -1.0]], dtype=torch.float64)
    b = torch.tensor([0.5, 0.0], dtype=torch.float64)
    t = torch.tensor([[0.25, -0.5]], dtype=torch.float64)
    h = torch.tanh(x @ w.T + b)
    y = h @ w.T + b
    g2 = 2 * (y - t)
    assert val(obs["hook_calls"][3]["args"]["grad_output"][0]) == pytest.approx(g2.flatten().tolist(), rel=1e-12)
    assert val(obs["hook_calls"][4]["args"]["grad_input"][0]) == pytest.approx((g2 @ w).flatten().tolist(), rel=1e-12)
    # h's retained grad is what reaches h: the second call's grad_input
    assert val(obs["grads"]["h"]) == pytest.approx((g2 @ w).flatten().tolist(), rel=1e-12)
    assert set(obs["values"]) >= {"lin", "lin#2", "act", "h", "model", "y", "loss"}


def test_custom_function_is_a_real_autograd_function():
    problem = adjoint.load("problems/custom_function.yaml")
    s = Session(problem, problem.variant("default"), "float64")
    names = s.forward().names
    assert type(names["lin"].grad_fn).__name__ == "LinearFunctionBackward"
    assert type(names["sq"].grad_fn).__name__ == "SquareFunctionBackward"
    assert isinstance(s.modules["lin"].weight, torch.nn.Parameter)


def test_builtins_are_real_torch_modules(slinear):
    s = Session(slinear, slinear.variant("full"), "float32")
    assert type(s.modules["f0"]) is torch.nn.Linear
    assert isinstance(s.modules["model"], torch.nn.Sequential)
    assert s.modules["f1.f"].weight.dtype == torch.float32
    assert s.modules["f1.f"].weight is s.leaves["f1.f.weight"]


def test_interp_hands_operators_to_torch():
    problem = adjoint.loads("""
name: ops
inputs: {x: {value: [0.5], requires_grad: true}}
model: {forward: "2 - x"}
loss: "2 / y"
""")
    x = torch.tensor([0.5], requires_grad=True)
    env = {"x": x}
    interp = Program(EnvScope(env, "the test"))
    out = interp.eval(problem.model.forward[-1].value)   # the program (Return(2 - x),)
    assert type(out.grad_fn).__name__ == "RsubBackward1"   # torch's own dispatch of number - tensor
    env["y"] = out
    loss = interp.eval(problem.loss)
    assert type(loss.grad_fn).__name__ == "MulBackward0"   # Tensor.__rtruediv__: reciprocal() * 2
    assert type(loss.grad_fn.next_functions[0][0]).__name__ == "ReciprocalBackward0"
    assert loss.item() == pytest.approx(2 / 1.5)


def test_unbound_symbol_is_bad_input():
    problem = adjoint.loads("""
name: sym
inputs: {x: {value: [w0], requires_grad: true}}
model: {forward: "x * x"}
loss: "sum(y)"
""", name="sym.yaml")
    with pytest.raises(ProblemError) as err:
        run_variant(problem, problem.variants[0], "float32")
    assert "symbols:" in err.value.line() and err.value.line().startswith("sym.yaml:3:")


def test_torch_errors_are_captured():
    # Unchecked (check=False): a hook on a tensor that does not require grad. PyTorch refuses.
    problem = adjoint.loads("""
name: refused
inputs: {x: [1, 2]}
model: {forward: "x * 2"}
hooks:
  - {tensor: x, label: "hook on a constant"}
""")
    obs = run_variant(problem, problem.variants[0], "float32")
    assert obs["error"]["type"] == "RuntimeError" and "require" in obs["error"]["message"]
    assert obs["error"]["during"] == "register" and obs["error"]["after_call"] is None and obs["hook_calls"] == []


def test_finite_differences_slinear(slinear):
    fd = finite_differences(slinear, slinear.variant("full"), ["x", "f0.bias", "f1.f.weight"])
    assert val(fd["x"]) == pytest.approx([-0.1223882035], rel=1e-7)
    assert val(fd["f0.bias"]) == pytest.approx([-0.4079606784], rel=1e-7)
    assert val(fd["f1.f.weight"]) == pytest.approx([-75695829 / 390625000], rel=1e-7)


def test_removed_and_late_hooks():
    problem = adjoint.load("tests/data/verify_forward_hooks.yaml")
    obs = run_variant(problem, problem.variant("default"), "float64")
    labels = [c["label"] for c in obs["hook_calls"]]
    assert "removed before" not in labels                  # tensor hook removed before backward: silent
    assert "y after forward" in labels and "loss hook" in labels
    pre = next(c for c in obs["hook_calls"] if c["label"] == "f pre doubles x")
    assert val(pre["returned"][0]) == pytest.approx([1.0, -3.0, 4.0])
    assert not any(math.isnan(v) for v in val(obs["grads"]["x"]))


def test_torch_hands_none_when_a_running_node_input_is_not_needed():
    # backward(inputs=[model]) runs model's grad_fn (CosBackward0) but x is not needed
    problem = adjoint.load("tests/data/engine_unary_need.yaml")
    obs = run_variant(problem, problem.variants[0], "float64")
    (call,) = obs["hook_calls"]
    assert call["args"]["grad_inputs"] == [None]
    assert val(call["args"]["grad_outputs"][0]) == pytest.approx([2 * math.cos(0.5)])
    assert obs["grads"]["x"] is None


def test_torch_relu_backward_masks_infinite_gradients():
    problem = adjoint.load("tests/data/engine_relu_mask.yaml")
    obs = run_variant(problem, problem.variants[0], "float64")
    assert val(obs["grads"]["x"]) == [0.0, 0.0, 0.25]
