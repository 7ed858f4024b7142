"""Expressions -> primitive ops, exactly as PyTorch dispatches them.

One :class:`Lowerer` walks an expression and decides, operator by operator, which ATen
op (hence which autograd node) PyTorch would run: ``2 - x`` is ``rsub``, ``2 / x`` is
``reciprocal`` then ``mul``, ``v @ M`` is ``unsqueeze``/``mm``/``squeeze``, ... It hands each
primitive to a *backend*: the graph tracer (:mod:`adjoint.graph`), the exact evaluator
(:class:`ValueBackend`, for hook ``returns`` and custom backward formulas). Shape errors are reported the way PyTorch words them.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Protocol

from . import syntax as X
from . import torch_names
from .expr import simple_assigns
from .errors import Loc, ProblemError
from .exact import MAX_EXACT_EXPONENT, Exact, ExactLimit, q
from .ops import RULES, UNARY_FUNCTIONS
from .signed_zero import result_mask


class Backend(Protocol):
    def apply(self, prim: str, ins: list, params, loc: Loc): ...
    def constant(self, value: Fraction): ...
    def shape(self, value) -> tuple[int, ...]: ...
    def is_tensor(self, value) -> bool: ...


class Scope(Protocol):
    def lookup(self, name: str, loc: Loc): ...
    def call(self, name: str, args: list, loc: Loc): ...


def _dims(shape) -> str:
    return "x".join(str(n) for n in shape) if shape else "scalar"


def broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...], loc: Loc) -> tuple[int, ...]:
    n = max(len(a), len(b))
    pa = (1,) * (n - len(a)) + tuple(a)
    pb = (1,) * (n - len(b)) + tuple(b)
    out = []
    for i, (x, y) in enumerate(zip(pa, pb)):
        if x != y and x != 1 and y != 1:
            raise ProblemError(loc, f"shapes {list(a)} and {list(b)} do not broadcast: PyTorch raises 'The size of "
                                    f"tensor a ({x}) must match the size of tensor b ({y}) at non-singleton "
                                    f"dimension {i}'")
        out.append(max(x, y))
    return tuple(out)


def result_shape(prim: str, shapes: list[tuple[int, ...]], params, loc: Loc) -> tuple[int, ...]:
    """Output shape of a primitive, raising PyTorch's complaint when there is none."""
    if prim in ("add", "sub", "mul", "div", "pow_tensor"):
        return broadcast_shapes(shapes[0], shapes[1], loc)
    if prim in ("sum", "mean", "norm", "dot"):
        if prim == "dot" and shapes[0] != shapes[1]:
            raise ProblemError(loc, f"matmul of vectors of sizes {shapes[0][0]} and {shapes[1][0]}: PyTorch raises "
                                    "'inconsistent tensor size' (dot needs equal lengths)")
        return ()
    if prim == "mm":
        (m, k), (k2, n) = shapes
        if k != k2:
            raise ProblemError(loc, f"matmul shapes {list(shapes[0])} and {list(shapes[1])}: PyTorch raises 'mat1 and "
                                    f"mat2 shapes cannot be multiplied ({m}x{k} and {k2}x{n})'")
        return (m, n)
    if prim == "mv":
        (m, k), (k2,) = shapes
        if k != k2:
            raise ProblemError(loc, f"matmul shapes {list(shapes[0])} and {list(shapes[1])}: PyTorch raises 'size "
                                    f"mismatch, got input ({m}), mat ({m}x{k}), vec ({k2})'")
        return (m,)
    if prim == "addmm":
        (m, k), (k2, n) = shapes[1], shapes[2]
        if k != k2:
            raise ProblemError(loc, f"Linear input has {k} features but the weight expects {k2}: PyTorch raises "
                                    f"'mat1 and mat2 shapes cannot be multiplied ({m}x{k} and {k2}x{n})'")
        broadcast_shapes(shapes[0], (m, n), loc)
        return (m, n)
    if prim == "t":
        return tuple(reversed(shapes[0]))
    if prim in ("view", "unsafe_view", "unsqueeze", "squeeze"):
        return tuple(params)
    if prim == "function":
        return params.out_shape
    return tuple(shapes[0])  # elementwise unary, rsub, rpow, pow_scalar, reciprocal, neg


