"""The expression and statement records of problem files (v2): what :mod:`adjoint.format.expr` parses into.

Plain frozen records, nothing else: the parser (:mod:`adjoint.format.expr`) builds them from Python
syntax through a whitelist; the runtime (:mod:`adjoint.engine.forward`), the torch side and the
renderers interpret them. Every record carries the file location of its first character.

Expressions
-----------
``Num``        a number literal, exact (``0.3`` is 3/10); ``is_int`` when written as an integer
``Str``        a string literal (keyword arguments only: ``reduction="sum"``)
``Bool``       ``True`` / ``False`` (keyword arguments)
``NoneLit``    ``None`` (a hook's returned tuple, keyword arguments, an index: ``x[None]``)
``EllipsisLit`` ``...`` (an index)
``Name``       a name
``Bin``        ``+ - * / ** @`` (``op`` is the operator's text); ``//`` and ``%`` are refused
``Neg``        unary minus (``-2`` is folded into ``Num`` by the parser)
``Call``       ``f(args, k=v)``: ``func`` is a function name (``relu``, ``softmax``; a ``torch.``,
               ``F.`` or ``torch.nn.functional.`` prefix is dropped and kept in ``prefix``) or a
               child module path relative to the calling module (``enc``, ``layers.0`` for
               ``layers[0](x)``)
``Method``     ``obj.name(args, k=v)``: a Tensor method (``x.view(2, -1)``, ``x.mul_(2)``)
``Attr``       ``obj.name`` without a call: ``x.T``, ``x.mT``, ``x.shape``
``Subscript``  ``value[items]``: each item an expression (an int, or a tensor for advanced
               indexing), a ``Slice``, ``NoneLit`` or ``EllipsisLit``; ``grad_input[0]`` is a
               Subscript of a tuple
``Slice``      ``lower:upper:step``, each part optional (None)
``Tup``        ``(a, b)``; ``ListLit`` ``[a, b]`` (sequence arguments: ``cat([a, b])``, ``dim=[0, 1]``)
``DictLit``    ``{"bias": v}``: string keys only (a with_kwargs hook's returned kwargs); a dict is
               indexed by a string: ``kwargs["bias"]``
``IsNone``     ``value is None`` / ``value is not None``: Python's identity test with None (a bool)
``IfExp``      ``a if test else b``: Python's conditional expression (one branch evaluated)
``Comp``       ``[elt for name in seq]`` and ``tuple(elt for name in seq)``: one ``for`` over a
               sequence, the name bound for ``elt`` only (a hook body's)

Statements (a custom forward, a hook's ``does:``)
----------
``Assign``     ``target = value``; a target is a ``Name``, a ``Tup`` of targets (unpacking:
               ``a, b = x.chunk(2)``), a ``Subscript`` of a name (index assignment, ``x[0] = v``) or
               an ``Attr`` ``requires_grad`` (``lin.weight.requires_grad = False``: the Tensor setter)
``AugAssign``  ``target op= value`` (``h += x``): target a ``Name`` or a ``Subscript``
``ExprStmt``   an expression evaluated for its effect (``x.mul_(2)``)
``With``       ``with no_grad():`` / ``with enable_grad():`` and its indented body
``Return``     ``return value`` (``value`` may be a ``Tup``: a module returning a tuple)
``If``         ``if test:`` with its body and its ``else:`` (``elif``: an ``If`` alone in ``orelse``);
               a hook's ``does:`` only

A ``Program`` is a tuple of statements; a custom forward's program ends in ``Return``
(a forward written as one expression is a program of one ``Return``).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from adjoint.format.errors import Loc


@dataclass(frozen=True)
class Expr:
    """An expression of the problem language, with its location in the file."""

    loc: Loc


@dataclass(frozen=True)
class Num(Expr):
    """A number literal (exact), with the text it was written as (an imaginary literal ``2j``: a
    :class:`adjoint.format.gaussian.Gaussian`)."""

    value: Fraction
    text: str

    @property
    def is_int(self) -> bool:
        """Written as an integer (``2``, ``-1``): Python gives an int, which matters to torch
        (``x.view(2, -1)``, ``x ** 2`` vs ``x ** 2.0`` are the same op, ``x[1]`` needs an int)."""
        return getattr(self.value, "denominator", None) == 1 and not any(c in self.text for c in ".eE")


@dataclass(frozen=True)
class Str(Expr):
    """A string literal."""

    value: str


@dataclass(frozen=True)
class Bool(Expr):
    """True or False."""

    value: bool


@dataclass(frozen=True)
class NoneLit(Expr):
    """None."""

    pass


@dataclass(frozen=True)
class EllipsisLit(Expr):
    """The ellipsis `...` in an index."""

    pass


@dataclass(frozen=True)
class Name(Expr):
    """A name: a tensor, a module or a symbol."""

    id: str


@dataclass(frozen=True)
class Bin(Expr):
    """A binary operation: + - * / ** @ and the comparisons."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Neg(Expr):
    """Unary minus."""

    operand: Expr


