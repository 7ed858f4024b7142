"""The scaled matrix products ``beta * self + alpha * (product)``: baddbmm, addbmm, addmv, addr.

Each is one node of PyTorch 2.13 (BaddbmmBackward0, AddbmmBackward0, AddmvBackward0,
AddrBackward0) with edges ``(self, first operand, second operand)``; it saves the first operand
when the second's gradient can be needed and the second when the first's can (pack order first,
second), as derivatives.yaml's formulas read them:

* self: ``maybe_multiply(grad, beta)`` (``grad`` itself when beta is 1), summed back to self's
  shape (self is broadcast to the result);
* baddbmm: ``grad.bmm(batch2^T) * alpha``, ``batch1^T.bmm(grad) * alpha`` per batch entry;
* addbmm: the same with ``grad`` expanded to every batch entry (``grad.unsqueeze(0).expand(...)``);
* addmv: ``grad.ger(vec) * alpha``, ``mat.t().mv(grad) * alpha``;
* addr: ``grad.mv(vec2) * alpha``, ``grad.t().mv(vec1) * alpha``.

``beta == 0`` is PyTorch's documented exception: self is not read at all (a nan or inf in it does
not reach the result). The params are ``(beta, alpha)``. The user's baddbmm is the primitive
``baddbmm_ab`` (the ``baddbmm`` of :mod:`adjoint.engine.ops.attention`, without beta and alpha, is the
one MultiheadAttention's mask makes). The shape rules raise PyTorch's errors
in the order its functions check them (the functional baddbmm / addbmm expand self first, reading
``batch2.size(2)``).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.values.mathtree import Fn, TFn, generic_vjp
from adjoint.engine.ops.record import Check, Math, Op, Save, if_needed
from adjoint.engine.ops.views import expand_shape
from adjoint.engine.torch_errors import TorchError


def _bt(B, x):
    return B.permute(x, (0, 2, 1))


def _scaled(B, value, c):
    """``value * c``, ``c`` itself where PyTorch's ``maybe_multiply`` skips a factor 1."""
    return value if c == 1 else B.mul(value, B.scalar(c))


def _combine(B, ins, p, product, shape):
    """``beta * self + alpha * product``; self not read where beta is 0."""
    beta, alpha = p
    term = _scaled(B, product, alpha)
    if beta == 0:
        return term
    return B.add(_scaled(B, ins[0], beta), term)


def _self_grad(B, g, x, beta):
    return B.sum_to(_scaled(B, g, beta), B.shape(x))


# ----------------------------------------------------------------------------- shapes (PyTorch's checks, in order)

