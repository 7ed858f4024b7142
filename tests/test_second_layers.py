"""Second order through the layer ops (F.prelu, F.glu, F.embedding, reflect / replicate F.pad, pixel_shuffle and
pixel_unshuffle), and the composites that needed no formula of their own (softsign, tanhshrink,
softmin, rms_norm): the graph a create_graph backward records, node for node (names and
sequence_nr), and the grad of grad, against real torch 2.13."""

import pytest
from conftest import require_torch

torch = require_torch()

from test_second_order import (_IDX, SELECTING, _compare_selecting, _run, _two_leaves, assert_same_graph,  # noqa: E402
                               chain_ours, chain_torch, start_seq)

F = torch.nn.functional


def _mask(h):
    return h * (h > 0.1)


LAYERS = [  # (forward, the same in torch of h, the index and b)
    # PreluKernelBackward0: _prelu_kernel_backward(grad, self, weight): PreluKernelBackwardBackward0, the
    # weight's gradient (self's shape) summed by validate_outputs (SumBackward1), then the weight view's
    ("F.prelu(h, b[0, :1])", lambda h, i, b: F.prelu(h, b[0, :1])),
    ("F.prelu(h, b[1] - 1)", lambda h, i, b: F.prelu(h, b[1] - 1)),
    ("F.prelu(h.reshape(1, 3, 2), b[0] * 2) * 3", lambda h, i, b: F.prelu(h.reshape(1, 3, 2), b[0] * 2) * 3),
    # zeros in the input: the forward kernel tests self > 0, its derivative self >= 0
    ("F.prelu(h * (h > 0.1), b[1])", lambda h, i, b: F.prelu(_mask(h), b[1])),
    # a weight without grad: the node still has three slots (the weight's None)
    ("F.prelu(h, idx[0].double() * 0.25)", lambda h, i, b: F.prelu(h, i[0].double() * 0.25)),
    # GluBackward0: glu_backward(grad, self, dim): GluBackwardBackward0
    ("F.glu(h, 0)", lambda h, i, b: F.glu(h, 0)),
    ("F.glu(torch.cat([h, b], 1), -1)", lambda h, i, b: F.glu(torch.cat([h, b], 1), -1)),
    ("F.glu(h.t(), 1) * h[:, 0]", lambda h, i, b: F.glu(h.t(), 1) * h[:, 0]),
    # XPadNDBackward0: X_padNd_backward(grad, self, padding): XPadNDBackwardBackward0
    ("F.pad(h.unsqueeze(0), (1, 1), mode='reflect')", lambda h, i, b: F.pad(h.unsqueeze(0), (1, 1), mode="reflect")),
    ("F.pad(h.unsqueeze(0), (2, 1), mode='replicate')",
     lambda h, i, b: F.pad(h.unsqueeze(0), (2, 1), mode="replicate")),
    ("F.pad(h.reshape(1, 1, 2, 3), (1, 2, 1, 0), mode='reflect')",
     lambda h, i, b: F.pad(h.reshape(1, 1, 2, 3), (1, 2, 1, 0), mode="reflect")),
    ("F.pad(h.reshape(1, 2, 3), (0, 2, 1, 1), mode='replicate')",
     lambda h, i, b: F.pad(h.reshape(1, 2, 3), (0, 2, 1, 1), mode="replicate")),
    ("F.pad(h.reshape(1, 1, 1, 2, 3), (1, 1, 1, 0, 0, 1), mode='replicate')",
     lambda h, i, b: F.pad(h.reshape(1, 1, 1, 2, 3), (1, 1, 1, 0, 0, 1), mode="replicate")),
    ("F.pad(h.reshape(1, 1, 2, 3), (1, 1, 1, 1, 0, 0), mode='reflect')",
     lambda h, i, b: F.pad(h.reshape(1, 1, 2, 3), (1, 1, 1, 1, 0, 0), mode="reflect")),
    # PixelShuffleBackward0: pixel_unshuffle(grad, r) (PixelUnshuffleBackward0), and the other way
    ("F.pixel_shuffle(h.reshape(1, 6, 1, 1)[:, :4], 2)",
     lambda h, i, b: F.pixel_shuffle(h.reshape(1, 6, 1, 1)[:, :4], 2)),
    ("F.pixel_unshuffle(h.reshape(1, 1, 2, 3)[:, :, :, :2], 2) * h[0, 0]",
     lambda h, i, b: F.pixel_unshuffle(h.reshape(1, 1, 2, 3)[:, :, :, :2], 2) * h[0, 0]),
    # EmbeddingBackward0: embedding_dense_backward(grad, indices, ...): EmbeddingDenseBackwardBackward0, whose
    # backward picks the rows again (0 at padding_idx; not divided by the counts with scale_grad_by_freq)
    ("F.embedding(idx[1], h)", lambda h, i, b: F.embedding(i[1], h)),
    ("F.embedding(idx, h.t()[:, :2], padding_idx=1) * 2", lambda h, i, b: F.embedding(i, h.t()[:, :2], padding_idx=1) * 2),
    ("F.embedding(idx, h.t(), padding_idx=-1)", lambda h, i, b: F.embedding(i, h.t(), padding_idx=-1)),
    ("F.embedding(idx[1], h, scale_grad_by_freq=True)", lambda h, i, b: F.embedding(i[1], h, scale_grad_by_freq=True)),
    # composites: their ops' formulas (TanhBackwardBackward0, SoftmaxBackwardDataBackward0, NegBackward0,
    # RsqrtBackward0's pow, ...) were there already
    ("F.tanhshrink(h * 3)", lambda h, i, b: F.tanhshrink(h * 3)),
    ("F.softmin(h, 1)", lambda h, i, b: F.softmin(h, 1)),
    ("F.softmin(h * 2, dim=0)", lambda h, i, b: F.softmin(h * 2, dim=0)),
    ("F.rms_norm(h, (3,), b[0])", lambda h, i, b: F.rms_norm(h, (3,), b[0])),
    ("F.rms_norm(h, (2, 3), eps=0.5)", lambda h, i, b: F.rms_norm(h, (2, 3), eps=0.5)),
]


