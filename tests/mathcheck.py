"""Evaluate a derivation tree (adjoint.values.mathtree) on exact values, to check the op
registry's ``math`` entries against the ops' own forward and VJP (tests/test_registry_math.py).

The evaluator is written here, from the notation, independently of the ops it checks: a tree
node means what the document says it means (``TMatMul`` is the matrix product with 1-D tensors
as columns, ``TT`` the transpose, ``TSub`` indexing, ``TPlace`` zeros with a slice set, a named
function what its name says). A function whose VJP the registry declares generic (``J^T
lambda``), or writes with a derivative f' it does not spell out, cannot be evaluated apart from
the op itself: :class:`Generic` is raised, and the test counts those instead.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.values.mathtree import (TT, TAtom, TBin, TConst, TFn, TInner, TJac, TLam, TMatMul, TNeg, TOnes,
                                         TPlace, TSub, TSumTo)
from adjoint.values.exact import Exact


class Generic(Exception):
    """The tree holds a declared generic J^T lambda or an unspelt derivative: nothing to evaluate."""


def _const(B, v):
    if isinstance(v, Exact):
        return v
    return B.scalar(Fraction(v) if not hasattr(v, "p") else Fraction(int(v.p), int(v.q)))


def _column(B, x):
    s = B.shape(x)
    return B.reshape(x, (s[0], 1)) if len(s) == 1 else x


def evaluate(B, n, atoms: dict, lam=None):
    """The value of tree ``n``; ``atoms`` maps TAtom.var to values, ``lam`` is every TLam's value. A node
    whose shape differs from its value's by dims of size 1 is a reshape the notation leaves invisible."""
    value = _evaluate(B, n, atoms, lam)
    shape = tuple(n.shape)
    if tuple(B.shape(value)) != shape and _numel(B.shape(value)) == _numel(shape) and \
            [d for d in B.shape(value) if d != 1] == [d for d in shape if d != 1]:
        value = B.reshape(value, shape)
    return value


def _evaluate(B, n, atoms: dict, lam=None):
    ev = lambda t: evaluate(B, t, atoms, lam)  # noqa: E731
    if isinstance(n, TAtom):
        return atoms[n.var]
    if isinstance(n, TLam):
        return lam
    if isinstance(n, TConst):
        return B.broadcast_to(_const(B, n.value), tuple(n.shape)) if n.shape else _const(B, n.value)
    if isinstance(n, TOnes):
        return B.full(tuple(n.shape), Fraction(1))
    if isinstance(n, TBin):
        a, b = ev(n.a), ev(n.b)
        op = {"add": B.add, "sub": B.sub, "mul": B.mul, "had": B.mul, "div": B.div, "pow": B.pow}[n.op]
        return op(a, b)
    if isinstance(n, TNeg):
        return B.neg(ev(n.a))
    if isinstance(n, TMatMul):
        out = B.matmul2d(_column(B, ev(n.a)), _column(B, ev(n.b)))
        return B.reshape(out, tuple(n.shape))
    if isinstance(n, TInner):
        return B.total(B.mul(ev(n.a), ev(n.b)))
    if isinstance(n, TT):
        a = ev(n.a)
        s = B.shape(a)
        if len(s) == 1:
            return B.reshape(a, (1, s[0]))
        if len(s) == 2:
            return B.reshape(B.t2(a), tuple(n.shape))
        return a
    if isinstance(n, TSumTo):
        return B.sum_to(ev(n.a), tuple(n.shape))
    if isinstance(n, TSub):
        return B.index(ev(n.a), n.key)
    if isinstance(n, TPlace):
        return B.place(tuple(n.shape), n.key, ev(n.a))
    if isinstance(n, TJac):
        raise Generic(n.of.name)
    if isinstance(n, TFn):
        return _function(B, n, [ev(a) for a in n.args])
    raise Generic(type(n).__name__)


def _numel(shape) -> int:
    out = 1
    for d in shape:
        out *= d
    return out


def _function(B, n: TFn, args: list):
    """A named function, from its name (and the parameters its node carries)."""
    name, p, x = n.fn.name, n.params, args[0]
    unary = {"relu": B.relu, "tanh": B.tanh, "sigmoid": B.sigmoid, "exp": B.exp, "log": B.log, "sin": B.sin,
             "cos": B.cos, "sqrt": B.sqrt, "abs": B.abs, "sign": B.sgn, "rsqrt": B.rsqrt, "log1p": B.log1p,
             "expm1": B.expm1, "atan": B.atan, "erf": B.erf, "sinh": B.sinh, "cosh": B.cosh, "tan": B.tan, "log2": B.log2,
             "log10": B.log10}
    if name == "erf'":   # 2 / sqrt(pi) * exp(-x^2), from its definition
        return B.mul(B.div(B.scalar(Fraction(2)), B.sqrt(B.pi())), B.exp(B.neg(B.mul(x, x))))
    if name in unary:
        return unary[name](x)
    if name == "step":
        return B.mask(x, lambda s: s > 0)
    if name == "sum":
        return B.total(x)
    if name == "mean":
        return B.div(B.total(x), B.scalar(Fraction(_numel(B.shape(x)))))
    if name == "norm":
        return B.sqrt(B.total(B.mul(x, x)))
    if name == "sum_dim":
        return B.sum_dims(x, p[0], p[1])
    if name == "mean_dim":
        dims = p[0] or tuple(range(len(B.shape(x))))
        count = _numel([B.shape(x)[d] for d in dims])
        return B.div(B.sum_dims(x, p[0], p[1]), B.scalar(Fraction(count)))
    if name == "reshape":
        return B.reshape(x, tuple(n.shape))
    if name == "expand":
        if p is not None:                   # a reduction's gradient: its reduced dims back as size 1 first
            dims, keepdim = p
            dims = dims or tuple(range(len(n.shape)))
            x = B.reshape(x, tuple(1 if d in dims else s for d, s in enumerate(n.shape)))
        return B.broadcast_to(x, tuple(n.shape))
    if name in ("permute", "transpose"):
        return B.permute(x, tuple(p))
    if name == "cat":
        return B.concat(args, p)
    if name == "stack":
        return B.stack(args, p)
    if name == "bmm":
        return B.bmm(args[0], args[1])
    if name == "bt":
        return B.permute(x, (0, 2, 1))
    raise Generic(name)
