"""``torch.einsum(equation, *operands)``: ATen's composite (``at::native::einsum`` and its
``sumproduct_pair``, CompositeImplicitAutograd), whose nodes are those of the ops it calls.

* The equation is parsed first (before any node), with ATen's checks and messages: labels in
  ``[a-zA-Z]`` (a byte's index in the message), spaces skipped, ``...`` once per operand,
  as many operands as the equation names, each operand's number of dimensions, output labels
  that appear in an input and once in the output. Without ``->`` the output is the ellipsis
  then the labels seen once, in label order (``A``-``Z`` before ``a``-``z``).
* Each operand in turn: its sizes checked against the sizes seen so far (a size 1 broadcasts;
  the error comes after the earlier operands' nodes), an ``unsqueeze`` for each label it lacks
  (in the aligned order), then one ``permute`` to the aligned order (output labels, then
  contraction labels), identity or not.
* Two operands are contracted as ``sumproduct_pair`` does: contraction dims only one of them
  has are summed first (``sum(dims, keepdim=True)``: SumBackward1); with nothing to contract
  together it is ``mul``; else both are permuted and reshaped (``at::reshape``: ``view`` or
  ``_reshape_alias``) to ``[batch, rows, inner]`` / ``[batch, inner, cols]``, ``bmm``'d, the
  product ``view``'d and ``permute``'d back, and the contraction dims dropped by a last ``view``.
  When every output dim only the right operand has comes before every one only the left has
  (``swap_lo_ro``; a size-1 dim of both counts as the right's), the two are swapped first, so
  ``bmm``'s first operand is the right one.
* One operand with contraction labels is ``sum`` over them (SumBackward1).

A label repeated in one operand (``'ii->i'``, ``'bii->bi'``): its sizes checked, then ATen's
``op.diagonal(0, prev_dim, dim).movedim(-1, prev_dim)`` (DiagonalBackward0, a view, then
PermuteBackward0), before the operand's unsqueezes and permute.

Not modelled, refused: three or more operands (``torch.einsum`` then contracts
them in the order ``opt_einsum`` picks when that package is installed, left to right
otherwise: the nodes depend on the installation), and the sublist form
(``einsum(x, [0, 1], ...)``).
"""

from __future__ import annotations

from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.bindings.core import aten_reshape
from adjoint.engine.bindings.signature import Function, Param
from adjoint.engine.torch_errors import TorchError

_LETTERS = 26
_LABELS = 2 * _LETTERS
_ELLIPSIS = _LABELS


def _subscript(c: int) -> int:
    """A label's index in [0, 52): ``A``-``Z`` first, then ``a``-``z`` (ATen's label_to_subscript)."""
    return c - ord("A") if ord("A") <= c <= ord("Z") else c - ord("a") + _LETTERS


def _label(s: int) -> str:
    return chr(s + ord("A")) if s < _LETTERS else chr(s - _LETTERS + ord("a"))


def _isalpha(c: int) -> bool:
    return ord("A") <= c <= ord("Z") or ord("a") <= c <= ord("z")


def _error(message: str):
    return TorchError("RuntimeError", message)


def _parse_inputs(lhs: bytes, num_ops: int) -> list[list[int]]:
    """Each operand's labels (``_ELLIPSIS`` for ``...``), as ATen parses the left-hand side."""
    op_labels: list[list[int]] = [[] for _ in range(num_ops)]
    ell_in_input, curr, i = False, 0, 0
    while i < len(lhs):
        c = lhs[i]
        if c == ord(" "):
            pass
        elif c == ord("."):
            if ell_in_input:
                raise _error(f"einsum(): found '.' for operand {curr} for which an ellipsis was already found")
            if not (i + 2 < len(lhs) and lhs[i + 1] == ord(".") and lhs[i + 2] == ord(".")):
                raise _error(f"einsum(): found '.' for operand {curr} that is not part of any ellipsis")
            i += 2
            op_labels[curr].append(_ELLIPSIS)
            ell_in_input = True
        elif c == ord(","):
            curr += 1
            if curr >= num_ops:
                raise _error("einsum(): fewer operands were provided than specified in the equation")
            ell_in_input = False
        else:
            if not _isalpha(c):
                raise _error(f"einsum(): invalid subscript given at index {i} in the equation string, subscripts "
                             "must be in [a-zA-Z]")
            op_labels[curr].append(_subscript(c))
        i += 1
    if curr != num_ops - 1:
        raise _error("einsum(): more operands were provided than specified in the equation")
    return op_labels


