"""The expression language of problem files: plain immutable records and a whitelist parser.

Text is handed to :func:`ast.parse` (which only parses, never runs anything) and the
resulting tree is copied into our own records node by node; any construct not on the
whitelist is refused with its file position. Number literals are re-read from their source
text, so ``0.3`` is exactly 3/10.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from fractions import Fraction

from .errors import Loc, ProblemError
from .loader import YScalar, YSeq, YNode

MAX_EXPR_CHARS = 10_000
MAX_EXPR_NODES = 2_000

#: Functions an expression may call, each exactly one PyTorch op (see docs/ops.md).
#: ``t`` (torch.t) is an extension of the contract: the contract's whitelist has no transpose.
FUNCTIONS = ("relu", "tanh", "sigmoid", "exp", "log", "sin", "cos", "sqrt", "abs",
             "sum", "mean", "norm", "t")

BINARY_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**",
              ast.MatMult: "@"}


@dataclass(frozen=True)
class Expr:
    loc: Loc


@dataclass(frozen=True)
class Num(Expr):
    value: Fraction
    text: str


@dataclass(frozen=True)
class Name(Expr):
    id: str


@dataclass(frozen=True)
class Bin(Expr):
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Neg(Expr):
    operand: Expr


@dataclass(frozen=True)
class Call(Expr):
    func: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Index(Expr):
    value: Expr
    index: int


@dataclass(frozen=True)
class Tup(Expr):
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class NoneLit(Expr):
    """``None`` inside a hook's returned tuple (extension: PyTorch allows it there)."""


@dataclass(frozen=True)
class Assign:
    name: str
    value: Expr
    loc: Loc


@dataclass(frozen=True)
class Program:
    """A custom forward: assignments, then the returned expression."""

    assigns: tuple[Assign, ...]
    result: Expr


def free_names(e: Expr) -> list[str]:
    """Names an expression reads, in order of first appearance (calls' function names excluded)."""
    out: list[str] = []

    def walk(x: Expr) -> None:
        if isinstance(x, Name):
            if x.id not in out:
                out.append(x.id)
        elif isinstance(x, Bin):
            walk(x.left)
            walk(x.right)
        elif isinstance(x, Neg):
            walk(x.operand)
        elif isinstance(x, Call):
            for a in x.args:
                walk(a)
        elif isinstance(x, Index):
            walk(x.value)
        elif isinstance(x, Tup):
            for a in x.items:
                walk(a)

    walk(e)
    return out


def to_source(e: Expr) -> str:
    """Readable source text of an expression (for reports)."""
    if isinstance(e, Num):
        return e.text
    if isinstance(e, Name):
        return e.id
    if isinstance(e, NoneLit):
        return "None"
    if isinstance(e, Neg):
        return f"-{_paren(e.operand)}"
    if isinstance(e, Bin):
        return f"{_paren(e.left)} {e.op} {_paren(e.right)}"
    if isinstance(e, Call):
        return f"{e.func}({', '.join(to_source(a) for a in e.args)})"
    if isinstance(e, Index):
        return f"{_paren(e.value)}[{e.index}]"
    if isinstance(e, Tup):
        inner = ", ".join(to_source(a) for a in e.items)
        return f"({inner},)" if len(e.items) == 1 else f"({inner})"
    raise TypeError(e)


def _paren(e: Expr) -> str:
    s = to_source(e)
    return f"({s})" if isinstance(e, (Bin, Neg)) else s


# ----------------------------------------------------------------------------- parsing

def parse_expression(node: YNode, what: str, allow_none: bool = False) -> Expr:
    """Parse one expression from a YAML scalar."""
    scalar = _as_text(node, what)
    tree = _ast_parse(scalar, "eval", what)
    return _Builder(scalar, allow_none, stripped=True).build(tree.body)


