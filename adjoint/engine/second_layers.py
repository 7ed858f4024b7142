"""Backward formulas recorded as ops (see adjoint.engine.second_formulas) for the layer ops
``_prelu_kernel`` (F.prelu, nn.PReLU), ``glu``, ``embedding``, reflection and replication padding, and
``pixel_shuffle`` / ``pixel_unshuffle``, as torch 2.13 records them under create_graph (checked by
printing the first gradient's ``grad_fn`` chain and ``_sequence_nr()``; tests/test_second_layers.py):

* ``PreluKernelBackward0``: ``_prelu_kernel_backward(grad, self, weight)``, one
  ``PreluKernelBackwardBackward0`` with two outputs; the weight's, of self's shape, summed to the
  weight by validate_outputs (``SumBackward1``);
* ``GluBackward0``: ``glu_backward(grad, self, dim)``: ``GluBackwardBackward0``;
* ``ReflectionPadNDBackward0`` / ``ReplicationPadNDBackward0``: ``X_padNd_backward(grad, self,
  padding)``: ``XPadNDBackwardBackward0``, whose own formula is the padding of the gradient (the
  forward op again) and ``zeros_like(self)``;
* ``EmbeddingBackward0``: ``embedding_dense_backward(grad, indices, ...)``:
  ``EmbeddingDenseBackwardBackward0``, whose own formula (a third backward) records
  ``IndexSelectBackward0``, ``MaskedFillBackward0`` (with a ``padding_idx``) and ``ViewBackward0``;
* ``PixelShuffleBackward0``: ``pixel_unshuffle(grad, r)`` (``PixelUnshuffleBackward0``), and the other way.

The backward kernels' records are in adjoint.engine.ops.second_layers. A third backward runs through
each backward kernel too (its derivatives.yaml formula replayed in torch's order).
"""

from __future__ import annotations

from adjoint.engine.ops.activations import compare_forward


def _prelu(rt, node, grads, saved, need):
    grad_self, grad_weight = rt.apply("prelu_kernel_backward", [grads[0], saved["self"], saved["weight"]], None,
                                      node.loc)
    return [grad_self, grad_weight]


def _prelu_backward_again(rt, node, grads, saved, need):
    # PreluKernelBackwardBackward0 (derivatives.yaml's _prelu_kernel_backward; gg0, gg1 the gradients of its two
    # outputs, either undefined), in slot order: grad_output where(self >= 0, gg0, gg0 * weight + gg1 * self) (the
    # right operand of + first: MulBackward0, MulBackward0, AddBackward0, then WhereBackward0; a missing gg1: one
    # product; a missing gg0: where(self >= 0, 0, gg1 * self)); self where(self >= 0, 0, grad_output * gg1) (gg1
    # missing: zeros_like(self), no node); weight where(self >= 0, 0, grad_output * gg0) (gg0 missing: zeros),
    # of self's shape (validate_outputs sums it). ``self >= 0`` and the 0-d zeros record nothing
    gg0, gg1 = (list(grads) + [None])[:2]
    go, x, w = saved["grad_output"], saved["self"], saved["weight"]
    B, loc = rt.B, node.loc
    like = gg0 if gg0 is not None else gg1
    zero = rt.tensor(B.zeros(()), dtype=like.dtype)
    mask = rt.tensor(compare_forward(B, [x.value, B.zeros(())], "ge"), dtype="bool")

    def where(a, b):
        return rt.apply("where", [a, b, mask], None, loc)
    d_go = d_x = d_w = None
    if need[0]:
        if gg0 is None:
            d_go = where(zero, rt.apply("mul", [gg1, x], None, loc))
        elif gg1 is None:
            d_go = where(gg0, rt.apply("mul", [gg0, w], None, loc))
        else:
            right = rt.apply("mul", [gg1, x], None, loc)
            d_go = where(gg0, rt.apply("add", [rt.apply("mul", [gg0, w], None, loc), right], None, loc))
    if need[1]:
        d_x = where(zero, rt.apply("mul", [go, gg1], None, loc)) if gg1 is not None else \
            rt.tensor(B.zeros(tuple(x.shape)), dtype=like.dtype)
    if need[2]:
        d_w = where(zero, rt.apply("mul", [go, gg0], None, loc)) if gg0 is not None else \
            rt.tensor(B.zeros(tuple(x.shape)), dtype=like.dtype)
    return [d_go, d_x, d_w]


def _glu(rt, node, grads, saved, need):
    return [rt.apply("glu_backward", [grads[0], saved["self"]], node.params, node.loc)]


def _embedding(rt, node, grads, saved, need):
    # EmbeddingBackward0: embedding_backward (sparse=False): embedding_dense_backward(grad, indices, num_weights,
    # padding_idx, scale_grad_by_freq): EmbeddingDenseBackwardBackward0
    rows = tuple(node.inputs[0].shape)[0]
    return [rt.apply("embedding_dense_backward", [grads[0], saved["indices"]], (rows, node.params), node.loc), None]


