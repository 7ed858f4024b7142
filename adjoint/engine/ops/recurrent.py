"""The recurrent layers' own primitives.

``unsafe_split`` (``UnsafeSplitBackward0``): ``split`` whose pieces autograd does not track as
views, which the recurrent cells (``at::lstm_cell``, ``at::gru_cell``: ``gates.unsafe_chunk``)
write in place (``sigmoid_``, ``add_``) with no CopySlices. The same values and VJP as
``split`` (the pieces' gradients concatenated, undefined ones as zeros); the pieces are fresh
tensors here (contiguous copies), which they are not in memory, but nothing reads the split
input again in the cells.

``mkldnn_lstm_layer`` (``MkldnnRnnLayerBackward0``): oneDNN's fused LSTM layer, which an
``nn.LSTM`` in float32 runs on the CPU (one per layer and direction; see the record below)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from adjoint.engine.ops.record import Check, Math, Op, Save
from adjoint.engine.ops.views import OPS as _VIEW_OPS
from adjoint.values.mathtree import Fn, TFn, generic_vjp, layer

_SPLIT = next(op for op in _VIEW_OPS if op.name == "split")

OPS = (
    replace(_SPLIT, name="unsafe_split", node="UnsafeSplitBackward0", view=False, layout=None, scatter=None),
)

_TRANSPOSE = next(op for op in _VIEW_OPS if op.name == "transpose")

#: ``transpose_`` (``TransposeBackward1``): the in-place transpose ATen's ``rnn_tanh`` / ``rnn_relu`` /
#: ``gru`` apply to their fresh stacked output when ``batch_first`` (``std::get<0>(results).transpose_(0,
#: 1)``): not a view, the result's version is 1 and its strides are the stacked tensor's, permuted
#: (the layer sets them).
OPS = OPS + (
    replace(_TRANSPOSE, name="transpose_", node="TransposeBackward1", view=False, layout=None, scatter=None,
            result_version=1),
)

_T = next(op for op in _VIEW_OPS if op.name == "t")

#: ``t_`` (``TBackward1``): the user's in-place ``Tensor.t_()`` (adjoint.engine.bindings.transpose_inplace), the
#: same kind of in-place transpose as ``transpose_`` above: not a view, version 1.
OPS = OPS + (
    replace(_T, name="t_", node="TBackward1", view=False, layout=None, scatter=None, result_version=1),
)


# ----------------------------------------------------------------------------- oneDNN's LSTM layer

@dataclass(frozen=True)
class MkldnnLstmSpec:
    """The non-tensor arguments of ``at::mkldnn_rnn_layer`` for an LSTM (``mode`` 2) that its node
    keeps (``_saved_reverse``, ...): the direction, the hidden size, and the module's flags."""

    reverse: bool
    hidden_size: int
    num_layers: int
    has_biases: bool
    bidirectional: bool
    batch_first: bool
    train: bool


def _mkldnn_shape(shapes, p: MkldnnLstmSpec, loc):
    x, hx, cx = shapes[0], shapes[5], shapes[6]
    return ((x[0], x[1], p.hidden_size), tuple(hx), tuple(cx))


def _lstm_steps(B, ins, p: MkldnnLstmSpec):
    """The layer's recurrence, step by step in the order it runs (reversed for ``reverse``): per
    step ``(t, h_prev, c_prev, i, f, g, o, c, tanh(c), h)``. The gates are one product of
    ``[x_t, h]`` with ``[w_ih, w_hh]`` (oneDNN accumulates the iteration GEMM onto the layer GEMM's
    result: one sum of ``input + hidden`` products per element) plus the one bias
    ``b_ih + b_hh`` (``_shuffle_bias``: added once, rounded, before the kernel)."""
    x, w0, w1, w2, w3, h, c = ins
    T, N, _ = B.shape(x)
    H = p.hidden_size
    w = B.t2(B.concat([w0, w1], 1))
    bias = B.add(w2, w3) if p.has_biases else B.zeros((4 * H,))
    bias = B.broadcast_to(B.reshape(bias, (1, 4 * H)), (N, 4 * H))
    steps = []
    for t in (reversed(range(T)) if p.reverse else range(T)):
        gates = B.add(B.matmul2d(B.concat([B.index(x, (t,)), h], 1), w), bias)
        i, f, g, o = (B.index(gates, (slice(None), slice(k * H, (k + 1) * H))) for k in range(4))
        i, f, g, o = B.onednn_sigmoid(i), B.onednn_sigmoid(f), B.tanh(g), B.onednn_sigmoid(o)
        c_new = B.add(B.mul(f, c), B.mul(i, g))
        tc = B.tanh(c_new)
        h_new = B.mul(o, tc)
        steps.append((t, h, c, i, f, g, o, c_new, tc, h_new))
        h, c = h_new, c_new
    return steps