def parse_program(node: YNode, what: str) -> Program:
    """Parse a custom forward: one expression, or lines ``name = expr`` ending in ``return expr``.

    A YAML list of lines is accepted as well as a block string."""
    if isinstance(node, YSeq):
        if not node.items:
            raise ProblemError(node.loc, f"{what} is an empty list; give lines 'name = expr' ending in 'return expr'")
        statements = [(item, stmt, b) for item in node.items for stmt, b in _statements(item, what)]
    else:
        statements = [(node, stmt, b) for stmt, b in _statements(node, what)]
    if not statements:
        raise ProblemError(node.loc, f"{what} is empty; give an expression or lines ending in 'return expr'")
    assigns = []
    for i, (item, stmt, b) in enumerate(statements):
        last = i == len(statements) - 1
        if isinstance(stmt, ast.Assign) and not last:
            if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
                raise ProblemError(b.loc(stmt), f"{what}: assign to one plain name, as in 'h = a * b'")
            assigns.append(Assign(stmt.targets[0].id, b.build(stmt.value), b.loc(stmt)))
        elif last and isinstance(stmt, ast.Return) and stmt.value is not None:
            return Program(tuple(assigns), b.build(stmt.value))
        elif last and isinstance(stmt, ast.Expr) and not assigns:
            return Program((), b.build(stmt.value))
        elif last:
            raise ProblemError(b.loc(stmt), f"{what} must end in 'return expr'")
        elif isinstance(stmt, ast.Return):
            raise ProblemError(b.loc(stmt), f"{what}: nothing may follow the 'return' line")
        else:
            raise ProblemError(b.loc(stmt), f"{what}: {_describe_stmt(stmt)} is not allowed; "
                                            "only 'name = expr' lines and a final 'return expr'")
    raise AssertionError("unreachable")


def _statements(node: YNode, what: str) -> list:
    """The Python statements of one YAML scalar, each with the builder that locates it."""
    scalar = _as_text(node, what)
    tree = _ast_parse(scalar, "exec", what)
    b = _Builder(scalar, False, stripped=False)
    return [(stmt, b) for stmt in tree.body]


def parse_statements(node: YNode, what: str) -> tuple[Assign, ...]:
    """Lines ``name = expr`` only (a hook's ``does:``)."""
    if isinstance(node, YSeq):
        out: list[Assign] = []
        for item in node.items:
            out.extend(parse_statements(item, what))
        return tuple(out)
    scalar = _as_text(node, what)
    tree = _ast_parse(scalar, "exec", what)
    b = _Builder(scalar, True, stripped=False)
    out = []
    for stmt in tree.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            raise ProblemError(b.loc(stmt), f"{what}: only lines 'name = expr' are allowed here")
        out.append(Assign(stmt.targets[0].id, b.build(stmt.value), b.loc(stmt)))
    return tuple(out)


def _as_text(node: YNode, what: str) -> YScalar:
    if not isinstance(node, YScalar) or node.kind in ("bool", "null"):
        raise ProblemError(node.loc, f"{what} must be an expression written as a string, e.g. \"relu(x)\"")
    if len(node.text) > MAX_EXPR_CHARS:
        raise ProblemError(node.loc, f"{what} is {len(node.text)} characters long; expressions are limited to "
                                     f"{MAX_EXPR_CHARS}; split it into named lines")
    return node


def _ast_parse(scalar: YScalar, mode: str, what: str) -> ast.AST:
    text = scalar.text
    if mode == "eval":
        text = text.strip()
    try:
        tree = ast.parse(text, mode=mode)
    except SyntaxError as exc:
        line = exc.lineno or 1
        col = exc.offset or 1
        msg = exc.msg
        if msg.startswith("'return' outside function"):
            msg = "misplaced 'return'"
        raise ProblemError(scalar.loc_at(line, col), f"cannot parse {what}: {msg}") from None
    except (RecursionError, MemoryError, ValueError):
        raise ProblemError(scalar.loc, f"{what} is nested too deeply to parse; split it into named lines") from None
    _refuse_dunders(tree, _Builder(scalar, False, stripped=(mode == "eval")))
    return tree


