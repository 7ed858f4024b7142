"""Complex tensors' own primitives: conj, view_as_real, view_as_complex, angle, sgn, complex.

Their backward formulas are derivatives.yaml's, already in PyTorch's convention for complex
gradients (the conjugate Wirtinger derivative; docs/semantics.md, "Complex numbers"):
``conj: grad.conj()``, ``view_as_real: at::view_as_complex(grad.contiguous())``,
``view_as_complex: at::view_as_real(grad.contiguous().resolve_conj())``. ``z.real`` and
``z.imag`` are ``select(view_as_real(z), -1, 0 / 1)``, as ATen writes them (no op of their own);
``neg_view`` is the ``_neg_view`` that ``imag`` of a conjugated tensor takes (NegViewBackward0).

On a real-valued backend (the gradient checker's) a value is its real part: ``conj`` is the
identity, ``view_as_real`` pairs each element with 0, ``view_as_complex`` keeps the first of
each pair -- the same maps restricted to real numbers, so the checks hold there too.
"""

from __future__ import annotations

from adjoint.engine.torch_errors import TorchError
from adjoint.values.mathtree import Fn, TFn, TNeg
from adjoint.values.mathtree.functions import generic_vjp
from adjoint.engine.ops.arith import binary_shape
from adjoint.engine.ops.record import Check, Math, Op, Save


def _conj(B, x):
    f = getattr(B, "conj", None)
    return f(x) if f is not None else x


def _as_real(B, x):
    f = getattr(B, "view_as_real", None)
    if f is not None:
        return f(x)
    shape = tuple(B.shape(x))
    return B.concat([B.reshape(x, shape + (1,)), B.reshape(B.zeros(shape), shape + (1,))], -1)


def _as_complex(B, x):
    f = getattr(B, "view_as_complex", None)
    if f is not None:
        return f(x)
    shape = tuple(B.shape(x))
    return B.index(x, tuple(slice(None) for _ in shape[:-1]) + (0,))


def conj_forward(B, ins, p):
    return _conj(B, ins[0])


def conj_vjp(B, gs, ins, outs, p, need):
    return [_conj(B, gs[0])]


def view_as_real_forward(B, ins, p):
    return _as_real(B, ins[0])


def view_as_real_vjp(B, gs, ins, outs, p, need):
    return [_as_complex(B, gs[0])]


def view_as_real_shape(shapes, p, loc):
    return tuple(shapes[0]) + (2,)


def view_as_complex_forward(B, ins, p):
    return _as_complex(B, ins[0])


def view_as_complex_vjp(B, gs, ins, outs, p, need):
    return [_as_real(B, gs[0])]


def view_as_complex_shape(shapes, p, loc):
    s = tuple(shapes[0])
    if not s:      # (the binding checks these first, in PyTorch's order with the dtype and strides)
        raise TorchError("RuntimeError", "Input tensor must have one or more dimensions")
    if s[-1] != 2:
        raise TorchError("RuntimeError", "Tensor must have a last dimension of size 2")
    return s[:-1]


def neg_view_forward(B, ins, p):
    return B.neg(ins[0])


def neg_view_vjp(B, gs, ins, outs, p, need):
    return [B.neg(gs[0])]


def angle_forward(B, ins, p):
    f = getattr(B, "angle", None)
    x = ins[0]
    if f is not None and B.is_complex(x):
        return f(x)
    return B.atan2(B.zeros(B.shape(x)), x)   # a real x: 0, or pi where x < 0


def angle_vjp(B, gs, ins, outs, p, need):
    """angle_backward: ``where(self == 0, 0, grad * self / self.abs().pow(2) * 1j)`` of a complex
    ``self``, zeros of a real one (its angle is piecewise constant)."""
    x, g = ins[0], gs[0]
    if not (hasattr(B, "is_complex") and B.is_complex(x)):
        return [B.mul(g, B.zeros(B.shape(x)))]
    n2 = B.norm2(x)
    safe = B.add(n2, B.mask(n2, lambda s: s == 0))   # 1 where z = 0, whose parts (and so the result) are 0
    q = B.div(B.mul(g, x), safe)
    return [B.make(B.neg(B.imag(q)), B.real(q))]    # times i


def sgn_forward(B, ins, p):
    return B.sgn(ins[0])


