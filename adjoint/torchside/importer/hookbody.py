"""A hook's Python body written in the problem format's expression language.

``adjoint import`` finds the hooks a model carries as Python functions; a problem file cannot
run Python, so each body is *translated*: its source (:func:`inspect.getsource`) parsed with
:mod:`ast`, its parameters renamed to the names the format hands a hook of that kind
(``(module, grad_input, grad_output)`` -> ``grad_input``, ``grad_output``; a tensor hook's
one argument -> ``grad``), every other name it reads captured by value (a number, a bool,
``None``, a tuple of them, from the closure or the module's globals; ``torch`` and
``torch.nn.functional`` as themselves), and:

* ``name = EXPR`` lines -> ``does:`` lines; the final ``return EXPR`` -> ``returns:``;
* a body that returns nothing (``None``, or no ``return``) and only observes -- ``print``,
  ``list.append``, storing into a container, pure Tensor methods such as ``.norm()`` -- is
  written observe-only: what it is handed is the answer, and nothing it does changes a
  gradient;
* a body that writes in place what it is handed (``g.clamp_(-c, c)``, ``g *= 2``,
  ``grad_input[0][0] = 0``, ``p.grad.mul_(0.5)``, ``p.grad = None``, a ``with
  torch.no_grad():`` block of such lines) keeps its lines under ``does:`` even when it
  returns None: the engine hands it PyTorch's own gradient tensors (docs/format.md, "Hook
  bodies that write in place");
* Python's choices are the format's own: ``A if C else B``, ``x is None`` / ``x is not None``,
  ``if`` / ``elif`` / ``else`` blocks (``if not C`` as ``if C`` with the blocks swapped), and
  a ``return`` inside a block (the rest of the body moves into the blocks that go on, each path
  assigning one local that ``returns:`` names); ``assert TEST``; ``a, b = t`` (``gx, =
  grad_input``); ``tuple(E for g in grad_input)`` and ``[E for g in grad_input]``;
* a hook that is an object with a ``__call__`` (``Clipper(0.01)``), or a bound method, is its
  class's function with the object as ``self``: the attributes it reads (``self.c``) are
  captured by value, as a closure's numbers are (a captured object's or dict's too:
  ``cfg.scale``, ``CFG["scale"]``); ``max`` / ``min`` / ``abs`` / ``%`` and the functions of
  Python's ``math`` (``math.sqrt(d)``) of captured numbers are computed here, as Python computes
  them; ``//`` of Python numbers is the format's;
* ``print(...)`` is left out (what it writes is not part of the answer), the ``module``
  argument included (``print(module.__class__.__name__)``);
* anything else (a loop, a call of another Python function, an in-place method the format
  does not have, the ``module`` argument read, a captured tensor or object) raises
  :class:`Untranslatable` with what it is, and :mod:`.hooks` refuses the import at the hook's
  ``file:line`` (or, with ``--hooks observe``, writes the hook observe-only and says so).

The translation is checked with the format's own parser before it is written, so a body the
format would refuse is refused here, at the user's line.
"""

from __future__ import annotations

import ast
import builtins
import copy
import functools
import inspect
import math
import operator
import textwrap
import types
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from adjoint.engine.bindings import FUNCTIONS, METHODS
from adjoint.engine.inplace import INPLACE_METHODS
from adjoint.torchside.importer.numbers import python_constant

#: The names the format hands each hook kind, after the ``module`` argument (None: not handed).
MODULE_ARGS = {
    "forward_pre": ("input",), "forward_pre+kwargs": ("input", "kwargs"),
    "forward": ("input", "output"), "forward+kwargs": ("input", "kwargs", "output"),
    "full_backward_pre": ("grad_output",),
    "full_backward": ("grad_input", "grad_output"), "backward": ("grad_input", "grad_output"),
}
TENSOR_ARGS = {"hook": ("grad",), "post_accumulate_grad": ("tensor",)}

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**", ast.MatMult: "@",
           ast.FloorDiv: "//"}
_CMP = {ast.Gt: ">", ast.GtE: ">=", ast.Lt: "<", ast.LtE: "<=", ast.Eq: "==", ast.NotEq: "!="}
_PREC = {"+": 10, "-": 10, "*": 20, "/": 20, "@": 20, "//": 20, "**": 40}
#: Python's built-ins of numbers that a hook's captured numbers are folded through, as Python computes them
_FOLDED_BUILTINS = (builtins.max, builtins.min, builtins.abs)
_FOLDED_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
               ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
               ast.Pow: lambda a, b: a ** b}
#: calls a hook may make only to observe (their value is not a gradient)
_OBSERVING_BUILTINS = {"print", "len", "float", "int", "str", "repr", "format", "id", "isinstance", "type",
                       "tuple", "list", "round", "abs", "min", "max", "sum"}
_OBSERVING_METHODS = {"append", "extend", "add", "update", "setdefault", "info", "debug", "warning", "write",
                      "format", "item", "tolist", "__setitem__"}
#: observing calls that return None: a lambda made of one of them returns None, so it only observes
#: (not "add": Tensor.add and torch.add return a tensor)
_NONE_RETURNING = {"print", "append", "extend", "update", "info", "debug", "warning", "__setitem__"}


def _returns_none(call) -> bool:
    """``print(...)``, ``feats.append(...)``, ``store.__setitem__(k, v)``: a call that returns None."""
    if not isinstance(call, ast.Call):
        return False
    f = call.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("torch", "F", "nn"):
        return False   # a torch function returns its result
    return name in _NONE_RETURNING and (isinstance(f, ast.Attribute) or name == "print")


class Untranslatable(Exception):
    """What in the hook's body the format cannot say (``where``: the user's ``file:line``)."""

    def __init__(self, what: str, line: int | None = None):
        super().__init__(what)
        self.what = what
        self.line = line


@dataclass(frozen=True)
class Body:
    """A hook's body as the format writes it: statements (``does:``) and the returned expression."""

    does: tuple[str, ...]
    returns: str | None        # None: the hook observes (returns None)
    optimizer: str | None = None   # the optimizer its body steps, as the file writes it ({type: Adam, ...})