class ValueBackend:
    """Values are :class:`Exact` tensors: computes an expression exactly."""

    def apply(self, prim, ins, params, loc):
        result_shape(prim, [x.shape for x in ins], params, loc)
        try:
            out = RULES[prim].forward(list(ins), params)
        except ExactLimit as exc:
            raise ProblemError(loc, f"{exc}; use a smaller power") from None
        return out.with_negzero(result_mask(prim, list(ins), params, out))

    def constant(self, value):
        return Exact.scalar(q(value))

    def shape(self, value):
        return value.shape

    def is_tensor(self, value):
        return isinstance(value, Exact)


class EnvScope:
    """Names from a dict: a hook's arguments, or a custom backward formula's inputs."""

    def __init__(self, env: dict, what: str):
        self.env = env
        self.what = what

    def lookup(self, name, loc):
        if name in self.env:
            return self.env[name]
        raise ProblemError(loc, f"unknown name '{name}' in {self.what}; available: {', '.join(self.env)}")

    def call(self, name, args, loc):
        raise ProblemError(loc, f"unknown function '{name}' in {self.what}; allowed: {', '.join(UNARY_FUNCTIONS)}")


def run_hook_body(hook, env: dict, backend):
    """Run a hook's ``does`` lines, then its ``returns`` expression (None when it has none).

    ``does`` only rebinds local names, as in Python: it changes nothing unless returned."""
    env = dict(env)
    kind = "tensor hook" if hook.kind == "hook" else f"{hook.kind} hook"
    low = Lowerer(backend, EnvScope(env, f"the {kind} '{hook.label}'"))
    for a in simple_assigns(hook.does):
        env[a.name] = low.eval(a.value)
    if hook.returns is None:
        return None
    return low.eval(hook.returns)


def _tuple_index(e: X.Subscript) -> int | None:
    """``grad_input[0]``: one integer literal, the only subscript the v1 engine runs."""
    if len(e.items) == 1 and isinstance(e.items[0], X.Num) and e.items[0].is_int:
        return int(e.items[0].value)
    return None


def is_number(v) -> bool:
    return isinstance(v, Fraction)