def _size(shape, d: int) -> int:
    """``t.size(d)`` (d >= 0) with PyTorch's IndexError past the last dim."""
    if not shape:
        raise TorchError("IndexError", f"Dimension specified as {d} but tensor has no dimensions")
    n = len(shape)
    if d >= n:
        raise TorchError("IndexError", f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
    return shape[d]


def _expand_self(shape, target, loc):
    if len(shape) > len(target):
        from adjoint.format.errors import ProblemError
        raise ProblemError(loc, f"self of {len(shape)} dims for a result of {len(target)}: PyTorch's expand error "
                                "(worded with the tensor's type) is not modelled; give self at most as many dims")
    expand_shape([shape], target, loc)


def baddbmm_shape(shapes, p, loc):
    s, b1, b2 = shapes
    target = (_size(b1, 0), _size(b1, 1), _size(b2, 2))
    _expand_self(s, target, loc)
    for shape, name in ((b1, "batch1"), (b2, "batch2")):
        if len(shape) != 3:
            raise TorchError("RuntimeError", f"{name} must be a 3D tensor")
    if (b2[0], b2[1]) != (b1[0], b1[2]):
        raise TorchError("RuntimeError", f"Expected size for first two dimensions of batch2 tensor to be: "
                                         f"[{b1[0]}, {b1[2]}] but got: [{b2[0]}, {b2[1]}].")
    return target


def addbmm_shape(shapes, p, loc):
    s, b1, b2 = shapes
    target = (_size(b1, 1), _size(b2, 2))
    _expand_self(s, target, loc)
    for shape, name in ((b1, "batch1"), (b2, "batch2")):
        if len(shape) != 3:
            raise TorchError("RuntimeError", f"{name} must be a 3D tensor")
    if b1[0] != b2[0]:
        raise TorchError("RuntimeError", f"batch1 and batch2 must have same number of batches, got {b1[0]} and {b2[0]}")
    if b1[2] != b2[1]:
        raise TorchError("RuntimeError", f"Incompatible matrix sizes for bmm ({b1[1]}x{b1[2]} and {b2[1]}x{b2[2]})")
    return target


def addmv_shape(shapes, p, loc):
    s, m, v = shapes
    if not (len(m) == 2 and len(v) == 1 and len(s) <= 1):
        raise TorchError("RuntimeError", f"vector + matrix @ vector expected, got {len(s)}, {len(m)}, {len(v)}")
    n = 1
    for d in s:
        n *= d
    if m[1] != v[0] or not (m[0] == n or n == 1):
        raise TorchError("RuntimeError", f"size mismatch, got input ({s[0] if s else 1}), mat ({m[0]}x{m[1]}), "
                                         f"vec ({v[0]})")
    return (m[0],)


def addr_shape(shapes, p, loc):
    s, v1, v2 = shapes
    for shape, name in ((v1, "vec1"), (v2, "vec2")):
        if len(shape) != 1:
            raise TorchError("RuntimeError", f"addr: Expected 1-D argument {name}, but got {len(shape)}-D")
    target = (v1[0], v2[0])
    _expand_self(s, target, loc)
    return target


# ----------------------------------------------------------------------------- forwards and VJPs

def baddbmm_forward(B, ins, p):
    prod = B.bmm(ins[1], ins[2])
    return _combine(B, ins, p, prod, B.shape(prod))


def baddbmm_vjp(B, gs, ins, outs, p, need):
    beta, alpha = p
    g = gs[0]
    x, b1, b2 = ins
    return [if_needed(need, 0, lambda: _self_grad(B, g, x, beta)),
            if_needed(need, 1, lambda: B.mul(B.bmm(g, _bt(B, b2)), B.scalar(alpha))),
            if_needed(need, 2, lambda: B.mul(B.bmm(_bt(B, b1), g), B.scalar(alpha)))]


def addbmm_forward(B, ins, p):
    prod = B.sum_dims(B.bmm(ins[1], ins[2]), (0,), False)
    return _combine(B, ins, p, prod, B.shape(prod))


def addbmm_vjp(B, gs, ins, outs, p, need):
    beta, alpha = p
    g = gs[0]
    x, b1, b2 = ins
    (b, n, _), (_, _, m) = B.shape(b1), B.shape(b2)
    ge = B.broadcast_to(B.reshape(g, (1, n, m)), (b, n, m))
    return [if_needed(need, 0, lambda: _self_grad(B, g, x, beta)),
            if_needed(need, 1, lambda: B.mul(B.bmm(ge, _bt(B, b2)), B.scalar(alpha))),
            if_needed(need, 2, lambda: B.mul(B.bmm(_bt(B, b1), ge), B.scalar(alpha)))]


def addmv_forward(B, ins, p):
    m, v = ins[1], ins[2]
    prod = B.reshape(B.matmul2d(m, B.reshape(v, (B.shape(v)[0], 1))), (B.shape(m)[0],))
    return _combine(B, ins, p, prod, B.shape(prod))


def addmv_vjp(B, gs, ins, outs, p, need):
    beta, alpha = p
    g = gs[0]
    x, m, v = ins
    k = B.shape(g)[0]
    return [if_needed(need, 0, lambda: _self_grad(B, g, x, beta)),
            if_needed(need, 1, lambda: B.mul(B.outer(g, v), B.scalar(alpha))),
            if_needed(need, 2, lambda: B.mul(B.reshape(B.matmul2d(B.t2(m), B.reshape(g, (k, 1))), B.shape(v)),
                                       B.scalar(alpha)))]


def addr_forward(B, ins, p):
    prod = B.outer(ins[1], ins[2])
    return _combine(B, ins, p, prod, B.shape(prod))


def addr_vjp(B, gs, ins, outs, p, need):
    beta, alpha = p
    g = gs[0]
    x, v1, v2 = ins
    n, m = B.shape(g)
    return [if_needed(need, 0, lambda: _self_grad(B, g, x, beta)),
            if_needed(need, 1, lambda: B.mul(B.reshape(B.matmul2d(g, B.reshape(v2, (m, 1))), (n,)), B.scalar(alpha))),
            if_needed(need, 2, lambda: B.mul(B.reshape(B.matmul2d(B.t2(g), B.reshape(v1, (n, 1))), (m,)), B.scalar(alpha)))]


# ----------------------------------------------------------------------------- how they read (adjoint.mathtree)

def _fn(name: str, product: str) -> Fn:
    return Fn(name, f"\\beta\\,#0 + \\alpha\\,{product}", generic_vjp)


BADDBMM = _fn("baddbmm", "\\operatorname{bmm}\\left(#1,\\ #2\\right)")
ADDBMM = _fn("addbmm", "\\sum_{b} #1[b]\\,#2[b]")
ADDMV = _fn("addmv", "#1\\,#2")
ADDR = _fn("addr", "#1\\,{#2}^{\\top}")


def _math(fn: Fn) -> Math:
    return Math(lambda a, p, shape, k: TFn(fn, tuple(a), tuple(shape)))


def _op(name, node, forward, vjp, shape, first, second, fn, check):
    return Op(name, node, forward, vjp, shape, (Save(first, "in", 1, if_need=2), Save(second, "in", 2, if_need=1)),
              "g * beta (summed to self), then the product's rule times alpha", integers="refused",
              math=_math(fn), checks=check)


_P = (Fraction(2), Fraction(-3, 2))
_BETA0 = (Fraction(0), Fraction(1))

OPS = (
    _op("baddbmm_ab", "BaddbmmBackward0", baddbmm_forward, baddbmm_vjp, baddbmm_shape, "batch1", "batch2", BADDBMM,
        (Check(((3,), (2, 2, 3), (2, 3, 3)), _P), Check(((2, 2, 3), (2, 2, 2), (2, 2, 3)), _BETA0))),
    _op("addbmm", "AddbmmBackward0", addbmm_forward, addbmm_vjp, addbmm_shape, "batch1", "batch2", ADDBMM,
        (Check(((3,), (2, 2, 3), (2, 3, 3)), _P), Check(((2, 3), (2, 2, 2), (2, 2, 3)), _BETA0))),
    _op("addmv", "AddmvBackward0", addmv_forward, addmv_vjp, addmv_shape, "mat", "vec", ADDMV,
        (Check(((2,), (2, 3), (3,)), _P), Check(((1,), (2, 3), (3,)), _BETA0))),
    _op("addr", "AddrBackward0", addr_forward, addr_vjp, addr_shape, "vec1", "vec2", ADDR,
        (Check(((2, 3), (2,), (3,)), _P), Check(((3,), (2,), (3,)), _BETA0))),
)