Kwargs = tuple[tuple[str, Expr], ...]


@dataclass(frozen=True)
class Call(Expr):
    """A function call f(args, kwargs) (prefix: torch, F or nothing)."""

    func: str
    args: tuple[Expr, ...]
    kwargs: Kwargs = ()
    prefix: str = ""             # "torch.", "F.", "torch.nn.functional." as written (dropped from func)


@dataclass(frozen=True)
class Method(Expr):
    """A method call obj.name(args, kwargs)."""

    obj: Expr
    name: str
    args: tuple[Expr, ...]
    kwargs: Kwargs = ()
    operator: str = ""               # a comparison operator made the call: the one Python applies to (obj, args[0])
                                     # (``0 < x`` is ``x > 0``: x.gt(0))


@dataclass(frozen=True)
class Chain(Expr):
    """A chained comparison ``a < b < c``: Python's ``(a < b) and (b < c)``, each operand evaluated
    once, left to right. A link's result is taken as a bool (a tensor's truth value: PyTorch
    raises for no or several elements); the first false one is the result and the operands after
    it are not evaluated; else the last link's result is."""

    operands: tuple[Expr, ...]
    ops: tuple[str, ...]             # the operators as written, one per link
    links: tuple[Method, ...]        # links[i]: operands[i] OP operands[i + 1] as a lone comparison is read
                                     # (the mirrored method of operands[i + 1] when operands[i] is a number)


@dataclass(frozen=True)
class Attr(Expr):
    """An attribute obj.name."""

    obj: Expr
    name: str


@dataclass(frozen=True)
class Slice(Expr):
    """A slice lower:upper:step in an index."""

    lower: Expr | None
    upper: Expr | None
    step: Expr | None


@dataclass(frozen=True)
class Subscript(Expr):
    """An index value[items]."""

    value: Expr
    items: tuple[Expr, ...]      # Expr | Slice | NoneLit | EllipsisLit, one per comma-separated index


@dataclass(frozen=True)
class Tup(Expr):
    """A tuple."""

    items: tuple[Expr, ...]


@dataclass(frozen=True)
class ListLit(Expr):
    """A list."""

    items: tuple[Expr, ...]


@dataclass(frozen=True)
class DictLit(Expr):
    """A dict with string keys."""

    items: tuple[tuple[str, Expr], ...]


@dataclass(frozen=True)
class IsNone(Expr):
    """``value is None`` (``negated``: ``value is not None``): Python's identity test, a bool."""

    value: Expr
    negated: bool = False


@dataclass(frozen=True)
class IfExp(Expr):
    """``body if test else orelse``: the test's truth value decides which one branch is evaluated."""

    test: Expr
    body: Expr
    orelse: Expr


@dataclass(frozen=True)
class Comp(Expr):
    """``[elt for target in iter]`` (``kind`` "list") or ``tuple(elt for target in iter)``
    ("tuple"): ``iter`` evaluated once, ``elt`` once per item with ``target`` bound to it (in
    the comprehension's own scope: the name is not bound after it)."""

    elt: Expr
    target: str
    iter: Expr
    kind: str = "list"


# ----------------------------------------------------------------------------- statements

@dataclass(frozen=True)
class Stmt:
    """A statement of a forward program, with its location in the file."""

    loc: Loc


@dataclass(frozen=True)
class Assign(Stmt):
    """target = value."""

    target: Expr                 # Name | Tup of targets | Subscript of a Name
    value: Expr


