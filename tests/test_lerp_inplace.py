"""``Tensor.lerp_(end, weight)`` with a number weight where no node records it (grad mode off, as in
every backward hook body; or nothing requires grad): the EMA recipe ``ema.lerp_(p.grad, 0.1)``.
It was refused ("Tensor.lerp_ is a PyTorch method adjoint does not model yet"). ATen's kernel
(aten/src/ATen/native/Lerp.h) computes ``self + weight * (end - self)`` when ``|weight| < 0.5``,
else ``end - (end - self) * (1 - weight)``; both are the same exact value. Recorded by autograd
(LerpBackward0) it stays refused. Expected values derived by hand below and checked against torch
2.13 (float64: [[3.1500000000000004, -6.300000000000001, 1.5750000000000002], [0.04374999999999999,
-0.08749999999999998, 0.021874999999999995]], m._version 2; x.grad [[9.250000000000002, -17.9375,
35.875]])."""

from __future__ import annotations

from pathlib import Path

import pytest

import adjoint
from adjoint.format.errors import ProblemError

FILE = Path(__file__).parent / "data" / "regressions" / "lerp_in_a_hook_body.yaml"

# y = W x + b = [3.6, 0.05]; dL/dy = 2y = [7.2, 0.1]; g = W.grad = [7.2, 0.1]^T x
#   = [[7.2, -14.4, 3.6], [0.1, -0.2, 0.05]]; x.grad = W^T [7.2, 0.1] = [3.7, -7.175, 14.35]
# ema: m = 0.25 g after the first backward, m + 0.25 (g - m) = 0.4375 g after the second
# large_weight: 3g - (3g - g) * 0.25 = 2.5 x.grad


def test_lerp_in_hook_bodies():
    v = adjoint.load(FILE).solve().to_json()["variants"]
    assert "error" not in v["ema"]
    assert v["ema"]["values"]["m"]["exact"] == [["63/20", "-63/10", "63/40"], ["7/160", "-7/80", "7/320"]]
    assert v["large_weight"]["hook_calls"][0]["returned"]["exact"] == [["37/4", "-287/16", "287/8"]]
    assert v["large_weight"]["grads"]["x"]["exact"] == [["37/4", "-287/16", "287/8"]]


def test_recorded_lerp_is_refused():
    text = FILE.read_text().split("variants:")[0].replace('forward: "lin(x)"', 'forward: |\n    h = lin(x)\n'
                                                           '    h.lerp_(x[:, :2], 0.5)\n    return h')
    with pytest.raises(ProblemError, match=r"lerp_\(\) recorded by autograd \(LerpBackward0\) is not modelled"):
        adjoint.loads(text).solve()


def test_tensor_weight_is_refused():
    text = FILE.read_text().replace("g.lerp_(grad * 3, weight=0.75)", "g.lerp_(grad * 3, grad)")
    with pytest.raises(ProblemError, match=r"lerp_\(\) with a tensor weight is not modelled"):
        adjoint.loads(text).solve()


@pytest.mark.torch
def test_it_verifies_against_torch():
    from conftest import require_torch
    require_torch()
    from gen import check
    outcome = check(FILE.read_text(), timeout=60)
    assert outcome.ok, outcome.report()


def test_integer_lerp_is_refused():
    # torch.arange(3).lerp_(torch.arange(3), 0.5): NotImplementedError "lerp_kernel_scalar" not implemented for 'Long'
    text = FILE.read_text().replace('"g.lerp_(grad * 3, weight=0.75)"', '"k = torch.arange(3)", "k.lerp_(k, 0.5)"')
    with pytest.raises(ProblemError, match=r"lerp_\(\) of a int64 tensor is PyTorch's NotImplementedError"):
        adjoint.loads(text).solve()
