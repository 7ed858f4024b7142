"""Backward formulas recorded as ops (see adjoint.engine.second_formulas) for oneDNN's LSTM layer
(``mkldnn_rnn_layer``, ``MkldnnRnnLayerBackward0``), the node of every layer and direction of an
``nn.LSTM`` in float32 on the CPU (adjoint.engine.ops.recurrent).

Under grad mode derivatives.yaml runs ``mkldnn_rnn_layer_differentiable_backward``
(FunctionsManual.cpp), a composition of plain ops, all seven gradients whatever is needed. Probed
in torch 2.13 node for node (``_sequence_nr()``; tests/test_second_recurrent.py):

* undefined incoming gradients are zeros (``zeros_like``, no node), defined ones ``.contiguous()``
  (a ``CloneBackward0`` where not contiguous);
* the layer recomputed step by step in its own direction: ``linear(input[t], w_ih, b_ih)``
  (``SelectBackward0``, ``TBackward0``, ``AddmmBackward0``), ``.add_(linear(h, w_hh, b_hh))``
  (``AddBackward0``, in place), ``unsafe_chunk(4, 1)`` (``UnsafeSplitBackward0``), ``sigmoid_``,
  ``sigmoid_``, ``tanh_``, ``sigmoid_`` on the pieces, ``cy = (f * cx).add(i * g)``, ``hy = o *
  cy.tanh()`` (no biases: ``at::zeros`` biases, no edge);
* then backward through time, last step first, C++ evaluating an operator's right operand
  first: ``new_grad_hy = grad_output[t].add(grad_hy)``; ``d1 = grad_cy.add(new_grad_hy * o * (1 -
  cy.tanh() * cy.tanh()))``; ``d1 * i``, ``d1 * g``, ``dprev_c = d1 * f``, ``d1 * cx``; ``dop =
  new_grad_hy * cy.tanh()``; ``do = dop * o * (1 - o)``; ``dg = dgp * (1 - g * g)``; ``df = dfp * f
  * (1 - f)``; ``di = dip * i * (1 - i)`` (``1 - x``: ``SubBackward0`` of a wrapped 1); ``da =
  cat([di, df, dg, do], 1)``; ``db_ = sum(da, 0)``; ``dx = mm(da, w_ih).unsqueeze(0)``; ``dprev_h =
  mm(da, w_hh)``; ``dWx_ = mm(da.transpose(0, 1), input[t])``; ``dWh_ = mm(da.transpose(0, 1),
  h)``; after the first step ``db += db_``, ``dWx += dWx_``, ``dWh += dWh_`` (in place);
* finally ``cat`` of the steps' ``dx`` on dim 0; both biases get ``db`` itself.

A further create_graph backward through these nodes is ordinary (each is an op with its own
formula).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.engine.inplace import apply_inplace
from adjoint.engine.second_formulas import _contiguous


def _mkldnn_lstm(rt, node, grads, saved, need):
    p, loc = node.params, node.loc
    B = rt.B
    ap = rt.apply
    x, w0, w1 = saved["input"], saved["weight0"], saved["weight1"]
    hx_, cx_ = saved["hx_"], saved["cx_"]
    g_out, g_hy, g_cy = grads
    if g_out is None and g_hy is None and g_cy is None:
        return [None] * 7

    def contiguous(g):
        return g if _contiguous(g) else ap("clone", [g], None, loc)

    T, N, _ = x.shape
    H = p.hidden_size
    g_out = contiguous(g_out) if g_out is not None else rt.tensor(B.zeros((T, N, H)), dtype=x.dtype)
    g_hy = contiguous(g_hy) if g_hy is not None else rt.tensor(B.zeros(tuple(hx_.shape)), dtype=x.dtype)
    g_cy = contiguous(g_cy) if g_cy is not None else rt.tensor(B.zeros(tuple(cx_.shape)), dtype=x.dtype)
    if p.has_biases:
        b_ih, b_hh = saved["weight2"], saved["weight3"]
    else:
        b_ih, b_hh = (rt.tensor(B.zeros((4 * H,)), dtype=w0.dtype) for _ in range(2))

    def mul(a, b):
        return ap("mul", [a, b], None, loc)

    def one_minus(a):
        return ap("sub", [Fraction(1), a], None, loc)

    def select(t, i):
        return ap("select", [t], (0, i), loc)

    def linear(a, w, b):
        return ap("addmm", [b, a, ap("t", [w], None, loc)], None, loc)

    # the layer again, step by step in its direction
    gates, states = {}, [(hx_, cx_)]
    h, c = hx_, cx_
    for seq in range(1, T + 1):
        t = T - seq if p.reverse else seq - 1
        gate = linear(select(x, t), w0, b_ih)
        gate = apply_inplace(rt, "add", gate, [linear(h, w1, b_hh)], None, loc)
        pieces = ap("unsafe_split", [gate], (H, 1), loc)
        i, f, g, o = (apply_inplace(rt, name, piece, [], None, loc)
                      for name, piece in zip(("sigmoid", "sigmoid", "tanh", "sigmoid"), pieces))
        gates[t] = (i, f, g, o)
        fc = mul(f, c)
        cy = ap("add", [fc, mul(i, g)], None, loc)
        hy = mul(o, ap("tanh", [cy], None, loc))
        states.append((hy, cy))
        h, c = hy, cy

    layer_dx = {}
    db = dwx = dwh = dprev_h = dprev_c = None
    for seq in range(T - 1, -1, -1):
        t = T - seq - 1 if p.reverse else seq
        i, f, g, o = gates[t]
        cy = states[seq + 1][1]
        h, c = states[seq]
        new_grad_hy = ap("add", [select(g_out, t), g_hy], None, loc)
        tanh2 = ap("tanh", [cy], None, loc)
        tanh1 = ap("tanh", [cy], None, loc)
        right = one_minus(mul(tanh1, tanh2))
        d1 = ap("add", [g_cy, mul(mul(new_grad_hy, o), right)], None, loc)
        dgp = mul(d1, i)
        dip = mul(d1, g)
        dprev_c = mul(d1, f)
        dfp = mul(d1, c)
        dop = mul(new_grad_hy, ap("tanh", [cy], None, loc))
        right = one_minus(o)
        do_ = mul(mul(dop, o), right)
        dg = mul(dgp, one_minus(mul(g, g)))
        right = one_minus(f)
        df = mul(mul(dfp, f), right)
        right = one_minus(i)
        di = mul(mul(dip, i), right)
        da = ap("cat", [di, df, dg, do_], 1, loc)
        db_ = ap("sum_dim", [da], ((0,), False), loc)
        dx = ap("unsqueeze", [ap("mm", [da, w0], None, loc)], 0, loc)
        dprev_h = ap("mm", [da, w1], None, loc)
        dwx_ = ap("mm", [ap("transpose", [da], (0, 1), loc), select(x, t)], None, loc)
        dwh_ = ap("mm", [ap("transpose", [da], (0, 1), loc), h], None, loc)
        if seq == T - 1:
            db, dwx, dwh = db_, dwx_, dwh_
        else:
            db = apply_inplace(rt, "add", db, [db_], None, loc)
            dwx = apply_inplace(rt, "add", dwx, [dwx_], None, loc)
            dwh = apply_inplace(rt, "add", dwh, [dwh_], None, loc)
        layer_dx[t] = dx
        g_hy, g_cy = dprev_h, dprev_c
    dx = ap("cat", [layer_dx[t] for t in range(T)], 0, loc)
    return [dx, dwx, dwh, db, db, dprev_h, dprev_c]


RECURRENT = {"mkldnn_lstm_layer": _mkldnn_lstm}