@dataclass(frozen=True)
class AugAssign(Stmt):
    """target op= value (in place)."""

    target: Expr                 # Name | Subscript of a Name
    op: str                      # "+", "-", "*", "/", "**", "@"
    value: Expr


@dataclass(frozen=True)
class ExprStmt(Stmt):
    """An expression evaluated for its effect."""

    value: Expr


@dataclass(frozen=True)
class With(Stmt):
    """A with torch.no_grad() / torch.enable_grad() / torch.set_grad_enabled(BOOL) /
    torch.inference_mode() block."""

    mode: str                    # the grad mode it sets: "no_grad" | "enable_grad" | "inference_mode" (grad off)
    body: tuple[Stmt, ...]
    set_grad_enabled: bool = False   # written torch.set_grad_enabled(False) / (True): the same mode

    @property
    def manager(self) -> str:
        """The context manager as written: ``no_grad()``, ``set_grad_enabled(False)``."""
        if self.set_grad_enabled:
            return f"set_grad_enabled({self.mode == 'enable_grad'})"
        return f"{self.mode}()"


@dataclass(frozen=True)
class Return(Stmt):
    """return value."""

    value: Expr


@dataclass(frozen=True)
class Assert(Stmt):
    """assert test / assert not test (``, "message"``): Python's AssertionError when it fails."""

    test: Expr
    negated: bool = False        # ``assert not test``
    message: str | None = None   # ``assert test, "text"``: AssertionError("text")


#: the exceptions a forward's ``raise`` line may raise: Python's built-ins whose ``str()`` is the
#: message as written (KeyError's adds quotes: not offered)
RAISABLE = ("RuntimeError", "ValueError", "TypeError", "IndexError", "NotImplementedError")


@dataclass(frozen=True)
class Raise(Stmt):
    """raise TYPE("message") in a forward: the forward stops there with that error."""

    type: str                    # one of RAISABLE
    message: str


@dataclass(frozen=True)
class If(Stmt):
    """if test: body else: orelse (a hook's ``does:``); ``elif`` is an ``If`` alone in ``orelse``."""

    test: Expr
    body: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] = ()


Program = tuple[Stmt, ...]

#: what a comparison's operand is written in parentheses for (``(a < b) is None``)
_CHOICES = (Chain, IsNone, IfExp)


# ----------------------------------------------------------------------------- walking

def children(e: Expr) -> tuple[Expr, ...]:
    """The sub-expressions of ``e``, in source order."""
    if isinstance(e, Bin):
        return (e.left, e.right)
    if isinstance(e, Neg):
        return (e.operand,)
    if isinstance(e, Call):
        return tuple(e.args) + tuple(v for _, v in e.kwargs)
    if isinstance(e, Method):
        return (e.obj,) + tuple(e.args) + tuple(v for _, v in e.kwargs)
    if isinstance(e, Attr):
        return (e.obj,)
    if isinstance(e, Chain):
        return tuple(e.operands)
    if isinstance(e, Subscript):
        return (e.value,) + tuple(e.items)
    if isinstance(e, Slice):
        return tuple(x for x in (e.lower, e.upper, e.step) if x is not None)
    if isinstance(e, (Tup, ListLit)):
        return tuple(e.items)
    if isinstance(e, DictLit):
        return tuple(v for _, v in e.items)
    if isinstance(e, IsNone):
        return (e.value,)
    if isinstance(e, IfExp):
        return (e.body, e.test, e.orelse)
    if isinstance(e, Comp):
        return (e.elt, e.iter)
    return ()


def free_names(e: Expr) -> list[str]:
    """Names an expression reads, in order of first appearance (function names excluded)."""
    out: list[str] = []
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Name) and x.id not in out:
            out.append(x.id)
        if isinstance(x, Comp):   # the comprehension's own name is not read from outside it
            inner = [n for n in free_names(x.elt) if n != x.target] + free_names(x.iter)
            out.extend(n for n in dict.fromkeys(inner) if n not in out)
            continue
        stack.extend(reversed(children(x)))
    return out


