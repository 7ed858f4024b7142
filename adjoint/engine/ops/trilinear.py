"""``_trilinear`` (``TrilinearBackward0``): the node of ``F.bilinear`` / ``nn.Bilinear``.

at::bilinear (aten/src/ATen/native/Linear.cpp) flattens both inputs to rows and calls
``_trilinear(x1, weight, x2, expand1=[1, 3], expand2=[0], expand3=[1, 2], sumdim=[2, 3])``:
with ``x1`` of shape ``(N, in1)``, ``weight`` of shape ``(out, in1, in2)`` and ``x2`` of shape
``(N, in2)``,

    y[n, o] = sum_i sum_j x1[n, i] * weight[o, i, j] * x2[n, j]          (N, out)

Only that call is modelled (adjoint.engine.bindings.bilinear makes it): the op's params are None.
The node saves the three inputs, each only where another input's gradient can be needed
(derivatives.yaml: ``wrap_opt_if(i1, grad_input_mask[1] || grad_input_mask[2])``, and so on),
and the expand / sumdim lists. Its backward (``_trilinear_backward``) is

    grad x1[n, i]     = sum_o sum_j g[n, o] weight[o, i, j] x2[n, j]
    grad weight[o, i, j] = sum_n g[n, o] x1[n, i] x2[n, j]
    grad x2[n, j]     = sum_o sum_i g[n, o] x1[n, i] weight[o, i, j]

A weight of another rank than 3 (which at::bilinear's size checks let through when its sizes 1
and 2 match) makes the kernel's sum of products refuse it after the node packed its inputs:
"number of dimensions must match".
"""

from __future__ import annotations

from adjoint.values.mathtree import Fn, generic_vjp, layer
from adjoint.engine.ops.record import Check, Math, Op, Save


def trilinear_shape(shapes, p, loc):
    x1, w = shapes[0], shapes[1]
    return (x1[0], w[0])


def trilinear_value_error(B, values, p):
    if len(B.shape(values[1])) != 3:
        return ("RuntimeError", "number of dimensions must match")
    return None


def _mm(B, a, b):
    """(m, k) @ (k, n) summed from +0.0 (as ``bmm`` does: the kernel never gives -0.0)."""
    (m, k), n = B.shape(a), B.shape(b)[1]
    return B.reshape(B.bmm(B.reshape(a, (1, m, k)), B.reshape(b, (1, k, n))), (m, n))


def _x1_weight(B, x1, w):
    """t[n, o, j] = sum_i x1[n, i] w[o, i, j], shape (N, out, in2)."""
    out, in1, in2 = B.shape(w)
    flat = B.reshape(B.permute(w, (1, 0, 2)), (in1, out * in2))
    return B.reshape(_mm(B, x1, flat), (B.shape(x1)[0], out, in2))


def _weight_x2(B, w, x2):
    """v[n, o, i] = sum_j w[o, i, j] x2[n, j], shape (N, out, in1)."""
    out, in1, in2 = B.shape(w)
    return B.reshape(_mm(B, x2, B.t2(B.reshape(w, (out * in1, in2)))),
                     (B.shape(x2)[0], out, in1))


def _rows_times(B, g, t):
    """r[n, k] = sum_o g[n, o] t[n, o, k]."""
    n, out, k = B.shape(t)
    return B.reshape(B.bmm(B.reshape(g, (n, 1, out)), t), (n, k))


def trilinear_forward(B, ins, p):
    x1, w, x2 = ins
    n, in2 = B.shape(x2)
    t = _x1_weight(B, x1, w)
    return B.reshape(B.bmm(t, B.reshape(x2, (n, in2, 1))), (n, B.shape(w)[0]))


def trilinear_vjp(B, gs, ins, outs, p, need):
    x1, w, x2 = ins
    g = gs[0]
    grads = [None, None, None]
    if need[0]:
        grads[0] = _rows_times(B, g, _weight_x2(B, w, x2))
    if need[1]:
        out, in1, in2 = B.shape(w)
        n = B.shape(x1)[0]
        gx = B.reshape(B.mul(B.reshape(g, (n, out, 1)), B.reshape(x1, (n, 1, in1))), (n, out * in1))
        grads[1] = B.reshape(_mm(B, B.t2(gx), x2), (out, in1, in2))
    if need[2]:
        grads[2] = _rows_times(B, g, _x1_weight(B, x1, w))
    return grads


#: how it reads: the bilinear form of each row pair, one per output feature; J^T lambda declared generic
TRILINEAR = Fn("trilinear", "\\operatorname{bilinear}\\left(#0,\\ #1,\\ #2\\right)", generic_vjp)

OPS = (
    Op("_trilinear", "TrilinearBackward0", trilinear_forward, trilinear_vjp, trilinear_shape,
       (Save("i1", "in", 0, if_need=(1, 2)), Save("i2", "in", 1, if_need=(0, 2)),
        Save("i3", "in", 2, if_need=(0, 1))),
       "x1: sum_o,j g[n,o] W[o,i,j] x2[n,j]; W: sum_n g[n,o] x1[n,i] x2[n,j]; x2: sum_o,i g[n,o] x1[n,i] W[o,i,j]",
       integers="refused", value_error=trilinear_value_error,
       math=Math(layer((TRILINEAR,))),
       checks=(Check(((2, 3), (4, 3, 2), (2, 2))), Check(((1, 1), (2, 1, 3), (1, 3))))),
)
