"""Every derivative rule against SymPy's differentiation (adjoint.engine.gradcheck), and the
checker itself against a deliberately wrong rule."""

from dataclasses import replace

import pytest

from adjoint.engine.gradcheck import cases, check, reads_only_saved
from adjoint.engine.ops import REGISTRY, Check


@pytest.mark.parametrize("op,case", cases(), ids=lambda x: getattr(x, "name", None) or f"{x.shapes}-{x.params}")
def test_rule_matches_sympy_jacobian(op, case):
    assert check(op, case) == []


@pytest.mark.parametrize("op,case", cases(), ids=lambda x: getattr(x, "name", None) or f"{x.shapes}-{x.params}")
def test_rule_reads_only_what_the_node_saves(op, case):
    assert reads_only_saved(op, case) == []


def test_saved_check_catches_relu_reading_its_input():
    def relu_by_input(B, gs, ins, outs, p, need):  # ReluBackward0 saves the result, not self
        return [B.select_positive(ins[0], gs[0])]

    bad = replace(REGISTRY["relu"], vjp=relu_by_input)
    assert reads_only_saved(bad, Check(((2, 2),)))


def test_every_rule_is_checked():
    # an op with no differentiable input (a comparison) makes no node: it has no rule to check
    assert [name for name, op in REGISTRY.items()
            if not op.checks and (op.differentiable is None or any(op.differentiable))] == []
    assert not any(REGISTRY["compare"].differentiable)


def test_checker_catches_a_wrong_rule():
    def wrong_tanh_vjp(B, gs, ins, outs, p, need):  # sign error: 1 + out^2
        return [B.mul(gs[0], B.add(B.scalar(1), B.mul(outs[0], outs[0])))]

    bad = replace(REGISTRY["tanh"], vjp=wrong_tanh_vjp)
    assert check(bad, Check(((2, 2),)))


def test_checker_catches_a_missing_broadcast_reduction():
    def unreduced(B, gs, ins, outs, p, need):
        return [gs[0], gs[0]]

    bad = replace(REGISTRY["add"], vjp=unreduced)
    assert check(bad, Check(((2, 3), (3,))))
