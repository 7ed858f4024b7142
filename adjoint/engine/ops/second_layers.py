"""The backward kernels a create_graph backward records for the layer ops of
adjoint.engine.ops.prelu, .glu and .padding (adjoint.engine.second_layers calls them), with their
own derivatives (derivatives.yaml's entries for the backward kernels), as torch 2.13 records them:

* ``_prelu_kernel_backward(grad_output, self, weight)``: ``PreluKernelBackwardBackward0``, two
  outputs, both of ``self``'s shape (the weight's is summed to the weight by the engine's
  ``validate_outputs``: a recorded ``SumBackward1``); saves ``grad_output``, ``self``, ``weight``.
  Its derivative tests ``self >= 0`` where the forward kernel tests ``self > 0``;
* ``glu_backward(grad_output, self, dim)``: ``GluBackwardBackward0``; saves ``grad_output``, ``self``;
* ``embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq)``:
  ``EmbeddingDenseBackwardBackward0`` (one edge: the indices have none); saves ``indices``. Its
  derivative, ``embedding_dense_double_backward``, picks the incoming gradient's rows at the indices
  (0 at ``padding_idx``) and does not divide by the counts with ``scale_grad_by_freq`` (the first
  backward "takes care of scaling by frequency": not the derivative there, PyTorch's answer);
* ``reflection_padNd_backward`` / ``replication_padNd_backward(grad_output, self, padding)``:
  ``ReflectionPadNDBackwardBackward0`` / ``ReplicationPadNDBackwardBackward0``; saves no tensor
  (the padding only): grad_output's gradient is the padding of the incoming gradient, self's
  ``zeros_like(self)``.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.values.mathtree import Fn, generic_vjp, layer
from adjoint.engine.ops.embedding import EmbeddingSpec, _embedding_sub, embedding_vjp
from adjoint.engine.ops.glu import _halves, glu_vjp
from adjoint.engine.ops.padding import PadSpec, _sub as pad_sub, pad_forward, pad_vjp
from adjoint.engine.ops.record import Check, Math, Op, Save


# ----------------------------------------------------------------------------- prelu

def prelu_backward_forward(B, ins, p):
    """_prelu_kernel_backward: ``self > 0 ? g : weight * g`` and ``self > 0 ? 0 : self * g``, both of
    self's shape (the weight broadcast to it)."""
    go, x, w = ins
    shape = B.shape(x)
    wide = B.broadcast_to(w, shape)
    return (B.choose(x, ">", go, B.mul(wide, go)), B.choose(x, ">", B.zeros(shape), B.mul(x, go)))


def prelu_backward_vjp(B, gs, ins, outs, p, need):
    """derivatives.yaml's ``_prelu_kernel_backward`` (gg0, gg1 the gradients of the two outputs, either
    undefined): grad_output ``where(self >= 0, gg0, gg0 * weight + gg1 * self)`` (a missing term left
    out; gg0 missing: 0 where self >= 0); self ``where(self >= 0, 0, grad_output * gg1)`` (gg1 missing:
    zeros); weight ``where(self >= 0, 0, grad_output * gg0)`` summed to the weight (gg0 missing: zeros)."""
    gg0, gg1 = (list(gs) + [None])[:2]
    go, x, w = ins
    shape = B.shape(x)
    wide = B.broadcast_to(w, shape)
    zero = B.zeros(shape)
    d_go = d_x = d_w = None
    if need[0]:
        if gg0 is not None:
            below = B.mul(gg0, wide) if gg1 is None else B.add(B.mul(gg0, wide), B.mul(gg1, x))
            d_go = B.choose(x, ">=", gg0, below)
        else:
            d_go = B.choose(x, ">=", zero, B.mul(gg1, x))
    if len(need) > 1 and need[1]:
        d_x = B.choose(x, ">=", zero, B.mul(go, gg1)) if gg1 is not None else zero
    if len(need) > 2 and need[2]:
        d_w = B.sum_to(B.choose(x, ">=", zero, B.mul(go, gg0)) if gg0 is not None else zero, B.shape(w))
    return [d_go, d_x, d_w]


PRELU_BACKWARD = tuple(Fn(f"prelu_backward_{k}", f"\\operatorname{{prelu}}'_{{{k}}}\\left(#*\\right)", generic_vjp)
                       for k in ("self", "weight"))


# ----------------------------------------------------------------------------- glu

def glu_backward_forward(B, ins, dim):
    go, x = ins
    return glu_vjp(B, [go], [x], None, dim, [True])[0]


def glu_backward_vjp(B, gs, ins, outs, dim, need):
    """glu_double_backward_grad_output: ``tmp = grad * glu_backward(ones, self, dim)``, its two halves
    added (gA s + gB a s (1 - s), s = sigmoid(b)); glu_double_backward for self: first half
    ``gB gO s (1 - s)``, second half ``gB a gO s (1 - s) (1 - 2 s) + gA gO s (1 - s)``."""
    gg = gs[0]
    go, x = ins
    first, second = _halves(B.shape(x), dim)
    a, s = B.index(x, first), B.sigmoid(B.index(x, second))
    one_minus = B.sub(B.scalar(1), s)
    slope = B.mul(s, one_minus)
    gga, ggb = B.index(gg, first), B.index(gg, second)
    d_go = d_x = None
    if need[0]:
        d_go = B.add(B.mul(gga, s), B.mul(B.mul(ggb, a), slope))
    if len(need) > 1 and need[1]:
        curve = B.sub(B.mul(slope, one_minus), B.mul(s, slope))
        d_x = B.concat([B.mul(B.mul(ggb, go), slope),
                        B.add(B.mul(B.mul(B.mul(ggb, a), go), curve), B.mul(B.mul(gga, go), slope))], dim)
    return [d_go, d_x]


