"""``logcumsumexp(input, dim)``: the running ``log(sum(exp(x)))`` along ``dim``.

LogcumsumexpBackward0 (PyTorch 2.13) saves self and result. Its backward
(``logcumsumexp_backward``) is ``grad`` itself for a 0-d or empty grad, else, written through
two reversed logcumsumexps of ``log|grad| - result`` (the positive and the negative part), the
sum ``grad_self[j] = sum_{i >= j} grad[i] * exp(self[j] - result[i])``: here ``exp(self - m)``
times the reversed running sum of ``grad * exp(m - result)``, ``m`` the largest element along
``dim`` (the exact answer is the same for any ``m``; the shift keeps the doubles of ``--float64``
finite). A nan element of ``grad`` is in neither part, so it contributes 0 (sweep seed 89304,
problem 85). The forward likewise: ``log(cumsum(exp(self - m))) + m``, ``m`` set to 0 where it is
infinite (logsumexp's convention); values with free symbols unshifted.
"""

from __future__ import annotations

from adjoint.values.mathtree import Fn, TFn, generic_vjp
from adjoint.engine.ops.record import Check, Math, Op, Save
from adjoint.engine.ops.rearrange import _cumsum, _flip, same_shape


def _shift(B, x, dim: int):
    m = B.amax(x, (dim,), True)
    return B.choose(B.sub(m, m), "==", m, B.zeros(B.shape(m)))     # an infinite max: 0


def _as_1d(B, x):
    return B.reshape(x, (1,)) if not B.shape(x) else x


def logcumsumexp_forward(B, ins, p):
    x = ins[0]
    shape = B.shape(x)
    v = _as_1d(B, x)
    if B.is_symbolic(v):
        out = B.log(_cumsum(B, B.exp(v), p))
    else:
        m = _shift(B, v, p)
        out = B.add(B.log(_cumsum(B, B.exp(B.sub(v, m)), p)), m)
    return B.reshape(out, shape) if not shape else out


def logcumsumexp_vjp(B, gs, ins, outs, p, need):
    g, x, result = gs[0], ins[0], outs[0]
    shape = B.shape(g)
    if not shape or 0 in shape:
        return [g]
    if not B.is_symbolic(g):
        # PyTorch splits grad into where(grad > 0) and where(grad < 0) parts (log|grad|, else the
        # dtype's lowest): a nan element is in neither, so it contributes 0, not nan
        g = B.choose(g, ">", g, B.choose(g, "<", g, B.zeros(shape)))
    m = B.zeros(B.shape(B.amax(x, (p,), True))) if B.is_symbolic(x) else _shift(B, x, p)
    scaled = B.mul(g, B.exp(B.sub(m, result)))
    tail = _flip(B, _cumsum(B, _flip(B, scaled, (p,)), p), (p,))
    return [B.mul(B.exp(B.sub(x, m)), tail)]


LOGCUMSUMEXP = Fn("logcumsumexp", "\\operatorname{logcumsumexp}_{#s}\\left(#0\\right)", generic_vjp)

OPS = (
    Op("logcumsumexp", "LogcumsumexpBackward0", logcumsumexp_forward, logcumsumexp_vjp, same_shape,
       (Save("self", "in", 0), Save("result", "out", 0)),
       "sum over i >= j of g_i * exp(a_j - out_i), along dim", integers="refused",
       math=Math(lambda a, p, shape, k: TFn(LOGCUMSUMEXP, (a[0],), tuple(shape), f"\\mathrm{{dim}}={p}")),
       checks=(Check(((2, 3),), 1), Check(((3, 2),), 0))),
)
