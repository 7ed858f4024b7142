"""Built-in modules of the margin losses: each forward as PyTorch's own (torch/nn/modules/loss.py),
one call of the functional with the module's constructor arguments (``weight`` of
MultiLabelSoftMarginLoss is a buffer, absent unless the file gives it)."""

from __future__ import annotations

from adjoint.engine.layers.losses import _call


def soft_margin_forward(c):
    return _call(c, "soft_margin_loss", ("reduction",))


def margin_ranking_forward(c):
    return _call(c, "margin_ranking_loss", ("margin", "reduction"), names=("input1", "input2", "target"))


def hinge_embedding_forward(c):
    return _call(c, "hinge_embedding_loss", ("margin", "reduction"))


def cosine_embedding_forward(c):
    return _call(c, "cosine_embedding_loss", ("margin", "reduction"), names=("input1", "input2", "target"))


def multilabel_soft_margin_forward(c):
    return _call(c, "multilabel_soft_margin_loss", ("reduction",), ("weight",))


FORWARDS = {
    "MultiLabelSoftMarginLoss": multilabel_soft_margin_forward,
    "CosineEmbeddingLoss": cosine_embedding_forward,
    "HingeEmbeddingLoss": hinge_embedding_forward,
    "MarginRankingLoss": margin_ranking_forward,
    "SoftMarginLoss": soft_margin_forward,
}