class _Plan:
    """Where each label (and the ellipsis) goes in the aligned order: output dims first."""

    def __init__(self, equation: bytes, operands, op_labels):
        self.label_count = [0] * _LABELS
        self.ell_num_dim = 0
        for i, (x, labels) in enumerate(zip(operands, op_labels)):
            ndims, nlabels, has_ellipsis = len(x.shape), len(labels), False
            for s in labels:
                if s == _ELLIPSIS:
                    nlabels -= 1
                    has_ellipsis = True
                    self.ell_num_dim = max(self.ell_num_dim, ndims - nlabels)
                else:
                    self.label_count[s] += 1
            if not (nlabels <= ndims if has_ellipsis else nlabels == ndims):
                raise _error(f"einsum(): the number of subscripts in the equation ({nlabels}) "
                             + ("is more than the number of dimensions (" if has_ellipsis
                                else "does not match the number of dimensions (")
                             + f"{ndims}) for operand {i}" + ("" if has_ellipsis else " and no ellipsis was given"))
        self.perm_index_of = [-1] * _LABELS
        perm_index, self.ell_index, ell_in_output = 0, 0, False
        arrow = equation.find(b"->")
        if arrow < 0:   # implicit output: the ellipsis, then the labels seen once
            perm_index, ell_in_output = self.ell_num_dim, True
            for s in range(_LABELS):
                if self.label_count[s] == 1:
                    self.perm_index_of[s] = perm_index
                    perm_index += 1
        else:
            lhs_size, rhs, i = arrow, equation[arrow + 2:], 0
            while i < len(rhs):
                c = rhs[i]
                if c == ord("."):
                    if ell_in_output:
                        raise _error("einsum(): found '.' for output but an ellipsis (...) was already found")
                    if not (i + 2 < len(rhs) and rhs[i + 1] == ord(".") and rhs[i + 2] == ord(".")):
                        raise _error("einsum(): found '.' for output that is not part of any ellipsis (...)")
                    i += 2
                    self.ell_index = perm_index
                    perm_index += self.ell_num_dim
                    ell_in_output = True
                elif c != ord(" "):
                    if not _isalpha(c):
                        raise _error(f"einsum(): invalid subscript given at index {lhs_size + 2 + i} in the equation "
                                     "string, subscripts must be in [a-zA-Z]")
                    s = _subscript(c)
                    if not (self.label_count[s] > 0 and self.perm_index_of[s] == -1):
                        raise _error(f"einsum(): output subscript {chr(c)}"
                                     + (" appears more than once in the output" if self.perm_index_of[s] > -1
                                        else " does not appear in the equation for any input operand"))
                    self.perm_index_of[s] = perm_index
                    perm_index += 1
                i += 1
        self.out_num_dim = perm_index
        if not ell_in_output:   # the ellipsis' dims are contracted
            self.ell_index = perm_index
            perm_index += self.ell_num_dim
        for s in range(_LABELS):   # the contraction labels, in label order
            if self.label_count[s] > 0 and self.perm_index_of[s] == -1:
                self.perm_index_of[s] = perm_index
                perm_index += 1
        self.perm_index = perm_index


