"""The group norm's backward under grad mode (adjoint.engine.second_formulas): torch 2.13 runs
``infinitely_differentiable_native_group_norm_backward`` (FunctionsManual.cpp), plain ops recorded one
by one, in the order below (sequence numbers probed on torch 2.13; GCC evaluates an overloaded binary
operator's right operand first, so ``-b * mean - c * rstd * s`` makes ``c * rstd * s`` before ``-b``):

* ``X``, ``mean``, ``rstd``, ``dY`` reshaped to ``(N, G, D, HxW)`` / ``(N, G, 1, 1)`` (ViewBackward0);
* ``ds = (dY * X).sum(3).unsqueeze_(-1)``, ``db = dY.sum(3).unsqueeze_(-1)`` (UnsqueezeBackward1);
* when the input's gradient is wanted: ``gamma.reshape(1, G, D, 1)``; ``var = ((rstd * rstd).reciprocal_()
  - eps).clamp_min(0)``, made and never used (its four nodes take sequence numbers and pack their saves);
  ``rstd_cube = rstd * rstd * rstd``; ``a = rstd * gamma``; ``b``, ``c`` the sums over D of ``ds * gamma``,
  ``db * gamma`` (unsqueeze_(-2)); ``b = (c * mean - b) * rstd_cube * s``; ``c = -b * mean - c * rstd * s``
  (``s = 1.0 / (D * HxW)``, a double); ``dX = (a * dY + b * X + c).reshape_as(X)``;
* the weight's ``((ds - db * mean) * rstd).sum(0).reshape_as(gamma)``, the bias's ``db.sum(0).reshape_as(gamma)``.

Gradients for the node's ``mean`` and ``rstd`` outputs (a create_graph backward through the graph an earlier
create_graph backward made) add, when the input's gradient is wanted, ``dvar = -0.5 * rstd_cube *
drstd.view(N, G, 1, 1)`` (made whenever ``drstd`` is given) and, when both are given, ``var_mean_backward(dvar,
dmean.view(N, G, 1, 1), X, {2, 3}, 0, true)`` to ``dX`` (one of them alone is dropped, as torch 2.13 does).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.engine.second_formulas import reshape as _reshape


def _sum_unsqueezed(rt, t, dim: int, loc):
    """``t.sum(dim).unsqueeze_(dim)``: SumBackward1, then UnsqueezeBackward1 (in place)."""
    return rt.apply("unsqueeze_", [rt.apply("sum_dim", [t], ((dim,), False), loc)], dim, loc)


def _var_mean_backward(rt, dvar, dmean, x_t, stats: tuple, loc):
    """var_mean_backward(dvar, dmean.view(N, G, 1, 1), X, {2, 3}, 0, true): ``dmean.view`` (an argument, made
    first), var_backward (MeanBackward1, SubBackward0, MulBackward1, MulBackward0), mean_backward's
    ``expand(sizes) / n`` (ExpandBackward0, DivBackward1), their sum (AddBackward0)."""
    dmean_t = rt.apply("view", [dmean], stats, loc)
    n = x_t.shape[2] * x_t.shape[3]
    centre = rt.apply("mean_dim", [x_t], ((2, 3), True), loc)
    dev = rt.apply("sub", [x_t, centre], None, loc)
    gself = rt.apply("mul", [rt.apply("mul_scalar", [dvar], Fraction(2.0 / float(n)), loc), dev], None, loc)
    aux = rt.apply("div_scalar", [rt.apply("expand", [dmean_t], tuple(x_t.shape), loc)], Fraction(n), loc)
    return rt.apply("add", [gself, aux], None, loc)


def _group_norm(rt, node, grads, saved, need):
    dY, dmean, drstd = (list(grads) + [None, None])[:3]
    loc = node.loc
    mul = lambda a, b: rt.apply("mul", [a, b], None, loc)   # noqa: E731
    x, gamma = saved["input"], saved.get("weight")
    shape = tuple(x.shape)
    n, c = shape[0], shape[1]
    hxw = 1
    for d in shape[2:]:
        hxw *= d
    groups = node.params.groups
    d = c // groups
    stats = (n, groups, 1, 1)
    s = Fraction(1.0 / float(d * hxw))
    x_t = _reshape(rt, x, (n, groups, d, hxw), loc)
    mean_t = _reshape(rt, saved["result1"], stats, loc)
    rstd_t = _reshape(rt, saved["result2"], stats, loc)
    ds = db = dy_t = None
    if dY is not None:
        dy_t = _reshape(rt, dY, (n, groups, d, hxw), loc)
        ds = _sum_unsqueezed(rt, mul(dy_t, x_t), 3, loc)
        db = _sum_unsqueezed(rt, dy_t, 3, loc)
    both = dmean is not None and drstd is not None   # one of them alone is dropped (torch 2.13's formula)
    dx = dgamma = dbeta = None
    if need[0]:
        gamma_t = _reshape(rt, gamma, (1, groups, d, 1), loc) if gamma is not None else None
        var = rt.apply("sub_scalar", [rt.apply("reciprocal", [mul(rstd_t, rstd_t)], None, loc)],
                       Fraction(float(node.params.eps)), loc)
        rt.apply("clamp_min", [var], Fraction(0), loc)   # var: made, never read
        rstd_cube = mul(mul(rstd_t, rstd_t), rstd_t)
        dvar = None
        if drstd is not None:   # -0.5 * rstd_cube * drstd.view(N, G, 1, 1): the view first
            drstd_t = rt.apply("view", [drstd], stats, loc)
            dvar = mul(rt.apply("mul_scalar", [rstd_cube], Fraction(-0.5), loc), drstd_t)
        if dY is not None:
            a = mul(rstd_t, gamma_t) if gamma is not None else rstd_t
            b = _sum_unsqueezed(rt, mul(ds, gamma_t) if gamma is not None else ds, 2, loc)
            cc = _sum_unsqueezed(rt, mul(db, gamma_t) if gamma is not None else db, 2, loc)
            b = rt.apply("mul_scalar", [mul(rt.apply("sub", [mul(cc, mean_t), b], None, loc), rstd_cube)], s, loc)
            right = rt.apply("mul_scalar", [mul(cc, rstd_t)], s, loc)
            cc = rt.apply("sub", [mul(rt.apply("neg", [b], None, loc), mean_t), right], None, loc)
            bx = mul(b, x_t)
            dx = rt.apply("add", [rt.apply("add", [mul(a, dy_t), bx], None, loc), cc], None, loc)
            if both:   # dX += var_mean_backward(...): an in-place AddBackward0 on a tensor nothing saved
                dx = rt.apply("add", [dx, _var_mean_backward(rt, dvar, dmean, x_t, stats, loc)], None, loc)
            dx = _reshape(rt, dx, shape, loc)
        elif both:
            dx = _reshape(rt, _var_mean_backward(rt, dvar, dmean, x_t, stats, loc), shape, loc)
    if len(need) > 1 and need[1] and gamma is not None and dY is not None:
        centred = rt.apply("sub", [ds, mul(db, mean_t)], None, loc)
        dgamma = _reshape(rt, rt.apply("sum_dim", [mul(centred, rstd_t)], ((0,), False), loc),
                          tuple(gamma.shape), loc)
    if len(need) > 2 and need[2] and gamma is not None and dY is not None:
        dbeta = _reshape(rt, rt.apply("sum_dim", [db], ((0,), False), loc), tuple(gamma.shape), loc)
    return [dx, dgamma, dbeta]


def _unsqueeze_inplace(rt, node, grads, saved, need):
    # UnsqueezeBackward1 (unsqueeze_(dim)): grad.squeeze(dim) (SqueezeBackward1)
    return [rt.apply("squeeze_dim", [grads[0]], (node.params,), node.loc)]


GROUP_NORM = {"native_group_norm": _group_norm, "unsqueeze_": _unsqueeze_inplace}
