"""logsumexp, cumsum, flip, roll, tril / triu and trace: a reduction, a scan and the copies that
move or mask elements (each makes a new tensor; none is a view: ``._base`` is None in torch).

Written in PyTorch 2.13's order of operations (ReduceOps.cpp, FunctionsManual.cpp), checked in
real torch:

* ``logsumexp``: ``maxes = amax(self, dims, keepdim=True)`` with infinite ones set to 0,
  ``log(sum(exp(self - maxes))) + maxes`` (a slice of -inf gives -inf, one with +inf +inf); its backward ``logsumexp_backward``: ``grad * exp(self - result)`` (grad and result
  unsqueezed at the reduced dims); LogsumexpBackward0 saves self and result;
* ``cumsum``: the CPU kernel's running sum from 0 (so it never gives -0.0); its backward
  ``cumsum_backward``: ``grad`` itself when it has at most one element or the dim has size 1,
  else ``grad.flip(dim).cumsum(dim).flip(dim)``;
* ``flip`` / ``roll``: their own kind again (``roll_backward``: roll by ``-shifts``); a flip is
  a TensorIterator copy (the result keeps a permuted input's memory order), roll's is row-major;
* ``tril`` / ``triu``: the elements on and below (above) the ``diagonal``-th diagonal, +0
  elsewhere; backward ``grad.tril(diagonal)`` (``triu``);
* ``trace``: the CPU kernel's running sum of the diagonal from 0; backward ``trace_backward``:
  zeros with ``grad`` written on the diagonal.
"""

from __future__ import annotations

from adjoint.values.mathtree import Fn, dims_text, generic_vjp, layer
from adjoint.engine.ops.record import Check, Math, Op, Save
from adjoint.engine.ops.reductions import dims_shape, restore


def _along(dim: int, key) -> tuple:
    return (slice(None),) * dim + (key,)


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


# ----------------------------------------------------------------------------- logsumexp

def logsumexp_forward(B, ins, p):
    dims, keepdim = p
    x = ins[0]
    if B.is_symbolic(x):     # the max of free symbols is open: the same value, unshifted
        return B.log(B.sum_dims(B.exp(x), dims, keepdim))
    maxes = B.amax(x, dims, True)
    # maxes.masked_fill_(maxes.abs() == INFINITY, 0): m - m is 0 for a finite max, nan for an infinite
    # one (a nan max gives nan either way)
    maxes = B.choose(B.sub(maxes, maxes), "==", maxes, B.zeros(B.shape(maxes)))
    total = B.sum_dims(B.exp(B.sub(x, maxes)), dims, keepdim)
    return B.add(B.log(total), B.reshape(maxes, B.shape(total)))


def logsumexp_vjp(B, gs, ins, outs, p, need):
    # logsumexp_backward: grad * (self - result).exp(), grad and result unsqueezed when not keepdim
    dims, keepdim = p
    x = ins[0]
    shape = B.shape(x)
    g = restore(B, gs[0], shape, dims, keepdim)
    result = restore(B, outs[0], shape, dims, keepdim)
    return [B.mul(g, B.exp(B.sub(x, result)))]


# ----------------------------------------------------------------------------- cumsum

def _flip(B, x, dims):
    shape = B.shape(x)
    if not shape or not dims:
        return x
    key = [slice(None)] * len(shape)
    for d in dims:
        key[d] = slice(None, None, -1)
    return B.index(x, tuple(key))


def _cumsum(B, x, dim: int):
    """The CPU kernel's running sum along ``dim``, from 0 (``0 + -0.0`` is +0.0)."""
    shape = B.shape(x)
    if not shape or shape[dim] == 0:
        return B.add(B.zeros(shape), x) if not shape else x
    acc, pieces = None, []
    for i in range(shape[dim]):
        piece = B.index(x, _along(dim, slice(i, i + 1)))
        acc = B.add(B.zeros(B.shape(piece)) if acc is None else acc, piece)
        pieces.append(acc)
    return B.concat(pieces, dim) if len(pieces) > 1 else pieces[0]