def translate(fn, names: tuple[str, ...], module_arg: bool, tensors: dict | None = None,
              module=None, target=None) -> Body:
    """The body of ``fn`` over the format's argument ``names`` (``module_arg``: its first
    parameter is the module, which the format does not hand). ``tensors``: the model's
    parameters and buffers by id, each read by its name in the file (a captured ``mask`` buffer,
    ``self.model.fc.weight``); ``module``: the module a module hook is on, whose parameters and
    buffers ``module.weight`` reads; ``target``: the tensor a post-accumulate-grad hook is on,
    whose own optimizer its body may step (``optims[p].step()``)."""
    args, keywords = (), {}
    if isinstance(fn, functools.partial):     # partial(save, name="fc1"): its arguments are captured values
        args, keywords = fn.args, dict(fn.keywords)
        fn = fn.func
        if not isinstance(fn, types.FunctionType):
            raise Untranslatable(f"the hook is a partial of a {type(fn).__name__}, not of a def")
    fn, args = _function_of(fn, args)
    node, first_line = _parse(fn)
    every = _params(node)
    defaults = dict(zip(every[len(every) - len(fn.__defaults__ or ()):], fn.__defaults__ or ()))
    bound = dict(zip(every, args))
    rest = every[len(args):]
    wanted = len(names) + (1 if module_arg else 0)
    handed, after = rest[:wanted], rest[wanted:]
    clash = [p for p in handed if p in keywords]
    missing = [p for p in after if p not in keywords and p not in defaults]
    if len(handed) != wanted or clash or missing or any(k not in every for k in keywords):
        raise Untranslatable(f"the hook takes ({', '.join(every)}){' with ' + ', '.join(keywords) + ' bound' if keywords else ''}, "
                             f"where PyTorch hands {wanted} argument(s)", first_line)
    bound.update({p: defaults[p] for p in after if p not in keywords})
    bound.update(keywords)
    params = handed
    mapping = dict(zip(params[1:] if module_arg else params, names))
    hidden = params[0] if module_arg else None
    return _Translator(fn, mapping, hidden, first_line, bound, tensors, module, target).body(node)


def _function_of(fn, args: tuple):
    """The Python function a hook runs and the arguments bound before PyTorch's: a def or a
    lambda itself; a bound method's function with its object first; an object's class's
    ``__call__`` with the object first (``Clipper(0.01)``: Python calls
    ``Clipper.__call__(obj, grad)``). The object is then read by value, as a closure is."""
    if isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
        return fn.__func__, (fn.__self__,) + tuple(args)
    call = getattr(type(fn), "__call__", None)
    if not isinstance(fn, (types.FunctionType, torch.nn.Module)) and isinstance(call, types.FunctionType):
        return call, (fn,) + tuple(args)
    if not isinstance(fn, types.FunctionType):
        raise Untranslatable(f"the hook is a {type(fn).__name__}, not a def, a lambda or an object with a __call__ "
                             "method")
    return fn, args


def _parse(fn):
    try:
        lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        raise Untranslatable("Python cannot find the hook's source") from None
    text = textwrap.dedent("".join(lines))
    tree = None
    for attempt in (text, "(\n" + text + "\n)"):
        try:
            tree = ast.parse(attempt)
            offset = start - (1 if attempt is text else 2)
            break
        except SyntaxError:
            continue
    if tree is None:
        raise Untranslatable("its source cannot be read on its own (a lambda inside a longer expression)", start)
    if fn.__name__ == "<lambda>":
        argnames = fn.__code__.co_varnames[:fn.__code__.co_argcount]
        found = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)
                 and tuple(a.arg for a in n.args.args) == tuple(argnames)]
        if not found or len({ast.dump(n) for n in found}) != 1:
            raise Untranslatable("its line holds several lambdas that could be it; give the hook a def", start)
        node = found[0]
    else:
        found = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and n.name == fn.__name__]
        if not found:
            raise Untranslatable("its definition was not found in its source", start)
        node = found[0]
    _shift(node, offset)
    return node, start


def _shift(node, offset: int) -> None:
    for n in ast.walk(node):
        if hasattr(n, "lineno"):
            n.lineno += offset


def _params(node) -> list[str]:
    a = node.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs:
        raise Untranslatable("the hook takes *args, **kwargs or keyword-only arguments", node.lineno)
    return [p.arg for p in a.args]


