"""Backward formulas recorded as ops (see adjoint.engine.second_formulas) for the vector products
``mv`` (MvBackward0), ``dot`` (DotBackward0) and the scaled products ``addmv`` (AddmvBackward0),
``addr`` (AddrBackward0), ``baddbmm`` (BaddbmmBackward0) and ``addbmm`` (AddbmmBackward0).

The order of the recorded nodes is torch 2.13's (``_sequence_nr()`` of first-order gradients,
tests/test_second_ops.py): the generated apply computes the slots in the alphabetical order of
derivatives.yaml's argument names (addmv: ``mat``, ``self``, ``vec``; addr: ``self``, ``vec1``,
``vec2``; the bmm ones: ``batch1``, ``batch2``, ``self``). ``maybe_multiply(t, s)`` is ``t`` itself
when the scalar is 1, else ``t * s`` (MulBackward1). ``grad.ger(vec)`` is ``outer``:
``grad.reshape({n, 1}) * vec`` (ViewBackward0, MulBackward0). A method chain evaluates its object
before its arguments (addbmm's ``grad.unsqueeze(0).expand(...)`` before ``batch2.transpose(1, 2)``).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.engine.second_formulas import reshape


def _maybe_multiply(rt, t, s, loc):
    """maybe_multiply(t, s): t when s is 1, else t * s (MulBackward1)."""
    s = Fraction(s)
    return t if s == 1 else rt.apply("mul_scalar", [t], s, loc)


def _ger(rt, g, vec, loc):
    """grad.ger(vec) = outer: grad.reshape({n, 1}) * vec (at::reshape by the gradient's strides: ViewBackward0
    of a contiguous one; MulBackward0)."""
    column = reshape(rt, g, (tuple(g.shape)[0], 1), loc)
    return rt.apply("mul", [column, vec], None, loc)


def _mv(rt, node, grads, saved, need):
    # MvBackward0: self (grad.ger(vec)) before vec (self.t().mv(grad): TBackward0, MvBackward0)
    g, loc = grads[0], node.loc
    a = _ger(rt, g, saved["vec"], loc) if need[0] else None
    b = None
    if len(need) > 1 and need[1]:
        b = rt.apply("mv", [rt.apply("t", [saved["self"]], None, loc), g], None, loc)
    return [a, b]


def _dot(rt, node, grads, saved, need):
    # DotBackward0: self (grad * tensor) before tensor (grad * self), MulBackward0 each
    g, loc = grads[0], node.loc
    a = rt.apply("mul", [g, saved["tensor"]], None, loc) if need[0] else None
    b = rt.apply("mul", [g, saved["self"]], None, loc) if len(need) > 1 and need[1] else None
    return [a, b]


def _addmv(rt, node, grads, saved, need):
    # AddmvBackward0: mat (maybe_multiply(grad.ger(vec), alpha)), self (maybe_multiply(grad, beta)), vec
    # (maybe_multiply(mat.t().mv(grad), alpha)); validate_outputs sums self's back to its shape
    beta, alpha = node.params
    g, loc = grads[0], node.loc
    m = _maybe_multiply(rt, _ger(rt, g, saved["vec"], loc), alpha, loc) if need[1] else None
    s = _maybe_multiply(rt, g, beta, loc) if need[0] else None
    v = None
    if need[2]:
        v = _maybe_multiply(rt, rt.apply("mv", [rt.apply("t", [saved["mat"]], None, loc), g], None, loc), alpha, loc)
    return [s, m, v]


def _addr(rt, node, grads, saved, need):
    # AddrBackward0: self (maybe_multiply(grad, beta)), vec1 (maybe_multiply(grad.mv(vec2), alpha)), vec2
    # (maybe_multiply(grad.t().mv(vec1), alpha): TBackward0, MvBackward0)
    beta, alpha = node.params
    g, loc = grads[0], node.loc
    s = _maybe_multiply(rt, g, beta, loc) if need[0] else None
    a = _maybe_multiply(rt, rt.apply("mv", [g, saved["vec2"]], None, loc), alpha, loc) if need[1] else None
    b = None
    if need[2]:
        b = _maybe_multiply(rt, rt.apply("mv", [rt.apply("t", [g], None, loc), saved["vec1"]], None, loc), alpha, loc)
    return [s, a, b]


def _expand_batches(rt, node, g, loc):
    """grad.unsqueeze(0).expand({batch1.size(0), batch1.size(1), batch2.size(2)})."""
    b1, b2 = tuple(node.inputs[1].shape), tuple(node.inputs[2].shape)
    return rt.apply("expand", [rt.apply("unsqueeze", [g], 0, loc)], (b1[0], b1[1], b2[2]), loc)


def _bmm_products(batched: bool):
    """BaddbmmBackward0 (``batched``) / AddbmmBackward0: batch1 (maybe_multiply(G.bmm(batch2.transpose(1, 2)),
    alpha)), batch2 (maybe_multiply(batch1.transpose(1, 2).bmm(G), alpha)), self (maybe_multiply(grad, beta)),
    G the gradient itself (baddbmm) or grad.unsqueeze(0).expand(...) (addbmm: UnsqueezeBackward0, ExpandBackward0,
    made anew for each operand)."""
    def formula(rt, node, grads, saved, need):
        beta, alpha = node.params
        g, loc = grads[0], node.loc

        def full():
            return g if batched else _expand_batches(rt, node, g, loc)
        a = b = None
        if need[1]:
            left = full()
            a = rt.apply("bmm", [left, rt.apply("transpose", [saved["batch2"]], (1, 2), loc)], None, loc)
            a = _maybe_multiply(rt, a, alpha, loc)
        if need[2]:
            t1 = rt.apply("transpose", [saved["batch1"]], (1, 2), loc)
            b = _maybe_multiply(rt, rt.apply("bmm", [t1, full()], None, loc), alpha, loc)
        s = _maybe_multiply(rt, g, beta, loc) if need[0] else None
        return [s, a, b]
    return formula


PRODUCTS = {"mv": _mv, "dot": _dot, "addmv": _addmv, "addr": _addr, "baddbmm_ab": _bmm_products(True),
            "addbmm": _bmm_products(False)}
