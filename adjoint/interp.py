"""The interpreter of problem-file programs: forwards, the loss, hook bodies (never ``eval``).

It walks :mod:`adjoint.syntax` records and hands every operator and call to the runtime
through :mod:`adjoint.functions`, so each becomes exactly the ops PyTorch would run. Values
are runtime :class:`~adjoint.graph.Tensor` objects, Python numbers (``Fraction``), tuples and
None. Names are resolved by a *scope*: :class:`EnvScope` for a hook's arguments; the module
and loss scopes live in :mod:`adjoint.forward`, which knows the model.
"""

from __future__ import annotations

from typing import Protocol

from . import syntax as S
from .errors import Loc, ProblemError
from .functions import FUNCTION_NAMES, binary, call_function, neg
from .graph import Tensor


class Scope(Protocol):
    assigning: str | None            # the name the statement being run assigns (for error messages)

    def lookup(self, name: str, loc: Loc): ...
    def call(self, name: str, args: list, kwargs: dict, loc: Loc): ...
    def assign(self, name: str, value, loc: Loc) -> None: ...


class EnvScope:
    """Names from a dict: a hook's arguments, or a custom backward formula's inputs."""

    assigning = None

    def __init__(self, env: dict, what: str):
        self.env = env
        self.what = what

    def lookup(self, name, loc):
        if name in self.env:
            return self.env[name]
        raise ProblemError(loc, f"unknown name '{name}' in {self.what}; available: {', '.join(self.env)}")

    def call(self, name, args, kwargs, loc):
        raise ProblemError(loc, f"unknown function '{name}' in {self.what}; allowed: {', '.join(FUNCTION_NAMES)}")

    def assign(self, name, value, loc):
        self.env[name] = value


class Interp:
    def __init__(self, rt, scope: Scope):
        self.rt = rt
        self.scope = scope

    # ------------------------------------------------------------------ statements
    def run(self, program) -> object:
        """Run statements; returns the value of a ``return`` (None when there is none)."""
        for stmt in program:
            if isinstance(stmt, S.Return):
                return self.eval(stmt.value)
            self.execute(stmt)
        return None

    def execute(self, stmt: S.Stmt) -> None:
        if isinstance(stmt, S.Assign):
            if not isinstance(stmt.target, S.Name):
                raise ProblemError(stmt.loc, "only assignment to a plain name is supported yet")
            self.scope.assigning = stmt.target.id
            value = self.eval(stmt.value)
            self.scope.assigning = None
            self.scope.assign(stmt.target.id, value, stmt.loc)
            return
        raise ProblemError(stmt.loc, f"'{S.stmt_source(stmt)}' is not supported yet")

    # ------------------------------------------------------------------ expressions
    def eval(self, e: S.Expr):
        if isinstance(e, S.Num):
            return e.value
        if isinstance(e, S.NoneLit):
            return None
        if isinstance(e, S.Name):
            return self.scope.lookup(e.id, e.loc)
        if isinstance(e, S.Tup):
            return tuple(self.eval(i) for i in e.items)
        if isinstance(e, S.Subscript):
            return self.subscript(e)
        if isinstance(e, S.Neg):
            return neg(self.rt, self.operand(self.eval(e.operand), e.operand, "unary -"), e.loc)
        if isinstance(e, S.Bin):
            a = self.operand(self.eval(e.left), e.left, e.op)
            b = self.operand(self.eval(e.right), e.right, e.op)
            return binary(self.rt, e.op, a, b, e.loc)
        if isinstance(e, S.Call):
            args = [self.eval(a) for a in e.args]
            kwargs = {k: self.eval(v) for k, v in e.kwargs}
            try:
                return call_function(self.rt, e.func, args, kwargs, e.loc, [a.loc for a in e.args])
            except KeyError:
                return self.scope.call(e.func, args, kwargs, e.loc)
        raise ProblemError(e.loc, f"'{S.to_source(e)}' is not supported yet")

    def subscript(self, e: S.Subscript):
        v = self.eval(e.value)
        if not isinstance(v, tuple):
            raise ProblemError(e.loc, f"'{S.to_source(e.value)}' is not a tuple; only tuples (hook arguments such "
                                      "as grad_input) can be indexed")
        index = e.items[0].value if len(e.items) == 1 and isinstance(e.items[0], S.Num) else None
        if index is None or index.denominator != 1:
            raise ProblemError(e.loc, "index a tuple with an integer literal, as in grad_input[0]")
        index = int(index)
        if index >= len(v):
            raise ProblemError(e.loc, f"index {index} is out of range: '{S.to_source(e.value)}' has {len(v)} "
                                      f"entr{'y' if len(v) == 1 else 'ies'} (PyTorch: tuple index out of range)")
        return v[index]

    def operand(self, v, e: S.Expr, op: str):
        if v is None:
            raise ProblemError(e.loc, f"'{S.to_source(e)}' is None here, so '{op}' fails: PyTorch raises TypeError "
                                      "(unsupported operand type NoneType)")
        if isinstance(v, tuple):
            raise ProblemError(e.loc, f"'{S.to_source(e)}' is a tuple; index it first, e.g. {S.to_source(e)}[0]")
        return v


def is_tensor(v) -> bool:
    return isinstance(v, Tensor)