def cumsum_forward(B, ins, p):
    return _cumsum(B, ins[0], p)


def cumsum_vjp(B, gs, ins, outs, p, need):
    # cumsum_backward: grad itself when trivial, else the reversed cumsum grad.flip(dim).cumsum(dim).flip(dim)
    g = gs[0]
    shape = B.shape(g)
    if _numel(shape) <= 1 or shape[p] == 1:
        return [g]
    return [_flip(B, _cumsum(B, _flip(B, g, (p,)), p), (p,))]


def same_shape(shapes, p, loc):
    return tuple(shapes[0])


# ----------------------------------------------------------------------------- flip, roll

def flip_forward(B, ins, p):
    return _flip(B, ins[0], p)


def flip_vjp(B, gs, ins, outs, p, need):
    return [_flip(B, gs[0], p)]


def _roll1(B, x, shift: int, dim: int):
    n = B.shape(x)[dim]
    if n == 0 or shift % n == 0:
        return x
    s = shift % n
    return B.concat([B.index(x, _along(dim, slice(n - s, n))), B.index(x, _along(dim, slice(0, n - s)))], dim)


def _roll(B, x, shifts, dims):
    """``roll(x, shifts, dims)``; no dims: the flattened tensor rolled, then viewed back."""
    if not dims:
        shape = B.shape(x)
        return B.reshape(_roll1(B, B.reshape(x, (_numel(shape),)), shifts[0], 0), shape)
    for s, d in zip(shifts, dims):
        x = _roll1(B, x, s, d)
    return x


def roll_forward(B, ins, p):
    shifts, dims = p
    return _roll(B, ins[0], shifts, dims)


def roll_vjp(B, gs, ins, outs, p, need):
    # roll_backward: grad.roll(-shifts, dims)
    shifts, dims = p
    return [_roll(B, gs[0], tuple(-s for s in shifts), dims)]


# ----------------------------------------------------------------------------- tril, triu, trace

def _triangle(B, x, diagonal: int, lower: bool):
    """x on and below (lower) / above the diagonal-th diagonal, +0.0 elsewhere."""
    shape = B.shape(x)
    rows, cols = shape[-2], shape[-1]
    keep = [int((j - i <= diagonal) if lower else (j - i >= diagonal)) for i in range(rows) for j in range(cols)]
    return B.choose(B.constant(keep, (rows, cols)), "!=", x, B.zeros(shape))


def _triangle_op(lower: bool):
    def forward(B, ins, p):
        return _triangle(B, ins[0], p, lower)

    def vjp(B, gs, ins, outs, p, need):
        return [_triangle(B, gs[0], p, lower)]
    return forward, vjp


def trace_forward(B, ins, p):
    x = ins[0]
    rows, cols = B.shape(x)
    acc = B.zeros(())
    for i in range(min(rows, cols)):
        acc = B.add(acc, B.index(x, (i, i)))
    return acc


def trace_vjp(B, gs, ins, outs, p, need):
    # trace_backward: zeros, index_fill_ of grad at the diagonal
    shape = B.shape(ins[0])
    rows, cols = shape
    diag = [int(i == j) for i in range(rows) for j in range(cols)]
    return [B.choose(B.constant(diag, shape), "!=", B.broadcast_to(gs[0], shape), B.zeros(shape))]


def scalar_shape(shapes, p, loc):
    return ()


# ----------------------------------------------------------------------------- how they read (adjoint.mathtree)
# Each reads as one named function with its arguments as a subscript; the J^T lambda is declared
# generic (the formulas are in the Op records and docs/ops.md).