GLU_BACKWARD = Fn("glu_backward", "\\operatorname{glu\\_backward}_{#s}\\left(#0,\\ #1\\right)", generic_vjp)


# ----------------------------------------------------------------------------- embedding

def embedding_backward_forward(B, ins, p):
    """embedding_dense_backward: EmbeddingBackward0's gradient of ``grad_output`` (``p``: the number of
    weight rows and the embedding's own parameters)."""
    go, idx = ins
    rows, spec = p
    weight_shape = B.zeros((rows, B.shape(go)[-1]))
    return embedding_vjp(B, [go], [weight_shape, idx], None, spec, [True, False])[0]


def embedding_backward_vjp(B, gs, ins, outs, p, need):
    """embedding_dense_double_backward: ``grad.index_select(0, indices.reshape(-1))``, the rows at
    ``padding_idx`` filled with 0, viewed as ``indices.shape + (-1,)`` (no frequency scaling)."""
    gg = gs[0]
    _, idx = ins
    flat = B.as_indices(idx).reshape(-1)
    picked = B.index(gg, (flat,))
    spec = p[1]
    if spec.padding_idx >= 0:
        keep = B.constant([Fraction(int(i != spec.padding_idx)) for i in flat], (flat.size, 1))
        picked = B.choose(keep, "==", B.zeros(B.shape(picked)), picked)   # masked_fill_: +0.0
    return [B.reshape(picked, tuple(B.shape(idx)) + (B.shape(gg)[-1],)), None]


EMBEDDING_BACKWARD = Fn("embedding_backward", "\\operatorname{embedding\\_backward}_{#s}\\left(#0,\\ #1\\right)",
                        generic_vjp)


# ----------------------------------------------------------------------------- padding

def pad_backward_forward(B, ins, spec: PadSpec):
    go, x = ins
    return pad_vjp(B, [go], [x], None, spec, [True])[0]


def pad_backward_vjp(B, gs, ins, outs, spec: PadSpec, need):
    """grad_output: the padding of the incoming gradient (the forward op again); self: zeros_like(self)."""
    _, x = ins
    return [pad_forward(B, [gs[0]], spec) if need[0] else None,
            B.zeros(B.shape(x)) if len(need) > 1 and need[1] else None]


PAD_BACKWARD = Fn("pad_by_copies_backward", "\\operatorname{pad}^{*}_{#s}\\left(#0,\\ #1\\right)", generic_vjp)


def _pad_backward(mode: str, rank: int) -> Op:
    kind = "Reflection" if mode == "reflect" else "Replication"
    pads = (1, 1) * rank if mode == "reflect" else (2, 1) * rank
    shape = (2,) + (3,) * rank
    padded = (2,) + tuple(n + pads[0] + pads[1] for n in (3,) * rank)
    return Op(f"{kind.lower()}_pad{rank}d_backward", f"{kind}Pad{rank}DBackwardBackward0", pad_backward_forward,
              pad_backward_vjp, lambda shapes, p, loc: tuple(shapes[1]), (),
              "g added into the input position each output position read; pad(g); 0", negzero="structural",
              grows=False, math=Math(layer((PAD_BACKWARD,), pad_sub)),
              # linear in the gradient: the 3-d one's Jacobian (432 columns) by exact differences, not SymPy
              checks=(Check((padded, shape), PadSpec(mode, pads), differences=rank == 3),))


OPS = (
    Op("prelu_kernel_backward", "PreluKernelBackwardBackward0", prelu_backward_forward, prelu_backward_vjp,
       lambda shapes, p, loc: (tuple(shapes[1]), tuple(shapes[1])),
       (Save("grad_output", "in", 0), Save("self", "in", 1), Save("weight", "in", 2)),
       "g where self > 0, else w g; 0 where self > 0, else self g (both of self's shape); their derivatives test "
       "self >= 0", negzero="product", outputs=2, math=Math(layer(PRELU_BACKWARD)),
       checks=(Check(((2, 3), (2, 3), (1, 3))), Check(((3,), (3,), (1,))))),
    Op("glu_backward", "GluBackwardBackward0", glu_backward_forward, glu_backward_vjp,
       lambda shapes, p, loc: tuple(shapes[1]), (Save("grad_output", "in", 0), Save("self", "in", 1)),
       "g s into the first half, g a s (1 - s) into the second (s = sigmoid(b)); glu_double_backward",
       underflows=True, math=Math(layer((GLU_BACKWARD,), str)),
       checks=(Check(((1, 4), (2, 4)), 0), Check(((3, 2), (3, 4)), 1))),
    Op("embedding_dense_backward", "EmbeddingDenseBackwardBackward0", embedding_backward_forward,
       embedding_backward_vjp, lambda shapes, p, loc: (p[0], tuple(shapes[0])[-1]), (Save("indices", "in", 1),),
       "g rows added into the rows the indices name (none into padding_idx; / count with scale_grad_by_freq); "
       "grad's rows at the indices (0 at padding_idx, not divided by the counts)",
       negzero="structural", grows=False, differentiable=(True, False),
       math=Math(layer((EMBEDDING_BACKWARD,), lambda p: _embedding_sub(p[1]))),
       checks=(Check(((3, 2), (3,)), (4, EmbeddingSpec(-1)), given=((1, (2, 0, 2)),)),
               Check(((2, 2, 2), (2, 2)), (3, EmbeddingSpec(1)), given=((1, (1, 0, 0, 2)),)))),
    *(_pad_backward(mode, rank) for mode in ("reflect", "replicate") for rank in (1, 2, 3)),
)
