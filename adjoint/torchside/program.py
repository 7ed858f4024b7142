"""Problem-file programs run on real torch tensors, with Python's own semantics (never ``eval``).

:class:`Program` walks :mod:`adjoint.format.syntax` records and does exactly what the Python
statement would do, handing every operator, call, method, attribute and index to Python and
PyTorch as written (``a - b`` is ``a.__sub__(b)``, ``x[i] += v`` is get, ``__iadd__`` on the
view, set; ``a, b = x.chunk(2)`` unpacks; ``with no_grad():`` is ``torch.no_grad()``), so
PyTorch's own dispatch decides every node. Nothing of adjoint's engine is reused: that is
what makes ``verify`` an independent opinion.

Values are torch tensors, Python numbers (a literal written as an integer is an ``int``,
any other a ``float`` rounded once), strings, booleans, None, ``...``, tuples, lists and
dicts. Names and child-module calls are resolved by a *scope* (``lookup``, ``assign``,
``child(name)``, ``call_child``), given by the caller: a module's forward, the loss, a hook.
"""

from __future__ import annotations

from contextlib import nullcontext
from fractions import Fraction

import itertools
import operator

import torch

from adjoint.format import syntax as S
from adjoint.format.module_attrs import is_self_attribute
from adjoint.format.errors import Loc, ProblemError
from adjoint.torchside import callables

BINARY = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "**": operator.pow,
          "@": operator.matmul, "//": operator.floordiv}
#: ``t op= v``: Python's in-place protocol (Tensor.__iadd__ and friends are in place).
COMPARE = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "==": operator.eq,
           "!=": operator.ne}
AUGMENTED = {"+": operator.iadd, "-": operator.isub, "*": operator.imul, "/": operator.itruediv,
             "**": operator.ipow, "@": operator.imatmul}
GRAD_MODES = {"no_grad": torch.no_grad, "enable_grad": torch.enable_grad}


def unpack(value, n: int) -> list:
    """The items ``a, b = value`` binds, with CPython's errors (``unpack_iterable``): TypeError for a
    value that is no iterable, the iterator's own error (a 0-d tensor's), ValueError when the
    iterator gives more or fewer than ``n`` items (it is asked for one more at most)."""
    if not hasattr(type(value), "__iter__") and not hasattr(type(value), "__getitem__"):
        raise TypeError(f"cannot unpack non-iterable {type(value).__name__} object")
    items = list(itertools.islice(iter(value), n + 1))
    if len(items) > n:
        raise ValueError(f"too many values to unpack (expected {n})")
    if len(items) < n:
        raise ValueError(f"not enough values to unpack (expected {n}, got {len(items)})")
    return items


class EnvScope:
    """Names from a dict (a hook's arguments); no child modules; assignments rebind locally."""

    def __init__(self, env: dict, what: str, run=None):
        self.env = env
        self.what = what
        self.run = run   # a hook body's: the session (the forward's names; a backward it runs)

    def lookup(self, name: str, loc: Loc):
        if name in self.env:
            return self.env[name]
        if self.run is not None and name in self.run.current_names():   # the forward's named tensors
            return self.run.current_names()[name]
        raise ProblemError(loc, f"unknown name '{name}' in {self.what}")

    def nested_backward(self, t, args: list, kwargs: dict, loc: Loc):
        """``T.backward(...)`` in a hook body: inside a running backward, a reentrant one."""
        if self.run is None or not isinstance(t, torch.Tensor):
            raise ProblemError(loc, f"verify does not run backward(...) in {self.what}")
        kwargs = dict(kwargs)
        if "grad_tensors" in kwargs:
            kwargs["gradient"] = kwargs.pop("grad_tensors")
        inside = torch._C._current_graph_task_id() != -1
        if inside:
            self.run.reentrant += 1
        try:
            t.backward(*args, **kwargs)
        finally:
            if inside:
                self.run.reentrant -= 1

    def nested_grad(self, func: str, args: list, kwargs: dict, loc: Loc):
        """``torch.autograd.grad(...)`` (or ``torch.autograd.backward(...)``) in a hook body: inside a
        running backward, a reentrant one."""
        if self.run is None or func not in ("grad", "backward"):
            raise ProblemError(loc, f"verify does not run torch.autograd.{func}(...) in {self.what}")
        inside = torch._C._current_graph_task_id() != -1
        if inside:
            self.run.reentrant += 1
        try:
            return getattr(torch.autograd, func)(*args, **kwargs)
        finally:
            if inside:
                self.run.reentrant -= 1

    def assign(self, name: str, value, loc: Loc) -> None:
        self.env[name] = value

    def child(self, name: str):
        return None

    def call_child(self, name: str, args: list, kwargs: dict, loc: Loc):
        raise ProblemError(loc, f"{self.what} cannot call the module '{name}'")