def _refuse_dunders(tree: ast.AST, b: "_Builder") -> None:
    """Name the most suspicious thing first: any __dunder__ name or attribute anywhere."""
    for node in ast.walk(tree):
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if name and name.startswith("__"):
            raise ProblemError(b.loc(node), f"'{name}' is not allowed: dunder names are refused in problem files, "
                                            "which are data and never run code")


def _describe_stmt(stmt: ast.stmt) -> str:
    names = {ast.Import: "an import", ast.ImportFrom: "an import", ast.FunctionDef: "a function definition",
             ast.ClassDef: "a class definition", ast.For: "a loop", ast.While: "a loop", ast.If: "an if",
             ast.With: "a with block", ast.Delete: "del", ast.Global: "global", ast.AugAssign: "augmented assignment",
             ast.AnnAssign: "an annotated assignment", ast.Expr: "a bare expression before the end",
             ast.Try: "try", ast.Raise: "raise", ast.Assert: "assert", ast.Pass: "pass"}
    return names.get(type(stmt), type(stmt).__name__)


_REFUSED = {
    ast.Attribute: "attribute access",
    ast.Lambda: "a lambda",
    ast.ListComp: "a comprehension", ast.SetComp: "a comprehension", ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a generator expression",
    ast.List: "a list display", ast.Dict: "a dict display", ast.Set: "a set display",
    ast.Compare: "a comparison", ast.BoolOp: "'and'/'or'", ast.IfExp: "a conditional expression",
    ast.Await: "await", ast.Yield: "yield", ast.YieldFrom: "yield", ast.Starred: "starred arguments",
    ast.NamedExpr: "':='", ast.JoinedStr: "an f-string", ast.FormattedValue: "an f-string",
    ast.Slice: "slicing",
}


