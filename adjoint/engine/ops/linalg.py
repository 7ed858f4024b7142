"""Matrix products: mm, mv, dot, vdot, addmm, bmm (what ``matmul`` and ``F.linear`` dispatch to).
``_reshape_alias``, which matmul's batched path meets after ``expand``, is a view: it lives with
the views (:mod:`adjoint.engine.ops.views`)."""

from __future__ import annotations

from adjoint.values.mathtree import TT, Fn, TBin, TFn, TInner, TMatMul
from adjoint.engine.ops.record import Check, Math, Op, Save, if_needed


# Mismatched inner sizes are the kernel's RuntimeError, an answer (``value_error``): PyTorch's
# autograd kernel makes the node and packs what it saves first, then the kernel refuses, so the
# shape rules give the shape the product would have and the refusal comes after the packs.

def mm_shape(shapes, p, loc):
    a, b = shapes
    if len(a) != 2 or len(b) != 2:   # the kernel's rank check is the value_error (after the packs)
        return (0, 0)
    return (a[0], b[1])


def _mm_message(a, b) -> str:
    return f"mat1 and mat2 shapes cannot be multiplied ({a[0]}x{a[1]} and {b[0]}x{b[1]})"


def mm_value_error(B, values, p):
    a, b = B.shape(values[0]), B.shape(values[1])
    for shape, name in ((a, "self"), (b, "mat2")):
        if len(shape) != 2:
            return ("RuntimeError", f"{name} must be a matrix")
    return ("RuntimeError", _mm_message(a, b)) if a[1] != b[0] else None


def mv_shape(shapes, p, loc):
    (m, k), (k2,) = shapes
    return (m,)


def mv_value_error(B, values, p):
    (m, k), (k2,) = B.shape(values[0]), B.shape(values[1])
    return ("RuntimeError", f"size mismatch, got input ({m}), mat ({m}x{k}), vec ({k2})") if k != k2 else None


def dot_shape(shapes, p, loc):
    return ()


def dot_value_error(B, values, p):
    (n,), (n2,) = B.shape(values[0]), B.shape(values[1])
    if n == n2:
        return None
    return ("RuntimeError", f"inconsistent tensor size, expected tensor [{n}] and src [{n2}] to have the same number "
                            f"of elements, but got {n} and {n2} elements respectively")


def addmm_shape(shapes, p, loc):
    (m, k), (k2, n) = shapes[1], shapes[2]
    if k == k2:   # addmm expands self to the product's sizes: expand's error, with its wording
        from adjoint.engine.ops.views import expand_shape
        expand_shape([shapes[0]], (m, n), loc)
    return (m, n)


def addmm_value_error(B, values, p):
    a, b = B.shape(values[1]), B.shape(values[2])
    return ("RuntimeError", _mm_message(a, b)) if a[1] != b[0] else None


def mm_forward(B, ins, p):
    return B.matmul2d(ins[0], ins[1])


def mm_vjp(B, gs, ins, outs, p, need):
    g = gs[0]
    a, b = ins
    return [if_needed(need, 0, lambda: B.matmul2d(g, B.t2(b))), if_needed(need, 1, lambda: B.matmul2d(B.t2(a), g))]


def mv_forward(B, ins, p):
    m, v = ins
    n = B.shape(v)[0]
    return B.reshape(B.matmul2d(m, B.reshape(v, (n, 1))), (B.shape(m)[0],))


def mv_vjp(B, gs, ins, outs, p, need):
    g = gs[0]
    m, v = ins
    k = B.shape(g)[0]
    return [if_needed(need, 0, lambda: B.outer(g, v)),
            if_needed(need, 1, lambda: B.reshape(B.matmul2d(B.t2(m), B.reshape(g, (k, 1))), B.shape(v)))]


def dot_forward(B, ins, p):
    a, b = ins
    n = B.shape(a)[0]
    return B.reshape(B.matmul2d(B.reshape(a, (1, n)), B.reshape(b, (n, 1))), ())


def dot_vjp(B, gs, ins, outs, p, need):
    g = gs[0]
    a, b = ins
    return [if_needed(need, 0, lambda: B.mul(g, b)), if_needed(need, 1, lambda: B.mul(g, a))]


def addmm_forward(B, ins, p):
    bias, m1, m2 = ins
    return B.add(bias, B.matmul2d(m1, m2))


def addmm_vjp(B, gs, ins, outs, p, need):
    g = gs[0]
    bias, m1, m2 = ins
    return [if_needed(need, 0, lambda: B.sum_to(g, B.shape(bias))),
            if_needed(need, 1, lambda: B.matmul2d(g, B.t2(m2))),
            if_needed(need, 2, lambda: B.matmul2d(B.t2(m1), g))]


def bmm_shape(shapes, p, loc):
    a, b = shapes
    if len(a) != 3 or len(b) != 3:   # the kernel's rank check is the value_error (after the packs)
        return (0, 0, 0)
    return (a[0], a[1], b[2])


