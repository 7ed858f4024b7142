"""``masked_fill`` with a tensor value (``MaskedFillBackward1``), and the shape rule, forward and
VJP both masked_fill overloads share (the number-valued one, ``MaskedFillBackward0``, is the
op ``masked_fill`` in :mod:`adjoint.engine.ops.losses`, where cross_entropy's label smoothing first
needed it).

PyTorch 2.13 (``aten/src/ATen/native/TensorAdvancedIndexing.cpp``, ``derivatives.yaml``),
probed on CPU:

* out of place, ``masked_fill`` expands ``self`` and ``mask`` against each other
  (``expand_outplace(mask, self)``: a mismatch names the mask as tensor a), clones and fills:
  the result has the broadcast shape, is contiguous and keeps ``self``'s float (a -0.0 too)
  where the mask is False; in place (``masked_fill_``) the mask must broadcast to ``self``;
* the mask must be a bool tensor (``masked_fill_ only supports boolean masks, but got mask
  with dtype long int``), raised by the kernel after autograd made the node;
* the value is a number (``MaskedFillBackward0``: one edge, ``self``) or a 0-d tensor
  (``MaskedFillBackward1``: edges ``self`` and ``value``, so the op's operands are ordered
  ``(self, value, mask)`` here, the differentiable ones first; a 1-d value is refused:
  ``masked_fill_ only supports a 0-dimensional value tensor, but got tensor with 1
  dimension(s).``);
* both nodes save the mask only; ``self``'s gradient is ``grad.masked_fill(mask, 0)`` summed
  back to ``self``'s shape, ``value``'s is ``grad.masked_select(mask).sum()``.

``masked_select(self, mask)`` (``MaskedSelectBackward0``): ``self`` and the mask broadcast
against each other (``expand_outplace(mask, self)``), the elements where the mask is set, in
row-major order of that shape: a 1-d contiguous result, whose length (the count) is the op's
parameter. The node saves the mask, then ``self``; ``masked_select_backward`` is
``zeros_like(self.expand(broadcast), preserve_format).masked_scatter_(mask, grad)``, summed to
``self``'s shape by validate_outputs where ``self`` was broadcast.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.values.mathtree import Fn, TFn, generic_vjp
from adjoint.engine.ops.record import Check
from adjoint.engine.ops.record import Math
from adjoint.engine.ops.record import Op
from adjoint.engine.ops.record import Save
from adjoint.engine.ops.arith import broadcast_shapes
from adjoint.engine.torch_errors import TorchError

_DTYPE_WORDS = {"int64": "long int", "float32": "float", "float64": "double"}


def masked_fill_shape(shapes, p, loc):
    """``expand_outplace(mask, self)``: the broadcast of the two (the mask is tensor a)."""
    return broadcast_shapes(shapes[1], shapes[0], loc)


def masked_fill_tensor_shape(shapes, p, loc):
    """The operands in the node's order: (self, value, mask)."""
    value = shapes[1]
    if len(value) != 0:   # the kernel's error (Runtime.apply raises it after the node's packs)
        raise TorchError("RuntimeError", "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                                         f"{len(value)} dimension(s).")
    return masked_fill_shape((shapes[0], shapes[2]), p, loc)


def mask_error(dtypes, p):
    """The kernel's refusal of a mask that is not bool (after the node is made); the mask is
    the last operand."""
    if dtypes[-1] != "bool":
        return ("masked_fill_ only supports boolean masks, but got mask with dtype "
                f"{_DTYPE_WORDS.get(dtypes[-1], dtypes[-1])}")
    return None


def fill(B, x, mask, value):
    """``x`` broadcast against ``mask``, ``value`` (a tensor, broadcast) where the mask is set;
    the elements kept keep their float (a -0.0 mark too: ``choose`` carries it)."""
    shape = broadcast_shapes(B.shape(mask), B.shape(x), None)
    return B.choose(B.broadcast_to(mask, shape), "!=", B.broadcast_to(value, shape), B.broadcast_to(x, shape))


def infinity(B, negative: bool, shape=()):
    """A tensor of ``-inf`` (``+inf``) as a constant: every backend's ``full`` takes SymPy's
    infinity (the exact one keeps it a special form with no recipe to recompute, so a certified
    value built on it refines without meeting a ``1 / 0`` ball)."""
    from adjoint.values.numbers.symbolic import sympy
    S = sympy().S
    return B.full(tuple(shape), S.NegativeInfinity if negative else S.Infinity)


def fill_value(B, p):
    """The number masked_fill writes: a Fraction, or ``"inf"`` / ``"-inf"`` (``float("-inf")``)."""
    if isinstance(p, str):
        return infinity(B, p == "-inf")
    return B.scalar(Fraction(p))


def masked_fill_forward(B, ins, p):
    x, mask = ins
    return fill(B, x, mask, fill_value(B, p))


def self_grad(B, g, x, mask):
    """``grad.masked_fill(mask, 0)``, summed to ``self``'s shape by autograd's validate_outputs."""
    shape = B.shape(g)
    zero = B.zeros(shape)
    return B.sum_to(B.choose(B.broadcast_to(mask, shape), "!=", zero, g), B.shape(x))


def masked_fill_vjp(B, gs, ins, outs, p, need):
    x, mask = ins
    return [self_grad(B, gs[0], x, mask), None]


def masked_fill_tensor_forward(B, ins, p):
    x, value, mask = ins
    return fill(B, x, mask, value)


def masked_fill_tensor_vjp(B, gs, ins, outs, p, need):
    # self: grad.masked_fill(mask, 0); value: masked_fill_backward = grad.masked_select(mask).sum()
    x, value, mask = ins
    g = gs[0]
    shape = B.shape(g)

    def value_grad():
        picked = B.choose(B.broadcast_to(mask, shape), "!=", g, B.zeros(shape))
        return B.sum_dims(picked, (), False)
    return [self_grad(B, g, x, mask) if need[0] else None, value_grad() if need[1] else None, None]


def masked_select_shape(shapes, p, loc):
    """A 1-d result of ``p`` elements (the True elements of the broadcast mask)."""
    broadcast_shapes(shapes[1], shapes[0], loc)
    return (p,)


def _selected(B, x, mask):
    """The broadcast shape and numpy's key for the elements the mask selects in it."""
    import numpy as np
    shape = tuple(broadcast_shapes(B.shape(mask), B.shape(x), None))
    return shape, (np.broadcast_to(B.as_indices(mask).astype(bool), shape),)


def masked_select_forward(B, ins, p):
    x, mask = ins
    shape, key = _selected(B, x, mask)
    return B.index(B.broadcast_to(x, shape), key)


def masked_select_vjp(B, gs, ins, outs, p, need):
    # masked_select_backward: zeros_like(self.expand(...)).masked_scatter_(mask, grad); summed to self
    x, mask = ins
    shape, key = _selected(B, x, mask)
    return [B.sum_to(B.place_add(shape, key, gs[0]), B.shape(x)), None]


#: how it reads (adjoint.mathtree): masked_fill(x, mask, v) (operands in the node's order: x, v, mask)
MASKED_SELECT = Fn("masked_select", "\\operatorname{masked\\_select}\\left(#0,\\ #1\\right)", generic_vjp)
MASKED_FILL_T = Fn("masked_fill_t", "\\operatorname{masked\\_fill}\\left(#0,\\ #2,\\ #1\\right)", generic_vjp)

OPS = (
    Op("masked_fill_tensor", "MaskedFillBackward1", masked_fill_tensor_forward, masked_fill_tensor_vjp,
       masked_fill_tensor_shape, (Save("mask", "in", 2),),
       "self: g, 0 where the mask is set (summed to self's shape); value: the sum of g where the mask is set",
       negzero="structural", grows=False, differentiable=(True, True, False), forward_error=mask_error, fills=True,
       checks_internal_overlap=False,   # masked_fill__cpu warns on an expanded self (bindings/masking.py)
       kink_doc="the mask (bool) has no edge; it is the only saved tensor",
       math=Math(lambda a, p, shape, k: TFn(MASKED_FILL_T, (a[0], a[1], a[2]), tuple(shape))),
       checks=(Check(((2, 3), (), (2, 3)), None, given=((2, (1, 0, 1, 0, 0, 1)),)),
               Check(((3,), (), (2, 3)), None, given=((2, (1, 0, 0, 0, 1, 1)),)))),
    Op("masked_select", "MaskedSelectBackward0", masked_select_forward, masked_select_vjp, masked_select_shape,
       (Save("mask", "in", 1), Save("self", "in", 0)),
       "zeros(broadcast) with g placed where the mask is set (masked_scatter_), summed to self's shape",
       negzero="structural", grows=False, differentiable=(True, False), copies_values=True,
       kink_doc="the mask (bool) has no edge; self is saved though only its shape and strides are read",
       math=Math(lambda a, p, shape, k: TFn(MASKED_SELECT, (a[0], a[1]), tuple(shape))),
       checks=(Check(((2, 3), (2, 3)), 3, given=((1, (1, 0, 1, 0, 0, 1)),)),
               Check(((3,), (2, 3)), 3, given=((1, (1, 0, 0, 0, 1, 1)),)),
               Check(((2, 3), (3,)), 4, given=((1, (1, 0, 1)),)))),
)