class _Builder:
    def __init__(self, scalar: YScalar, allow_none: bool, stripped: bool):
        self.scalar = scalar
        self.lines = scalar.text.splitlines() or [""]
        first = self.lines[0]
        # parse_expression strips leading blanks of an expression; keep columns true
        self.strip_offset = len(first) - len(first.lstrip()) if stripped else 0
        self.allow_none = allow_none
        self.count = 0

    def loc(self, node: ast.AST) -> Loc:
        line = getattr(node, "lineno", 1)
        col_bytes = getattr(node, "col_offset", 0)
        text_line = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        src = text_line.lstrip() if line == 1 and self.strip_offset else text_line
        col = len(src.encode("utf-8")[:col_bytes].decode("utf-8", "ignore")) + 1
        if line == 1:
            col += self.strip_offset
        return self.scalar.loc_at(line, col)

    def operator_loc(self, node: ast.BinOp, op: str) -> Loc:
        """Where the operator itself is: after the left operand, skipping blanks and ')'."""
        left = node.left
        if left.end_lineno != node.lineno or left.end_lineno != getattr(node.right, "lineno", left.end_lineno):
            return self.loc(node)
        line = self.lines[left.end_lineno - 1]
        if left.end_lineno == 1 and self.strip_offset:
            line = line.lstrip()
        raw = line.encode("utf-8")
        i = left.end_col_offset
        while i < len(raw) and raw[i:i + len(op)].decode("utf-8", "ignore") != op:
            i += 1
        if i >= len(raw):
            return self.loc(node)
        col = len(raw[:i].decode("utf-8", "ignore")) + 1 + (self.strip_offset if left.end_lineno == 1 else 0)
        return self.scalar.loc_at(left.end_lineno, col)

    def segment(self, node: ast.AST) -> str:
        line = self.lines[node.lineno - 1]
        if node.lineno == 1 and self.strip_offset:
            line = line.lstrip()
        raw = line.encode("utf-8")
        return raw[node.col_offset: node.end_col_offset].decode("utf-8")

    def build(self, node: ast.AST) -> Expr:
        self.count += 1
        if self.count > MAX_EXPR_NODES:
            raise ProblemError(self.loc(node), f"expression has more than {MAX_EXPR_NODES} parts; split it into named lines")
        loc = self.loc(node)
        if isinstance(node, ast.Constant):
            return self.constant(node, loc)
        if isinstance(node, ast.Name):
            if node.id.startswith("__"):
                raise ProblemError(loc, f"name '{node.id}' is not allowed: dunder names are refused in problem files")
            return Name(loc, node.id)
        if isinstance(node, ast.BinOp):
            op = BINARY_OPS.get(type(node.op))
            if op is None:
                sym = {ast.FloorDiv: "//", ast.Mod: "%", ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|",
                       ast.BitAnd: "&", ast.BitXor: "^"}.get(type(node.op), type(node.op).__name__)
                raise ProblemError(loc, f"operator '{sym}' is not allowed; use + - * / ** @")
            return Bin(self.operator_loc(node, op), op, self.build(node.left), self.build(node.right))
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.USub):
                inner = self.build(node.operand)
                if isinstance(inner, Num):
                    return Num(loc, -inner.value, "-" + inner.text)
                return Neg(loc, inner)
            if isinstance(node.op, ast.UAdd):
                return self.build(node.operand)
            raise ProblemError(loc, "only unary minus is allowed ('not' and '~' are not)")
        if isinstance(node, ast.Call):
            return self.call(node, loc)
        if isinstance(node, ast.Subscript):
            idx = node.slice
            if not (isinstance(idx, ast.Constant) and type(idx.value) is int):
                if isinstance(idx, ast.UnaryOp) and isinstance(idx.op, ast.USub) and isinstance(idx.operand, ast.Constant):
                    raise ProblemError(self.loc(idx), "negative indices are not allowed; index a tuple with 0, 1, ...")
                raise ProblemError(self.loc(idx), "index with an integer literal only, as in grad_input[0]")
            return Index(loc, self.build(node.value), idx.value)
        if isinstance(node, ast.Tuple):
            return Tup(loc, tuple(self.build(e) for e in node.elts))
        what = _REFUSED.get(type(node), type(node).__name__)
        raise ProblemError(loc, f"{what} is not allowed in problem expressions; use names, numbers, "
                                "+ - * / ** @, tuples, [int] and the whitelisted functions")

    def constant(self, node: ast.Constant, loc: Loc) -> Expr:
        v = node.value
        if v is None:
            if self.allow_none:
                return NoneLit(loc)
            raise ProblemError(loc, "None is only allowed inside a hook's returned tuple")
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            kind = "a string" if isinstance(v, str) else type(v).__name__
            raise ProblemError(loc, f"{kind} literal is not allowed; expressions take numbers and names")
        text = self.segment(node).replace("_", "")
        try:
            value = Fraction(text)
        except (ValueError, ZeroDivisionError):
            raise ProblemError(loc, f"cannot read number literal '{text}' exactly") from None
        return Num(loc, value, text)

    def call(self, node: ast.Call, loc: Loc) -> Expr:
        if not isinstance(node.func, ast.Name):
            if isinstance(node.func, (ast.Lambda, ast.Call, ast.Subscript)):
                self.build(node.func)  # refuses the lambda (or whatever it is) by name
            if isinstance(node.func, ast.Attribute):
                raise ProblemError(self.loc(node.func), "attribute access is not allowed; call a whitelisted function "
                                                        f"({', '.join(FUNCTIONS)}) or a child module by its name")
            raise ProblemError(loc, "only named functions can be called")
        if node.func.id.startswith("__"):
            raise ProblemError(loc, f"'{node.func.id}' is not allowed: dunder names are refused in problem files")
        if node.keywords:
            raise ProblemError(self.loc(node.keywords[0].value) if node.keywords[0].value else loc,
                               f"keyword arguments are not allowed in a call of '{node.func.id}'; "
                               f"{node.func.id}(x) takes one tensor (sum and mean reduce every element)")
        return Call(loc, node.func.id, tuple(self.build(a) for a in node.args))
