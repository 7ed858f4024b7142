"""Second order through the pointwise losses: binary_cross_entropy (BinaryCrossEntropyBackwardBackward0, and
its target's logit formula), binary_cross_entropy_with_logits (plain ops), smooth_l1_loss
(SmoothL1LossBackwardBackward0) and huber_loss (HuberLossBackwardBackward0): the graph a create_graph
backward records, node for node (names and sequence_nr), and the grad of grad, against real torch 2.13 (all
four were refused before). The gradient reaching the loss requires grad here (``sum(y ** 3)``), so the
in-place ``mul_(grad)`` of the target formulas saves a clone of self (one more sequence_nr). Also: random
compositions with a loss, and the refusals (a third backward through the backward kernels, BCE's target gradient
at an input of 0 or 1)."""

import pytest
from conftest import require_torch

torch = require_torch()

from test_second_order import _compare_selecting  # noqa: E402

F = torch.nn.functional
F64 = torch.float64


def _t(v):
    return torch.tensor(v, dtype=F64)


_W = "torch.tensor([0.5, 2.0, 1.5], dtype=torch.float64)"
_P = "torch.tensor([[0.3, 0.6, 0.2], [0.7, 0.4, 0.9]], dtype=torch.float64)"
W, P = [0.5, 2.0, 1.5], [[0.3, 0.6, 0.2], [0.7, 0.4, 0.9]]

OPS = [  # (forward over h = a * b and b; the same in torch)
    # BinaryCrossEntropyBackward0: binary_cross_entropy_backward (one node), then the target's
    # logit(self).neg_().mul_(grad) [.mul_(weight)] [.div_(numel)]
    ("F.binary_cross_entropy(torch.sigmoid(h), b / 2)", lambda h, b: F.binary_cross_entropy(torch.sigmoid(h), b / 2)),
    ("F.binary_cross_entropy(torch.sigmoid(h), b / 2, reduction='sum')",
     lambda h, b: F.binary_cross_entropy(torch.sigmoid(h), b / 2, reduction="sum")),
    (f"F.binary_cross_entropy(torch.sigmoid(h), b / 2, weight={_W}, reduction='none')",
     lambda h, b: F.binary_cross_entropy(torch.sigmoid(h), b / 2, weight=_t(W), reduction="none")),
    (f"F.binary_cross_entropy(torch.sigmoid(h), b / 2, weight={_W})",
     lambda h, b: F.binary_cross_entropy(torch.sigmoid(h), b / 2, weight=_t(W))),
    (f"F.binary_cross_entropy(torch.sigmoid(h), {_P}, weight={_W}, reduction='sum')",
     lambda h, b: F.binary_cross_entropy(torch.sigmoid(h), _t(P), weight=_t(W), reduction="sum")),
    (f"F.binary_cross_entropy({_P}, torch.sigmoid(h))", lambda h, b: F.binary_cross_entropy(_t(P), torch.sigmoid(h))),
    # BinaryCrossEntropyWithLogitsBackward0: its formulas as plain ops (out of place under grad mode, but
    # the mean's div_ and the target formula's in-place steps)
    ("F.binary_cross_entropy_with_logits(h, b / 2)", lambda h, b: F.binary_cross_entropy_with_logits(h, b / 2)),
    (f"F.binary_cross_entropy_with_logits(h, b / 2, weight={_W}, pos_weight={_W} * 2)",
     lambda h, b: F.binary_cross_entropy_with_logits(h, b / 2, weight=_t(W), pos_weight=_t(W) * 2)),
    (f"F.binary_cross_entropy_with_logits(h, b / 2, pos_weight={_W}, reduction='sum')",
     lambda h, b: F.binary_cross_entropy_with_logits(h, b / 2, pos_weight=_t(W), reduction="sum")),
    (f"F.binary_cross_entropy_with_logits(h, b / 2, weight={_W}, reduction='none')",
     lambda h, b: F.binary_cross_entropy_with_logits(h, b / 2, weight=_t(W), reduction="none")),
    (f"F.binary_cross_entropy_with_logits(h * 3, {_P}, pos_weight={_W})",
     lambda h, b: F.binary_cross_entropy_with_logits(h * 3, _t(P), pos_weight=_t(W))),
    (f"F.binary_cross_entropy_with_logits({_P}, torch.sigmoid(h), weight={_W}, pos_weight={_W}, reduction='sum')",
     lambda h, b: F.binary_cross_entropy_with_logits(_t(P), torch.sigmoid(h), weight=_t(W), pos_weight=_t(W),
                                                     reduction="sum")),
    # SmoothL1LossBackward0 / HuberLossBackward0: the backward kernel for self, then for target (arguments swapped);
    # beta / delta 0.2 puts elements on both pieces
    ("F.smooth_l1_loss(h, b / 2, beta=0.2)", lambda h, b: F.smooth_l1_loss(h, b / 2, beta=0.2)),
    ("F.smooth_l1_loss(h, b / 2, reduction='sum')", lambda h, b: F.smooth_l1_loss(h, b / 2, reduction="sum")),
    ("F.smooth_l1_loss(h * 4, b, beta=0.5, reduction='none')",
     lambda h, b: F.smooth_l1_loss(h * 4, b, beta=0.5, reduction="none")),
    (f"F.smooth_l1_loss({_P}, h, beta=0.3)", lambda h, b: F.smooth_l1_loss(_t(P), h, beta=0.3)),
    ("F.huber_loss(h, b / 2, delta=0.2)", lambda h, b: F.huber_loss(h, b / 2, delta=0.2)),
    ("F.huber_loss(h, b / 2, reduction='sum', delta=0.25)",
     lambda h, b: F.huber_loss(h, b / 2, reduction="sum", delta=0.25)),
    ("F.huber_loss(h * 4, b, reduction='none')", lambda h, b: F.huber_loss(h * 4, b, reduction="none")),
    (f"F.huber_loss(h, {_P}, delta=0.5)", lambda h, b: F.huber_loss(h, _t(P), delta=0.5)),
]