def to_source(e: Expr) -> str:
    """Readable source text of an expression (for reports)."""
    if isinstance(e, Num):
        return e.text
    if isinstance(e, Str):
        return repr(e.value)
    if isinstance(e, Bool):
        return str(e.value)
    if isinstance(e, NoneLit):
        return "None"
    if isinstance(e, EllipsisLit):
        return "..."
    if isinstance(e, Name):
        return e.id
    if isinstance(e, Neg):
        return f"-{_paren(e.operand)}"
    if isinstance(e, Bin):
        return f"{_paren(e.left)} {e.op} {_paren(e.right)}"
    if isinstance(e, Call):
        return f"{e.prefix}{e.func}({_arglist(e.args, e.kwargs)})"
    if isinstance(e, Method) and e.operator == "~":
        return f"~{_paren(e.obj)}"
    if isinstance(e, Method):
        return f"{_paren(e.obj)}.{e.name}({_arglist(e.args, e.kwargs)})"
    if isinstance(e, Attr):
        return f"{_paren(e.obj)}.{e.name}"
    if isinstance(e, Chain):
        parts = [_paren(e.operands[0])]
        for op, operand in zip(e.ops, e.operands[1:]):
            parts += [op, _paren(operand)]
        return " ".join(parts)
    if isinstance(e, Slice):
        parts = ["" if x is None else to_source(x) for x in (e.lower, e.upper)]
        text = ":".join(parts)
        return text + (f":{to_source(e.step)}" if e.step is not None else "")
    if isinstance(e, Subscript):
        return f"{_paren(e.value)}[{', '.join(to_source(i) for i in e.items)}]"
    if isinstance(e, Tup):
        inner = ", ".join(to_source(a) for a in e.items)
        return f"({inner},)" if len(e.items) == 1 else f"({inner})"
    if isinstance(e, ListLit):
        return f"[{', '.join(to_source(a) for a in e.items)}]"
    if isinstance(e, DictLit):
        return "{" + ", ".join(f"{k!r}: {to_source(v)}" for k, v in e.items) + "}"
    if isinstance(e, IsNone):
        return f"{_paren(e.value, _CHOICES)} is {'not ' if e.negated else ''}None"
    if isinstance(e, IfExp):
        return f"{_paren(e.body, (IfExp,))} if {_paren(e.test, (IfExp,))} else {to_source(e.orelse)}"
    if isinstance(e, Comp):
        inner = f"{to_source(e.elt)} for {e.target} in {_paren(e.iter, (IfExp,))}"
        return f"tuple({inner})" if e.kind == "tuple" else f"[{inner}]"
    raise TypeError(e)


def stmt_source(s: Stmt) -> str:
    """One statement as source text (a With gives its header only)."""
    if isinstance(s, Assign):
        target = to_source(s.target)
        return f"{target[1:-1] if isinstance(s.target, Tup) else target} = {to_source(s.value)}"
    if isinstance(s, AugAssign):
        return f"{to_source(s.target)} {s.op}= {to_source(s.value)}"
    if isinstance(s, ExprStmt):
        return to_source(s.value)
    if isinstance(s, With):
        return f"with {s.manager}:"
    if isinstance(s, Return):
        value = to_source(s.value)
        return f"return {value[1:-1] if isinstance(s.value, Tup) and len(s.value.items) > 1 else value}"
    if isinstance(s, Assert):
        message = f", {s.message!r}" if s.message is not None else ""
        return f"assert {'not ' if s.negated else ''}{to_source(s.test)}{message}"
    if isinstance(s, Raise):
        return f"raise {s.type}({s.message!r})"
    if isinstance(s, If):
        text = f"if {to_source(s.test)}: " + ("; ".join(stmt_source(x) for x in s.body) or "pass")
        if len(s.orelse) == 1 and isinstance(s.orelse[0], If):
            return text + " el" + stmt_source(s.orelse[0])
        return text + (" else: " + "; ".join(stmt_source(x) for x in s.orelse) if s.orelse else "")
    raise TypeError(s)


