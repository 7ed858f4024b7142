"""Three-tensor pointwise ops: ``addcmul`` and ``addcdiv`` (``self + value * tensor1 * tensor2``,
``self + value * tensor1 / tensor2``), the three operands broadcast.

derivatives.yaml (PyTorch 2.13), real tensors:

* addcmul (AddcmulBackward0): ``self: grad``, ``tensor1: grad * (tensor2 * value)``,
  ``tensor2: grad * (tensor1 * value)``; the node saves ``tensor1`` only when tensor2's gradient can
  be needed and ``tensor2`` only when tensor1's can (pack order tensor1, tensor2);
* addcdiv (AddcdivBackward0): ``tensor1: grad * (value / tensor2)``,
  ``tensor2: -grad * (value * tensor1 / (tensor2 * tensor2))``; ``tensor2`` is read by both
  formulas and is saved always, ``tensor1`` only when tensor2's gradient can be needed.

Each gradient is summed back over the dims its operand was broadcast along. ``value`` is the
op's parameter (a Python number). The CPU kernel refuses integer ``tensor1`` and ``tensor2`` for
addcdiv (the historic integer division), in its own words.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from adjoint.values.mathtree import TBin, TConst, number
from adjoint.engine.ops.record import Check, Math, Op, Save, if_needed
from adjoint.engine.ops.arith import broadcast_shapes


def addc_shape(shapes, p, loc):
    return broadcast_shapes(broadcast_shapes(shapes[0], shapes[1], loc), shapes[2], loc)


def addcmul_forward(B, ins, p):
    x, t1, t2 = ins
    return B.add(x, B.mul(B.mul(B.scalar(p), t1), t2))


def addcmul_vjp(B, gs, ins, outs, p, need):
    g = gs[0]
    x, t1, t2 = ins
    v = B.scalar(p)
    return [if_needed(need, 0, lambda: B.sum_to(g, B.shape(x))),
            if_needed(need, 1, lambda: B.sum_to(B.mul(g, B.mul(t2, v)), B.shape(t1))),
            if_needed(need, 2, lambda: B.sum_to(B.mul(g, B.mul(t1, v)), B.shape(t2)))]


def addcdiv_forward(B, ins, p):
    x, t1, t2 = ins
    return B.add(x, B.div(B.mul(B.scalar(p), t1), t2))


def addcdiv_vjp(B, gs, ins, outs, p, need):
    g = gs[0]
    x, t1, t2 = ins
    v = B.scalar(p)
    return [if_needed(need, 0, lambda: B.sum_to(g, B.shape(x))),
            if_needed(need, 1, lambda: B.sum_to(B.mul(g, B.div(v, t2)), B.shape(t1))),
            if_needed(need, 2, lambda: B.sum_to(B.mul(B.neg(g), B.div(B.mul(v, t1), B.mul(t2, t2))), B.shape(t2)))]


ADDCDIV_INTEGER = ("Integer division with addcdiv is no longer supported, and in a future  release addcdiv will perform "
                   "a true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as (input + "
                   "value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as (input + value * "
                   "tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the latter implementation: "
                   "(input + value * tensor1 / tensor2), for all dtypes.")


def addcdiv_error(dtypes, p):
    """addcdiv's meta function: integral (or bool) tensor1 and tensor2 together are refused."""
    ints = ("int64", "bool")
    return ADDCDIV_INTEGER if dtypes[1] in ints and dtypes[2] in ints else None


# ----------------------------------------------------------------------------- how they read (adjoint.mathtree)

def _shape(*trees):
    out = ()
    for t in trees:
        out = broadcast_shapes(out, tuple(t.shape), None)
    return out


def _addc(op: str):
    def formula(a, p, shape, k):
        x, t1, t2 = a
        scaled = TBin("mul", TConst(number(p)), t1, tuple(t1.shape))
        term = TBin(op, scaled, t2, _shape(t1, t2))
        return TBin("add", x, term, tuple(shape))
    return Math(formula)


OPS = (
    Op("addcmul", "AddcmulBackward0", addcmul_forward, addcmul_vjp, addc_shape,
       (Save("tensor1", "in", 1, if_need=2), Save("tensor2", "in", 2, if_need=1)),
       "g, g * t2 * value, g * t1 * value (summed back over broadcast dims)", negzero="addc",
       math=_addc("mul"), checks=(Check(((2, 3), (3,), (2, 1)), Fraction(3, 2)), Check(((2,), (2,), (2,)), Fraction(-1)))),
    Op("addcdiv", "AddcdivBackward0", addcdiv_forward, addcdiv_vjp, addc_shape,
       (Save("tensor1", "in", 1, if_need=2), Save("tensor2", "in", 2)),
       "g, g * value / t2, -g * value * t1 / t2^2 (summed back over broadcast dims)", negzero="addc",
       nonfinite="division by zero", forward_error=addcdiv_error,
       math=_addc("div"), checks=(Check(((2, 3), (3,), (2, 1)), Fraction(3, 2), positive=True),)),
)

# both run as one TensorIterator (an elementwise kernel)
OPS = tuple(replace(op, elementwise=True) for op in OPS)