@pytest.mark.parametrize("forward,twin", OPS, ids=[s[0] for s in OPS])
def test_second_order_through_the_loss_against_torch(forward, twin):
    """The first gradients' recorded graphs node for node and the grad of grad, against torch 2.13."""
    _compare_selecting(forward, lambda h, i, b: twin(h, b))


THIRD = """
name: third
dtype: float64
inputs:
  x: {value: [[0.5, -1, 0.25], [1, 0.5, -0.75]], requires_grad: true}
  t: {value: [[0.2, 0.9, 0.4], [0.7, 0.1, 0.5]], requires_grad: TARGET_GRAD}
model:
  inputs: [x, t]
  forward: |
    return FORWARD
loss: "y"
steps:
  - forward
  - {backward: {method: grad, inputs: INPUTS, create_graph: true, as: GRADS}}
  - {backward: {method: grad, inputs: [x], root: "ROOT", create_graph: true, as: [hx]}}
  - {backward: {root: "sum(hx ** 2)"}}
"""

THIRD_REFUSED = [  # (forward, whether the target requires grad, the node a third backward meets first)
    ("F.binary_cross_entropy(torch.sigmoid(x), t)", False, "BinaryCrossEntropyBackwardBackward0"),
    ("F.binary_cross_entropy(torch.sigmoid(x), t, reduction='sum')", True, "LogitBackward0"),
    ("F.smooth_l1_loss(x, t, beta=0.5)", True, "SmoothL1LossBackwardBackward0"),
    ("F.huber_loss(x, t, reduction='none').sum()", False, "HuberLossBackwardBackward0"),
]


@pytest.mark.parametrize("forward,target_grad,node", THIRD_REFUSED, ids=[s[0] for s in THIRD_REFUSED])
def test_a_third_backward_through_the_loss_backward_kernels_is_refused(forward, target_grad, node):
    """The second backward through these kernels is modelled; a create_graph backward through them (their
    derivatives' own recorded ops) is not yet: refused at the step, in the one-line message."""
    import adjoint
    from adjoint.format.errors import ProblemError
    inputs, grads = ("[x, t]", "[gx, gt]") if target_grad else ("[x]", "[gx]")
    text = THIRD.replace("FORWARD", forward).replace("TARGET_GRAD", str(target_grad).lower()) \
        .replace("INPUTS", inputs).replace("GRADS", grads) \
        .replace("ROOT", "sum(gx ** 2) + sum(gt ** 2)" if target_grad else "sum(gx ** 2)")
    with pytest.raises(ProblemError, match=f"create_graph through {node} is not modelled yet"):
        adjoint.loads(text).solve()