def _aligned(rt, operands, op_labels, plan: _Plan, loc: Loc) -> tuple[list, list[int]]:
    """Each operand checked, unsqueezed and permuted to the aligned order (ATen's loop over the
    operands, one at a time); and how many operands have each aligned dim of a size other than 1."""
    label_size = [1] * _LABELS
    ell_sizes = [1] * plan.ell_num_dim
    dim_counts = [0] * plan.perm_index
    ops = []
    for i, (x, labels) in enumerate(zip(operands, op_labels)):
        op = x
        permutation = [-1] * plan.perm_index
        dim = 0
        for s in labels:
            if s == _ELLIPSIS:
                ndim = len(x.shape) - (len(labels) - 1)
                for j in range(plan.ell_num_dim - ndim, plan.ell_num_dim):
                    size = op.shape[dim]
                    if size != 1:
                        if not (ell_sizes[j] == 1 or ell_sizes[j] == size):
                            raise _error(f"einsum(): dimension {dim} covered by ellipsis in operand {i}has size "
                                         f"{size} which does not broadcast with previously seen ellipsis with size "
                                         f"{ell_sizes[j]} for the respective dimension")
                        ell_sizes[j] = size
                        dim_counts[plan.ell_index + j] += 1
                    permutation[plan.ell_index + j] = dim
                    dim += 1
            elif permutation[plan.perm_index_of[s]] == -1:
                size = op.shape[dim]
                if size != 1:
                    if not (label_size[s] == 1 or label_size[s] == size):
                        raise _error(f"einsum(): subscript {_label(s)} has size {size} for operand {i} which does "
                                     f"not broadcast with previously seen size {label_size[s]}")
                    label_size[s] = size
                    dim_counts[plan.perm_index_of[s]] += 1
                permutation[plan.perm_index_of[s]] = dim
                dim += 1
            else:
                prev = permutation[plan.perm_index_of[s]]
                if op.shape[dim] != op.shape[prev]:
                    raise _error(f"einsum(): subscript {_label(s)} is repeated for operand {i} but the sizes don't "
                                 f"match, {op.shape[dim]} != {op.shape[prev]}")
                # the diagonal of the two dims (a view, DiagonalBackward0), moved back to the first one's
                # place: at::movedim(-1, prev), a permute (PermuteBackward0, an identity one too)
                if op.shape[dim] == 0:
                    raise ProblemError(loc, "torch.einsum with a repeated label of size 0 (an empty diagonal) is not "
                                            "modelled (zero-size tensors are not)")
                op = rt.apply("diagonal", [op], (0, prev, dim), loc)
                order = list(range(len(op.shape) - 1))
                order.insert(prev, len(op.shape) - 1)
                op = rt.apply("permute", [op], tuple(order), loc)
        for k, val in enumerate(permutation):   # a dim of size 1 for each label the operand lacks
            if val == -1:
                op = rt.apply("unsqueeze", [op], dim, loc)
                permutation[k] = dim
                dim += 1
        ops.append(rt.apply("permute", [op], tuple(permutation), loc))
    return ops, dim_counts


def _sumproduct_pair(rt, left, right, sum_dims: list[int], loc: Loc):
    """ATen's ``sumproduct_pair(left, right, sum_dims, keepdim=True)``: ``(left * right).sum(sum_dims)``
    by permute, reshape, ``bmm``, view and permute back (``mul`` when nothing is summed)."""
    if not sum_dims:
        return rt.apply("mul", [left, right], None, loc)
    ndim = len(left.shape)
    lro, lo, ro = [], [], []
    lro_size = lo_size = ro_size = sum_size = 1
    for i in range(ndim):
        sl, sr = left.shape[i] != 1, right.shape[i] != 1
        if i in sum_dims:
            if sl and sr:
                if left.shape[i] != right.shape[i]:
                    raise _error("non-broadcast dimensions must match")
                sum_size *= left.shape[i]
            elif sl:
                left = rt.apply("sum_dim", [left], ((i,), True), loc)
            elif sr:
                right = rt.apply("sum_dim", [right], ((i,), True), loc)
        elif sl and sr:
            if left.shape[i] != right.shape[i]:
                raise _error("non-broadcast dimensions must match")
            lro.append(i)
            lro_size *= left.shape[i]
        elif sl:
            lo.append(i)
            lo_size *= left.shape[i]
        else:
            ro.append(i)
            ro_size *= right.shape[i]
    if lo and ro and ro[-1] < lo[0]:   # swap_lo_ro: bmm then makes the output's own order (2.x)
        left, right, lo, ro, lo_size, ro_size = right, left, ro, lo, ro_size, lo_size
    out_size = ([left.shape[d] for d in lro] + [left.shape[d] for d in lo] + [1] * len(sum_dims)
                + [right.shape[d] for d in ro])
    lperm = lro + lo + sum_dims + ro
    rperm = lro + sum_dims + ro + lo
    operm = [-1] * (len(lro) + len(lo) + len(sum_dims) + len(ro))
    for i, d in enumerate(lro + lo + sum_dims + ro):
        operm[d] = i
    left = aten_reshape(rt, rt.apply("permute", [left], tuple(lperm), loc), (lro_size, lo_size, sum_size), loc)
    right = aten_reshape(rt, rt.apply("permute", [right], tuple(rperm), loc), (lro_size, sum_size, ro_size), loc)
    result = rt.apply("bmm", [left, right], None, loc)
    return rt.apply("permute", [rt.apply("view", [result], tuple(out_size), loc)], tuple(operm), loc)


