"""``prod``: of every element (ProdBackward0) and along one dim (ProdBackward1), both saving self
then result; their backward is ``prod_backward`` (FunctionsManual.cpp, PyTorch 2.13), in its
order of operations:

* no zero in the input (every element; along a dim: no zero anywhere in the tensor):
  ``grad * (result / input)``;
* every element with two or more zeros (and grad mode off, as in a backward without
  ``create_graph``, the only one modelled): ``zeros_like(input)`` (+0.0 everywhere);
* otherwise ``prod_safe_zeros_backward``: ``grad * (exclusive_normal * exclusive_reverse)``, the
  products of the elements before (``cat([1, x[:-1]]).cumprod()``) and after (``cat([1,
  x[1:].flip()]).cumprod().flip()``) each one, along the dim (the flattened input for every
  element) -- for every slice, those without a zero too.

The forward is the running product (exact values: the order does not matter).
"""

from __future__ import annotations

from adjoint.values.mathtree import Fn, dims_text, generic_vjp, layer
from adjoint.engine.ops.record import Check, Math, Op, Save
from adjoint.engine.ops.reductions import dims_shape, restore, scalar_shape


def _along(dim: int, i: int) -> tuple:
    return (slice(None),) * dim + (slice(i, i + 1),)


def _kept_ones(B, x, dim: int):
    """Ones of ``x``'s shape with ``dim`` of size 1 (the empty product: a dim of size 0 makes 1s)."""
    return B.full(tuple(1 if i == dim else n for i, n in enumerate(B.shape(x))), 1)


def _product(B, x, dim: int):
    """The product along ``dim``, kept as size 1."""
    n = B.shape(x)[dim]
    acc = _kept_ones(B, x, dim)
    for i in range(n):
        acc = B.mul(acc, B.index(x, _along(dim, i)))
    return acc


def _cumprod_pieces(B, pieces):
    out, acc = [], None
    for p in pieces:
        acc = p if acc is None else B.mul(acc, p)
        out.append(acc)
    return out


def safe_zeros_backward(B, g, x, dim: int):
    """prod_safe_zeros_backward: grad * (exclusive_normal * exclusive_reverse) along ``dim``."""
    n = B.shape(x)[dim]
    ones = _kept_ones(B, x, dim)
    items = [B.index(x, _along(dim, i)) for i in range(n)]
    normal = _cumprod_pieces(B, [ones] + items[:-1])
    reverse = list(reversed(_cumprod_pieces(B, [ones] + list(reversed(items[1:])))))
    exclusive = [B.mul(a, b) for a, b in zip(normal, reverse)]
    return B.mul(g, B.concat(exclusive, dim) if n > 1 else exclusive[0])


def prod_all_forward(B, ins, p):
    x = ins[0]
    return B.reshape(_product(B, B.reshape(x, (B.numel(x),)), 0), ())


def prod_all_vjp(B, gs, ins, outs, p, need):
    x, result, g = ins[0], outs[0], gs[0]
    shape = B.shape(x)
    if not shape:
        return [g]
    if not B.any_zero(x):
        return [B.mul(g, B.div(result, x))]
    n = B.numel(x)
    flat = B.reshape(x, (n,))
    if _zeros_beyond_one(B, flat):       # grad mode off: zeros_like(input)
        return [B.zeros(shape)]
    return [B.reshape(safe_zeros_backward(B, B.reshape(g, (1,)), flat, 0), shape)]


def _zeros_beyond_one(B, flat) -> bool:
    """A 1-D value holds two zeros or more."""
    n = B.shape(flat)[0]
    for i in range(n):
        if B.any_zero(B.index(flat, slice(i, i + 1))):
            return i + 1 < n and B.any_zero(B.index(flat, slice(i + 1, n)))
    return False


def prod_dim_forward(B, ins, p):
    dim, keepdim = p
    x = ins[0]
    shape = B.shape(x)
    if not shape:
        return x
    out = _product(B, x, dim)
    return out if keepdim else B.reshape(out, dims_shape([shape], ((dim,), False), None))


def prod_dim_vjp(B, gs, ins, outs, p, need):
    dim, keepdim = p
    x = ins[0]
    shape = B.shape(x)
    if not shape:
        return [gs[0]]
    g = restore(B, gs[0], shape, (dim,), keepdim)
    result = restore(B, outs[0], shape, (dim,), keepdim)
    if not B.any_zero(x):
        return [B.mul(g, B.div(result, x))]
    return [safe_zeros_backward(B, g, x, dim)]