EDGE = """
name: edge
dtype: float64
inputs:
  x: {value: [0, 0.5, 1]}
  t: {value: [0.2, 0.9, 0.4], requires_grad: true}
model:
  inputs: [x, t]
  forward: |
    return F.binary_cross_entropy(x, t)
loss: "y"
steps:
  - forward
  - {backward: {method: grad, inputs: [t], create_graph: true, as: [gt]}}
  - {backward: {root: "sum(gt ** 2)"}}
"""


def test_the_target_gradient_at_an_input_of_0_or_1_is_refused():
    """logit(0) and logit(1) are -inf and inf: torch 2.13's first gradient is inf there and its grad of grad
    nan (checked here); adjoint refuses the create_graph step rather than model those non-finite values."""
    import adjoint
    from adjoint.format.errors import ProblemError
    x = _t([0, 0.5, 1])
    t = torch.tensor([0.2, 0.9, 0.4], dtype=F64, requires_grad=True)
    (gt,) = torch.autograd.grad(F.binary_cross_entropy(x, t), [t], create_graph=True)
    assert torch.isinf(gt[0]) and torch.isinf(gt[2])
    with pytest.raises(ProblemError, match="create_graph through BinaryCrossEntropyBackward0's target gradient at "
                                           "an input of 0 or 1 is not modelled yet"):
        adjoint.loads(EDGE).solve()


# random compositions: a loss over two random compositions of the modelled ops (tests/test_second_order.py's), times
# a third, so that the gradient reaching the loss node requires grad; each loss with what it applies to its operands
# first (evaluated in Python's order: the input's, then the target's)
_SIG, _ID = torch.sigmoid, (lambda a: a)
LOSSES = [
    ("F.binary_cross_entropy(sigmoid({0}), sigmoid({1}), reduction='none')", _SIG, _SIG,
     lambda a, b: F.binary_cross_entropy(a, b, reduction="none")),
    ("F.binary_cross_entropy(sigmoid({0}), sigmoid({1}) * 0.5, weight=torch.tensor([0.5, 2.0], dtype=torch.float64))",
     _SIG, lambda b: torch.sigmoid(b) * 0.5, lambda a, b: F.binary_cross_entropy(a, b, weight=_t([0.5, 2.0]))),
    ("F.binary_cross_entropy_with_logits({0}, sigmoid({1}), pos_weight=torch.tensor([1.5, 0.5], dtype=torch.float64), "
     "reduction='sum')", _ID, _SIG,
     lambda a, b: F.binary_cross_entropy_with_logits(a, b, pos_weight=_t([1.5, 0.5]), reduction="sum")),
    ("F.binary_cross_entropy_with_logits({0}, sigmoid({1}), weight=torch.tensor([2.0, 0.5], dtype=torch.float64), "
     "reduction='none')", _ID, _SIG,
     lambda a, b: F.binary_cross_entropy_with_logits(a, b, weight=_t([2.0, 0.5]), reduction="none")),
    ("F.smooth_l1_loss({0}, {1}, beta=0.5, reduction='none')", _ID, _ID,
     lambda a, b: F.smooth_l1_loss(a, b, beta=0.5, reduction="none")),
    ("F.huber_loss({0}, {1}, delta=0.5)", _ID, _ID, lambda a, b: F.huber_loss(a, b, delta=0.5)),
]
_ENV = {"x": torch.zeros(2), "w": torch.zeros(2), "c": torch.zeros(1)}


def _of_two(rng):
    """A random composition (tests/test_second_order.random_expr) of two elements, as the losses' operands must be."""
    from test_second_order import random_expr
    while True:
        text, fn = random_expr(rng, 2)
        if tuple(torch.as_tensor(fn(_ENV)).shape) == (2,):
            return text, fn


@pytest.mark.parametrize("seed", range(24))
def test_random_second_order_through_a_loss_against_torch(seed):
    """Random compositions with a loss: the first-order gradients' recorded graphs (names, sequence_nr) and the
    second grad's results, against torch 2.13."""
    import random
    from test_second_order import _compare_second_order, random_expr
    rng = random.Random(seed)
    text, pa, pb, fn = rng.choice(LOSSES)
    (a, fa), (b, fb) = _of_two(rng), _of_two(rng)
    c, fc = random_expr(rng, 2)
    _compare_second_order(f"({text.format(a, b)}) * ({c})",
                          lambda env: fn(pa(fa(env)), pb(fb(env))) * fc(env), rng.choice(["sum", "mean"]))
