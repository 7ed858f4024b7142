"""``fmod`` and ``remainder``: C's ``fmod`` (the result has the sign of self) and PyTorch's
``remainder`` (the sign of other, as Python's ``%``).

derivatives.yaml (PyTorch 2.13):

* ``fmod.Tensor`` (FmodBackward1): ``self: grad``, ``other: -grad * self.div(other,
  rounding_mode="trunc")``; ``remainder.Tensor`` (RemainderBackward1): the same with ``"floor"``.
  Both save other, then self, only when other's gradient can be needed; the gradients are summed
  back over the broadcast dims;
* ``fmod.Scalar`` / ``remainder.Scalar`` (FmodBackward0 / RemainderBackward0): ``self: grad``,
  nothing saved.

A divisor 0 gives nan (the exact answer refuses it; ``--float64`` follows PyTorch). The values
are the backend's ``fmod`` / ``remainder`` / ``rounded_quotient`` (rational elements only in
the exact answer: :mod:`adjoint.values.backends.exact_modulo`).
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from adjoint.values.mathtree import Fn, TConst, TFn, generic_vjp, number
from adjoint.engine.ops.record import Check, Math, Op, Save
from adjoint.engine.ops.arith import binary_shape, same_shape

_MODE = {"fmod": "trunc", "remainder": "floor"}


def _tensor_forward(name: str):
    def forward(B, ins, p):
        return getattr(B, name)(ins[0], ins[1])
    return forward


def _tensor_vjp(name: str):
    def vjp(B, gs, ins, outs, p, need):
        g = gs[0]
        a, b = ins
        return [B.sum_to(g, B.shape(a)) if need[0] else None,
                B.sum_to(B.mul(B.neg(g), B.rounded_quotient(a, b, _MODE[name])), B.shape(b)) if need[1] else None]
    return vjp


def _scalar_forward(name: str):
    def forward(B, ins, p):
        return getattr(B, name)(ins[0], B.scalar(p))
    return forward


def scalar_vjp(B, gs, ins, outs, p, need):
    return [gs[0]]


FMOD = Fn("fmod", "\\operatorname{fmod}\\left(#0,\\ #1\\right)", generic_vjp)
REMAINDER = Fn("remainder", "\\operatorname{remainder}\\left(#0,\\ #1\\right)", generic_vjp)
_FNS = {"fmod": FMOD, "remainder": REMAINDER}


def _ops(name: str, node: str):
    fn = _FNS[name]
    return (
        Op(f"{name}_tensor", f"{node}Backward1", _tensor_forward(name), _tensor_vjp(name), binary_shape,
           (Save("other", "in", 1, if_need=1), Save("self", "in", 0, if_need=1)),
           f"g, -g * {_MODE[name]}(a / b) (summed back over broadcast dims)", negzero="input_sign", grows=False,
           nonfinite=f"{name} by zero", integers="refused",
           math=Math(lambda a, p, shape, k: TFn(fn, tuple(a), tuple(shape))),
           checks=(Check(((2, 3), (3,)), given=((1, (3, -2, 4)),), differences=True),
                   Check(((2, 3), (3,)), given=((0, tuple(Fraction(k, 7) for k in (1, -5, 3, -9, 11, 2))),),
                         differences=True))),
        Op(f"{name}_scalar", f"{node}Backward0", _scalar_forward(name), scalar_vjp, same_shape, (), "g",
           negzero="input_sign", grows=False, nonfinite=f"{name} by zero", integers="refused",
           math=Math(lambda a, p, shape, k: TFn(fn, (a[0], TConst(number(p))), tuple(shape))),
           checks=(Check(((2, 3),), Fraction(3, 2), differences=True), Check(((2,),), Fraction(-2, 3), differences=True))),
    )


def div_mode_forward(B, ins, p):
    return B.rounded_quotient(ins[0], ins[1], p)


def div_mode_vjp(B, gs, ins, outs, p, need):
    # div_tensor_self_backward / div_tensor_other_backward with a rounding mode: zeros_like(grad) for each
    g = gs[0]
    return [B.sum_to(B.zeros(B.shape(g)), B.shape(ins[0])) if need[0] else None,
            B.sum_to(B.zeros(B.shape(g)), B.shape(ins[1])) if need[1] else None]


DIV_MODE = Fn("div_mode", "\\operatorname{div}_{#s}\\left(#0,\\ #1\\right)", generic_vjp)

#: ``a.div(b, rounding_mode=MODE)`` (DivBackward2): the quotient rounded toward zero ("trunc") or down ("floor");
#: its gradients are zeros (no graph). Recorded by the create_graph formulas of FmodBackward1 and
#: RemainderBackward1 (adjoint.engine.second_binary); not a function of the file language yet.
DIV_OP = Op("div_mode", "DivBackward2", div_mode_forward, div_mode_vjp, binary_shape,
            (Save("other", "in", 1), Save("self", "in", 0, if_need=1)), "zeros (a step function)",
            negzero="product", grows=False, nonfinite="division by zero", integers="refused",
            math=Math(lambda a, p, shape, k: TFn(DIV_MODE, tuple(a), tuple(shape))),
            checks=(Check(((2, 3), (3,)), "trunc", given=((1, (3, -2, 4)),), differences=True),
                    Check(((2, 3), (3,)), "floor", given=((1, (3, -2, 4)),), differences=True)))

OPS = tuple(replace(op, elementwise=True) for op in _ops("fmod", "Fmod") + _ops("remainder", "Remainder") + (DIV_OP,))