def mkldnn_lstm_forward(B, ins, p: MkldnnLstmSpec):
    steps = sorted(_lstm_steps(B, ins, p), key=lambda s: s[0])
    out = B.stack([s[9] for s in steps], 0)
    last = steps[0] if p.reverse else steps[-1]
    return out, last[9], last[7]


def _one_minus(B, a):
    return B.sub(B.scalar(1), a)


def mkldnn_lstm_vjp(B, gs, ins, outs, p: MkldnnLstmSpec, need):
    """``mkldnn_rnn_layer_backward`` (derivatives.yaml, outside create_graph): the LSTM's backward
    through time, an undefined incoming gradient read as zeros. The gates' gradients of every
    step ``dG`` (N, 4H) give ``dh_prev = dG @ w_hh`` step by step; the input's, the weights' and the
    bias's are each one product over all the steps (``dG_all`` (T*N, 4H)); ``b_ih`` and ``b_hh``
    get the same gradient (the one bias's, cloned)."""
    x, w0, w1 = ins[0], ins[1], ins[2]
    if all(g is None for g in gs):
        return [None] * 7
    T, N, I = B.shape(x)
    H = p.hidden_size
    g_out, g_h, g_c = gs
    dh = g_h if g_h is not None else B.zeros((N, H))
    dc = g_c if g_c is not None else B.zeros((N, H))
    dgates = {}
    for t, _h_prev, c_prev, i, f, g, o, _c, tc, _h in reversed(_lstm_steps(B, ins, p)):
        if g_out is not None:
            dh = B.add(B.index(g_out, (t,)), dh)
        dc = B.add(dc, B.mul(B.mul(dh, o), _one_minus(B, B.mul(tc, tc))))
        d_o = B.mul(B.mul(dh, tc), B.mul(o, _one_minus(B, o)))
        d_i = B.mul(B.mul(dc, g), B.mul(i, _one_minus(B, i)))
        d_f = B.mul(B.mul(dc, c_prev), B.mul(f, _one_minus(B, f)))
        d_g = B.mul(B.mul(dc, i), _one_minus(B, B.mul(g, g)))
        dgates[t] = B.concat([d_i, d_f, d_g, d_o], 1)
        dc = B.mul(dc, f)
        dh = B.matmul2d(dgates[t], w1)
    d_all = B.concat([dgates[t] for t in range(T)], 0)                       # (T*N, 4H), time order
    h_prev = {s[0]: s[1] for s in _lstm_steps(B, ins, p)}
    d_all_t = B.t2(d_all)
    res = [None] * 7
    if need[0]:
        res[0] = B.reshape(B.matmul2d(d_all, w0), (T, N, I))
    if need[1]:
        res[1] = B.matmul2d(d_all_t, B.reshape(x, (T * N, I)))
    if need[2]:
        res[2] = B.matmul2d(d_all_t, B.concat([h_prev[t] for t in range(T)], 0))
    if p.has_biases and (need[3] or need[4]):
        db = B.sum_to(d_all, (1, 4 * H))
        db = B.reshape(db, (4 * H,))
        res[3] = db if need[3] else None
        res[4] = db if need[4] else None
    if need[5]:
        res[5] = dh
    if need[6]:
        res[6] = dc
    return res


LSTM_LAYER = Fn("mkldnn_lstm_output", "\\operatorname{LSTM}_{#s}\\left(#*\\right)", generic_vjp)
LSTM_HY = Fn("mkldnn_lstm_hy", "h^{\\mathrm{LSTM}}_{#s}\\left(#*\\right)", generic_vjp)
LSTM_CY = Fn("mkldnn_lstm_cy", "c^{\\mathrm{LSTM}}_{#s}\\left(#*\\right)", generic_vjp)


def _lstm_sub(p: MkldnnLstmSpec) -> str:
    return "\\mathrm{rev}" if p.reverse else ""


_SPEC = MkldnnLstmSpec(False, 1, 1, True, False, False, True)