class Program:
    """Runs statements and evaluates expressions in ``scope``; ``produced(value)`` is told of
    every value an expression makes (the run keeps them, so their graphs stay alive)."""

    def __init__(self, scope, produced=None):
        self.scope = scope
        self.produced = produced
        self.ran = getattr(scope, "statement_ran", None)   # told of each statement that ran (a forward's scope)
        # ``t.data`` aliases the statements took: each has a version counter of its own, which a
        # write through it moves instead of ``t``'s (the hook runner finds leaves written so)
        self.data_aliases: list[torch.Tensor] = []

    # ------------------------------------------------------------------ statements
    def run(self, program):
        """Run a program; the value of its ``return`` (None when it has none)."""
        for stmt in program:
            if isinstance(stmt, S.Return):
                return self.eval(stmt.value)
            self.execute(stmt)
            if self.ran is not None:
                self.ran(stmt)
        return None

    def execute(self, stmt: S.Stmt) -> None:
        if isinstance(stmt, S.Assign):
            if isinstance(stmt.target, S.Subscript):   # Python: the value first, then the target's parts
                value = self.eval(stmt.value)
                base = self.eval(stmt.target.value)
                self.setitem(base, self.index(stmt.target), value, stmt.loc)
                return
            self.bind(stmt.target, self.eval(stmt.value), stmt.loc)
            return
        if isinstance(stmt, S.AugAssign):
            self.augmented(stmt)
            return
        if isinstance(stmt, S.ExprStmt):
            self.eval(stmt.value)
            return
        if isinstance(stmt, S.With):
            if stmt.mode == "inference_mode":
                with torch.inference_mode():
                    for inner in stmt.body:
                        self.execute(inner)
                        if self.ran is not None:
                            self.ran(inner)
                return
            if stmt.mode not in GRAD_MODES:
                raise ProblemError(stmt.loc, f"verify knows 'with no_grad():' and 'with enable_grad():', not "
                                             f"'with {stmt.mode}()'")
            manager = torch.set_grad_enabled(stmt.mode == "enable_grad") if stmt.set_grad_enabled \
                else GRAD_MODES[stmt.mode]()
            with manager:
                for inner in stmt.body:
                    self.execute(inner)
                    if self.ran is not None:
                        self.ran(inner)
            return
        if isinstance(stmt, S.Assert):   # Python's own assert: AssertionError when it fails
            if bool(self.eval(stmt.test)) == stmt.negated:
                raise AssertionError(*(() if stmt.message is None else (stmt.message,)))
            return
        if isinstance(stmt, S.If):   # a hook body's if block: Python's truth value of the test
            for inner in stmt.body if self.eval(stmt.test) else stmt.orelse:
                self.execute(inner)
            return
        if isinstance(stmt, S.Raise):   # a forward's raise line: the built-in exception, as written
            raise {"RuntimeError": RuntimeError, "ValueError": ValueError, "TypeError": TypeError,
                   "IndexError": IndexError, "NotImplementedError": NotImplementedError}[stmt.type](stmt.message)
        if isinstance(stmt, S.Return):
            raise ProblemError(stmt.loc, "'return' only ends a forward")
        raise ProblemError(stmt.loc, f"verify does not run '{S.stmt_source(stmt)}'")

    def bind(self, target: S.Expr, value, loc: Loc) -> None:
        """``target = value``: a name, or tuple unpacking (nested), as Python binds it."""
        if isinstance(target, S.Name):
            self.scope.assign(target.id, value, loc)
            return
        if isinstance(target, S.Tup):
            items = unpack(value, len(target.items))
            together = getattr(self.scope, "together", None)   # the names' hooks go on after the statement
            with together() if together is not None else nullcontext():
                for t, v in zip(target.items, items):
                    self.bind(t, v, loc)
            return
        if is_self_attribute(target) and hasattr(self.scope, "module"):   # a forward's self.NAME = v
            setattr(self.scope.module, target.name, value)
            return
        if isinstance(target, S.Attr) and target.name == "requires_grad":   # t.requires_grad = flag: the setter
            obj = self.eval(target.obj)
            if not isinstance(obj, torch.Tensor):
                raise ProblemError(loc, f"'{S.to_source(target.obj)}' is {type(obj).__name__}, not a tensor")
            obj.requires_grad = value
            return
        if isinstance(target, S.Attr) and target.name == "grad":   # a hook body's t.grad = v
            obj = self.eval(target.obj)
            if not isinstance(obj, torch.Tensor):
                raise ProblemError(loc, f"'{S.to_source(target.obj)}' is {type(obj).__name__}, not a tensor")
            obj.grad = value
            return
        raise ProblemError(loc, f"cannot assign to '{S.to_source(target)}'")

    def augmented(self, stmt: S.AugAssign) -> None:
        """``t op= v`` as Python runs it: a name gets ``t.__iop__(v)`` (in place on a tensor; a
        number is rebound); ``x[i] op= v`` is ``tmp = x[i]; tmp = tmp.__iop__(v); x[i] = tmp``."""
        op = AUGMENTED[stmt.op]
        if isinstance(stmt.target, S.Subscript):
            base = self.eval(stmt.target.value)
            items = self.index(stmt.target)
            current = self.getitem(base, items, stmt.target)
            value = self.eval(stmt.value)
            result = self.keep(op(current, value))
            self.setitem(base, items, result, stmt.loc)
            return
        if isinstance(stmt.target, S.Attr) and stmt.target.name == "grad":   # t.grad op= v: get, __iop__, set
            obj = self.eval(stmt.target.obj)
            current = self.eval(stmt.target)
            value = self.eval(stmt.value)
            obj.grad = op(current, value)
            return
        if not isinstance(stmt.target, S.Name):
            raise ProblemError(stmt.loc, f"cannot assign to '{S.to_source(stmt.target)}'")
        current = self.eval(stmt.target)
        value = self.eval(stmt.value)
        result = self.keep(op(current, value))
        if result is not current:
            self.scope.assign(stmt.target.id, result, stmt.loc)

    def setitem(self, base, items: tuple, value, loc: Loc) -> None:
        key = items[0] if len(items) == 1 else tuple(items)
        if not isinstance(base, (torch.Tensor, tuple, dict)) and base is not None:   # a tuple, None: Python's TypeError
            raise ProblemError(loc, f"only tensors and a hook's kwargs take index assignment here, not "
                                    f"{type(base).__name__}")
        base[key] = value

    # ------------------------------------------------------------------ expressions
    def keep(self, value):
        if self.produced is not None:
            self.produced(value)
        return value

    def eval(self, e: S.Expr):
        if isinstance(e, S.Num):
            if not isinstance(e.value, Fraction):   # an imaginary literal: Python's complex
                return complex(e.value)
            return int(e.value) if e.is_int else float(e.value)
        if isinstance(e, (S.Str, S.Bool)):
            return e.value
        if isinstance(e, S.NoneLit):
            return None
        if isinstance(e, S.EllipsisLit):
            return Ellipsis
        if isinstance(e, S.Name):
            return self.scope.lookup(e.id, e.loc)
        if isinstance(e, S.Tup):
            return tuple(self.eval(i) for i in e.items)
        if isinstance(e, S.ListLit):
            return [self.eval(i) for i in e.items]
        if isinstance(e, S.DictLit):
            return {k: self.eval(v) for k, v in e.items}
        if isinstance(e, S.Neg):
            return self.keep(-self.eval(e.operand))
        if isinstance(e, S.Bin):
            if e.op not in BINARY:
                raise ProblemError(e.loc, f"verify does not know the operator '{e.op}'")
            return self.keep(BINARY[e.op](self.eval(e.left), self.eval(e.right)))
        if isinstance(e, S.Subscript):
            return self.keep(self.getitem(self.eval(e.value), self.index(e), e))
        if isinstance(e, S.Call):
            if e.func == "checkpoint" and not e.prefix and hasattr(self.scope, "checkpoint") \
                    and self.scope.child("checkpoint") is None:   # torch.utils.checkpoint.checkpoint(child, ...)
                args = [self.eval(a) for a in e.args[1:]]
                kwargs = {k: self.eval(v) for k, v in e.kwargs}
                return self.keep(self.scope.checkpoint(S.module_path(e.args[0]), args, kwargs, e.loc))
            if e.func == "checkpoint_sequential" and not e.prefix and hasattr(self.scope, "checkpoint_sequential") \
                    and self.scope.child("checkpoint_sequential") is None:
                kwargs = {k: self.eval(v) for k, v in e.kwargs}
                return self.keep(self.scope.checkpoint_sequential(S.module_path(e.args[0]), self.eval(e.args[1]),
                                                                  self.eval(e.args[2]), kwargs, e.loc))
            args = [self.eval(a) for a in e.args]
            kwargs = {k: self.eval(v) for k, v in e.kwargs}
            if not e.prefix and self.scope.child(e.func) is not None:
                return self.keep(self.scope.call_child(e.func, args, kwargs, e.loc))
            if e.func == "backward" and not e.prefix and hasattr(self.scope, "nested_backward"):
                return self.scope.nested_backward(args[0] if args else None, args[1:], kwargs, e.loc)
            if e.prefix in ("torch.autograd.", "autograd.") and hasattr(self.scope, "nested_grad"):
                return self.keep(self.scope.nested_grad(e.func, args, kwargs, e.loc))
            return self.keep(callables.function(e.func, e.prefix, e.loc)(*args, **kwargs))
        if isinstance(e, S.Method):
            obj = self.eval(e.obj)
            if isinstance(obj, torch.optim.Optimizer):   # optim.step() / optim.zero_grad() in a hook body
                from adjoint.torchside.optimizers import optimizer_method
                return optimizer_method(obj, e.name, [self.eval(a) for a in e.args],
                                        {k: self.eval(v) for k, v in e.kwargs}, e.loc)
            if obj is None and not e.operator:
                getattr(obj, e.name)   # Python's AttributeError, before the arguments are evaluated
            args = [self.eval(a) for a in e.args]
            kwargs = {k: self.eval(v) for k, v in e.kwargs}
            if e.operator == "~":   # Python's ~: Tensor.__invert__
                return self.keep(operator.invert(obj))
            if e.operator:   # a comparison operator: Python's own (None != 0 is True, None > 0 raises TypeError)
                return self.keep(COMPARE[e.operator](obj, args[0]))
            if isinstance(obj, (tuple, list)):   # Python's AttributeError, as the engine answers it
                getattr(obj, e.name)
            if not isinstance(obj, torch.Tensor):
                raise ProblemError(e.loc, f"'{S.to_source(e.obj)}' is {type(obj).__name__}, not a tensor; it has no "
                                          f"method '{e.name}' here")
            if e.name == "backward" and hasattr(self.scope, "nested_backward"):
                return self.scope.nested_backward(obj, args, kwargs, e.loc)
            return self.keep(callables.method(obj, e.name, e.loc)(*args, **kwargs))
        if isinstance(e, S.Chain):   # Python's a < b < c: (a < b) and (b < c), b evaluated once
            left = self.eval(e.operands[0])
            for i, op in enumerate(e.ops):
                right = self.eval(e.operands[i + 1])
                result = self.keep(COMPARE[op](left, right))
                if i == len(e.ops) - 1 or not result:   # not: Tensor.__bool__ (PyTorch's error for several elements)
                    return result
                left = right
        if isinstance(e, S.IsNone):
            return (self.eval(e.value) is None) != e.negated
        if isinstance(e, S.IfExp):
            return self.eval(e.body) if self.eval(e.test) else self.eval(e.orelse)
        if isinstance(e, S.Comp):
            return self.comprehension(e)
        if isinstance(e, S.Attr) and isinstance(self.scope, EnvScope) and self.scope.run is not None:
            path = S.dotted_name(e)   # a hook body's ``lin.weight``: the forward's name of a parameter
            if path is not None and path not in self.scope.env and path in self.scope.run.current_names():
                return self.scope.lookup(path, e.loc)
        if isinstance(e, S.Attr) and hasattr(self.scope, "dotted"):   # a root's ``f.w``: a parameter's full name
            found = self.scope.dotted(S.dotted_name(e))
            if found is not None:
                return found
        path = S.module_path(e.obj) or S.dotted_name(e.obj) if isinstance(e, S.Attr) else None
        if path is not None and hasattr(self.scope, "child") \
                and self.scope.child(path) is not None:   # PATH.NAME: a parameter, buffer or module attribute
            return self.keep(getattr(self.scope.module.get_submodule(path), e.name))
        if isinstance(e, S.Attr) and isinstance(e.obj, S.Name) and e.obj.id == "torch" \
                and isinstance(getattr(torch, e.name, None), torch.dtype):   # torch.float64: a dtype
            return getattr(torch, e.name)
        if isinstance(e, S.Attr):
            obj = self.eval(e.obj)
            if obj is None:
                getattr(obj, e.name)   # Python's AttributeError
            if type(obj).__module__ == "torch.return_types" or type(obj).__name__ == "PackedSequence":
                # x.max(dim=1).values (its own AttributeError else); a PackedSequence's fields
                return self.keep(getattr(obj, e.name))
            if not isinstance(obj, torch.Tensor):
                raise ProblemError(e.loc, f"'{S.to_source(e.obj)}' is {type(obj).__name__}, not a tensor")
            value = callables.attribute(obj, e.name, e.loc)
            if e.name == "data":
                self.data_aliases.append(value)
            return self.keep(value)
        raise ProblemError(e.loc, f"verify does not run '{S.to_source(e)}'")

    def comprehension(self, e: S.Comp):
        """``[ELT for NAME in SEQ]`` / ``tuple(ELT for NAME in SEQ)`` in a hook body: Python's
        iteration of ``SEQ``, ``NAME`` bound for ``ELT`` only."""
        if not isinstance(self.scope, EnvScope):
            raise ProblemError(e.loc, "verify runs a comprehension in a hook body only")
        seq = self.eval(e.iter)
        out = S.each_bound(self.scope.env, e.target, seq, lambda: self.eval(e.elt))
        return out if e.kind == "list" else tuple(out)

    def index(self, e: S.Subscript) -> tuple:
        """The index items of ``value[items]``: numbers, slices, None, ``...``, tensors."""
        out = []
        for item in e.items:
            if isinstance(item, S.Slice):
                out.append(slice(*[None if x is None else self.eval(x) for x in (item.lower, item.upper, item.step)]))
            else:
                out.append(self.eval(item))
        return tuple(out)

    def getitem(self, value, items: tuple, e: S.Subscript):
        key = items[0] if len(items) == 1 else items
        try:
            return value[key]
        except (IndexError, KeyError, TypeError) as exc:
            if isinstance(value, torch.Tensor) or value is None or (isinstance(value, tuple) and isinstance(exc, IndexError)):
                raise   # Python's own error, as the user's script meets it
            raise ProblemError(e.loc, f"'{S.to_source(e)}': Python raises {type(exc).__name__} ({exc})") from None