def bmm_value_error(B, values, p):
    a, b = B.shape(values[0]), B.shape(values[1])
    for shape, name in ((a, "batch1"), (b, "batch2")):
        if len(shape) != 3:
            return ("RuntimeError", f"{name} must be a 3D tensor")
    if (b[0], b[1]) == (a[0], a[2]):
        return None
    return ("RuntimeError", f"Expected size for first two dimensions of batch2 tensor to be: [{a[0]}, {a[2]}] but "
                            f"got: [{b[0]}, {b[1]}].")


def _bt(B, x):
    """Each matrix of a batch transposed."""
    return B.permute(x, (0, 2, 1))


def bmm_forward(B, ins, p):
    return B.bmm(ins[0], ins[1])


def bmm_vjp(B, gs, ins, outs, p, need):
    g = gs[0]
    a, b = ins
    return [if_needed(need, 0, lambda: B.bmm(g, _bt(B, b))), if_needed(need, 1, lambda: B.bmm(_bt(B, a), g))]


# ----------------------------------------------------------------------------- how they read (adjoint.mathtree)

def _addmm_formula(a, p, shape, k):
    """m1 m2 + b (a 1-D bias is a row added to every row: b^T)."""
    bias = a[0]
    if len(bias.shape) == 1:
        bias = TT(bias, (1, bias.shape[0]))
    return TBin("add", TMatMul(a[1], a[2], shape), bias, shape)


def _batch_t(t):
    s = tuple(t.shape)
    return TFn(BATCH_T, (t,), s[:-2] + (s[-1], s[-2]))


#: a batch of matrices transposed one by one, and their products one by one
BATCH_T = Fn("bt", "{#0}^{\\top}", lambda lam, n: (_batch_t(lam),), delimited=True)
BMM = Fn("bmm", "\\operatorname{bmm}\\left(#0,\\ #1\\right)",
         lambda lam, n: (TFn(BMM, (lam, _batch_t(n.args[1])), n.args[0].shape),
                         TFn(BMM, (_batch_t(n.args[0]), lam), n.args[1].shape)))

_MATMUL = Math(lambda a, p, shape, k: TMatMul(a[0], a[1], shape))
_DOT = Math(lambda a, p, shape, k: TInner(a[0], a[1], shape))       # a^T b
_BMM = Math(lambda a, p, shape, k: TFn(BMM, (a[0], a[1]), tuple(shape)))

OPS = (
    Op("bmm", "BmmBackward0", bmm_forward, bmm_vjp, bmm_shape,
       (Save("mat2", "in", 1, if_need=0), Save("self", "in", 0, if_need=1)), "g b^T, a^T g (per batch entry)",
       math=_BMM, checks=(Check(((2, 2, 3), (2, 3, 2))),), value_error=bmm_value_error, integers="alone"),
    Op("mm", "MmBackward0", mm_forward, mm_vjp, mm_shape,
       (Save("mat2", "in", 1, if_need=0), Save("self", "in", 0, if_need=1)), "g b^T, a^T g", math=_MATMUL, checks=(Check(((2, 3), (3, 2))),),
       value_error=mm_value_error, negzero="outer", integers="alone"),
    Op("mv", "MvBackward0", mv_forward, mv_vjp, mv_shape,
       (Save("self", "in", 0, if_need=1), Save("vec", "in", 1, if_need=0)), "g v^T (outer), M^T g", math=_MATMUL, checks=(Check(((2, 3), (3,))),),
       value_error=mv_value_error, integers="alone"),
    Op("dot", "DotBackward0", dot_forward, dot_vjp, dot_shape,
       (Save("self", "in", 0, if_need=1), Save("tensor", "in", 1, if_need=0)), "g*b, g*a", math=_DOT, checks=(Check(((3,), (3,))),),
       value_error=dot_value_error, integers="alone"),
    # torch.vdot of real vectors (spectral_norm's sigma = vdot(u, W v)): dot's value and rule; the
    # node saves other, then self (pack order checked in torch 2.13), each only for the other's gradient
    Op("vdot", "VdotBackward0", dot_forward, dot_vjp, dot_shape,
       (Save("other", "in", 1, if_need=0), Save("self", "in", 0, if_need=1)), "g*b, g*a (real vectors)", math=_DOT,
       checks=(Check(((3,), (3,))),), value_error=dot_value_error, integers="alone"),
    Op("addmm", "AddmmBackward0", addmm_forward, addmm_vjp, addmm_shape,
       (Save("mat1", "in", 1, if_need=2), Save("mat2", "in", 2, if_need=1)), "g (summed to the bias), g m2^T, m1^T g", math=Math(_addmm_formula), checks=(Check(((2,), (3, 2), (2, 2))),),
       value_error=addmm_value_error, integers="alone"),
)
