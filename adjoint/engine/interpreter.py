"""The interpreter of problem-file programs: forwards, the loss, hook bodies (never ``eval``).

It walks :mod:`adjoint.format.syntax` records with Python's own semantics (argument binding,
``x[i] += v`` as get, in-place add, set; tuple unpacking; ``with no_grad():``) and hands every
operator, function, method and index to the runtime through :mod:`adjoint.engine.bindings`, so each
becomes exactly the ops PyTorch would run. Values are runtime
:class:`~adjoint.engine.graph.Tensor` objects, Python numbers (``Fraction``), strings, booleans,
tuples, dicts (a hook's ``kwargs``) and None. Names are resolved by a *scope*:
:class:`EnvScope` for a hook's arguments; the module and loss scopes live in
:mod:`adjoint.engine.forward`, which knows the model.
"""

from __future__ import annotations

from contextlib import nullcontext

from fractions import Fraction
from typing import Protocol

from adjoint.engine.pyfloat import PyFloat, is_int
from adjoint.format import syntax as S
from adjoint.format.module_attrs import is_self_attribute
from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.bindings import FUNCTIONS, METHODS, call_function, describe
from adjoint.engine.bindings.core import binary, is_number, neg
from adjoint.engine.bindings.views import attribute, getitem
from adjoint.engine.graph import Tensor
from adjoint.engine.return_types import PackedSequence, ReturnTuple
from adjoint.format.torch_names import RNN_UTILS_PREFIXES
from adjoint.engine.inplace import INPLACE_METHODS, AUGMENTED, call_inplace
from adjoint.engine.bindings.setitem import setitem
from adjoint.engine import bigints, int_arith, pyerrors
from adjoint.engine.torch_errors import TorchError
from adjoint.engine.pylist import PyList, sequence_name
from adjoint.format.gaussian import Gaussian

#: operands CPython words otherwise (concatenation, repetition): not modelled, refused
_SEQUENCES = (tuple, str, dict)


class Scope(Protocol):
    assigning: str | None            # the name the statement being run assigns (for error messages)

    def lookup(self, name: str, loc: Loc): ...
    def call(self, name: str, args: list, kwargs: dict, loc: Loc): ...
    def assign(self, name: str, value, loc: Loc) -> None: ...
    # optional: ``bound(name)``, ``(value,)`` when the program itself binds the name (see Interp.check_shadowing)


def unbound_local(name: str, loc, what: str) -> ProblemError:
    """``name`` is bound by a line after this one of the same code (a forward, a hook body), so
    Python takes it as a local name throughout that code: ``what`` here reads it before it is
    bound, UnboundLocalError, never PyTorch's function or the script's variable. Not modelled."""
    return ProblemError(loc, f"'{name}' is assigned later in this code, so Python takes it as a local name "
                             f"throughout: {what} here raises UnboundLocalError (cannot access local variable "
                             f"'{name}' where it is not associated with a value); give the local another name")


class EnvScope:
    """Names from a dict: a hook's arguments, or a custom backward formula's inputs."""

    assigning = None

    def __init__(self, env: dict, what: str, names: dict | None = None, named: dict | None = None,
                 own: frozenset | None = None, later: frozenset = frozenset()):
        self.env = env
        self.what = what
        #: the names a line of the code binds (syntax.bound_names): Python's locals throughout it
        self.later = later
        #: the names the code binds itself (default: all of ``env``), which hide functions (``bound``)
        self.own = own
        self.names = names if names is not None else {}
        #: the forward's tensors the body named: name -> (tensor, its version and requires_grad when
        #: first named), so the caller sees which of them the body wrote in place or switched
        self.named = named if named is not None else {}

    def lookup(self, name, loc):
        if name in self.env:
            return self.env[name]
        if name in self.later:
            raise unbound_local(name, loc, f"reading '{name}'")
        if name in self.names:   # a hook body may name the forward's tensors
            value = self.names[name]
            version = getattr(getattr(value, "version", None), "value", None)
            if version is not None:
                self.named.setdefault(name, (value, version, value.requires_grad))
            return value
        raise ProblemError(loc, f"unknown name '{name}' in {self.what}; available: {', '.join(self.env)}")

    def bound(self, name):
        """The code's own names (a hook's arguments, what its body assigns): Python's locals."""
        if name not in self.env or (self.own is not None and name not in self.own):
            return None
        return (self.env[name],)

    def binds_later(self, name) -> bool:
        """A local name the code binds on a later line, not bound yet (see unbound_local)."""
        return name in self.later and name not in self.env

    def call(self, name, args, kwargs, loc):
        raise ProblemError(loc, unknown_function(name, f"in {self.what}"))

    def assign(self, name, value, loc):
        self.env[name] = value

    def assign_again(self, name, value, loc):
        """``t += (g,)`` of a tuple, ``n += 1`` of a number: Python rebinds the name."""
        self.env[name] = value


def unknown_function(name: str, where: str, close: str = "") -> str:
    """A call of a name that is no function of the format: a PyTorch function not modelled yet is
    said to be one (never an "unknown" name: the contract's wording), anything else is unknown,
    with a close name when there is one (``close``: the caller's own suggestion, a child module)."""
    from adjoint.format.torch_names import is_function
    if is_function(name) and not close:
        return f"'{name}' is a PyTorch function adjoint does not model yet ({where}); see docs/not-modelled.md"
    return f"unknown function '{name}' {where}" + (close or suggest_function(name))