class _Translator:
    def __init__(self, fn, mapping: dict[str, str], hidden: str | None, line: int, bound: dict | None = None,
                 tensors: dict | None = None, module=None, target=None):
        self.fn = fn
        self.target = target            # a post-accumulate-grad hook's tensor (None: another kind)
        self.optim = None               # the torch.optim.Adam its body steps
        self.tensors = tensors or {}    # id -> the file's name of a parameter or buffer of the model
        self.module = module            # the module a module hook is on (None: not known)
        self.stored: set[str] = set()   # every name the body binds (its arguments too)
        self.bound = bound or {}         # a partial's bound arguments (captured by value)
        self.mapping = mapping          # the user's parameter name -> the format's name
        self.hidden = hidden            # the module argument (not handed by the format)
        self.line = line
        self.local: set[str] = set()
        self.inplace = False
        self.locals: dict[str, str] = {}   # a local name -> its name in the file (renamed off the handed names)
        closure = fn.__closure__ or ()
        self.cells = {n: c for n, c in zip(fn.__code__.co_freevars, closure)}

    def fail(self, what: str, node=None):
        return Untranslatable(what, getattr(node, "lineno", None) or self.line)

    # ------------------------------------------------------------------ statements
    def body(self, node) -> Body:
        self.stored = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)} | {
            a.arg for a in node.args.args}
        node = _Decided(self.truth).visit(copy.deepcopy(node))
        for block in ast.walk(node):        # what follows a return never runs (a decided if leaves some)
            for field in ("body", "orelse"):
                stmts = getattr(block, field, None)
                if isinstance(stmts, list):
                    ends = [i for i, st in enumerate(stmts) if isinstance(st, ast.Return)]
                    if ends:
                        del stmts[ends[0] + 1:]
        if isinstance(node, ast.Lambda):
            if _returns_none(node.body) and self.observing(ast.Expr(node.body)):   # lambda m, i, o: feats.append(o)
                return Body((), None)
            stepped = self.optimizer_call(ast.Expr(node.body))   # lambda p: optims[p].step(): returns None
            if stepped is not None:
                return Body((stepped,), None, self.optimizer_text())
            text = self.returned(node.body)
            return Body((), text)
        stmts = list(node.body)
        if stmts and isinstance(stmts[0], ast.Expr) and isinstance(stmts[0].value, ast.Constant) \
                and isinstance(stmts[0].value.value, str):
            stmts = stmts[1:]                                  # the docstring
        does: list[str] = []
        returns = None
        self.inplace = False        # set by any in-place write (a statement, or an in-place method in an expression)
        self.kept = False           # set by a statement kept though it writes nothing (an assert)
        if any(_returns_in(s) for s in stmts if not isinstance(s, ast.Return)):
            # a return inside a block: each path assigns one local, which returns: names
            self.result = self.local_name("result")
            self.returned_values = []
            does = self.returning(stmts)
            if all(v is None for v in self.returned_values) and not self.inplace and not self.kept:
                return Body((), None)
            return Body((f"{self.result} = None", *does), self.result, self.optimizer_text())
        for i, s in enumerate(stmts):
            last = i == len(stmts) - 1
            if isinstance(s, ast.Return):
                if not last:
                    raise self.fail("a 'return' before the end of the body", s)
                returns = None if s.value is None else self.returned(s.value)
                continue
            does.extend(self.statement(s) or ())
        if returns is None and not self.inplace and not self.kept:
            return Body((), None)
        return Body(tuple(does), returns, self.optimizer_text())

    def returning(self, stmts) -> list[str]:
        """The lines of statements some of which return from inside a block, as Python runs
        them: a ``return`` assigns the result and ends its path; an ``if`` holding one takes the
        statements after it into each of its blocks (a path that has returned runs none of them)."""
        out: list[str] = []
        for i, s in enumerate(stmts):
            if isinstance(s, ast.Return):
                value = None if s.value is None else self.returned(s.value)
                self.returned_values.append(value)
                out.append(f"{self.result} = {value if value is not None else 'None'}")
                return out
            if isinstance(s, ast.If) and _returns_in(s):
                rest = list(stmts[i + 1:])
                test, body, orelse = self.choice(s)
                out.append(_if_text(test, self.returning(body + rest), self.returning(orelse + rest)))
                return out
            if _returns_in(s):
                raise self.fail("a 'return' inside a block other than an 'if'", s)
            out.extend(self.statement(s) or ())
        return out

    def choice(self, s: ast.If):
        """An ``if``'s test and blocks as the format writes them: ``if not C`` is ``if C`` with
        the blocks swapped (the same truth value, taken once)."""
        test, body, orelse = s.test, list(s.body), list(s.orelse)
        while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, body, orelse = test.operand, orelse, body
        return self.expr(test), body, orelse

    def statement(self, s) -> list[str] | None:
        """The ``does:`` lines of one statement (None: it only observes, and is left out)."""
        if isinstance(s, ast.Pass):
            return None
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], (ast.Tuple, ast.List)) \
                and s.targets[0].elts and all(isinstance(t, ast.Name) for t in s.targets[0].elts):
            value = self.expr(s.value)          # gx, = grad_input: Python's unpacking, as the format's
            names = []
            for t in s.targets[0].elts:
                if t.id == self.hidden or t.id in self.cells or t.id in ("torch", "F"):
                    raise self.fail(f"assigning '{t.id}'", s)
                if t.id not in self.mapping and t.id not in self.local:
                    self.local_name(t.id)
                self.local.add(t.id)
                names.append(self.mapping.get(t.id) or self.locals[t.id])
            return [", ".join(names) + ("," if len(names) == 1 else "") + f" = {value}"]
        if isinstance(s, ast.Assert):
            if s.msg is not None and not (isinstance(s.msg, ast.Constant) and isinstance(s.msg.value, str)):
                raise self.fail("an assert whose message is not a string literal (the format's assert takes "
                                "'assert EXPR, \"text\"')", s)
            test, negated = s.test, False
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                test, negated = test.operand, True
            self.kept = True                      # failing, it raises: an answer
            message = f", {s.msg.value!r}" if s.msg is not None else ""
            return [f"assert {'not ' if negated else ''}{self.expr(test, 5 if negated else 0)}{message}"]
        if isinstance(s, ast.If):
            test, body, orelse = self.choice(s)
            lines = [[x for sub in block for x in (self.statement(sub) or ())] for block in (body, orelse)]
            if not lines[0] and not lines[1]:
                return None                       # only observing lines (a print under a condition)
            return [_if_text(test, *lines)]
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            target = s.targets[0].id
            if target == self.hidden or target in self.cells or target in ("torch", "F"):
                raise self.fail(f"assigning '{target}'", s)
            value = self.expr(s.value)
            if target not in self.mapping and target not in self.local:
                self.local_name(target)
            self.local.add(target)
            return [f"{self.mapping.get(target) or self.locals[target]} = {value}"]
        stepped = self.optimizer_call(s)
        if stepped is not None:
            self.inplace = True
            return [stepped]
        if self.stores_outside(s):
            return None
        written = self.write(s)
        if written is not None:
            self.inplace = True
            return written
        if self.observing(s):
            return None
        if isinstance(s, (ast.For, ast.While)):
            raise self.fail(f"a '{'for' if isinstance(s, ast.For) else 'while'}' loop (write each element's line: "
                            "grad_input[0].mul_(0.1))", s)
        raise self.fail(f"the statement '{_short(ast.unparse(s))}'", s)

    def write(self, s) -> list[str] | None:
        """A statement writing a handed tensor (or a local) in place, as the format writes it:
        ``g.clamp_(-c, c)``, ``g *= 2``, ``grad_input[0][0] = 0``, ``p.grad = None``,
        ``p.grad.mul_(0.5)``, and a ``with torch.no_grad():`` block of such lines
        (docs/format.md, "Hook bodies that write in place"). None: not such a statement."""
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Attribute):
            f = s.value.func
            if self.inplace_name(f.attr) and self.reads_argument(f.value):
                return [self.expr(s.value)]
            return None
        if isinstance(s, ast.AugAssign):
            if type(s.op) not in _BINOPS or _BINOPS[type(s.op)] == "@":
                raise self.fail(f"'{_short(ast.unparse(s))}' (an augmented assignment the format does not write)", s)
            return [f"{self.written(s.target, s)} {_BINOPS[type(s.op)]}= {self.expr(s.value)}"]
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], (ast.Subscript, ast.Attribute)):
            t = s.targets[0]
            if not self.reads_argument(t):
                return None
            return [f"{self.written(t, s)} = {self.expr(s.value)}"]
        if isinstance(s, ast.With):
            if len(s.items) != 1 or s.items[0].optional_vars is not None:
                return None
            ctx = s.items[0].context_expr
            mode = None
            if isinstance(ctx, ast.Call) and not ctx.args and not ctx.keywords and isinstance(ctx.func, ast.Attribute) \
                    and self.namespace(ctx.func.value) == ("torch", torch) and ctx.func.attr in ("no_grad", "enable_grad"):
                mode = ctx.func.attr
            if mode is None:
                raise self.fail(f"the block 'with {_short(ast.unparse(ctx))}:' (a hook body takes 'with "
                                "torch.no_grad():' and 'with torch.enable_grad():' blocks)", s)
            inner: list[str] = []
            for sub in s.body:
                inner.extend(self.statement(sub) or ())
            if not inner:
                return None
            return [f"with torch.{mode}():\n" + "\n".join("    " + line.replace("\n", "\n    ") for line in inner)]
        return None

    def written(self, target, s) -> str:
        """The target of an in-place write: a handed tensor or a local, an index into one, or
        its ``.grad``."""
        if isinstance(target, ast.Name):
            if target.id in self.mapping or target.id in self.local:
                return self.name(target)
            raise self.fail(f"'{_short(ast.unparse(s))}' writes '{target.id}', which is neither an argument nor a "
                            "tensor the hook made", s)
        if isinstance(target, ast.Subscript) and self.reads_argument(target.value):
            return f"{self.expr(target.value, 100)}[{self.index(target.slice)}]"
        if isinstance(target, ast.Attribute) and target.attr == "grad" and self.reads_argument(target.value):
            return f"{self.expr(target.value, 100)}.grad"
        raise self.fail(f"'{_short(ast.unparse(s))}' writes what the format cannot name", s)

    @staticmethod
    def inplace_name(attr: str) -> bool:
        return attr.endswith("_") and not attr.startswith("_")

    def local_name(self, name: str) -> str:
        """A local's name in the file: its own, unless that is a name the format hands the hook."""
        taken = set(self.mapping.values()) | set(self.locals.values()) | {"module", "torch", "F"}
        new = name
        while new in taken:
            new += "_"
        self.locals[name] = new
        return new

    def returned(self, value) -> str | None:
        if isinstance(value, ast.Constant) and value.value is None:
            return None
        return self.expr(value)

    def observing(self, s) -> bool:
        """A statement that only records (``print(g.norm())``, ``seen.append(g)``, ``store[k] = g``)."""
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            call = s.value
        elif isinstance(s, ast.Assign) and all(isinstance(t, ast.Subscript) for t in s.targets):
            for t in s.targets:
                if self.reads_argument(t.value):
                    raise self.fail(f"'{_short(ast.unparse(s))}' writes into a tensor it is handed "
                                    "(in place: not modelled in a hook body yet)", s)
            call = None
        elif isinstance(s, (ast.Global, ast.Nonlocal)):
            return True
        else:
            return False
        printed = {id(x) for n in ast.walk(s) if _returns_none(n) and isinstance(n.func, ast.Name)
                   for a in n.args + [k.value for k in n.keywords] for x in ast.walk(a)}
        for n in ast.walk(s):
            if isinstance(n, ast.Call):
                self.check_observing_call(n, top=n is call)
            if isinstance(n, ast.Name) and n.id == self.hidden and id(n) not in printed:
                raise self.fail(f"the module argument '{self.hidden}' is read", s)
        return True

    def optimizer_call(self, s) -> str | None:
        """``optims[p].step()`` / ``optims[p].zero_grad()`` in a post-accumulate-grad hook, PyTorch's
        optimizer-in-backward recipe: the ``torch.optim.Adam`` over the hook's own tensor, written
        as the format's ``optim`` (its settings go into the hook's ``optimizer:``). None: not such
        a statement."""
        if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Attribute)
                and s.value.func.attr in ("step", "zero_grad") and self.target is not None):
            return None
        call, owner = s.value, s.value.func.value
        found = self.held(owner)
        if found is _MISSING and isinstance(owner, ast.Subscript) and isinstance(owner.slice, ast.Name) \
                and self.mapping.get(owner.slice.id) == "tensor":   # optimizer_dict[parameter]
            held = self.held(owner.value)
            found = held.get(self.target, _MISSING) if isinstance(held, dict) else _MISSING
        if not isinstance(found, torch.optim.Optimizer):
            return None
        what = f"'{_short(ast.unparse(call))}'"
        if type(found) not in (torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD):
            raise self.fail(f"{what} steps a torch.optim.{type(found).__name__}, which adjoint does not model (the "
                            "optimizers a hook may step are Adam, AdamW and SGD)", s)
        group = found.param_groups[0] if len(found.param_groups) == 1 else {}
        if [id(p) for p in group.get("params", ())] != [id(self.target)]:
            raise self.fail(f"{what} steps an optimizer over other tensors than the hook's own (the format's optim is "
                            "torch.optim.Adam([tensor]))", s)
        kind = type(found).__name__
        if group.get("capturable") or group.get("differentiable") or group.get("fused") \
                or group.get("foreach") or found.state or isinstance(group.get("lr"), torch.Tensor) \
                or (kind == "Adam" and group.get("decoupled_weight_decay")):
            raise self.fail(f"{what} steps an {kind} with capturable, differentiable, fused, foreach=True, "
                            "a Tensor lr, decoupled_weight_decay or a state already, which adjoint does not model", s)
        if call.args or (call.func.attr == "step" and call.keywords) or any(
                k.arg != "set_to_none" or not (isinstance(k.value, ast.Constant) and k.value.value is True)
                for k in call.keywords if call.func.attr == "zero_grad"):
            raise self.fail(f"{what} with arguments (the format's optim.step() and optim.zero_grad() take none)", s)
        if self.optim is not None and self.optim is not found:
            raise self.fail(f"{what} steps a second optimizer (a hook owns one)", s)
        self.optim = found
        return f"optim.{call.func.attr}()"

    def optimizer_text(self) -> str | None:
        """The hook's ``optimizer:``, as the file writes it (Python's floats, as the optimizer holds them)."""
        if self.optim is None:
            return None
        group = self.optim.param_groups[0]
        kind = type(self.optim).__name__

        def num(key):
            return python_constant(float(group[key]))

        extra = "".join(f", {key}: {num(key)}" for key in ("weight_decay",) if group[key] != (0.01 if kind == "AdamW"
                                                                                               else 0))
        extra += ", amsgrad: true" if group.get("amsgrad") else ""
        extra += ", maximize: true" if group.get("maximize") else ""
        if kind == "SGD":
            sgd = "".join(f", {key}: {num(key)}" for key in ("momentum", "dampening") if group[key] != 0)
            sgd += ", nesterov: true" if group.get("nesterov") else ""
            return f"{{type: SGD, lr: {num('lr')}{sgd}{extra}}}"
        b1, b2 = group["betas"]
        return (f"{{type: {kind}, lr: {num('lr')}, betas: [{python_constant(float(b1))}, "
                f"{python_constant(float(b2))}], eps: {num('eps')}{extra}}}")

    def stores_outside(self, s) -> bool:
        """``self.activations = out.detach()``, ``self.calls += 1``: a store into an attribute of a
        captured Python object (Grad-CAM's recorder; not a tensor, not a module of the model),
        which records and changes no gradient. What it stores is computed, as Python computes
        it: a call there is checked as an observing statement's."""
        if isinstance(s, ast.Assign):
            targets = s.targets
        elif isinstance(s, ast.AugAssign):
            targets = [s.target]
        else:
            return False
        for t in targets:
            if not isinstance(t, ast.Attribute) or self.reads_argument(t.value):
                return False
            owner = self.held(t.value)
            if owner is _MISSING or owner is self.module or isinstance(owner, (torch.Tensor, nn.Module)):
                return False
        for n in ast.walk(s.value):
            if isinstance(n, ast.Call):
                self.check_observing_call(n, top=False)
            if isinstance(n, ast.Name) and n.id == self.hidden:
                raise self.fail(f"the module argument '{self.hidden}' is read", s)
        return True

    def reads_argument(self, node) -> bool:
        return any(isinstance(n, ast.Name) and (n.id in self.mapping or n.id in self.local) for n in ast.walk(node))

    def check_observing_call(self, call: ast.Call, top: bool) -> None:
        self.refuse_out(call)
        f = call.func
        if isinstance(f, ast.Attribute):
            if f.attr.endswith("_") and not f.attr.startswith("_"):
                raise self.fail(f"the in-place call .{f.attr}() inside a call adjoint cannot see into", call)
            if f.attr in _OBSERVING_METHODS or f.attr in METHODS:
                if f.attr in _OBSERVING_METHODS and top and self.reads_argument(f.value):
                    raise self.fail(f"'.{f.attr}()' called on a tensor it is handed", call)
                return
            raise self.fail(f"the call .{f.attr}() (adjoint cannot tell what it changes)", call)
        if isinstance(f, ast.Name) and f.id in _OBSERVING_BUILTINS and self.value_of(f.id) is getattr(builtins, f.id):
            return
        raise self.fail(f"the call {_short(ast.unparse(call))} (a Python function adjoint cannot see into)", call)

    # ------------------------------------------------------------------ expressions
    def expr(self, node, prec: int = 0) -> str:
        text, own = self.visit(node)
        return text if own >= prec else f"({text})"

    def visit(self, node) -> tuple[str, int]:
        held = self.held(node) if isinstance(node, (ast.Attribute, ast.Subscript)) else _MISSING
        if isinstance(held, torch.Tensor) and id(held) in self.tensors:   # m.fc.weight, module.mask: by its name
            return self.tensor_name(held, node), 100
        if held is not _MISSING and not isinstance(held, torch.Tensor) and self.captured_root(node):
            return self.captured_value(held, node), 100     # CFG["scales"][1], scales[i]: by value
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and self.captured(node.value.id):
            return self.captured_value(getattr(self.value_of(node.value.id), node.attr, _MISSING), node), 100
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and self.captured(node.value.id) \
                and isinstance(node.slice, ast.Constant) and isinstance(self.value_of(node.value.id), (dict, list)):
            held = self.value_of(node.value.id)
            key = node.slice.value
            found = held.get(key, _MISSING) if isinstance(held, dict) else \
                held[key] if isinstance(key, int) and -len(held) <= key < len(held) else _MISSING
            return self.captured_value(found, node), 100
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            sym = _BINOPS[type(node.op)]
            p = _PREC[sym]
            left, right = (p + 1, p) if sym == "**" else (p, p + 1)
            return f"{self.expr(node.left, left)} {sym} {self.expr(node.right, right)}", p
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return f"-{self.expr(node.operand, 30)}", 30
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd):
            return self.visit(node.operand)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Is, ast.IsNot)):
            right = node.comparators[0]
            if not (isinstance(right, ast.Constant) and right.value is None):
                raise self.fail(f"'{_short(ast.unparse(node))}' (an 'is' test of something other than None)", node)
            return f"{self.expr(node.left, 5)} is {'not ' if isinstance(node.ops[0], ast.IsNot) else ''}None", 4
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMP:
            return f"{self.expr(node.left, 5)} {_CMP[type(node.ops[0])]} {self.expr(node.comparators[0], 5)}", 4
        if isinstance(node, ast.Constant):
            return self.constant(node.value, node), 100
        if isinstance(node, ast.Name):
            return self.name(node), 100
        if isinstance(node, ast.Tuple) and any(isinstance(e, ast.Starred) for e in node.elts):
            return self.starred_tuple(node), 10
        if isinstance(node, (ast.Tuple, ast.List)):
            inner = ", ".join(self.expr(e) for e in node.elts)
            if isinstance(node, ast.Tuple):
                return "(" + inner + ("," if len(node.elts) == 1 else "") + ")", 100
            return "[" + inner + "]", 100
        if isinstance(node, ast.Dict):
            return self.dict_literal(node), 100
        if isinstance(node, ast.Subscript):
            return f"{self.expr(node.value, 100)}[{self.index(node.slice)}]", 100
        if isinstance(node, ast.Call):
            return self.call(node), 100
        if isinstance(node, ast.Attribute) and node.attr == "grad" and self.reads_argument(node.value):
            return f"{self.expr(node.value, 100)}.grad", 100
        if isinstance(node, ast.Attribute) and node.attr in ("T", "mT", "shape"):
            return f"{self.expr(node.value, 100)}.{node.attr}", 100
        if isinstance(node, ast.IfExp):
            test, body, orelse = node.test, node.body, node.orelse
            while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):   # B if not C else A
                test, body, orelse = test.operand, orelse, body
            return f"{self.expr(body, 2)} if {self.expr(test, 2)} else {self.expr(orelse, 1)}", 1
        if isinstance(node, ast.ListComp):
            return "[" + self.comprehension(node) + "]", 100
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            folded = self.fold(node)
            if folded is not _MISSING:
                return python_constant(folded), 100
        raise self.fail(f"the expression '{_short(ast.unparse(node))}'", node)

    def starred_tuple(self, node: ast.Tuple) -> str:
        """``(grad_input[0] * 0.5, *grad_input[1:])``: the rest of a tuple the hook is handed,
        spliced in; written as the format's tuple sum, ``(grad_input[0] * 0.5,) + grad_input[1:]``
        (a slice of a tuple is a tuple)."""
        parts, run = [], []
        for e in node.elts:
            if not isinstance(e, ast.Starred):
                run.append(self.expr(e))
                continue
            if run:
                parts.append("(" + ", ".join(run) + ",)")
                run = []
            v = e.value
            if not (isinstance(v, ast.Subscript) and isinstance(v.slice, ast.Slice) and isinstance(v.value, ast.Name)
                    and v.value.id in self.mapping):
                raise self.fail(f"'{_short(ast.unparse(e))}' in a tuple (the format splices a slice of a tuple the "
                                "hook is handed: *grad_input[1:])", e)
            parts.append(self.expr(v, 11))
        if run:
            parts.append("(" + ", ".join(run) + ",)")
        return " + ".join(parts)

    def dict_literal(self, node: ast.Dict) -> str:
        """``{"bias": 2 * kwargs["bias"]}``: the keyword arguments a ``with_kwargs`` forward-pre
        hook hands on, written as the format's dict of string keys. ``{**kwargs, ...}`` has no
        form there."""
        items = []
        for key, value in zip(node.keys, node.values):
            if key is None:
                raise self.fail(f"'**{_short(ast.unparse(value))}' in the dict '{_short(ast.unparse(node))}' (the "
                                "format's dict lists its keys: {'bias': kwargs['bias'] * 2})", node)
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                raise self.fail(f"the dict key '{_short(ast.unparse(key))}' (the format's dict has string keys)", key)
            items.append(f"{python_constant(key.value)}: {self.expr(value)}")
        return "{" + ", ".join(items) + "}"

    def comprehension(self, node) -> str:
        """``E for g in SEQ`` (of ``[...]`` or ``tuple(...)``): one ``for`` over one name, which
        is a local of the comprehension only."""
        if len(node.generators) != 1 or node.generators[0].ifs or node.generators[0].is_async \
                or not isinstance(node.generators[0].target, ast.Name):
            raise self.fail(f"the comprehension '{_short(ast.unparse(node))}' (the format takes one 'for NAME in SEQ' "
                            "with no 'if')", node)
        gen = node.generators[0]
        seq = self.expr(gen.iter, 5)
        name = gen.target.id
        saved = (self.mapping.pop(name, None), name in self.local, self.locals.get(name))
        self.local_name(name)
        self.local.add(name)
        try:
            return f"{self.expr(node.elt)} for {self.locals[name]} in {seq}"
        finally:
            if saved[0] is not None:
                self.mapping[name] = saved[0]
            if not saved[1]:
                self.local.discard(name)
            if saved[2] is None:
                self.locals.pop(name, None)
            else:
                self.locals[name] = saved[2]

    def captured(self, name: str) -> bool:
        """A name the hook reads from outside it (not an argument, a local, ``torch`` or ``F``)."""
        return name not in self.mapping and name not in self.local and name != self.hidden \
            and self.namespace(ast.Name(id=name)) is None and self.value_of(name) is not _MISSING

    def truth(self, node):
        """The truth value Python gives a test made of captured values alone (a flag, ``CFG["clip"]``,
        ``not ENABLED``, ``SCALE > 0``, the module argument's ``module.training``, ``isinstance(module,
        nn.Linear)`` of the module a hook is on), as the call would
        take it; ``_MISSING`` when the test reads anything the hook is handed or computes."""
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            value = self.truth(node.operand)
            return value if value is _MISSING else not value
        if isinstance(node, ast.BoolOp):      # left to right, stopping where Python stops
            stops = isinstance(node.op, ast.Or)
            for part in node.values:
                value = self.truth(part)
                if value is _MISSING or value == stops:
                    return value
            return not stops
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _DECIDED_CMP:
            a, b = self.plain(node.left), self.plain(node.comparators[0])
            if a is _MISSING or b is _MISSING:
                return _MISSING
            try:
                return bool(_DECIDED_CMP[type(node.ops[0])](a, b))
            except TypeError:
                return _MISSING
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and self.captured(node.func.id) \
                and self.value_of(node.func.id) is builtins.isinstance and len(node.args) == 2 and not node.keywords:
            obj, cls = self.held(node.args[0]), self.python_object(node.args[1])
            if obj is _MISSING or cls is _MISSING:
                return _MISSING
            try:        # isinstance(module, nn.Linear): the module a hook is on is known at import
                return isinstance(obj, cls)
            except TypeError:
                return _MISSING
        value = self.plain(node)
        return value if value is _MISSING else bool(value)

    def python_object(self, node):
        """What a name or a dotted name the body reads from outside it is (``nn.Linear``,
        ``torch.nn.Conv2d``, a tuple of them), as Python looks it up; ``_MISSING`` for anything else."""
        if isinstance(node, ast.Tuple):
            items = [self.python_object(e) for e in node.elts]
            return _MISSING if any(i is _MISSING for i in items) else tuple(items)
        if isinstance(node, ast.Name):
            if node.id in self.mapping or node.id in self.local or node.id == self.hidden:
                return _MISSING
            return self.value_of(node.id)
        if isinstance(node, ast.Attribute):
            base = self.python_object(node.value)
            return _MISSING if base is _MISSING else getattr(base, node.attr, _MISSING)
        return _MISSING

    def plain(self, node):
        """A Python number, bool, string or None made of captured values alone, or ``_MISSING``."""
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, (bool, int, float, str)) or node.value is None else _MISSING
        if isinstance(node, ast.Name):
            value = self.value_of(node.id) if self.captured(node.id) else _MISSING
        elif isinstance(node, (ast.Attribute, ast.Subscript)):
            value = self.held(node)
        else:
            return self.fold(node)
        return value if isinstance(value, (bool, int, float, str)) or value is None else _MISSING

    def tensor_name(self, t, node) -> str:
        """The file's name of the model's parameter or buffer ``t``, read in the body: refused
        where a name of the body (an argument, a local) would hide it."""
        text = self.tensors[id(t)]
        root = text.split(".")[0].split("[")[0]
        if root in self.stored or root in self.mapping.values() or root in self.locals.values():
            raise self.fail(f"'{_short(ast.unparse(node))}' is the model's {text}, a name the hook's body also "
                            "gives to a value of its own", node)
        return text

    def held(self, node):
        """The object a chain of attributes and constant items reads off a captured object or the
        module argument (``m.layers[0].weight``, ``module.mask``), as Python reads it; ``_MISSING``
        for anything else (a call, an argument the hook is handed)."""
        if isinstance(node, ast.Name):
            if node.id == self.hidden:
                return self.module if self.module is not None else _MISSING
            return self.value_of(node.id) if self.captured(node.id) else _MISSING
        if isinstance(node, ast.Attribute):
            base = self.held(node.value)
            return _MISSING if base is _MISSING else getattr(base, node.attr, _MISSING)
        if isinstance(node, ast.Subscript):
            key = self.plain(node.slice)     # a constant, or a captured number (``scales[i]``, ``i=i``)
            if not isinstance(key, (int, str)) or isinstance(key, bool):
                return _MISSING
            base = self.held(node.value)
            if isinstance(base, (nn.Module, dict, list, tuple)):
                try:
                    return base[key]
                except (IndexError, KeyError, TypeError):
                    return _MISSING
        return _MISSING

    def captured_root(self, node) -> bool:
        """A chain of attributes and items that starts at a captured name (``CFG["scales"][1]``,
        ``cfg.layers[i]``), not at the module argument."""
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        return isinstance(node, ast.Name) and node.id != self.hidden and self.captured(node.id)

    def captured_value(self, value, node) -> str:
        """An attribute or item of a captured object, read by value (``self.c``, ``cfg["scale"]``);
        a parameter or buffer of the model, by its name in the file (``model.mask``)."""
        if isinstance(value, torch.Tensor) and id(value) in self.tensors:
            return self.tensor_name(value, node)
        if isinstance(value, (bool, int, float)) or value is None or (
                isinstance(value, tuple) and all(isinstance(v, (bool, int, float)) for v in value)):
            return python_constant(value)
        what = "not there" if value is _MISSING else f"a {type(value).__name__}"
        raise self.fail(f"'{_short(ast.unparse(node))}', {what} (only numbers, bools, None and tuples of them are "
                        "captured by value)", node)

    def fold(self, node):
        """The value of an expression of captured numbers alone, as Python computes it (the
        built-ins ``max`` / ``min`` / ``abs``, ``%``); ``_MISSING`` when it reads anything else."""
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.Name) and self.captured(node.id):
            value = self.value_of(node.id)
            return value if isinstance(value, (int, float)) else _MISSING
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            value = self.fold(node.operand)
            return value if value is _MISSING else (-value if isinstance(node.op, ast.USub) else +value)
        if isinstance(node, ast.BinOp) and type(node.op) in _FOLDED_OPS:
            a, b = self.fold(node.left), self.fold(node.right)
            if a is _MISSING or b is _MISSING:
                return _MISSING
            try:
                return _FOLDED_OPS[type(node.op)](a, b)
            except (ArithmeticError, ValueError):
                return _MISSING      # Python raises: left to the format's own refusal
        if isinstance(node, ast.Call) and self.math_function(node.func) is not None and not node.keywords:
            args = [self.fold(a) for a in node.args]
            if any(a is _MISSING for a in args):
                return _MISSING
            try:
                value = self.math_function(node.func)(*args)
            except (ArithmeticError, ValueError, TypeError):
                return _MISSING      # Python raises: left to the refusal of the call
            return value if isinstance(value, (int, float)) and not isinstance(value, bool) else _MISSING
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and self.captured(node.func.id) \
                and _folded_builtin(self.value_of(node.func.id)) and node.args and not node.keywords:
            args = [self.fold(a) for a in node.args]
            if any(a is _MISSING for a in args) or (self.value_of(node.func.id) is builtins.abs and len(args) != 1):
                return _MISSING
            return self.value_of(node.func.id)(*args)
        return _MISSING

    def math_function(self, func):
        """``math.sqrt`` (``import math``) as the hook names it: the function of Python's ``math``
        module, or None."""
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and self.captured(func.value.id) \
                and self.value_of(func.value.id) is math:
            found = getattr(math, func.attr, None)
            return found if callable(found) else None
        return None

    def index(self, node) -> str:
        if isinstance(node, ast.Tuple):
            return ", ".join(self.index(e) for e in node.elts)
        if isinstance(node, ast.Slice):
            parts = ["" if v is None else self.expr(v) for v in (node.lower, node.upper)]
            text = ":".join(parts)
            return text + (":" + self.expr(node.step) if node.step is not None else "")
        return self.expr(node)

    def constant(self, value, node) -> str:
        if value is None or isinstance(value, (bool, int, float, str)) or value is Ellipsis:
            return python_constant(value)
        raise self.fail(f"the constant {value!r}", node)

    def value_of(self, name: str):
        if name in self.bound:
            return self.bound[name]
        if name in self.cells:
            try:
                return self.cells[name].cell_contents
            except ValueError:
                raise Untranslatable(f"'{name}' is not yet bound in the hook's closure", self.line) from None
        if name in self.fn.__globals__:
            return self.fn.__globals__[name]
        return getattr(builtins, name, _MISSING)

    def name(self, node: ast.Name) -> str:
        n = node.id
        if n == self.hidden:
            raise self.fail(f"the module argument '{n}' is read (the format hands a hook its gradients only)", node)
        if n in self.mapping:
            return self.mapping[n]
        if n in self.local:
            return self.locals[n]
        value = self.value_of(n)
        if isinstance(value, (bool, int, float)) or value is None:
            return python_constant(value)
        if isinstance(value, tuple) and all(isinstance(v, (bool, int, float)) for v in value):
            return python_constant(value)
        if isinstance(value, torch.Tensor) and id(value) in self.tensors:   # a captured parameter or buffer
            return self.tensor_name(value, node)
        if value is _MISSING:
            raise self.fail(f"the name '{n}', which is not defined", node)
        raise self.fail(f"'{n}', a captured {type(value).__name__} (only numbers, bools, None and tuples of them "
                        "are captured by value)", node)

    def refuse_out(self, call: ast.Call) -> None:
        """``torch.clamp(g, -c, c, out=g)``: PyTorch writes the result into ``out`` (in place: a
        version bump, the overlap check; and an error when an argument requires grad), which a
        hook body does not write: refused, naming the in-place method that writes the same when
        ``out`` is the first argument (never dropped as an observing call)."""
        out = next((k.value for k in call.keywords if k.arg == "out"), None)
        if out is None:
            return
        text = _short(ast.unparse(call))
        f = call.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
        first = call.args[0] if call.args else None
        same = isinstance(first, ast.Name) and isinstance(out, ast.Name) and first.id == out.id
        if same and name is not None and (f"{name}_" in INPLACE_METHODS or f"{name}_" in METHODS):
            rest = [ast.unparse(a) for a in call.args[1:]] + [ast.unparse(k) for k in call.keywords if k.arg != "out"]
            instead = f"{first.id}.{name}_({', '.join(rest)})"
            raise self.fail(f"'{text}' writes its result into {out.id} through out=, which a hook body does not "
                            f"write (write {instead}: PyTorch's same write of {out.id} in place, while no argument "
                            "requires grad)", call)
        raise self.fail(f"'{text}' writes its result into {ast.unparse(out)} through out=, which a hook body does "
                        "not write (compute the value, or write it with an in-place method)", call)

    def call(self, node: ast.Call) -> str:
        self.refuse_out(node)
        f = node.func
        if isinstance(f, ast.Name) and len(node.args) == 1 and isinstance(node.args[0], ast.GeneratorExp) \
                and (self.value_of(f.id) is builtins.tuple or self.value_of(f.id) is builtins.list) \
                and f.id not in self.mapping and f.id not in self.local:
            return ("tuple(" + self.comprehension(node.args[0]) + ")" if self.value_of(f.id) is builtins.tuple
                    else "[" + self.comprehension(node.args[0]) + "]")
        args = [self.expr(a) for a in node.args]
        for k in node.keywords:
            if k.arg is None:
                raise self.fail("a **kwargs call", node)
            args.append(f"{k.arg}={self.expr(k.value)}")
        if self.math_function(f) is not None:
            folded = self.fold(node)
            if folded is not _MISSING:
                return python_constant(folded)
            raise self.fail(f"the call {_short(ast.unparse(node))} (Python's math of a value that is not a captured "
                            "number; use the torch function of the tensor)", node)
        if isinstance(f, ast.Attribute):
            base = f.value
            namespace = self.namespace(base)
            if namespace is not None:
                if f.attr not in FUNCTIONS or getattr(namespace[1], f.attr, None) is None:
                    raise self.fail(f"{namespace[0]}.{f.attr}, which adjoint does not model", node)
                return f"{namespace[0]}.{f.attr}({', '.join(args)})"
            if self.inplace_name(f.attr):
                if f.attr not in METHODS and f.attr not in INPLACE_METHODS:
                    raise self.fail(f"the in-place call .{f.attr}(), which adjoint does not model", node)
                self.inplace = True
            if f.attr not in METHODS and f.attr not in INPLACE_METHODS:
                raise self.fail(f"the Tensor method .{f.attr}(), which adjoint does not model", node)
            return f"{self.expr(base, 100)}.{f.attr}({', '.join(args)})"
        if isinstance(f, ast.Name) and f.id not in self.mapping and f.id not in self.local:
            value = self.value_of(f.id)
            for prefix, ns in (("torch", torch), ("F", F)):
                if f.id in FUNCTIONS and getattr(ns, f.id, None) is value and value is not None:
                    return f"{prefix}.{f.id}({', '.join(args)})"
            if value is builtins.tuple and len(node.args) == 1 and not node.keywords:
                inner = node.args[0]
                if isinstance(inner, (ast.List, ast.Tuple)):
                    return self.expr(ast.Tuple(elts=inner.elts, ctx=ast.Load()))
            if _folded_builtin(value):
                folded = self.fold(node)
                if folded is not _MISSING:
                    return python_constant(folded)
        raise self.fail(f"the call {_short(ast.unparse(node))} (a Python function adjoint cannot see into)", node)

    def namespace(self, base) -> tuple[str, object] | None:
        """``torch`` / ``F`` (``torch.nn.functional``) as the hook's code names them."""
        if isinstance(base, ast.Name) and base.id not in self.mapping and base.id not in self.local:
            value = self.value_of(base.id)
            if value is torch:
                return "torch", torch
            if value is F:
                return "F", F
        if isinstance(base, ast.Attribute) and ast.unparse(base) == "torch.nn.functional" and \
                self.value_of("torch") is torch:
            return "F", F
        return None


