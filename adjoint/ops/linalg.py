"""Matrix products: mm, mv, dot, addmm (what ``matmul`` and ``F.linear`` dispatch to)."""

from __future__ import annotations

from ..errors import ProblemError
from ..derivation.mathtree import TT, TBin, TInner, TMatMul
from . import Check, Math, Op, Save
from .arith import broadcast_shapes


def _if(need, i, thunk):
    return thunk() if need[i] else None


def mm_shape(shapes, p, loc):
    (m, k), (k2, n) = shapes
    if k != k2:
        raise ProblemError(loc, f"matmul shapes {list(shapes[0])} and {list(shapes[1])}: PyTorch raises 'mat1 and "
                                f"mat2 shapes cannot be multiplied ({m}x{k} and {k2}x{n})'")
    return (m, n)


def mv_shape(shapes, p, loc):
    (m, k), (k2,) = shapes
    if k != k2:
        raise ProblemError(loc, f"matmul shapes {list(shapes[0])} and {list(shapes[1])}: PyTorch raises 'size "
                                f"mismatch, got input ({m}), mat ({m}x{k}), vec ({k2})'")
    return (m,)


def dot_shape(shapes, p, loc):
    if shapes[0] != shapes[1]:
        raise ProblemError(loc, f"matmul of vectors of sizes {shapes[0][0]} and {shapes[1][0]}: PyTorch raises "
                                "'inconsistent tensor size' (dot needs equal lengths)")
    return ()


def addmm_shape(shapes, p, loc):
    (m, k), (k2, n) = shapes[1], shapes[2]
    if k != k2:
        raise ProblemError(loc, f"Linear input has {k} features but the weight expects {k2}: PyTorch raises "
                                f"'mat1 and mat2 shapes cannot be multiplied ({m}x{k} and {k2}x{n})'")
    broadcast_shapes(shapes[0], (m, n), loc)
    return (m, n)


def mm_forward(B, ins, p):
    return B.matmul2d(ins[0], ins[1])


def mm_vjp(B, gs, ins, outs, p, need):
    g = gs[0]
    a, b = ins
    return [_if(need, 0, lambda: B.matmul2d(g, B.t2(b))), _if(need, 1, lambda: B.matmul2d(B.t2(a), g))]


def mv_forward(B, ins, p):
    m, v = ins
    n = B.shape(v)[0]
    return B.reshape(B.matmul2d(m, B.reshape(v, (n, 1))), (B.shape(m)[0],))


def mv_vjp(B, gs, ins, outs, p, need):
    g = gs[0]
    m, v = ins
    k = B.shape(g)[0]
    return [_if(need, 0, lambda: B.outer(g, v)),
            _if(need, 1, lambda: B.reshape(B.matmul2d(B.t2(m), B.reshape(g, (k, 1))), B.shape(v)))]


def dot_forward(B, ins, p):
    a, b = ins
    n = B.shape(a)[0]
    return B.reshape(B.matmul2d(B.reshape(a, (1, n)), B.reshape(b, (n, 1))), ())


def dot_vjp(B, gs, ins, outs, p, need):
    g = gs[0]
    a, b = ins
    return [_if(need, 0, lambda: B.mul(g, b)), _if(need, 1, lambda: B.mul(g, a))]


def addmm_forward(B, ins, p):
    bias, m1, m2 = ins
    return B.add(bias, B.matmul2d(m1, m2))


def addmm_vjp(B, gs, ins, outs, p, need):
    g = gs[0]
    bias, m1, m2 = ins
    return [_if(need, 0, lambda: B.sum_to(g, B.shape(bias))),
            _if(need, 1, lambda: B.matmul2d(g, B.t2(m2))),
            _if(need, 2, lambda: B.matmul2d(B.t2(m1), g))]


# ----------------------------------------------------------------------------- how they read (adjoint.mathtree)

def _addmm_formula(a, p, shape, k):
    """m1 m2 + b (a 1-D bias is a row added to every row: b^T)."""
    bias = a[0]
    if len(bias.shape) == 1:
        bias = TT(bias, (1, bias.shape[0]))
    return TBin("add", TMatMul(a[1], a[2], shape), bias, shape)


_MATMUL = Math(lambda a, p, shape, k: TMatMul(a[0], a[1], shape))
_DOT = Math(lambda a, p, shape, k: TInner(a[0], a[1], shape))       # a^T b

OPS = (
    Op("mm", "MmBackward0", mm_forward, mm_vjp, mm_shape,
       (Save("mat2", "in", 1, if_need=0), Save("self", "in", 0, if_need=1)), "g b^T, a^T g", math=_MATMUL, checks=(Check(((2, 3), (3, 2))),)),
    Op("mv", "MvBackward0", mv_forward, mv_vjp, mv_shape,
       (Save("self", "in", 0, if_need=1), Save("vec", "in", 1, if_need=0)), "g v^T (outer), M^T g", math=_MATMUL, checks=(Check(((2, 3), (3,))),)),
    Op("dot", "DotBackward0", dot_forward, dot_vjp, dot_shape,
       (Save("self", "in", 0, if_need=1), Save("tensor", "in", 1, if_need=0)), "g*b, g*a", math=_DOT, checks=(Check(((3,), (3,))),)),
    Op("addmm", "AddmmBackward0", addmm_forward, addmm_vjp, addmm_shape,
       (Save("mat1", "in", 1, if_need=2), Save("mat2", "in", 2, if_need=1)), "g (summed to the bias), g m2^T, m1^T g", math=Math(_addmm_formula), checks=(Check(((2,), (3, 2), (2, 2))),)),
)
