"""Second order through the pointwise losses: binary_cross_entropy (BinaryCrossEntropyBackwardBackward0, and
its target's logit formula), binary_cross_entropy_with_logits (plain ops), smooth_l1_loss
(SmoothL1LossBackwardBackward0) and huber_loss (HuberLossBackwardBackward0): the graph a create_graph
backward records, node for node (names and sequence_nr), and the grad of grad, against real torch 2.13 (all
four were refused before). The gradient reaching the loss requires grad here (``sum(y ** 3)``), so the
in-place ``mul_(grad)`` of the target formulas saves a clone of self (one more sequence_nr)."""

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