LOGSUMEXP = Fn("logsumexp", "\\operatorname{logsumexp}_{#s}\\left(#0\\right)", generic_vjp)
CUMSUM = Fn("cumsum", "\\operatorname{cumsum}_{#s}\\left(#0\\right)", generic_vjp)
FLIP = Fn("flip", "\\operatorname{flip}_{#s}\\left(#0\\right)", generic_vjp)
ROLL = Fn("roll", "\\operatorname{roll}_{#s}\\left(#0\\right)", generic_vjp)
TRIL = Fn("tril", "\\operatorname{tril}_{#s}\\left(#0\\right)", generic_vjp)
TRIU = Fn("triu", "\\operatorname{triu}_{#s}\\left(#0\\right)", generic_vjp)
TRACE = Fn("trace", "\\operatorname{tr}\\left(#0\\right)", generic_vjp)


def _ints(v) -> str:
    v = tuple(v)
    return str(v[0]) if len(v) == 1 else "(" + ",".join(str(d) for d in v) + ")"


def _roll_sub(p) -> str:
    shifts, dims = p
    return "\\mathrm{shifts}=" + _ints(shifts) + (",\\,\\mathrm{dims}=" + _ints(dims) if dims else "")


def _diagonal_sub(p) -> str:
    return f"\\mathrm{{diagonal}}={p}" if p else ""


_TRIL = _triangle_op(True)
_TRIU = _triangle_op(False)

OPS = (
    Op("logsumexp", "LogsumexpBackward0", logsumexp_forward, logsumexp_vjp, dims_shape,
       (Save("self", "in", 0), Save("result", "out", 0)), "g * exp(a - out), g and out unsqueezed at the reduced dims",
       math=Math(layer((LOGSUMEXP,), lambda p: dims_text(p[0], p[1]))),
       checks=(Check(((2, 3),), ((1,), False)), Check(((2, 3),), ((0, 1), True)))),
    Op("cumsum", "CumsumBackward0", cumsum_forward, cumsum_vjp, same_shape, (),
       "the reversed cumsum of g along dim (g itself when dim has size 1)",
       math=Math(layer((CUMSUM,), lambda p: f"\\mathrm{{dim}}={p}")),
       checks=(Check(((2, 3),), 1), Check(((3, 2),), 0))),
    Op("flip", "FlipBackward0", flip_forward, flip_vjp, same_shape, (), "g flipped back", negzero="structural",
       grows=False, elementwise=True, math=Math(layer((FLIP,), lambda p: "\\mathrm{dims}=" + _ints(p) if p else "")),
       checks=(Check(((2, 3),), (0,)), Check(((2, 3),), (0, 1))), copies_values=True),
    Op("roll", "RollBackward0", roll_forward, roll_vjp, same_shape, (), "g rolled back by -shifts",
       negzero="structural", grows=False, math=Math(layer((ROLL,), _roll_sub)),
       checks=(Check(((2, 3),), ((1,), (1,))), Check(((2, 3),), ((2,), ())), Check(((2, 3),), ((1, -1), (0, 1)))), copies_values=True),
    Op("tril", "TrilBackward0", _TRIL[0], _TRIL[1], same_shape, (), "g.tril(diagonal)", negzero="structural",
       grows=False, math=Math(layer((TRIL,), _diagonal_sub)),
       checks=(Check(((3, 3),), 0), Check(((2, 3),), 1), Check(((2, 2, 3),), -1)), copies_values=True),
    Op("triu", "TriuBackward0", _TRIU[0], _TRIU[1], same_shape, (), "g.triu(diagonal)", negzero="structural",
       grows=False, math=Math(layer((TRIU,), _diagonal_sub)),
       checks=(Check(((3, 3),), 0), Check(((3, 2),), -1), Check(((2, 2, 3),), 1)), copies_values=True),
    Op("trace", "TraceBackward0", trace_forward, trace_vjp, scalar_shape, (), "g on the diagonal, 0 elsewhere",
       math=Math(layer((TRACE,))), checks=(Check(((3, 3),)), Check(((2, 3),)))),
)
