"""Adam stepped in post-accumulate-grad hooks and as a step (adjoint/engine/adam.py), checked
against values derived by hand: with a constant gradient g, Adam's exact update is the same
every step,

    m_t = g (1 - b1^t),  v_t = g^2 (1 - b2^t),
    p <- p - (lr / (1 - b1^t)) * m_t / (sqrt(v_t) / sqrt(1 - b2^t) + eps) = p - lr * g / (|g| + eps),

so after k steps p = p0 - k * lr * g / (|g| + eps), exactly (the square roots cancel). The
e2e port's Linear(3, 2) with loss = sum(model(input)) has that constant gradient: each row of
weight.grad is the column sums of input, bias.grad is 2 (the batch size). The port itself is
checked against torch in tests/test_pytorch_ports.py."""

from __future__ import annotations

import os
from fractions import Fraction

import pytest

import adjoint

HERE = os.path.dirname(os.path.abspath(__file__))
E2E = os.path.join(HERE, "pytorch", "test_post_accumulate_grad_hook_e2e.yaml")

W0 = [[Fraction(1, 2), Fraction(-1, 4), Fraction(1)], [Fraction(-1), Fraction(3, 4), Fraction(1, 8)]]
B0 = [Fraction(1, 4), Fraction(-1, 2)]
INPUT = [[Fraction(1, 2), Fraction(1, 4), Fraction(3, 4)], [Fraction(1, 8), Fraction(1), Fraction(1, 2)]]
LR, EPS = Fraction(1, 1000), Fraction(1, 10 ** 8)


@pytest.fixture(scope="module")
def solved():
    return adjoint.load(E2E).solve()   # once for both tests: two variants, fifteen exact Adam steps


def _after(p0, g, k):
    return p0 - k * LR * g / (abs(g) + EPS)


def _exact(v) -> list:
    flat = []
    stack = [v["exact"]]
    while stack:
        x = stack.pop(0)
        if isinstance(x, list):
            stack[:0] = x
        else:
            flat.append(Fraction(x))
    return flat


def test_adam_in_hooks_and_as_a_step_match_the_closed_form(solved):
    answer = solved.to_json()["variants"]
    col = [sum(row[j] for row in INPUT) for j in range(3)]
    want_w = [_after(w, col[j], 5) for row in W0 for j, w in enumerate(row)]
    want_b = [_after(b, Fraction(2), 5) for b in B0]
    hooked = answer["in_backward"]
    for k, p in enumerate(hooked["passes"]):   # the hooks step during passes 1..5, never after their removal
        steps = min(k + 1, 5)
        assert _exact(p["leaf_values"]["bias"]) == [_after(b, Fraction(2), steps) for b in B0]
    assert _exact(hooked["leaf_values"]["weight"]) == want_w
    assert _exact(hooked["leaf_values"]["bias"]) == want_b
    copy = answer["copy"]   # one Adam over model.parameters(), stepped ten times; its last forward's values
    assert _exact(copy["values"]["weight"]) == [_after(w, col[j], 10) for row in W0 for j, w in enumerate(row)]
    assert _exact(copy["values"]["bias"]) == [_after(b, Fraction(2), 10) for b in B0]


def test_adam_step_is_worded_as_adam_in_the_derivation(solved):
    shown = solved.variants[1]
    steps = [s for s in shown.derivation.steps if s.kind == "step"]
    assert len(steps) == 10 and all(s.optimizer == ("Adam", LR, (Fraction(9, 10), Fraction(999, 1000)), EPS)
                                    for s in steps)