#: ``mkldnn_rnn_layer`` (``MkldnnRnnLayerBackward0``): one layer and direction of an ``nn.LSTM`` in
#: float32 on the CPU (oneDNN's fused kernel). Inputs ``input, weight0..3 (w_ih, w_hh, b_ih, b_hh:
#: zeros of w_ih's and w_hh's shapes without biases), hx_, cx_``; outputs the layer's output, ``hy``,
#: ``cy`` (its fourth, the oneDNN workspace, is no node output and is not modelled: the layer refuses
#: saved-tensor hooks around it). Values exact; oneDNN's float32 arithmetic is held to verify's bound.
OPS = OPS + (
    Op("mkldnn_lstm_layer", "MkldnnRnnLayerBackward0", mkldnn_lstm_forward, mkldnn_lstm_vjp, _mkldnn_shape,
       (Save("hx_", "in", 5), Save("cx_", "in", 6), Save("input", "in", 0), Save("weight0", "in", 1),
        Save("weight1", "in", 2), Save("weight2", "in", 3), Save("weight3", "in", 4), Save("result0", "out", 0),
        Save("result1", "out", 1), Save("result2", "out", 2)),
       "LSTM backward through time: dG per step (sigmoid' and tanh' of the gates), dh_prev = dG w_hh; "
       "dx = dG w_ih, dw_ih = dG^T x, dw_hh = dG^T h_prev, db_ih = db_hh = sum(dG) over steps and batch",
       grows=True, outputs=3,
       checks=(Check(((2, 1, 1), (4, 1), (4, 1), (4,), (4,), (1, 1), (1, 1)), _SPEC),
               Check(((2, 1, 1), (4, 1), (4, 1), (4,), (4,), (1, 1), (1, 1)),
                     MkldnnLstmSpec(True, 1, 1, True, True, False, True))),
       math=Math(layer((LSTM_LAYER, LSTM_HY, LSTM_CY), _lstm_sub)), integers="refused"),
)


# ----------------------------------------------------------------------------- packed sequences

@dataclass(frozen=True)
class PackSpec:
    """``_pack_padded_sequence``'s non-tensor facts: ``batch_first`` and the batch sizes (one per
    time step, non-increasing: how many sequences are longer than the step)."""

    batch_first: bool
    batch_sizes: tuple[int, ...]


def _pack_rows(shape, p: PackSpec):
    """The rows of the input, flattened over its first two dims, that the packed data takes, in
    order: step by step, the first ``batch_sizes[t]`` sequences of step ``t``."""
    import numpy as np
    n_t, n_b = (shape[1], shape[0]) if p.batch_first else (shape[0], shape[1])
    rows = [b * n_t + t if p.batch_first else t * n_b + b for t, bs in enumerate(p.batch_sizes) for b in range(bs)]
    return np.array(rows, dtype=np.int64)


def pack_forward(B, ins, p: PackSpec):
    x = ins[0]
    shape = tuple(B.shape(x))
    flat = B.reshape(x, (shape[0] * shape[1],) + shape[2:])
    return B.index(flat, (_pack_rows(shape, p),))


def pack_vjp(B, gs, ins, outs, p: PackSpec, need):
    shape = tuple(B.shape(ins[0]))
    flat = (shape[0] * shape[1],) + shape[2:]
    return [B.reshape(B.place_add(flat, (_pack_rows(shape, p),), gs[0]), shape), None]


def _pack_shape(shapes, p: PackSpec, loc):
    return (sum(p.batch_sizes),) + tuple(shapes[0][2:])


PACK = Fn("pack_padded_sequence", "\\operatorname{pack}_{#s}\\left(#0\\right)", generic_vjp)

#: ``_pack_padded_sequence`` (``PackPaddedSequenceBackward0``): the packed data of a padded batch,
#: (T, B, *) or (B, T, *) with ``batch_first``. Inputs ``input, batch_sizes`` (the int64 result1 the
#: node saves, made by the lowering); the backward (``_pack_padded_sequence_backward``) writes each
#: packed row's gradient back to its place, zeros in the padding.
OPS = OPS + (
    Op("pack_padded_sequence", "PackPaddedSequenceBackward0", pack_forward, pack_vjp, _pack_shape,
       (Save("result1", "in", 1),), "zeros(input) with each packed row's g at its (step, sequence) place",
       negzero="structural", grows=False, differentiable=(True, False), copies_values=True,
       kink_doc="batch_sizes (int64) has no edge",
       math=Math(lambda a, p, shape, k: TFn(PACK, (a[0],), tuple(shape),
                                            "\\mathrm{batch\\_first}" if p.batch_first else "", p)),
       checks=(Check(((3, 2, 2), (3,)), PackSpec(False, (2, 2, 1)), given=((1, (2, 2, 1)),)),
               Check(((2, 3), (3,)), PackSpec(True, (2, 1, 1)), given=((1, (2, 1, 1)),)))),
)