def suggest_function(name: str) -> str:
    """The rest of an unknown-function message: a close name, or that PyTorch has it but adjoint does not model it."""
    import difflib

    from adjoint.engine.bindings import FUNCTION_NAMES
    from adjoint.format.torch_names import is_function
    if is_function(name):
        return f": '{name}' is a PyTorch function adjoint does not model yet"
    close = difflib.get_close_matches(name, FUNCTION_NAMES, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


#: torch's namespaces of functions a file may reach for (``torch.linalg.norm(x)``), and what the
#: format has instead
_TORCH_NAMESPACES = {
    "linalg": "; a vector norm is norm(x, p, dim, keepdim) (torch.norm, Tensor.norm: "
              "torch.linalg.vector_norm's node)",
    "special": "", "fft": "", "sparse": "", "distributions": "", "func": "", "utils": "",
    "nested": "", "masked": "", "signal": "",
}


#: torch.nn.utils' functions that have a step of their own (docs/format.md, "Steps")
_UTILS_STEPS = {"clip_grad_norm_": "{clip_grad_norm: {max_norm: M}}", "clip_grad_value_": "{clip_grad_value: {clip_value: C}}"}


def nn_utils_refused(e: S.Method) -> ProblemError:
    """``torch.nn.utils.X(...)`` in a program or a hook body: not modelled there (the gradient
    clipping functions are steps between a backward and the optimizer's step)."""
    name = f"{S.dotted_name(e.obj)}.{e.name}"
    if e.name in _UTILS_STEPS:
        return ProblemError(e.loc, f"{name}(...) inside a hook body or a forward is not modelled; clip every .grad "
                                   f"with a step after the backward ({_UTILS_STEPS[e.name]} in steps:), or one "
                                   "gradient in its hook in place (grad.mul_(c), grad.clamp_(-c, c))")
    return ProblemError(e.loc, f"{name}(...) is not modelled; see docs/not-modelled.md")


def check_prefix(e: S.Call) -> None:
    """``torch.X`` / ``F.X``: the name must exist in that namespace of PyTorch."""
    from adjoint.format.torch_names import in_namespace
    if not in_namespace(e.prefix, e.func):
        space = {"torch.": "torch", "nn.Transformer.": "torch.nn.Transformer",
                 "torch.nn.Transformer.": "torch.nn.Transformer", "nn.utils.rnn.": "torch.nn.utils.rnn",
                 "torch.nn.utils.rnn.": "torch.nn.utils.rnn"}.get(e.prefix, "torch.nn.functional")
        raise ProblemError(e.loc, f"PyTorch has no {e.prefix}{e.func} ({space} has no '{e.func}'); write "
                                  f"{e.func}(...) without the prefix, or a function the prefix has")


#: the torch.nn.utils.rnn functions adjoint models (engine/bindings/packed.py)
PACKING = ("pack_padded_sequence", "pad_packed_sequence", "pad_sequence", "pack_sequence", "unpad_sequence",
           "unpack_sequence")


def refuse_rnn_utils(e: S.Call) -> None:
    """A torch.nn.utils.rnn function adjoint does not model, or a modelled one without its prefix."""
    if e.func in PACKING:
        raise ProblemError(e.loc, f"{e.func} is a function of torch.nn.utils.rnn: call nn.utils.rnn.{e.func}(...)")
    raise ProblemError(e.loc, f"{e.prefix}{e.func} is not modelled; of torch.nn.utils.rnn adjoint models "
                              f"{', '.join(PACKING)} (exit 2)")


class Interp:
    def __init__(self, rt, scope: Scope):
        self.rt = rt
        self.scope = scope
        self.number_types: dict[str, str] = {}   # names whose Python number type the program's assignments tell
        self.ran = getattr(scope, "statement_ran", None)   # told of each statement that ran (a forward's scope)

    # ------------------------------------------------------------------ statements
    def run(self, program) -> object:
        """Run statements; returns the value of a ``return`` (None when there is none)."""
        for stmt in program:
            if isinstance(stmt, S.Return):
                return self.eval(stmt.value)
            self.execute(stmt)
            if self.ran is not None:
                self.ran(stmt)
        return None

    def execute(self, stmt: S.Stmt) -> None:
        if isinstance(stmt, S.Assign) and isinstance(stmt.target, S.Attr) and stmt.target.name == "requires_grad":
            # t.requires_grad = flag: Python evaluates the value, then the object, then sets it
            from adjoint.engine.requires_grad import set_requires_grad
            flag = self.eval(stmt.value)
            set_requires_grad(self.rt, self.eval(stmt.target.obj), flag, S.to_source(stmt.target.obj), stmt.loc)
            return
        if isinstance(stmt, S.Assign):
            if isinstance(stmt.target, S.Subscript):
                # Python's order: the value, then what is indexed (a name, or in a hook body any
                # expression: ``grad[0][:, 0] = v`` writes into the view ``grad[0]``), then the index
                value = self.eval(stmt.value)
                target = self.eval(stmt.target.value)
                setitem(self.rt, target, self.index_items(stmt.target), value, stmt.loc)
                return
            if isinstance(stmt.target, S.Name):
                self.scope.assigning = stmt.target.id
            value = self.eval(stmt.value)
            self.scope.assigning = None
            self.bind(stmt.target, value, stmt.loc)
            pyerrors.assigned_types(stmt.target, stmt.value, self.number_types)
            return
        if isinstance(stmt, S.AugAssign):
            self.augmented(stmt)
            if isinstance(stmt.target, S.Name):
                self.number_types.pop(stmt.target.id, None)
            return
        if isinstance(stmt, S.ExprStmt):
            self.eval(stmt.value)
            return
        if isinstance(stmt, S.With):
            from adjoint.engine.inference import refuse_inside
            refuse_inside(self.rt, stmt.loc, f"'with {stmt.manager}:'")   # (a hook body's, run inside the block)
            inference = stmt.mode == "inference_mode"
            if inference and (self.rt.checkpointing or self.rt.recomputing or self.rt.saved_hooks
                              or not hasattr(self.scope, "set_module_attribute")):
                raise ProblemError(stmt.loc, "'with inference_mode():' inside a checkpointed region, under saved-tensor "
                                             "hooks or in a custom Function's forward is not modelled")
            before = self.rt.grad_enabled
            self.rt.grad_enabled = stmt.mode == "enable_grad"
            self.rt.inference = inference
            try:
                for inner in stmt.body:
                    self.execute(inner)
                    if self.ran is not None:
                        self.ran(inner)
            finally:
                self.rt.grad_enabled = before
                self.rt.inference = False
            return
        if isinstance(stmt, S.Assert):
            from adjoint.engine.asserts import run_assert
            test = self.eval(stmt.test)
            if isinstance(test, Tensor) and test.dtype in ("bool", "int64"):
                # Tensor.__bool__, as an if takes it: ``assert torch.isfinite(grad).all()``; --structure
                # has no computed values, and takes such an assert to hold rather than to fail
                unknown = self.rt.B.name == "structure" and getattr(test.value, "known", None) is None
                test = True if unknown else truth_value(self.rt, test)
            run_assert(test, stmt)
            return
        if isinstance(stmt, S.If):   # a hook body's if block: the test's truth value chooses the block
            for inner in stmt.body if self.condition(stmt.test) else stmt.orelse:
                self.execute(inner)
            return
        if isinstance(stmt, S.Raise):   # the forward raises here (PyTorch's _call_impl sees its error)
            raise TorchError(stmt.type, stmt.message, "forward_raised")
        raise ProblemError(stmt.loc, f"'{S.stmt_source(stmt)}' is not supported here")

    def bind(self, target: S.Expr, value, loc: Loc) -> None:
        if isinstance(target, S.Name):
            self.scope.assign(target.id, value, loc)
            return
        if isinstance(target, S.Tup):
            value = self.unpacked(value, len(target.items), loc)
            together = getattr(self.scope, "together", None)   # the names' hooks go on after the statement
            with together() if together is not None else nullcontext():
                for t, v in zip(target.items, value):
                    self.bind(t, v, loc)
            return
        if is_self_attribute(target) and hasattr(self.scope, "set_module_attribute"):   # a forward's self.NAME = v
            self.scope.set_module_attribute(target.name, value, loc)
            return
        raise ProblemError(loc, f"cannot assign to '{S.to_source(target)}'")

    def unpacked(self, value, n: int, loc: Loc) -> tuple:
        """The items ``a, b = value`` binds, as CPython's UNPACK_SEQUENCE takes them: a tuple's (a
        list's, a ``torch.return_types``'); a tensor's through ``Tensor.__iter__``, which is
        ``iter(self.unbind(0))`` (one UnbindBackward0 for all the rows; TypeError "iteration over a
        0-d tensor" for a 0-d one); ValueError when the count is not ``n``."""
        if isinstance(value, Tensor):
            value = self.rows(value, loc)
        elif value is None or isinstance(value, (bool, PyFloat)):
            raise TorchError("TypeError", f"cannot unpack non-iterable {pyerrors.type_name(value, None)} object",
                             "python")
        elif not isinstance(value, tuple):
            raise ProblemError(loc, f"cannot unpack {describe(value)}: Python's iteration of it is not modelled")
        if len(value) > n:
            raise TorchError("ValueError", f"too many values to unpack (expected {n})", "python")
        if len(value) < n:
            raise TorchError("ValueError", f"not enough values to unpack (expected {n}, got {len(value)})", "python")
        return value

    def rows(self, t: Tensor, loc: Loc) -> tuple:
        """``iter(t)``'s items: ``Tensor.__iter__`` is ``iter(self.unbind(0))`` (one UnbindBackward0
        for all the rows; TypeError "iteration over a 0-d tensor" for a 0-d one)."""
        if not t.shape:
            raise TorchError("TypeError", "iteration over a 0-d tensor", "python")
        return call_function(self.rt, "unbind", [Fraction(0)], {}, loc, method_of=t)

    def augmented(self, stmt: S.AugAssign) -> None:
        """``t op= v`` with Python's semantics: Tensor.__iadd__ and friends are in-place;
        ``x[i] op= v`` is get, in-place op on the view, then set. The target is evaluated before
        ``v`` (CPython: BINARY_SUBSCR, then the right-hand side): ``x[i]`` is made, or raises,
        before anything ``v`` computes."""
        if isinstance(stmt.target, S.Subscript):
            base = self.eval(stmt.target.value)
            items = self.index_items(stmt.target)
            current = self.subscript_of(base, items, stmt.target)
            value = self.eval(stmt.value)
            self.check_augmented_none(current, stmt, value)
            result = self.apply_augmented(current, stmt.op, value, stmt.loc, stmt.value, stmt.target)
            setitem(self.rt, base, items, result, stmt.loc)
            return
        current = self.eval(stmt.target)
        value = self.eval(stmt.value)
        self.check_augmented_none(current, stmt, value)
        result = self.apply_augmented(current, stmt.op, value, stmt.loc, stmt.value, stmt.target)
        if result is not current:
            self.scope.assign_again(stmt.target.id, result, stmt.loc)

    def check_augmented_none(self, current, stmt: S.AugAssign, value) -> None:
        """``t op= v`` with None on a side: CPython's TypeError (Tensor's in-place operators
        return NotImplemented for None), worded with ``op=``."""
        if (current is None or value is None) and not isinstance(current, _SEQUENCES) \
                and not isinstance(value, _SEQUENCES):
            raise pyerrors.binary_none(stmt.op + "=", current, stmt.target, value, stmt.value, stmt.loc)

    def apply_augmented(self, current, op: str, value, loc: Loc, value_expr: S.Expr | None = None,
                        target: S.Expr | None = None):
        if isinstance(current, tuple) or isinstance(value, tuple):   # a tuple has no in-place operator: t = t + v
            return self.sequences(op, current, target, value, value_expr, loc, augmented=True)
        if isinstance(current, Tensor) and value_expr is not None:   # t += 2 ** 70: the Scalar's OverflowError
            bigints.check_scalar(value, value_expr)
        if isinstance(current, Tensor) and op in AUGMENTED:
            return call_inplace(self.rt, AUGMENTED[op], current, [value], {}, loc)
        return binary(self.rt, op, self.operand_value(current, loc), self.operand_value(value, loc), loc)

    def operand_value(self, v, loc):
        if v is None or isinstance(v, (tuple, str, bool, dict)):
            raise ProblemError(loc, f"unsupported operand: {describe(v)}")
        return v

    # ------------------------------------------------------------------ expressions
    def eval(self, e: S.Expr):
        if isinstance(e, S.Num):
            return e.value
        if isinstance(e, S.Str):
            return e.value
        if isinstance(e, S.Bool):
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
            return PyList(self.eval(i) for i in e.items)
        if isinstance(e, S.DictLit):
            return {k: self.eval(v) for k, v in e.items}
        if isinstance(e, S.Subscript):
            return self.subscript_of(self.eval(e.value), self.index_items(e), e)
        if isinstance(e, (S.Bin, S.Neg)):
            return self.operators(e)
        if isinstance(e, S.Call):
            self.check_shadowing(e)
            if e.func == "checkpoint" and e.prefix == "" and not self.is_child("checkpoint"):
                return self.checkpoint(e)
            if e.func == "checkpoint_sequential" and e.prefix == "" and not self.is_child("checkpoint_sequential") \
                    and hasattr(self.scope, "checkpoint_sequential"):
                path = S.module_path(e.args[0]) if len(e.args) == 3 else None
                if path is None:
                    raise ProblemError(e.loc, "checkpoint_sequential(FUNCTIONS, segments, input, use_reentrant=...) "
                                              "takes a Sequential or ModuleList child, a number and a tensor")
                segments = self.eval(e.args[1])
                segments = int(segments) if isinstance(segments, Fraction) and segments.denominator == 1 else segments
                return self.scope.checkpoint_sequential(path, segments, self.eval(e.args[2]),
                                                        {k: self.eval(v) for k, v in e.kwargs}, e.loc)
            if e.func == "backward" and e.prefix == "" and isinstance(self.scope, EnvScope):   # in a hook body
                from adjoint.engine.nested_backward import nested_backward
                args = [self.eval(a) for a in e.args]
                return nested_backward(self.rt, args[0] if args else None, args[1:],
                                       {k: self.eval(v) for k, v in e.kwargs}, e.loc)
            if e.prefix in ("torch.autograd.", "autograd.") and e.func == "backward" \
                    and isinstance(self.scope, EnvScope):   # torch.autograd.backward(...) in a hook body
                from adjoint.engine.nested_backward import autograd_backward
                return autograd_backward(self.rt, [self.eval(a) for a in e.args],
                                         {k: self.eval(v) for k, v in e.kwargs}, e.loc)
            if e.prefix in ("torch.autograd.", "autograd."):   # torch.autograd.grad(...) in a hook body
                from adjoint.engine.nested_grad import nested_grad
                return nested_grad(self.rt, e, [self.eval(a) for a in e.args],
                                   {k: self.eval(v) for k, v in e.kwargs}, isinstance(self.scope, EnvScope))
            args = [self.eval(a) for a in e.args]
            kwargs = {k: self.eval(v) for k, v in e.kwargs}
            if e.func == "float" and e.prefix == "" and not self.is_child("float"):   # Python's float(): no Scalar
                from adjoint.engine.infinity import python_float
                return python_float(args, kwargs, e.loc)
            bigints.refuse_in_call(args + list(kwargs.values()), list(e.args) + [v for _, v in e.kwargs], e.func)
            if e.prefix:
                check_prefix(e)
            if (e.prefix in RNN_UTILS_PREFIXES) != (e.func in PACKING) and not self.is_child(e.func):
                refuse_rnn_utils(e)
            if e.func == "generate_square_subsequent_mask" and not e.prefix and not self.is_child(e.func):
                raise ProblemError(e.loc, "generate_square_subsequent_mask is a static method of nn.Transformer: "
                                          "call nn.Transformer.generate_square_subsequent_mask(sz)")
            if e.func == "len" and e.prefix == "" and not self.is_child("len"):   # Python's len()
                from adjoint.engine.bindings.glue import python_len
                return python_len(args, kwargs, e.loc)
            if e.func == "print" and e.prefix == "" and not self.is_child("print"):
                return None   # Python's print(...): its arguments were evaluated (a read of .grad warns); no effect
            if not (e.prefix == "" and self.is_child(e.func)) and e.func in FUNCTIONS:   # a child's name: no lookup
                if e.func == "where" and len(args) == 1 and not kwargs:
                    raise ProblemError(e.loc, "torch.where(condition) with one argument is torch.nonzero(condition, "
                                              "as_tuple=True), which is not modelled yet; index with the bool mask "
                                              "(x[condition]) or give where its two values")
                self.check_tensor_args(e, args)
                return call_function(self.rt, e.func, args, kwargs, e.loc, prefix=e.prefix,
                                     types=_arg_types(e, args, kwargs, self.number_types))
            find = getattr(self.scope, "find_child", None)   # a forward's scope (the loss's keeps its numbers as they are)
            if find is not None and self.is_child(e.func) and getattr(find(e.func), "type", None) is not None:
                # a built-in layer's number input is the Python float the call wrote (2.0): its forward hands
                # it to a functional that tells a float from an int (F.gaussian_nll_loss's var)
                args = [self.python_float(v, a) for v, a in zip(args, e.args)]
                kwargs = {k: self.python_float(kwargs[k], v) for k, v in e.kwargs}
            return self.scope.call(e.func, args, kwargs, e.loc)
        if isinstance(e, S.Method):
            utils = S.dotted_name(e.obj)
            if utils in ("torch.nn.utils", "nn.utils") and self.shadowing(utils.split(".")[0]) is None:
                raise nn_utils_refused(e)
            obj = self.eval(e.obj)
            if obj is None and not e.operator:
                raise pyerrors.no_attribute(e.name)
            args = [self.eval(a) for a in e.args]
            kwargs = {k: self.eval(v) for k, v in e.kwargs}
            if not e.operator:
                bigints.refuse_in_call(args + list(kwargs.values()), list(e.args) + [v for _, v in e.kwargs], e.name)
            return self.method(obj, e, args, kwargs)
        if isinstance(e, S.Chain):
            return self.chain(e)
        if isinstance(e, S.IsNone):   # Python's identity test: a tensor, a tuple, a number is never None
            return (self.eval(e.value) is None) != e.negated
        if isinstance(e, S.IfExp):
            return self.eval(e.body) if self.condition(e.test) else self.eval(e.orelse)
        if isinstance(e, S.Comp):
            return self.comprehension(e)
        if isinstance(e, S.Attr) and isinstance(self.scope, EnvScope):
            path = S.dotted_name(e)   # a hook body's ``lin.weight``, ``net[0].bias``: the forward's name of a parameter
            if path is not None and path in self.scope.names:
                return self.scope.lookup(path, e.loc)
        path = S.module_path(e.obj) or S.dotted_name(e.obj) if isinstance(e, S.Attr) else None
        if path is not None and hasattr(self.scope, "module_attribute") \
                and self.scope.find_child(path) is not None:   # PATH.NAME: a parameter, buffer or module attribute
            return self.scope.module_attribute(path, e.name, e.loc)
        if isinstance(e, S.Attr) and isinstance(e.obj, S.Name) and e.obj.id == "torch" and self.shadowing("torch") is None:
            from adjoint.engine.bindings.glue import DTYPE_NAMES, DType   # torch.float64: a dtype
            if e.name in DTYPE_NAMES:
                return DType(DTYPE_NAMES[e.name])
            if e.name in _TORCH_NAMESPACES:   # torch.linalg.norm(x): a namespace's function
                raise ProblemError(e.loc, f"the functions of torch.{e.name} are not modelled yet"
                                          f"{_TORCH_NAMESPACES[e.name]}")
            raise ProblemError(e.loc, f"'torch.{e.name}' is not modelled as a value; the dtypes torch.float64, "
                                      "torch.float32, torch.int64 and torch.bool are")
        if isinstance(e, S.Attr):
            obj = self.eval(e.obj)
            if obj is None:
                raise pyerrors.no_attribute(e.name)
            if isinstance(obj, PackedSequence) and e.name not in obj.fields:
                raise ProblemError(e.loc, f"PackedSequence.{e.name} is not modelled; read its fields data, "
                                          "batch_sizes, sorted_indices, unsorted_indices")
            if isinstance(obj, ReturnTuple):   # x.max(dim=1).values: torch.return_types.max's fields
                try:
                    return obj.field(e.name)
                except KeyError:
                    raise pyerrors.return_type_attribute(obj, e.name) from None
            if not isinstance(obj, Tensor):
                raise ProblemError(e.loc, f"'{S.to_source(e.obj)}' is {describe(obj)}, which has no attribute "
                                          f"'{e.name}'")
            try:
                return attribute(self.rt, obj, e.name, e.loc)
            except KeyError:
                raise ProblemError(e.loc, f"the tensor attribute '{e.name}' is not modelled; use .T, .mT, .shape, "
                                          ".ndim, .dtype") from None
        raise ProblemError(e.loc, f"'{S.to_source(e)}' is not supported here")

    def checkpoint(self, e: S.Call):
        """``checkpoint(FN, *args, use_reentrant=..., ...)``: FN names a child module (not a value)."""
        path = S.module_path(e.args[0]) if e.args else None
        if path is None or not hasattr(self.scope, "checkpoint"):
            raise ProblemError(e.loc, "checkpoint(FN, *args, use_reentrant=...) takes a child module first (its name, "
                                      "or a ModuleList item: layers[0]), in a module's forward")
        args = [self.eval(a) for a in e.args[1:]]
        kwargs = {k: self.eval(v) for k, v in e.kwargs}
        return self.scope.checkpoint(path, args, kwargs, e.loc)

    def operators(self, root: S.Expr):
        """A tree of operators, evaluated without recursion (a 1,000-term sum is a 1,000-deep
        tree), left operand first, as Python does."""
        stack = [(root, False)]
        values: list = []
        while stack:
            node, ready = stack.pop()
            if isinstance(node, S.Bin):
                if not ready:
                    stack += [(node, True), (node.right, False), (node.left, False)]
                    continue
                b, a = values.pop(), values.pop()
                if isinstance(a, tuple) or isinstance(b, tuple):
                    values.append(self.sequences(node.op, a, node.left, b, node.right, node.loc))
                    continue
                if node.op == "/" and is_number(a) and is_number(b) and b == 0:
                    raise pyerrors.zero_division(a, node.left, b, node.right, self.number_types, node.loc)
                if (a is None or b is None) and not isinstance(a, _SEQUENCES) and not isinstance(b, _SEQUENCES):
                    raise pyerrors.binary_none(node.op, a, node.left, b, node.right, node.loc)
                if node.op == "@" and not (isinstance(a, Tensor) and isinstance(b, Tensor)) and \
                        all(isinstance(v, (Tensor, Fraction, Gaussian, bool)) for v in (a, b)):
                    error = pyerrors.matmul_number(a, node.left, b, node.right)
                    if error is not None:   # Python's own error, before any op: an answer
                        raise error
                if isinstance(a, bool) or isinstance(b, bool):
                    a, b = self.python_bools(node, a, b)
                if node.op == "//":
                    values.append(self.floor_divide(node, a, b))
                    continue
                b = self.operand(b, node.right, node.op)
                a = self.operand(a, node.left, node.op)
                if isinstance(a, Tensor) or isinstance(b, Tensor):   # a Python int beyond what a Scalar holds
                    bigints.check_scalar(a, node.left)
                    bigints.check_scalar(b, node.right)
                    a, b = self.python_float(a, node.left), self.python_float(b, node.right)
                values.append(binary(self.rt, node.op, a, b, node.loc))
            elif isinstance(node, S.Neg):
                if not ready:
                    stack += [(node, True), (node.operand, False)]
                    continue
                operand = values.pop()
                if operand is None or isinstance(operand, tuple):
                    raise pyerrors.unary_none("-", pyerrors.type_name(operand, None))
                values.append(neg(self.rt, self.operand(operand, node.operand, "unary -"), node.loc))
            else:
                values.append(self.eval(node))
        return values[0]

    def is_child(self, name: str) -> bool:
        check = getattr(self.scope, "has_child", None)
        return bool(check and check(name))

    def shadowing(self, name: str):
        """``(value,)`` when the program itself binds ``name`` (a forward's argument or local, an input
        or a target, a hook's argument), else None."""
        bound = getattr(self.scope, "bound", None)
        return bound(name) if bound is not None else None

    def check_shadowing(self, e: S.Call) -> None:
        """Python looks a name up in the program before the functions it imported: with a tensor
        named ``relu``, ``relu(h)`` calls the tensor (TypeError: 'Tensor' object is not callable),
        and with one named ``torch`` (or ``F``), ``torch.relu(h)`` is ``Tensor.relu`` of it (a
        TypeError or AttributeError), never PyTorch's function. Not modelled: refused at the call
        (a child module called by its name is the module, as in a forward's ``self.relu``)."""
        head = e.prefix.split(".", 1)[0] if e.prefix else e.func
        if not e.prefix and self.is_child(head):
            return
        found = self.shadowing(head)
        if found is None:
            later = getattr(self.scope, "binds_later", None)
            if later is not None and later(head):
                raise unbound_local(head, e.loc, f"{e.prefix}{e.func}(...)")
            return
        what = describe(found[0])
        noun = what.split()[-1]
        if e.prefix:
            raise ProblemError(e.loc, f"'{head}' names {what} here, which hides the module {head} (Python looks a "
                                      f"name up in the program first, so {e.prefix}{e.func}(...) would not reach "
                                      f"PyTorch); give the {noun} another name")
        raise ProblemError(e.loc, f"'{head}' names {what} here, which hides PyTorch's {head}(...) (Python looks a "
                                  f"name up in the program first, and would call the {noun}); give the {noun} "
                                  f"another name, or write torch.{head}(...)")

    def check_tensor_args(self, e: S.Call, args: list) -> None:
        """v1's wording for a whitelisted one-tensor function handed something else."""
        fn = FUNCTIONS[e.func]
        if args and fn.params and fn.params[0].kind == "tensor" and not isinstance(args[0], Tensor):
            # PyTorch's own error where it is modelled (None, or a number whose type the expression
            # tells): an answer, not a refusal
            type_ = pyerrors.type_name(args[0], e.args[0]) if not isinstance(args[0], tuple) else \
                sequence_name(args[0])   # fc(gru(x)): the (output, h_n) tuple
            error = type_ and pyerrors.unary_function_not_tensor(e.func, e.prefix, len(e.args), len(e.kwargs), type_)
            if error:
                raise error
            got = "None" if args[0] is None else "a tuple" if isinstance(args[0], tuple) else \
                f"a dict (keys {', '.join(map(repr, args[0]))}: index it, y['key'])" if isinstance(args[0], dict) \
                else "a number"
            builtin = " (in a problem file it is torch." + e.func + ", not Python's builtin: clamp a tensor instead, " \
                "t.clamp(min=1))" if e.func in ("max", "min") and not e.prefix and got == "a number" else ""
            raise ProblemError(e.args[0].loc, f"{e.func}() needs a tensor, got {got}{builtin}: not modelled here "
                                              "(PyTorch's TypeError or AttributeError names the argument's Python type "
                                              "and how it was passed); give a tensor")

    def method(self, obj, e: S.Method, args: list, kwargs: dict):
        if e.operator == "~":   # Tensor.__invert__ (bitwise_not); Python's own ~ of anything else
            from adjoint.engine.bindings.glue import bitwise_not
            if not isinstance(obj, Tensor):
                raise ProblemError(e.loc, f"'{S.to_source(e.obj)}' is {describe(obj)}: ~ is modelled on a tensor only")
            return bitwise_not(self.rt, obj, e.loc, operator=True)
        if e.operator in ("==", "!=") and (obj is None or args[0] is None):
            # Python's == with None: identity (None, and a Tensor's __eq__ with None, give a bool);
            # the bool goes on as a Python value (an operand it cannot be is refused where it is used)
            same = obj is args[0]
            return same if e.operator == "==" else not same
        if e.operator and _number(obj) and _number(args[0]):   # two Python numbers (t._version == v): a bool
            return {"==": obj == args[0], "!=": obj != args[0], "<": obj < args[0], "<=": obj <= args[0],
                    ">": obj > args[0], ">=": obj >= args[0]}[e.operator]
        if e.operator:
            self.check_comparison(obj, e, args)
            if isinstance(obj, Tensor):   # x > 2 ** 70: the Scalar's OverflowError
                bigints.check_scalar(args[0], e.args[0])
        if hasattr(obj, "call_method"):   # an engine object a body names (an optimizer: adjoint.engine.adam)
            return obj.call_method(self, e.name, args, kwargs, e.loc)
        if isinstance(obj, PackedSequence):   # PackedSequence.to(), .float(), ...: its own methods
            raise ProblemError(e.loc, f"PackedSequence's methods are not modelled ('{e.name}'); read its fields "
                                      "or pad it with nn.utils.rnn.pad_packed_sequence")
        if isinstance(obj, tuple) and not e.operator and not hasattr(list, e.name):
            # Python's AttributeError: a tuple or list has no tensor method
            from adjoint.engine.pylist import sequence_name
            raise TorchError("AttributeError", f"'{sequence_name(obj)}' object has no attribute '{e.name}'")
        if not isinstance(obj, Tensor):
            raise ProblemError(e.loc, f"'{S.to_source(e.obj)}' is {describe(obj)}, which has no method '{e.name}'")
        if e.name in INPLACE_METHODS:
            return call_inplace(self.rt, e.name, obj, args, kwargs, e.loc)
        if e.name == "backward" and isinstance(self.scope, EnvScope):   # T.backward(...) in a hook body
            from adjoint.engine.nested_backward import nested_backward
            return nested_backward(self.rt, obj, args, kwargs, e.loc)
        if e.name == "requires_grad_":   # a new leaf (a hook body's grad.detach(), a Function's saved copy)
            from adjoint.engine.requires_grad import requires_grad_
            return requires_grad_(self.rt, obj, args, kwargs, e.loc)
        if e.name == "detach_":
            from adjoint.engine.requires_grad import detach_
            return detach_(obj, args, kwargs, e.loc)
        if e.name in METHODS:
            return call_function(self.rt, e.name, args, kwargs, e.loc, method_of=obj,
                                 types=_arg_types(e, args, kwargs, self.number_types))
        from adjoint.format.torch_names import is_tensor_member
        if is_tensor_member(e.name):
            raise ProblemError(e.loc, f"Tensor.{e.name} is a PyTorch method adjoint does not model yet")
        raise ProblemError(e.loc, f"tensors have no method '{e.name}'")

    def chain(self, e: S.Chain):
        """``a < b < c`` as Python runs it: ``a < b``, taken as a bool (``Tensor.__bool__``); false:
        that result, ``c`` never evaluated; true: ``b < c``, with ``b``'s value of the first link."""
        left = self.eval(e.operands[0])
        for i, link in enumerate(e.links):
            right = self.eval(e.operands[i + 1])
            if isinstance(e.operands[i], S.Num):   # read as right.MIRRORED(left) (the comparison's record)
                result = self.method(right, link, [left], {})
            else:
                result = self.method(left, link, [right], {})
            if i == len(e.links) - 1 or not truth_value(self.rt, result):
                return result
            left = right

    def condition(self, test: S.Expr) -> bool:
        """An ``if``'s (or a conditional expression's) test taken as Python takes it, ``bool(v)``:
        None is false, a number or a sequence its own truth; a tensor's ``__bool__`` is its one
        element's value (PyTorch's RuntimeError for none or several) -- of a bool or integer
        tensor (a comparison, ``x.any()``); of a float tensor it is refused."""
        v = self.eval(test)
        if isinstance(v, Tensor) and v.dtype not in ("bool", "int64"):
            raise ProblemError(test.loc, f"'{S.to_source(test)}' is a {v.dtype} tensor: its truth value as a "
                                         "condition is not modelled; compare it, as in 'x.abs().max() > 0'")
        return truth_value(self.rt, v)

    def comprehension(self, e: S.Comp):
        """``[ELT for NAME in SEQ]`` / ``tuple(ELT for NAME in SEQ)`` in a hook body, as Python
        runs it: ``SEQ`` once, then ``ELT`` per item with ``NAME`` bound to it in the
        comprehension's own scope (a name of the body it shadows is as it was afterwards). A
        tuple's or list's items; a tensor's are ``Tensor.__iter__``'s, ``unbind(0)``."""
        if not isinstance(self.scope, EnvScope):
            raise ProblemError(e.loc, "a comprehension is modelled in a hook body only")
        seq = self.eval(e.iter)
        if isinstance(seq, Tensor):
            if not seq.shape:
                raise TorchError("TypeError", "iteration over a 0-d tensor", "python")
            seq = call_function(self.rt, "unbind", [Fraction(0)], {}, e.loc, method_of=seq)
        elif seq is None:
            raise TorchError("TypeError", "'NoneType' object is not iterable", "python")
        elif not isinstance(seq, tuple):
            raise ProblemError(e.iter.loc, f"'{S.to_source(e.iter)}' is {describe(seq)}: a comprehension over it is "
                                           "not modelled; iterate over a tuple, a list or a tensor")
        out = S.each_bound(self.scope.env, e.target, seq, lambda: self.eval(e.elt))
        return PyList(out) if e.kind == "list" else tuple(out)

    def check_comparison(self, obj, e: S.Method, args: list) -> None:
        """``a > b`` with None on a side (a hook's argument with no gradient): Python raises
        TypeError for an ordering; ``==`` / ``!=`` give a Python bool, not a tensor."""
        if (obj is None or args[0] is None) and e.operator not in ("==", "!=") \
                and not isinstance(obj, _SEQUENCES) and not isinstance(args[0], _SEQUENCES):
            raise pyerrors.comparison_none(e.operator, obj, e.obj, args[0], e.args[0], e.loc)
        for v, src in ((obj, e.obj), (args[0], e.args[0])):
            if v is None:
                if e.operator in ("==", "!="):
                    raise ProblemError(src.loc, f"'{S.to_source(src)}' is None here, so '{e.operator}' gives a Python "
                                                f"bool ({e.operator == '!='}), not a tensor: not modelled; compare a "
                                                "tensor")
                raise ProblemError(src.loc, f"'{S.to_source(src)}' is None here, so '{e.operator}' fails: Python raises "
                                            f"TypeError ('{e.operator}' not supported between instances of ... and "
                                            "'NoneType')")

    def index_items(self, e: S.Subscript) -> list:
        items = []
        for item in e.items:
            if isinstance(item, S.Slice):
                parts = [None if x is None else self.eval(x) for x in (item.lower, item.upper, item.step)]
                for x, src in zip(parts, (item.lower, item.upper, item.step)):
                    if x is not None and (not is_int(x) or pyerrors.type_name(x, src, self.number_types) == "float"):
                        raise ProblemError(src.loc, "slice indices must be integers: Python raises TypeError")
                    if x is not None and not bigints.INT64_MIN <= x <= bigints.INT64_MAX:
                        raise ProblemError(src.loc, f"the slice bound {S.to_source(src)} is beyond int64: PyTorch "
                                                    "truncates it (warning for some, raising for a step), which is "
                                                    "not modelled; give a bound within the tensor's size")
                items.append(slice(*[None if x is None else int(x) for x in parts]))
            else:
                v = self.eval(item)
                if isinstance(v, str):
                    items.append(v)
                    continue
                if isinstance(v, Fraction):
                    if not is_int(v) or pyerrors.type_name(v, item, self.number_types) == "float":   # 2.0, x.item()
                        raise ProblemError(item.loc, "a float index: PyTorch raises IndexError (\"only integers, slices "
                                                     "... are valid indices (got float)\") where the index count "
                                                     "allows, which is not predicted here; index with an int")
                    v = int(v)
                items.append(v)
        return items

    def subscript_of(self, v, items: list, e: S.Subscript):
        if isinstance(v, tuple):
            if len(items) == 1 and isinstance(items[0], slice):   # Python's tuple slice: a tuple
                return v[items[0]]
            if len(items) != 1 or not isinstance(items[0], int):
                raise ProblemError(e.loc, f"index a tuple with an integer, as in {S.to_source(e.value)}[0]")
            index = items[0]
            if not -len(v) <= index < len(v):
                raise pyerrors.tuple_index()
            return v[index]
        if isinstance(v, dict):
            if len(items) != 1 or items[0] not in v:
                raise ProblemError(e.loc, f"'{S.to_source(e.value)}' has no key {items[0]!r}")
            return v[items[0]]
        if isinstance(v, Tensor):
            for item, src in zip(items, e.items):   # x[2 ** 70]: PyTorch's ValueError unpacking the index
                if isinstance(item, int) and not isinstance(item, bool):
                    bigints.check_index(Fraction(item), src)
            return getitem(self.rt, v, items, e.loc, lone=len(e.items) == 1)
        if v is None:
            raise pyerrors.not_subscriptable()
        raise ProblemError(e.loc, f"'{S.to_source(e.value)}' is {describe(v)}; only tuples and tensors can be indexed")

    def sequences(self, op: str, a, a_expr: S.Expr | None, b, b_expr: S.Expr | None, loc: Loc,
                  augmented: bool = False):
        """``a OP b`` (``a OP= b``: a tuple has no in-place operator, so it is the same) where an
        operand is a tuple, a list or a ``torch.return_types`` value: Python's concatenation of two
        tuples or two lists, its repetition by an int (a list stays a list; a ``torch.return_types``
        concatenated or repeated is a plain tuple), else CPython's TypeError
        (:func:`pyerrors.sequence_operand`)."""
        if op == "+" and isinstance(a, tuple) and isinstance(b, tuple) and isinstance(a, PyList) == isinstance(b, PyList):
            return PyList(a + b) if isinstance(a, PyList) else a + b
        if op == "+" and augmented and isinstance(a, PyList):   # list.__iadd__ is extend(): any iterable
            if isinstance(b, (tuple, Tensor)):
                return PyList(a + tuple(b if isinstance(b, tuple) else self.rows(b, loc)))
            name = pyerrors.type_name(b, b_expr, self.number_types)
            if name is None:
                raise ProblemError(loc, "list += NUMBER: Python's TypeError names the number's type (int or float), "
                                        "which is not known here")
            raise TorchError("TypeError", f"'{name}' object is not iterable", "python")
        if op == "*" and isinstance(a, tuple) != isinstance(b, tuple) and (isinstance(a, tuple) or not augmented):
            (seq, count, count_expr) = (a, b, b_expr) if isinstance(a, tuple) else (b, a, a_expr)
            kind = pyerrors.type_name(count, count_expr, self.number_types) \
                if isinstance(count, (bool, Fraction, PyFloat)) else None
            if kind in ("int", "bool"):
                n = max(int(count), 0)
                if n * len(seq) > 10 ** 6:
                    raise ProblemError(loc, f"a sequence repeated {n} times: too large to model")
                return PyList(seq * n) if isinstance(seq, PyList) else tuple(seq) * n
        raise pyerrors.sequence_operand(op, a, a_expr, b, b_expr, self.number_types, loc, augmented)

    def floor_divide(self, node: S.Bin, a, b):
        """``a // b`` of two Python numbers (a size: ``C // n_head``), Python's floor division: an
        int of two ints, else a whole float; by zero, Python's ZeroDivisionError."""
        if not (isinstance(a, Fraction) and isinstance(b, Fraction)):
            raise ProblemError(node.loc, "'//' is modelled on Python numbers only (sizes: C // n_head); of a tensor "
                                         "(torch.floor_divide) it is not modelled yet")
        kinds = (pyerrors.type_name(a, node.left, self.number_types), pyerrors.type_name(b, node.right, self.number_types))
        if b == 0:
            if None in kinds:
                raise ProblemError(node.loc, "'//' by zero: Python's ZeroDivisionError names int or float division, "
                                             "which adjoint cannot tell here; divide by a number that is not 0")
            raise TorchError("ZeroDivisionError", "integer division or modulo by zero" if kinds == ("int", "int")
                             else "float floor division by zero", "python")
        q = a // b   # Fraction's floor (an int); a PyFloat operand (x.item()) makes it a float, as Python does
        return q if isinstance(q, PyFloat) else Fraction(q)

    def python_bools(self, node: S.Bin, a, b):
        """``a OP b`` with the Python bool that ``==`` / ``!=`` with None gives: Python takes it as
        the int 0 or 1 beside a number; a float tensor's operator wraps it as a 0-d bool tensor,
        which PyTorch promotes to the tensor's dtype (``x * (g == None)`` is ``x * 0``, the same
        node; a wrapped number is never saved), except that ``-`` refuses a bool operand. Beside
        an integer or bool tensor, ``+`` and ``*`` are integer arithmetic (``m * False`` is a bool
        tensor: :func:`adjoint.engine.int_arith.python_bools`); its other operators, and ``@``'s
        operand, stay refused (``operand``)."""
        other = b if isinstance(a, bool) else a
        if isinstance(other, Tensor) and other.dtype in ("int64", "bool") and node.op in ("+", "-", "*"):
            return int_arith.python_bools(self.rt, node.op, a, b)
        if node.op == "@" or (isinstance(other, Tensor) and other.dtype not in ("float32", "float64")):
            return a, b
        if isinstance(other, Tensor) and node.op == "-":
            from adjoint.engine.ops.arith import SUB_BOOL
            raise TorchError("RuntimeError", SUB_BOOL, "dtype")
        if not isinstance(other, (Tensor, Fraction, bool)):
            return a, b
        return (Fraction(int(a)) if isinstance(a, bool) else a), (Fraction(int(b)) if isinstance(b, bool) else b)

    def python_float(self, v, e: S.Expr):
        """A number operand of a tensor operator as the Python float it is (``0.5``, ``2.0``,
        ``x.item()``), which decides the result's dtype beside an int64 or bool tensor
        (``i * 0.5`` is float32, ``i * 2`` int64: the runtime's type promotion)."""
        if type(v) is Fraction and pyerrors.number_type(e, self.number_types) == "float":
            return PyFloat(v)
        return v

    def operand(self, v, e: S.Expr, op: str):
        """An operator's operand that is no tuple and not None (those are Python's errors, or its
        concatenation and repetition, before this)."""
        if isinstance(v, bool):
            raise ProblemError(e.loc, f"'{S.to_source(e)}' is the Python bool {v} here (== or != with None gives "
                                      f"one); '{op}' with a Python bool is modelled beside a float tensor or a number only "
                                      "(+, - and * beside an int64 or bool tensor too); compare tensors")
        if isinstance(v, (str, dict)) or v is Ellipsis:
            raise ProblemError(e.loc, f"'{S.to_source(e)}' is {describe(v)}, which '{op}' does not take")
        from adjoint.engine.infinity import Infinite
        if isinstance(v, Infinite):
            raise ProblemError(e.loc, f"'{S.to_source(e)}' is infinite: arithmetic with an infinite number is not "
                                      "modelled; it may be masked_fill's value (x.masked_fill(mask, float(\"-inf\")))")
        return v


def truth_value(rt, v) -> bool:
    """``bool(v)`` as Python takes it: a tensor's ``__bool__`` is its one element's value, and
    PyTorch's RuntimeError for none or several; a Python bool or number its own. (``--structure``
    has no values: a computed one-element tensor reads as false there.)"""
    if not isinstance(v, Tensor):
        return bool(v)
    n = 1
    for d in v.shape:
        n *= d
    if n != 1:
        raise TorchError("RuntimeError", "Boolean value of Tensor with "
                                         f"{'no values' if n == 0 else 'more than one value'} is ambiguous", "python")
    return rt.B.ints(v.value)[0] != 0


def _number(v) -> bool:
    """A Python number of a program (kept exact as a Fraction; a bool is an int)."""
    return isinstance(v, (Fraction, int, float)) and not isinstance(v, Tensor)


def _arg_types(e, args: list, kwargs: dict, names: dict) -> tuple[list, dict]:
    """Each argument's Python type as PyTorch's argument parser prints it (``pyerrors.type_name``:
    a number's int or float read from its expression, or from the assignment of a name in it;
    None where it cannot be told)."""
    return ([pyerrors.type_name(v, x, names) for v, x in zip(args, e.args)],
            {k: pyerrors.type_name(kwargs[k], x, names) for k, x in e.kwargs})