def prod_dim_shape(shapes, p, loc):
    dim, keepdim = p
    if not shapes[0]:
        return ()
    return dims_shape(shapes, ((dim,), keepdim), loc)


# ----------------------------------------------------------------------------- cumprod

def cumprod_forward(B, ins, p):
    """The running product along ``dim`` (the CPU kernel's, from 1: exact values, so the order does
    not matter; a 0-d input is itself)."""
    x = ins[0]
    shape = B.shape(x)
    if not shape or shape[p] == 0:
        return x
    items = [B.index(x, _along(p, i)) for i in range(shape[p])]
    pieces = _cumprod_pieces(B, items)
    return B.concat(pieces, p) if len(pieces) > 1 else pieces[0]


def cumprod_vjp(B, gs, ins, outs, p, need):
    """cumprod_backward (ReduceOps.cpp, grad mode off): ``grad`` itself for at most one element or a
    dim of size 1; else, per position k along ``dim``, the sum over j >= k of ``grad_j`` times
    ``prod_{i <= j, i != k} x_i`` taken only where that product is not 0 -- what both of its
    paths compute: with no zero in the input ``reversed_cumsum(result * grad) / input``, with
    zeros the masked form (before the first zero z1 the same restricted to j < z1; at z1 the
    products of the elements between z1 and the second zero times ``result[z1 - 1]``; after z1
    nothing), so a grad_j (even an infinite one) beyond a zero never reaches k."""
    x, g = ins[0], gs[0]
    shape = B.shape(x)
    if not shape or B.numel(x) <= 1 or shape[p] == 1:
        return [g]
    n = shape[p]
    items = [B.index(x, _along(p, i)) for i in range(n)]
    grads = [B.index(g, _along(p, i)) for i in range(n)]
    zero = B.zeros(B.shape(items[0]))
    before = _kept_ones(B, x, p)          # prod_{i < k} x_i
    pieces = []
    for k in range(n):
        omitted = before                  # prod_{i <= j, i != k} x_i, from j = k on
        total = None
        for j in range(k, n):
            if j > k:
                omitted = B.mul(omitted, items[j])
            term = B.choose(omitted, "!=", B.mul(grads[j], omitted), zero)
            total = term if total is None else B.add(total, term)
        pieces.append(total)
        before = B.mul(before, items[k])
    return [B.concat(pieces, p)]


def cumprod_shape(shapes, p, loc):
    return tuple(shapes[0])


PROD = Fn("prod", "\\operatorname{prod}_{#s}\\left(#0\\right)", generic_vjp)
CUMPROD = Fn("cumprod", "\\operatorname{cumprod}_{#s}\\left(#0\\right)", generic_vjp)
_SELF_RESULT = (Save("self", "in", 0), Save("result", "out", 0))

OPS = (
    Op("prod", "ProdBackward0", prod_all_forward, prod_all_vjp, scalar_shape, _SELF_RESULT,
       "g * (out / a) without zeros; with one zero: g times the product of the others; with more: 0", negzero="prod",
       math=Math(layer((PROD,))), checks=(Check(((2, 3),)), Check(((3,),)))),
    Op("prod_dim", "ProdBackward1", prod_dim_forward, prod_dim_vjp, prod_dim_shape, _SELF_RESULT,
       "g * (out / a) without zeros in a; else g times the product of the others along dim", negzero="prod",
       math=Math(layer((PROD,), lambda p: dims_text((p[0],), p[1]))),
       checks=(Check(((2, 3),), (1, False)), Check(((3, 2),), (0, True)),
               Check(((2, 2, 2),), (2, False)))),
    Op("cumprod", "CumprodBackward0", cumprod_forward, cumprod_vjp, cumprod_shape, _SELF_RESULT,
       "per position k along dim: the sum over j >= k of g_j * prod_{i <= j, i != k} a_i where that product is "
       "not 0 (reversed_cumsum(out * g) / a without zeros)", negzero="cumprod",
       math=Math(layer((CUMPROD,), lambda p: f"\\mathrm{{dim}}={p}")),
       checks=(Check(((2, 3),), 1), Check(((3, 2),), 0), Check(((4,),), 0))),
)