def requires_grad_statements(program) -> dict[str, Stmt]:
    """Each name's first statement of ``program`` (``with`` bodies included) that makes its tensor
    require grad in place: ``NAME.requires_grad_()``, ``NAME.requires_grad_(True)``,
    ``NAME.requires_grad_(requires_grad=True)`` as a statement of its own, or ``NAME.requires_grad = True``. A forward binds a name
    once, so that statement comes after the line binding it (the tensor hooks on a name whose
    tensor does not require grad at its line go on after it: adjoint.engine.hook_registration)."""
    out: dict[str, Stmt] = {}
    for s in program:
        if isinstance(s, With):
            for name, inner in requires_grad_statements(s.body).items():
                out.setdefault(name, inner)
            continue
        if isinstance(s, Assign) and isinstance(s.target, Attr) and s.target.name == "requires_grad" \
                and isinstance(s.target.obj, Name) and isinstance(s.value, Bool) and s.value.value:
            out.setdefault(s.target.obj.id, s)   # NAME.requires_grad = True
            continue
        e = s.value if isinstance(s, ExprStmt) else None
        if not (isinstance(e, Method) and e.name == "requires_grad_" and not e.operator and isinstance(e.obj, Name)):
            continue
        flags = list(e.args) + [v for k, v in e.kwargs if k == "requires_grad"]
        if len(flags) == len(e.args) + len(e.kwargs) <= 1 and all(isinstance(f, Bool) and f.value for f in flags):
            out.setdefault(e.obj.id, s)
    return out


def bound_names(program) -> frozenset[str]:
    """The names ``program``'s statements bind (``name = ...``, ``a, b = ...``, ``name += ...``),
    in ``with`` and ``if`` bodies too: Python's local names of a function with that body, local
    throughout it, so a call or read of one before its line is UnboundLocalError."""
    out: set[str] = set()

    def targets(t) -> None:
        if isinstance(t, Name):
            out.add(t.id)
        elif isinstance(t, Tup):
            for item in t.items:
                targets(item)

    for s in program:
        if isinstance(s, (Assign, AugAssign)):
            targets(s.target)
        elif isinstance(s, With):
            out |= bound_names(s.body)
        elif isinstance(s, If):
            out |= bound_names(s.body) | bound_names(s.orelse)
    return frozenset(out)


def each_bound(env: dict, name: str, items, evaluate) -> list:
    """``evaluate()`` once per item of ``items`` with ``env[name]`` bound to it, ``name``'s own
    binding (or its absence) restored afterwards: a comprehension's scope, as both interpreters
    of a hook body run it."""
    missing = object()
    before = env.get(name, missing)
    out = []
    try:
        for item in items:
            env[name] = item
            out.append(evaluate())
    finally:
        if before is missing:
            env.pop(name, None)
        else:
            env[name] = before
    return out


def _arglist(args, kwargs) -> str:
    return ", ".join([to_source(a) for a in args] + [f"{k}={to_source(v)}" for k, v in kwargs])


def _paren(e: Expr, lower: tuple = ()) -> str:
    """``e``'s source, in parentheses where it binds less tightly than an operand (``lower``:
    the records that do, when it is not an operand of an arithmetic operator or a call)."""
    s = to_source(e)
    return f"({s})" if isinstance(e, lower or (Bin, Neg, Chain, IsNone, IfExp)) else s


def dotted_name(e) -> str | None:
    """``a.b.c`` (and ``net[0].weight``) as one dotted name, as a hook body names a parameter by
    its path (``lin.weight``, ``net.0.weight``); None for anything else."""
    parts = []
    while isinstance(e, Attr):
        parts.append(e.name)
        e = e.obj
    base = module_path(e)
    return None if base is None or not parts else ".".join([base] + parts[::-1])


def module_path(e) -> str | None:
    """The module path an expression names, as a ``checkpoint`` argument or a parameter read
    does: ``f``, ``layers[0]`` (``layers.0``), ``blocks[1][0]``, ``transformer.h[0]``
    (``transformer.h.0``); None for anything else (whether it is a module is the caller's
    question)."""
    parts = []
    while True:
        if isinstance(e, Name):
            return ".".join([e.id] + parts[::-1])
        if isinstance(e, Subscript) and len(e.items) == 1 and isinstance(e.items[0], Num) \
                and e.items[0].value.denominator == 1 and e.items[0].value >= 0 and "." not in e.items[0].text:
            parts.append(str(int(e.items[0].value)))
            e = e.value
        elif isinstance(e, Attr) and parts:   # an attribute between indices: a ModuleDict's item (transformer.h[0])
            parts.append(e.name)
            e = e.obj
        else:
            return None