_MISSING = object()


#: the comparisons a test of captured values is decided with at import
_DECIDED_CMP = {ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Lt: operator.lt, ast.LtE: operator.le,
                ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Is: operator.is_, ast.IsNot: operator.is_not,
                ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}   # "bias" in name


class _Decided(ast.NodeTransformer):
    """The body with each ``if`` and ``A if C else B`` whose test is decided by captured values
    alone (``truth``) replaced by the branch Python takes: the flag is read by value, as a
    captured number is, and the branch not taken is never run (nor translated)."""

    def __init__(self, truth):
        self.truth = truth

    def visit_IfExp(self, node):
        self.generic_visit(node)
        value = self.truth(node.test)
        return node if value is _MISSING else node.body if value else node.orelse

    def visit_If(self, node):
        self.generic_visit(node)
        value = self.truth(node.test)
        if value is not _MISSING:
            return (node.body if value else node.orelse) or [ast.Pass()]
        node.body = node.body or [ast.Pass()]
        return node


def _folded_builtin(value) -> bool:
    """``max`` / ``min`` / ``abs`` themselves (by identity: a captured value may not hash)."""
    return any(value is b for b in _FOLDED_BUILTINS)


def _returns_in(node) -> bool:
    """A ``return`` inside the statement (not in a nested function)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Return):
            return True
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)) or n is node:
            stack.extend(ast.iter_child_nodes(n))
    return False


def _if_text(test: str, body: list[str], orelse: list[str]) -> str:
    """An ``if`` block of ``does:`` lines (a block with nothing in it holds ``pass``)."""
    def indented(lines):
        return "\n".join("    " + line.replace("\n", "\n    ") for line in (lines or ["pass"]))
    return f"if {test}:\n{indented(body)}" + (f"\nelse:\n{indented(orelse)}" if orelse else "")


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."
