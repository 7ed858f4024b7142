"""The expression trees the derivation is written in.

One ``T*`` record per kind of node -- atoms (a leaf or a named tensor x_k), constants, elementwise
and matrix operations, functions, custom Function calls, multipliers lambda_k, sums over broadcast
dimensions, hook arguments, derivatives, written-out products -- each with the shape of its value
(a 1-D tensor is a column). They are built from the traced graph (analysis.py) or from a problem
expression (expressions.py), differentiated by vjp.py and typeset by ``DerivationPrinter``.
:func:`simplify` applies the display simplifications that keep the value (``1 a``, ``(a^T)^T``, ``--a``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from fractions import Fraction

import flint

from ...exact import Exact

fmpq = flint.fmpq


class TNode:
    """An expression over tensors, built from the traced graph (or a problem expression)."""

    shape: tuple = ()

    def children(self) -> tuple:
        return ()


@dataclass(eq=False)
class TAtom(TNode):          # a leaf or a named intermediate (a state x_k)
    var: int
    shape: tuple


@dataclass(eq=False)
class TConst(TNode):         # a Python number (or a constant tensor value)
    value: object            # Fraction | fmpq | Exact
    shape: tuple = ()


@dataclass(eq=False)
class TBin(TNode):           # elementwise + - * / ** and the VJP-only elementwise product
    op: str                  # add | sub | mul | div | pow | had
    a: TNode
    b: TNode
    shape: tuple

    def children(self):
        return (self.a, self.b)


@dataclass(eq=False)
class TNeg(TNode):
    a: TNode
    shape: tuple

    def children(self):
        return (self.a,)


@dataclass(eq=False)
class TMatMul(TNode):        # matrix product (column convention for 1-D tensors)
    a: TNode
    b: TNode
    shape: tuple

    def children(self):
        return (self.a, self.b)


@dataclass(eq=False)
class TInner(TNode):         # dot product of two vectors: a^T b
    a: TNode
    b: TNode
    shape: tuple = ()

    def children(self):
        return (self.a, self.b)


@dataclass(eq=False)
class TT(TNode):             # transpose (of a 1-D column: the row)
    a: TNode
    shape: tuple

    def children(self):
        return (self.a,)


@dataclass(eq=False)
class TFn(TNode):            # relu tanh sigmoid exp log sin cos sqrt abs sum mean norm sign step
    name: str
    a: TNode
    shape: tuple

    def children(self):
        return (self.a,)


@dataclass(eq=False)
class TCall(TNode):          # a custom autograd.Function applied to its inputs
    name: str
    args: tuple
    shape: tuple

    def children(self):
        return self.args


@dataclass(eq=False)
class TLam(TNode):           # the multiplier lambda_k of state x_k (tilde: the gradient PyTorch carries)
    var: int
    shape: tuple
    tilde: bool = False


@dataclass(eq=False)
class TSumTo(TNode):         # sum over broadcast dimensions back to `shape`
    a: TNode
    shape: tuple

    def children(self):
        return (self.a,)


@dataclass(eq=False)
class TOnes(TNode):          # the all-ones tensor of a shape
    shape: tuple


@dataclass(eq=False)
class TName(TNode):          # a plain name: a hook argument, a Function slot
    name: str
    shape: tuple = ()
    code: bool = True        # typeset as code (hook arguments) or as a math symbol


@dataclass(eq=False)
class TIndex(TNode):
    a: TNode
    index: int
    shape: tuple = ()

    def children(self):
        return (self.a,)


@dataclass(eq=False)
class TTuple(TNode):
    items: tuple
    shape: tuple = ()

    def children(self):
        return self.items


@dataclass(eq=False)
class TNone(TNode):
    shape: tuple = ()


@dataclass(eq=False)
class TSym(TNode):           # a symbol already in LaTeX (x_{3}, \ell, or an expression standing for a tensor)
    tex: str
    shape: tuple = ()
    atomic: bool = True


@dataclass(eq=False)
class TDeriv(TNode):         # the derivative d top / d bottom
    top: TNode
    bottom: TNode
    shape: tuple = ()


@dataclass(eq=False)
class TVal(TNode):           # an exact value, printed by the number rule
    value: Exact
    shape: tuple = ()


@dataclass(eq=False)
class TProduct(TNode):       # a written-out product of factors (a chain rule), joined by a centred dot
    items: tuple
    shape: tuple = ()

    def children(self):
        return self.items


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _is_scalar_shape(shape) -> bool:
    return _numel(shape) == 1


def _const_value(node: TNode):
    if isinstance(node, TConst) and not isinstance(node.value, Exact):
        return Fraction(node.value) if not isinstance(node.value, fmpq) else Fraction(int(node.value.p), int(node.value.q))
    return None


# ----------------------------------------------------------------------------- simplification

def simplify(n: TNode) -> TNode:
    """Display simplifications that keep the value: 1*a, a^1, (a^T)^T, --a, sum_to of the same shape."""
    if isinstance(n, TBin):
        a, b = simplify(n.a), simplify(n.b)
        ca, cb = _const_value(a), _const_value(b)
        if n.op in ("mul", "had"):
            if cb is not None and ca is None:
                a, b, ca, cb = b, a, cb, ca          # constant first
            if ca == 1:
                return b if b.shape == n.shape else TBin("mul", a, b, n.shape)
            if ca == -1:
                return simplify(TNeg(b, n.shape))
            if ca is not None and cb is not None:
                return TConst(ca * cb, n.shape)
            if ca is not None and ca < 0:
                return TNeg(simplify(TBin("mul", TConst(-ca), b, n.shape)), n.shape)
            if ca is not None and isinstance(b, TBin) and b.op in ("mul", "had") and _const_value(b.a) is not None:
                return simplify(TBin("mul", TConst(ca * _const_value(b.a)), b.b, n.shape))
            if isinstance(a, TNeg):
                return simplify(TNeg(TBin(n.op, a.a, b, n.shape), n.shape))
            if isinstance(b, TNeg):
                return simplify(TNeg(TBin(n.op, a, b.a, n.shape), n.shape))
            return TBin("mul" if ca is not None else n.op, a, b, n.shape)
        if n.op == "pow":
            if cb == 1:
                return a
            if cb == 0:
                return TConst(Fraction(1), n.shape)
        if n.op == "div" and cb == 1:
            return a
        if n.op == "div" and isinstance(a, TNeg):
            return TNeg(TBin("div", a.a, b, n.shape), n.shape)
        if n.op == "div" and isinstance(a, TBin) and a.op == "mul" and (_const_value(a.a) or 0) < 0:
            return TNeg(TBin("div", TBin("mul", TConst(-_const_value(a.a)), a.b, a.shape), b, n.shape), n.shape)
        if n.op == "add" and isinstance(b, TNeg):
            return TBin("sub", a, b.a, n.shape)
        if n.op == "sub" and isinstance(b, TNeg):
            return TBin("add", a, b.a, n.shape)
        return TBin(n.op, a, b, n.shape)
    if isinstance(n, TNeg):
        a = simplify(n.a)
        if isinstance(a, TNeg):
            return a.a
        ca = _const_value(a)
        if ca is not None:
            return TConst(-ca, n.shape)
        return TNeg(a, n.shape)
    if isinstance(n, TT):
        a = simplify(n.a)
        if isinstance(a, TT):
            return a.a
        if len(a.shape) == 0 or isinstance(a, (TConst, TOnes)) and _is_scalar_shape(a.shape):
            return a
        if isinstance(a, TNeg):
            return TNeg(simplify(TT(a.a, n.shape)), n.shape)
        if isinstance(a, TMatMul) and (isinstance(a.a, TT) or isinstance(a.b, TT)):
            return simplify(TMatMul(TT(a.b, _t_shape(a.b.shape)), TT(a.a, _t_shape(a.a.shape)), n.shape))
        if isinstance(a, TBin) and a.op in ("add", "sub"):
            return simplify(TBin(a.op, TT(a.a, _t_shape(a.a.shape)), TT(a.b, _t_shape(a.b.shape)), n.shape))
        return TT(a, n.shape)
    if isinstance(n, TMatMul):
        return TMatMul(simplify(n.a), simplify(n.b), n.shape)
    if isinstance(n, TInner):
        return TInner(simplify(n.a), simplify(n.b), n.shape)
    if isinstance(n, TSumTo):
        a = simplify(n.a)
        if tuple(a.shape) == tuple(n.shape):
            return a
        if _numel(a.shape) == _numel(n.shape):
            return a
        return TSumTo(a, n.shape)
    if isinstance(n, TFn):
        return TFn(n.name, simplify(n.a), n.shape)
    if isinstance(n, TCall):
        n.args = tuple(simplify(a) for a in n.args)   # in place: Function formulas are keyed by id
        return n
    return n


def _t_shape(shape) -> tuple:
    if len(shape) == 1:
        return (1, shape[0])
    if len(shape) == 2:
        return (shape[1], shape[0])
    return tuple(shape)


def _reshaped(n: TNode, shape) -> TNode:
    """A reshape that is invisible in the notation: the same tree, with the new shape."""
    c = copy.copy(n)
    c.shape = tuple(shape)
    return c
