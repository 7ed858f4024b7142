"""The expression trees the derivation is written in: one ``T*`` record per kind of node.

Atoms (a leaf or a named tensor x_k), constants, elementwise and matrix operations, named
functions (:class:`TFn`, whose notation and vector-Jacobian product an :class:`Fn` declares),
custom Function calls, multipliers lambda_k, sums over broadcast dimensions, index views and
the tensors that put a gradient back where a view took it from, hook arguments, derivatives,
written-out products -- each with the shape of its value (a 1-D tensor is a column).

The op registry (:mod:`adjoint.engine.ops`) says how each primitive reads in these nodes (its
``math`` entry); :mod:`adjoint.derivation` builds a variant's trees from the run;
:mod:`.reverse` differentiates them; the LaTeX renderer prints them.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import flint

from adjoint.values.exact import Exact

fmpq = flint.fmpq


@dataclass(frozen=True, eq=False)
class Fn:
    """A function the derivation writes by name (tanh, relu, sum, softmax, cat, ...).

    ``tex`` is its notation: ``#0``, ``#1``, ... stand for the printed arguments, ``#*`` for all of
    them separated by commas, and ``#s`` for the node's subscript (a dim, a shape);
    ``vjp(lam, node)`` gives, per argument, the tree of ``J^T lam`` (None: no gradient flows
    there) -- required, there is no default; ``sympy`` maps SymPy arguments to a SymPy
    expression for the local derivatives of one-element problems; ``delimited``: the notation
    brings its own delimiters (``|x|``, ``||x||``), so it needs no parentheses as the base of
    a power or a transpose."""

    name: str
    tex: str
    vjp: Callable
    sympy: Callable | None = None
    delimited: bool = False


class TNode:
    """An expression over tensors, built from the run (or a problem expression)."""

    shape: tuple = ()

    def children(self) -> tuple:
        return ()


@dataclass(eq=False)
class TAtom(TNode):
    """A leaf or a named intermediate (a state x_k); var: its id in the derivation."""

    var: int
    shape: tuple


@dataclass(eq=False)
class TConst(TNode):
    """A Python number (or a constant tensor value)."""

    value: object            # Fraction | fmpq | Exact
    shape: tuple = ()


@dataclass(eq=False)
class TBin(TNode):
    """Elementwise + - * / ** and the VJP-only elementwise product."""

    op: str                  # add | sub | mul | div | pow | had
    a: TNode
    b: TNode
    shape: tuple

    def children(self):
        return (self.a, self.b)


@dataclass(eq=False)
class TNeg(TNode):
    """Elementwise negation."""

    a: TNode
    shape: tuple

    def children(self):
        return (self.a,)


@dataclass(eq=False)
class TMatMul(TNode):
    """Matrix product (column convention for 1-D tensors)."""

    a: TNode
    b: TNode
    shape: tuple

    def children(self):
        return (self.a, self.b)


@dataclass(eq=False)
class TInner(TNode):
    """Dot product of two vectors: a^T b."""

    a: TNode
    b: TNode
    shape: tuple = ()

    def children(self):
        return (self.a, self.b)


@dataclass(eq=False)
class TT(TNode):
    """Transpose (of a 1-D column: the row)."""

    a: TNode
    shape: tuple

    def children(self):
        return (self.a,)


@dataclass(eq=False)
class TFn(TNode):
    """A named function applied to its arguments (see Fn)."""

    fn: Fn
    args: tuple
    shape: tuple
    sub: str = ""            # the notation's subscript (#s): a dim, a shape, a permutation
    params: object = None    # what the function's VJP needs to know (a dim, a permutation)

    @property
    def name(self) -> str:
        return self.fn.name

    @property
    def a(self) -> TNode:
        return self.args[0]

    def children(self):
        return self.args


@dataclass(eq=False)
class TCall(TNode):
    """A custom autograd.Function applied to its inputs (output `output` of several)."""

    name: str
    args: tuple
    shape: tuple
    output: int | None = None

    def children(self):
        return self.args


@dataclass(eq=False)
class TLam(TNode):
    """The multiplier lambda_k of state x_k (tilde: the gradient PyTorch carries)."""

    var: int
    shape: tuple
    tilde: bool = False


@dataclass(eq=False)
class TSumTo(TNode):
    """Sum over broadcast dimensions back to `shape`."""

    a: TNode
    shape: tuple

    def children(self):
        return (self.a,)


@dataclass(eq=False)
class TOnes(TNode):
    """The all-ones tensor of a shape."""

    shape: tuple


@dataclass(eq=False)
class TSub(TNode):
    """An index view a[key]: key items are int | slice | None | Ellipsis."""

    a: TNode
    key: tuple
    shape: tuple

    def children(self):
        return (self.a,)


@dataclass(eq=False)
class TPlace(TNode):
    """Zeros of `shape` with a put at [key] (the gradient of a[key])."""

    a: TNode
    key: tuple
    shape: tuple

    def children(self):
        return (self.a,)


@dataclass(eq=False)
class TPut(TNode):
    """Base with its view `region` replaced by value (an in-place write through a view)."""

    base: TNode
    region: TNode            # the view of base that was written (built by `view` from base)
    value: TNode
    view: Callable           # tree -> the same view of that tree (the written elements of a gradient)
    shape: tuple

    def children(self):
        return (self.base, self.value)


@dataclass(eq=False)
class TJac(TNode):
    """J^T lam of a named function w.r.t. its argument `index` (a declared generic VJP)."""

    of: TFn
    index: int
    lam: TNode
    shape: tuple

    def children(self):
        return (self.lam,)


@dataclass(eq=False)
class TName(TNode):
    """A plain name: a hook argument, a Function slot."""

    name: str
    shape: tuple = ()
    code: bool = True        # typeset as code (hook arguments) or as a math symbol


@dataclass(eq=False)
class TIndex(TNode):
    """Item `index` of a tuple (grad_input[0])."""

    a: TNode
    index: int
    shape: tuple = ()

    def children(self):
        return (self.a,)


@dataclass(eq=False)
class TTuple(TNode):
    """A tuple of trees (a hook's grad_input)."""

    items: tuple
    shape: tuple = ()

    def children(self):
        return self.items


@dataclass(eq=False)
class TNone(TNode):
    """None (a hook argument without a gradient)."""

    shape: tuple = ()


@dataclass(eq=False)
class TSym(TNode):
    """A symbol already typeset (x_{3}, \\ell): built by the renderer only."""

    tex: str
    shape: tuple = ()
    atomic: bool = True


@dataclass(eq=False)
class TDeriv(TNode):
    """The derivative d top / d bottom."""

    top: TNode
    bottom: TNode
    shape: tuple = ()


@dataclass(eq=False)
class TVal(TNode):
    """An exact value, printed by the number rule."""

    value: Exact
    shape: tuple = ()


@dataclass(eq=False)
class TProduct(TNode):
    """A written-out product of factors (a chain rule), joined by a centred dot."""

    items: tuple
    shape: tuple = ()

    def children(self):
        return self.items


def numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def is_scalar_shape(shape) -> bool:
    return numel(shape) == 1


def const_value(node: TNode):
    """The number a constant node holds (a Fraction), None for anything else."""
    if isinstance(node, TConst) and not isinstance(node.value, Exact) and not hasattr(node.value, "re"):   # not complex
        return Fraction(node.value) if not isinstance(node.value, fmpq) else Fraction(int(node.value.p),
                                                                                      int(node.value.q))
    return None


def t_shape(shape) -> tuple:
    """The shape of a transpose (a 1-D column transposes to a row)."""
    if len(shape) == 1:
        return (1, shape[0])
    if len(shape) == 2:
        return (shape[1], shape[0])
    return tuple(shape)


def walk(n: TNode):
    """Every node of a tree, depth first."""
    yield n
    for ch in n.children():
        yield from walk(ch)