class Lowerer:
    def __init__(self, backend, scope: Scope):
        self.b = backend
        self.scope = scope

    def tensor(self, v) -> bool:
        return v is not None and not is_number(v) and not isinstance(v, tuple) and self.b.is_tensor(v)

    # ------------------------------------------------------------------ expressions
    def eval(self, e: X.Expr):
        if isinstance(e, X.Num):
            return e.value
        if isinstance(e, X.NoneLit):
            return None
        if isinstance(e, X.Name):
            return self.scope.lookup(e.id, e.loc)
        if isinstance(e, X.Tup):
            return tuple(self.eval(i) for i in e.items)
        if isinstance(e, X.Subscript) and _tuple_index(e) is not None:
            v = self.eval(e.value)
            index = _tuple_index(e)
            if not isinstance(v, tuple):
                raise ProblemError(e.loc, f"'{X.to_source(e.value)}' is not a tuple; only tuples (hook arguments such "
                                          "as grad_input) can be indexed")
            if not -len(v) <= index < len(v):
                raise ProblemError(e.loc, f"index {index} is out of range: '{X.to_source(e.value)}' has {len(v)} "
                                          f"entr{'y' if len(v) == 1 else 'ies'} (PyTorch: tuple index out of range)")
            return v[index]
        if isinstance(e, X.Neg):
            v = self.operand(self.eval(e.operand), e.operand, "unary -")
            return -v if is_number(v) else self.b.apply("neg", [v], None, e.loc)
        if isinstance(e, X.Bin):
            a = self.operand(self.eval(e.left), e.left, e.op)
            b = self.operand(self.eval(e.right), e.right, e.op)
            return self.binary(e.op, a, b, e.loc)
        if isinstance(e, X.Call) and not e.kwargs:
            if e.prefix and not torch_names.in_namespace(e.prefix, e.func):
                raise ProblemError(e.loc, f"PyTorch has no {e.prefix}{e.func}; write {e.func}(...) without the "
                                          "prefix, or a function the prefix has")
            if e.prefix and (e.func not in UNARY_FUNCTIONS or e.func == "norm"):  # torch.norm is not vector_norm
                raise ProblemError(e.loc, f"'{e.prefix}{e.func}' is not supported yet: this version's engine "
                                          f"runs {', '.join(UNARY_FUNCTIONS)} (norm: torch.linalg.vector_norm)")
            args = [self.eval(a) for a in e.args]
            if e.func in UNARY_FUNCTIONS:
                return self.function(e, args)
            return self.scope.call(e.func, args, e.loc)
        raise ProblemError(e.loc, f"'{X.to_source(e)}' is not supported yet: this version's engine runs names, "
                                  "numbers, + - * / ** @, calls without keyword arguments and tuple[int]")

    def operand(self, v, e: X.Expr, op: str):
        if v is None:
            raise ProblemError(e.loc, f"'{X.to_source(e)}' is None here, so '{op}' fails: PyTorch raises TypeError "
                                      "(unsupported operand type NoneType)")
        if isinstance(v, tuple):
            raise ProblemError(e.loc, f"'{X.to_source(e)}' is a tuple; index it first, e.g. {X.to_source(e)}[0]")
        return v

    def function(self, e: X.Call, args: list):
        if len(args) != 1:
            raise ProblemError(e.loc, f"{e.func}() takes exactly one tensor argument here, got {len(args)}")
        x = args[0]
        if not self.tensor(x):
            got = "None" if x is None else ("a tuple" if isinstance(x, tuple) else "a number")
            raise ProblemError(e.args[0].loc, f"{e.func}() needs a tensor, got {got}: PyTorch raises TypeError "
                                              f"({e.func}(): argument 'input' must be Tensor)")
        prim = UNARY_FUNCTIONS[e.func]
        if prim == "t" and len(self.b.shape(x)) > 2:
            raise ProblemError(e.loc, f"t() expects a tensor with <= 2 dimensions, but the argument is "
                                      f"{len(self.b.shape(x))}-D")
        return self.b.apply(prim, [x], None, e.loc)

    # ------------------------------------------------------------------ operators
    def binary(self, op: str, a, b, loc: Loc):
        na, nb = is_number(a), is_number(b)
        if na and nb:
            return self.fold(op, a, b, loc)
        ap = self.b.apply
        if op == "+":
            if nb:
                return ap("add", [a, self.b.constant(b)], None, loc)
            if na:
                return ap("add", [b, self.b.constant(a)], None, loc)  # 2 + x runs x.__radd__(2)
            return ap("add", [a, b], None, loc)
        if op == "-":
            if nb:
                return ap("sub", [a, self.b.constant(b)], None, loc)
            if na:
                return ap("rsub", [b], a, loc)
            return ap("sub", [a, b], None, loc)
        if op == "*":
            if nb:
                return ap("mul", [a, self.b.constant(b)], None, loc)
            if na:
                return ap("mul", [b, self.b.constant(a)], None, loc)
            return ap("mul", [a, b], None, loc)
        if op == "/":
            if nb:
                return ap("div", [a, self.b.constant(b)], None, loc)
            if na:  # Tensor.__rtruediv__: self.reciprocal() * other
                return ap("mul", [ap("reciprocal", [b], None, loc), self.b.constant(a)], None, loc)
            return ap("div", [a, b], None, loc)
        if op == "**":
            if nb:
                return ap("pow_scalar", [a], b, loc)
            if na:
                return ap("rpow", [b], a, loc)
            return ap("pow_tensor", [a, b], None, loc)
        if op == "@":
            if na or nb:
                raise ProblemError(loc, "matmul needs two tensors; PyTorch raises TypeError for a number operand")
            return self.matmul(a, b, loc)
        raise AssertionError(op)

    def fold(self, op: str, a: Fraction, b: Fraction, loc: Loc) -> Fraction:
        """Python arithmetic on two number literals (no tensor, no node)."""
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "/":
            if b == 0:
                raise ProblemError(loc, "division by zero between two numbers: Python raises ZeroDivisionError")
            return a / b
        if op == "**":
            if b.denominator == 1 and abs(b) > MAX_EXACT_EXPONENT and abs(a) not in (0, 1):
                raise ProblemError(loc, f"the exponent {b} is too large to compute exactly (at most "
                                        f"{MAX_EXACT_EXPONENT} in size); use a smaller power")
            if b.denominator == 1 and not (a == 0 and b < 0):
                return a ** int(b)
            raise ProblemError(loc, f"the number {a} ** {b} is not an exact rational; write the value as a tensor "
                                    "or a symbol")
        raise ProblemError(loc, "matmul needs two tensors; PyTorch raises TypeError for numbers")

    def matmul(self, a, b, loc: Loc):
        """at::matmul's dispatch for the ranks it handles without batching."""
        sa, sb = self.b.shape(a), self.b.shape(b)
        da, db = len(sa), len(sb)
        ap = self.b.apply
        if da == 0 or db == 0:
            raise ProblemError(loc, f"both arguments to matmul need to be at least 1D, but they are {da}D and {db}D "
                                    "(PyTorch raises this too)")
        if da == 1 and db == 1:
            return ap("dot", [a, b], None, loc)
        if da == 2 and db == 1:
            return ap("mv", [a, b], None, loc)
        if da == 1 and db == 2:
            if sa[0] != sb[0]:
                raise ProblemError(loc, f"matmul shapes {list(sa)} and {list(sb)}: PyTorch raises 'mat1 and mat2 "
                                        f"shapes cannot be multiplied (1x{sa[0]} and {_dims(sb)})'")
            u = ap("unsqueeze", [a], (1, sa[0]), loc)
            m = ap("mm", [u, b], None, loc)
            return ap("squeeze", [m], (sb[1],), loc)
        if da == 2 and db == 2:
            return ap("mm", [a, b], None, loc)
        if da >= 3 and db in (1, 2):
            rows = 1
            for n in sa[:-1]:
                rows *= n
            if sa[-1] != sb[0]:
                raise ProblemError(loc, f"matmul shapes {list(sa)} and {list(sb)}: PyTorch raises 'mat1 and mat2 "
                                        f"shapes cannot be multiplied ({rows}x{sa[-1]} and {_dims(sb)})'")
            folded = ap("view", [a], (rows, sa[-1]), loc)
            if db == 2:
                return ap("unsafe_view", [ap("mm", [folded, b], None, loc)], tuple(sa[:-1]) + (sb[1],), loc)
            return ap("unsafe_view", [ap("mv", [folded, b], None, loc)], tuple(sa[:-1]), loc)
        raise ProblemError(loc, f"matmul of a {da}-D and a {db}-D tensor uses PyTorch's batched path "
                                "(expand/bmm), which adjoint does not model yet; use ranks <= 2 on the right")

    def linear(self, x, weight, bias, loc: Loc):
        """F.linear as torch 2.13 runs it (see docs/ops.md for the node chains)."""
        sx, sw = self.b.shape(x), self.b.shape(weight)
        ap = self.b.apply
        if not sx:
            raise ProblemError(loc, "Linear needs an input of at least 1 dimension, got a 0-d tensor")
        if sx[-1] != sw[1]:
            rows = 1
            for n in sx[:-1]:
                rows *= n
            raise ProblemError(loc, f"Linear input has shape {list(sx)} but weight has shape {list(sw)}: PyTorch raises "
                                    f"'mat1 and mat2 shapes cannot be multiplied ({rows}x{sx[-1]} and "
                                    f"{sw[1]}x{sw[0]})'")
        if bias is not None:
            if len(sx) == 2:
                return ap("addmm", [bias, x, ap("t", [weight], None, loc)], None, loc)
            rows = 1
            for n in sx[:-1]:
                rows *= n
            flat = ap("view", [x], (rows, sx[-1]), loc)
            out = ap("addmm", [bias, flat, ap("t", [weight], None, loc)], None, loc)
            return ap("view", [out], tuple(sx[:-1]) + (sw[0],), loc)
        return self.matmul(x, ap("t", [weight], None, loc), loc)
