"""SLinear, derived by hand (see the issue and docs): every number exact.

f0 = 0.3*0.3 + 0.1 = 0.19; s = 0.4*0.19 + 0.2 = 0.276; y = s**2 = 0.076176;
L = (y - 1)**2 = 3333792121/3906250000.
dL/dy = 2(y - 1) = -1.847648 = -57739/31250           (grad_output of SLinear)
dL/ds = dL/dy * 2s = -1.019901696 = -3983991/3906250   (what the legacy hook sees: PowBackward0's grad)
dL/dx1 = dL/ds * 0.4 = -0.4079606784 = -3983991/9765625 (full hook grad_input)
dL/dx = dL/dx1 * 0.3 = -11951973/97656250 = x.grad = f0.weight.grad (x = 0.3 too)
Doubling grad_input doubles everything upstream of SLinear:
x.grad = f0.weight.grad = -11951973/48828125, f0.bias.grad = -7967982/9765625.
"""

import json
import subprocess
import sys

import adjoint

PROBLEM = "problems/slinear.yaml"


def exact(v):
    return v.strings()


def test_loss_and_full_hook():
    pred = adjoint.load(PROBLEM).solve()
    full = pred.variant("full")
    assert exact(full.loss) == ["3333792121/3906250000"]
    (call,) = full.hook_calls
    assert call.kind == "full_backward" and call.target == "f1"
    assert exact(call.args["grad_output"][0]) == ["-57739/31250"]
    assert exact(call.args["grad_input"][0]) == ["-3983991/9765625"]
    assert exact(full.grads["x"]) == ["-11951973/97656250"]


def test_legacy_hook_sees_last_node():
    legacy = adjoint.load(PROBLEM).solve().variant("legacy")
    (call,) = legacy.hook_calls
    assert call.node == "PowBackward0"
    assert exact(call.args["grad_input"][0]) == ["-3983991/3906250"]
    assert exact(call.args["grad_output"][0]) == ["-57739/31250"]


def test_rescaled_doubles_upstream():
    v = adjoint.load(PROBLEM).solve().variant("rescaled")
    assert exact(v.grads["x"]) == ["-11951973/48828125"]
    assert exact(v.grads["f0.weight"]) == [["-11951973/48828125"]]
    assert exact(v.grads["f0.bias"]) == ["-7967982/9765625"]
    # SLinear's own parameters are downstream of the hook: unchanged
    assert exact(v.grads["f1.f.bias"]) == ["-3983991/3906250"]


def test_cli_json_matches_contract():
    out = subprocess.run([sys.executable, "-m", "adjoint.cli", "solve", PROBLEM, "--json"],
                         capture_output=True, text=True, check=True)
    doc = json.loads(out.stdout)
    assert doc["problem"] == "slinear"
    assert set(doc["variants"]) == {"full", "rescaled", "legacy"}
    full = doc["variants"]["full"]
    assert full["loss"]["exact"] == ["3333792121/3906250000"]
    assert abs(full["loss"]["value"][0] - 0.853450783) < 1e-9
    assert full["adjoints"]["f1"]["grad_output"][0]["exact"] == ["-57739/31250"]
    assert full["adjoints"]["f1"]["grad_input"][0]["exact"] == ["-3983991/9765625"]
    call = full["hook_calls"][0]
    assert call["hook"] == 0 and call["kind"] == "full_backward" and call["target"] == "f1"
    assert call["args"]["grad_input"][0]["value"] == [-0.4079606784]
    assert call["returned"] is None


def test_solve_does_not_import_torch():
    code = "import sys, adjoint; adjoint.load('%s').solve(); print('torch' in sys.modules)" % PROBLEM
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
