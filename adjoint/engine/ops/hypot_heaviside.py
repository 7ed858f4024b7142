"""``hypot`` and ``heaviside``, two elementwise functions of two broadcast tensors.

* hypot (HypotBackward0): ``sqrt(self^2 + other^2)`` (C's hypot); derivatives.yaml's
  ``grad * self / result`` and ``grad * other / result``, summed back over broadcast dims; the node
  saves other (when other's gradient can be needed), self (when self's can), then result, always. At the origin the result is 0 and both gradients are 0 / 0 (nan in PyTorch).
* heaviside: ``0`` where self < 0, ``values`` where self == 0 (-0.0 too), ``1`` where self > 0.
  derivatives.yaml has no formula: the generated code records a ``torch::autograd::NotImplemented``
  node (sequence_nr UINT64_MAX, none drawn) whose apply raises ``derivative for aten::heaviside is
  not implemented`` when a backward reaches it.
"""

from __future__ import annotations

from dataclasses import replace

from adjoint.values.mathtree import Fn, TFn, generic_vjp, no_gradient
from adjoint.engine.ops.record import Check, Math, Op, Save
from adjoint.engine.ops.arith import binary_shape


def hypot_forward(B, ins, p):
    a, b = ins
    return B.sqrt(B.add(B.mul(a, a), B.mul(b, b)))


def hypot_vjp(B, gs, ins, outs, p, need):
    g = gs[0]
    a, b = ins
    out = outs[0]
    return [B.sum_to(B.div(B.mul(g, a), out), B.shape(a)) if need[0] else None,
            B.sum_to(B.div(B.mul(g, b), out), B.shape(b)) if need[1] else None]


def hypot_kink(B, ins, p):
    a, b = ins
    if B.any_zero(B.add(B.mul(a, a), B.mul(b, b))):
        return "hypot at (0, 0): its gradients are grad * self / result and grad * other / result, 0 / 0 (nan in PyTorch)"
    return None


def heaviside_forward(B, ins, p):
    x, values = ins
    zeros = B.zeros(B.shape(x))
    step = B.choose(x, ">", B.add(zeros, B.scalar(1)), zeros)
    return B.choose(x, "==", values, step)


def heaviside_vjp(B, gs, ins, outs, p, need):
    # never run: the NotImplemented node raises first (heaviside_backward_error); the function is
    # piecewise constant, so what it would be is 0
    return [B.zeros(B.shape(x)) if need[i] else None for i, x in enumerate(ins)]


def heaviside_backward_error(dtypes, p, need):
    return ("RuntimeError", "derivative for aten::heaviside is not implemented", "not_implemented")


def heaviside_error(dtypes, p):
    return "heaviside is not yet implemented for tensors with different dtypes." if dtypes[0] != dtypes[1] else None


HYPOT = Fn("hypot", "\\operatorname{hypot}\\left(#0,\\ #1\\right)", generic_vjp)
HEAVISIDE = Fn("heaviside", "H\\left(#0,\\ #1\\right)", no_gradient)

OPS = (
    Op("hypot", "HypotBackward0", hypot_forward, hypot_vjp, binary_shape,
       (Save("other", "in", 1, if_need=1), Save("self", "in", 0, if_need=0), Save("result", "out", 0)),
       "g * a / out, g * b / out (summed back over broadcast dims)", kink=hypot_kink,
       kink_doc="0 / 0 (nan) at a = b = 0", integers="refused",
       math=Math(lambda a, p, shape, k: TFn(HYPOT, tuple(a), tuple(shape))),
       checks=(Check(((2, 3), (3,)), positive=True), Check(((2,), (2,)), positive=True))),
    Op("heaviside", "torch::autograd::NotImplemented", heaviside_forward, heaviside_vjp, binary_shape, (),
       "raises: derivative for aten::heaviside is not implemented", negzero="never", grows=False,
       forward_error=heaviside_error, backward_error=heaviside_backward_error, sequence_nr_max=True,
       takes_sequence_nr=False, copies_values=True,
       math=Math(lambda a, p, shape, k: TFn(HEAVISIDE, tuple(a), tuple(shape))),
       checks=(Check(((2, 3), (3,)), positive=True),)),
)

# both run as one TensorIterator (an elementwise kernel)
OPS = tuple(replace(op, elementwise=True) for op in OPS)