def lower_einsum(rt, a, loc):
    if a.keywords:   # torch.einsum(*args): Python's TypeError for equation= or operands= (torch 2.13)
        raise TorchError("TypeError", f"einsum() got an unexpected keyword argument '{a.keywords[0]}'")
    equation, operands = a["equation"], a["operands"]
    if not operands:   # torch.einsum's own check (Python)
        raise TorchError("ValueError", "einsum(): must specify the equation string and at least one operand, or at "
                                       "least one operand and its subscripts list")
    if len(operands) > 2:
        raise ProblemError(loc, f"torch.einsum of {len(operands)} operands: PyTorch contracts them in the order "
                                "opt_einsum picks when that package is installed (left to right otherwise), which "
                                "adjoint does not model; write it as einsums of two operands")
    eq = equation.encode("utf-8")
    arrow = eq.find(b"->")
    op_labels = _parse_inputs(eq if arrow < 0 else eq[:arrow], len(operands))
    plan = _Plan(eq, operands, op_labels)
    ops, dim_counts = _aligned(rt, operands, op_labels, plan, loc)
    if len(ops) == 2:   # the contraction: ATen's loop, once
        x, y = ops
        sum_dims, x_sum, y_sum = [], [], []
        for dim in range(plan.out_num_dim, plan.perm_index):
            if x.shape[dim] != 1 and y.shape[dim] != 1:
                dim_counts[dim] -= 1
                if dim_counts[dim] == 1:
                    sum_dims.append(dim)
                    dim_counts[dim] = 0
            elif dim_counts[dim] == 1:
                if x.shape[dim] != 1:
                    x_sum.append(dim)
                    dim_counts[dim] = 0
                elif y.shape[dim] != 1:
                    y_sum.append(dim)
                    dim_counts[dim] = 0
        if x_sum:
            x = rt.apply("sum_dim", [x], (tuple(x_sum), True), loc)
        if y_sum:
            y = rt.apply("sum_dim", [y], (tuple(y_sum), True), loc)
        ops = [_sumproduct_pair(rt, x, y, sum_dims, loc)]
    out = ops[0]
    if plan.perm_index > plan.out_num_dim:   # the contraction dims: size 1 now (a view), or summed (one operand)
        if len(operands) > 1:
            return rt.apply("view", [out], tuple(out.shape[:plan.out_num_dim]), loc)
        return rt.apply("sum_dim", [out], (tuple(range(plan.out_num_dim, plan.perm_index)), False), loc)
    return out


FUNCTIONS = (
    Function("einsum", (Param("equation", "str"), Param("operands", "tensors", ())), lower_einsum, where="function",
             varargs=True, doc="at::einsum: unsqueeze / permute per operand, then mul, or permute / reshape / bmm / "
                               "view / permute / view; one operand: permute, sum"),
)