def sgn_vjp(B, gs, ins, outs, p, need):
    """sgn_backward (FunctionsManual.cpp): of a complex ``self``,
    ``((gx - (sgn * sgn) * gx.conj()) / (2. * abs)).masked_fill_(abs == 0., 0.)``; of a real one
    zeros (``_efficientzerotensor``)."""
    x, s, g = ins[0], outs[0], gs[0]
    if not (hasattr(B, "is_complex") and B.is_complex(x)):
        return [B.zeros(B.shape(x))]
    a = B.abs(x)
    zero = B.mask(a, lambda v: v == 0)
    q = B.div(B.sub(g, B.mul(B.mul(s, s), B.conj(g))), B.add(B.mul(B.scalar(2), a), zero))
    return [B.mul(q, B.sub(B.scalar(1), zero))]


def complex_forward(B, ins, p):
    """torch.complex(real, imag), the operands broadcast; on a real backend (the gradient checker's)
    the real part alone, as the module docstring says."""
    shape = complex_shape([B.shape(x) for x in ins], p, None)
    re, im = (B.broadcast_to(x, shape) for x in ins)
    return B.make(re, im) if hasattr(B, "make") else re


def complex_vjp(B, gs, ins, outs, p, need):
    """derivatives.yaml: ``real: at::real(grad)``, ``imag: at::imag(grad)``, each summed back to
    its operand's shape."""
    g = gs[0]
    re = B.real(g) if hasattr(B, "real") else g
    im = B.imag(g) if hasattr(B, "imag") else B.zeros(B.shape(g))
    return [B.sum_to(re, B.shape(ins[0])) if need[0] else None, B.sum_to(im, B.shape(ins[1])) if need[1] else None]


def complex_shape(shapes, p, loc):
    return binary_shape(shapes, p, loc)


CONJ = Fn("conj", "\\overline{#0}", generic_vjp, delimited=True)
AS_REAL = Fn("view_as_real", "\\operatorname{view\\_as\\_real}\\left(#0\\right)", generic_vjp)
AS_COMPLEX = Fn("view_as_complex", "\\operatorname{view\\_as\\_complex}\\left(#0\\right)", generic_vjp)


SGN = Fn("sgn", "\\operatorname{sgn}\\left(#0\\right)", generic_vjp)
COMPLEX = Fn("complex", "\\operatorname{complex}\\left(#0, #1\\right)", generic_vjp)
ANGLE = Fn("angle", "\\arg\\left(#0\\right)", generic_vjp)


def _math(fn):
    return Math(lambda a, p, shape, k: TFn(fn, tuple(a), shape))


OPS = (
    Op("conj", "ConjBackward0", conj_forward, conj_vjp, lambda s, p, loc: tuple(s[0]), (), "conj(g)", grows=False,
       math=_math(CONJ), checks=(Check(((2, 2),)),)),
    Op("view_as_real", "ViewAsRealBackward0", view_as_real_forward, view_as_real_vjp, view_as_real_shape, (),
       "view_as_complex(g)", grows=False, math=_math(AS_REAL), checks=(Check(((2,),)),)),
    Op("view_as_complex", "ViewAsComplexBackward0", view_as_complex_forward, view_as_complex_vjp,
       view_as_complex_shape, (), "view_as_real(g)", grows=False, math=_math(AS_COMPLEX), checks=(Check(((3, 2),)),)),
    Op("neg_view", "NegViewBackward0", neg_view_forward, neg_view_vjp, lambda s, p, loc: tuple(s[0]), (), "-g",
       grows=False, math=Math(lambda a, p, shape, k: TNeg(a[0], shape)), checks=(Check(((2, 2),)),)),
    Op("angle", "AngleBackward0", angle_forward, angle_vjp, lambda s, p, loc: tuple(s[0]), (Save("self", "in", 0),),
       "g * z / |z|^2 * i (0 at z = 0)", grows=False, math=_math(ANGLE), checks=(Check(((2, 2),), positive=True),)),
    Op("sgn", "SgnBackward0", sgn_forward, sgn_vjp, lambda s, p, loc: tuple(s[0]),
       (Save("self", "in", 0), Save("result", "out", 0)), "(g - out^2 conj(g)) / (2 |z|) (0 at z = 0; real: 0)",
       grows=False, math=_math(SGN), checks=(Check(((2, 2),), positive=True),)),
    # saves imag when imag needs a gradient, then real when real does (pack order, torch 2.13)
    Op("complex", "ComplexBackward0", complex_forward, complex_vjp, complex_shape,
       (Save("imag", "in", 1, if_need=1), Save("real", "in", 0, if_need=0)), "real(g), imag(g)", grows=False,
       math=_math(COMPLEX), checks=(Check(((2, 3), (3,))), Check(((2,), (2,))))),
)