def _embedding_backward_again(rt, node, grads, saved, need):
    # EmbeddingDenseBackwardBackward0: embedding_dense_double_backward(grad, indices, padding_idx):
    # grad.index_select(0, indices.reshape(-1)) (IndexSelectBackward0; the reshape of the indices records
    # nothing), masked_fill_ of the padding_idx rows in place on that fresh result (MaskedFillBackward0), then
    # view(indices.shape + (-1,)) (ViewBackward0)
    g, idx = grads[0], saved["indices"]
    B = rt.B
    flat = B.as_indices(idx.value).reshape(-1)
    picked = rt.apply("index_select", [g, rt.tensor(B.reshape(idx.value, (flat.size,)), dtype=idx.dtype)], 0,
                      node.loc)
    padding = node.params[1].padding_idx
    if padding >= 0:
        mask = rt.tensor(B.constant([int(i == padding) for i in flat], (flat.size, 1)), dtype="bool")
        picked = rt.apply("masked_fill", [picked, mask], 0, node.loc)
    return [rt.apply("view", [picked], tuple(idx.shape) + (tuple(g.shape)[-1],), node.loc), None]


def _glu_backward_again(rt, node, grads, saved, need):
    # GluBackwardBackward0, grad_output then self (torch 2.13's sequence numbers; C++ evaluates the right operand
    # of a binary operator first). grad_output: glu_double_backward_grad_output: tmp = grad * glu_backward(ones,
    # self, dim) (GluBackwardBackward0 without a gradient edge, MulBackward0), then tmp.narrow(second half) +
    # tmp.narrow(first half) (SliceBackward0, SliceBackward0, AddBackward0). self: glu_double_backward: the halves
    # a, b of self (SliceBackward0 each), s = b.sigmoid(), 1 - s (SubBackward0), s (1 - s); the gradient's halves
    # gA, gB; gB * a; gI_a = gB * gO * s(1-s); s'' = s(1-s) (1-s) - s s(1-s); gI_b = gB a gO s'' + gA gO s(1-s)
    # (the right product first); cat([gI_a, gI_b], dim) (CatBackward0)
    g, go, x = grads[0], saved["grad_output"], saved["self"]
    dim, loc, B = node.params, node.loc, rt.B
    n = tuple(x.shape)[dim] // 2

    def mul(a, b):
        return rt.apply("mul", [a, b], None, loc)

    def half(t, start):
        return rt.apply("slice", [t], (dim, start, start + n, 1), loc)
    d_go = d_x = None
    if need[0]:
        ones = rt.tensor(B.full(tuple(go.shape), 1), dtype=go.dtype)
        tmp = mul(g, rt.apply("glu_backward", [ones, x], dim, loc))
        second = half(tmp, n)
        d_go = rt.apply("add", [half(tmp, 0), second], None, loc)
    if len(need) > 1 and need[1]:
        a, b = half(x, 0), half(x, n)
        s = rt.apply("sigmoid", [b], None, loc)
        one_minus = rt.apply("sub", [rt.tensor(B.full(tuple(s.shape), 1), dtype=s.dtype), s], None, loc)
        slope = mul(s, one_minus)
        gga, ggb = half(g, 0), half(g, n)
        ggb_a = mul(ggb, a)
        first = mul(mul(ggb, go), slope)
        right = mul(s, slope)
        curve = rt.apply("sub", [mul(slope, one_minus), right], None, loc)
        tail = mul(mul(gga, go), slope)
        second = rt.apply("add", [mul(mul(ggb_a, go), curve), tail], None, loc)
        d_x = rt.apply("cat", [first, second], dim, loc)
    return [d_go, d_x]


def _pad(rt, node, grads, saved, need):
    return [rt.apply(f"{node.op.name}_backward", [grads[0], saved["self"]], node.params, node.loc)]


def _pad_backward(rt, node, grads, saved, need):
    # XPadNDBackwardBackward0: grad_output: X_padNd(grad, padding) (the forward's node again); self: zeros_like(self)
    g = grads[0]
    a = rt.apply(node.op.name[:-len("_backward")], [g], node.params, node.loc) if need[0] else None
    b = None
    if len(need) > 1 and need[1]:
        b = rt.tensor(rt.B.zeros(tuple(node.inputs[1].shape)), dtype=g.dtype)
    return [a, b]


def _shuffle(other: str):
    def formula(rt, node, grads, saved, need):
        return [rt.apply(other, [grads[0]], node.params, node.loc)]
    return formula


_PADS = tuple(f"{kind}_pad{rank}d" for kind in ("reflection", "replication") for rank in (1, 2, 3))

LAYERS = {
    "_prelu_kernel": _prelu, "prelu_kernel_backward": _prelu_backward_again, "glu": _glu,
    "glu_backward": _glu_backward_again, "embedding": _embedding,
    "embedding_dense_backward": _embedding_backward_again,
    "pixel_shuffle": _shuffle("pixel_unshuffle"), "pixel_unshuffle": _shuffle("pixel_shuffle"),
    **{name: _pad for name in _PADS}, **{f"{name}_backward": _pad_backward for name in _PADS},
}