@pytest.mark.parametrize("forward,twin", LAYERS, ids=[s[0] for s in LAYERS])
def test_layer_ops_second_order_against_torch(forward, twin):
    """The first gradients' recorded graphs node for node and the grad of grad, against torch 2.13
    (prelu, glu, embedding, the paddings and the pixel shuffles were refused before)."""
    _compare_selecting(forward, twin)


THIRD = SELECTING.replace(
    "  - {backward: {method: grad, inputs: [a, b], root: \"sum(ga * ga) + sum(gb ** 3)\", as: [ha, hb]}}",
    "  - {backward: {method: grad, inputs: [a, b], root: \"sum(ga * ga) + sum(gb ** 3)\", create_graph: true, "
    "as: [ha, hb]}}\n  - {backward: {method: grad, inputs: [a, b], root: \"sum(ha ** 2) + sum(hb)\", as: [ka, kb]}}")

THIRDS = [  # (forward, the same in torch of h and the index, a node the second create_graph backward records)
    # XPadNDBackwardBackward0's own formula: X_padNd(grad, padding) (a second XPadNDBackward0) and zeros_like(self)
    ("F.pad(h.unsqueeze(0), (2, 1), mode='reflect')", lambda h, i, b: F.pad(h.unsqueeze(0), (2, 1), mode="reflect"),
     "ReflectionPad1DBackward0"),
    ("F.pad(h.reshape(1, 1, 2, 3), (1, 0, 1, 1), mode='replicate')",
     lambda h, i, b: F.pad(h.reshape(1, 1, 2, 3), (1, 0, 1, 1), mode="replicate"), "ReplicationPad2DBackward0"),
    # PreluKernelBackwardBackward0's: where(self >= 0, ...) of products (MulBackward0, AddBackward0, WhereBackward0)
    ("F.prelu(h, b[1] - 1)", lambda h, i, b: F.prelu(h, b[1] - 1), "WhereBackward0"),
    ("F.prelu(h * (h > 0.1), b[0, :1])", lambda h, i, b: F.prelu(_mask(h), b[0, :1]), "WhereBackward0"),
    # a weight without grad: no gradient reaches the weight's output (gg1 undefined)
    ("F.prelu(h, idx[1].double() - 0.5)", lambda h, i, b: F.prelu(h, i[1].double() - 0.5), "WhereBackward0"),
    # GluBackwardBackward0's: glu_double_backward_grad_output (GluBackwardBackward0 of ones, MulBackward0, two
    # SliceBackward0, AddBackward0) and glu_double_backward (slices, sigmoid, 1 - s, products, CatBackward0)
    ("F.glu(h, 0)", lambda h, i, b: F.glu(h, 0), "CatBackward0"),
    ("F.glu(torch.cat([h, b], 1), -1)", lambda h, i, b: F.glu(torch.cat([h, b], 1), -1), "GluBackwardBackward0"),
    # EmbeddingDenseBackwardBackward0's: index_select (IndexSelectBackward0), masked_fill_ of padding_idx's rows
    # (MaskedFillBackward0), view (ViewBackward0)
    ("F.embedding(idx[1], h)", lambda h, i, b: F.embedding(i[1], h), "IndexSelectBackward0"),
    ("F.embedding(idx, h.t(), padding_idx=0)", lambda h, i, b: F.embedding(i, h.t(), padding_idx=0),
     "MaskedFillBackward0"),
]


@pytest.mark.parametrize("forward,twin,node", THIRDS, ids=[s[0] for s in THIRDS])
def test_a_third_backward_through_prelu_pad_or_embedding_backward(forward, twin, node):
    """A third backward through the prelu, glu, padding and embedding backward kernels: the second
    create_graph backward's graphs node for node and the third backward's values, against torch 2.13."""
    run = _run(THIRD.replace("FORWARD", forward))
    assert run.error is None, run.error
    base = start_seq()
    a, b = _two_leaves()
    ga, gb = torch.autograd.grad((twin(a * b, torch.tensor(_IDX), b) ** 3).sum(), [a, b], create_graph=True)
    ha, hb = torch.autograd.grad((ga * ga).sum() + (gb ** 3).sum(), [a, b], create_graph=True)
    recorded = chain_torch(ha, base)
    assert node in [n for n, seq, _ in recorded if seq is not None and seq > chain_torch(ga, base)[0][1]]
    assert_same_graph(chain_ours(run.made["ha"]), recorded, "ha")
    assert_same_graph(chain_ours(run.made["hb"]), chain_torch(hb, base), "hb")
    ka, kb = torch.autograd.grad((ha ** 2).sum() + hb.sum(), [a, b])
    assert run.made["ka"].value.a.ravel().tolist() == pytest.approx(ka.flatten().tolist(), abs=1e-9)
    assert run.made["kb"].value.a.ravel().tolist() == pytest.approx(kb.flatten().tolist(), abs=1e-9)
