"""The expression language of problem files: a whitelist parser into :mod:`adjoint.format.syntax` records.

Text is handed to :func:`ast.parse` (which only parses, never runs anything) and the
resulting tree is copied into our own records node by node; any construct not on the
whitelist is refused with its file position (the first character of the offending node;
for an operator, the operator itself). Number literals are re-read from their source text,
so ``0.3`` is exactly 3/10.

The grammar (contract v2, "Expressions"): numbers, strings, ``True``/``False``/``None``,
``...``, names, ``+ - * / ** @``, unary minus, calls with keyword arguments (a
``torch.``/``F.``/``torch.nn.functional.``/``nn.functional.`` prefix is dropped into
``Call.prefix``), method calls and attributes (``x.sum(dim=0)``, ``x.T``), subscripts
(ints, expressions, slices, ``None``, ``...``), ``layers[0](x)`` (a ModuleList item, called
by an integer literal: ``Call(func="layers.0")``), tuples and lists, ``A if C else B`` and
``X is None`` / ``X is not None``; in a hook body, ``[E for N in SEQ]`` and ``tuple(E for N in
SEQ)``. Statements: assignment (to a name, a tuple of names, or a subscript of a name),
augmented assignment, calls as statements, ``with no_grad():`` / ``with enable_grad():``
blocks and ``return``; in a hook's ``does:``, ``if`` / ``elif`` / ``else:`` blocks.
Which functions, methods and attributes exist is the runtime's business, not the parser's.

Trees are built without recursion (a 1,000-term sum is 1,000 levels deep), and parsed on a
fresh thread, whose stack Python's own AST construction then has to itself.
"""

from __future__ import annotations

import ast
import threading
from dataclasses import dataclass
from fractions import Fraction

from adjoint.format.gaussian import Gaussian
from adjoint.format.errors import Loc, ProblemError
from adjoint.format.literals import NotANumber, NumberRefused, read_number
from adjoint.format.loader import YScalar, YSeq, YNode
from adjoint.format.syntax import Assert
from adjoint.format.syntax import (Assign, AugAssign, Attr, Bin, Bool, Call, Chain, Comp, DictLit, EllipsisLit, Expr, ExprStmt, If,
                     IfExp, IsNone, ListLit, Method, Name, Neg, NoneLit, Num, Program, Return, Slice, Stmt, Str, Subscript,
                     Tup, With, stmt_source, to_source)

__all__ = ["parse_expression", "parse_program", "parse_statements", "simple_program", "simple_assigns",
           "SimpleAssign", "to_source", "MAX_EXPR_CHARS", "MAX_EXPR_NODES"]

#: One expression (or one line of a forward) may have at most this many characters ...
MAX_EXPR_CHARS = 10_000
#: ... and one expression (or one statement) at most this many parts.
MAX_EXPR_NODES = 2_000

BINARY_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**", ast.MatMult: "@"}
#: A comparison is the Tensor method Python's operator calls (``a > b`` is ``a.__gt__(b)``, which is
#: ``a.gt(b)``); with a number on the left, Python calls the right operand's mirrored method
#: (``0 < x`` is ``x.__gt__(0)``).
COMPARISONS = {ast.Gt: ("gt", "lt", ">"), ast.GtE: ("ge", "le", ">="), ast.Lt: ("lt", "gt", "<"),
               ast.LtE: ("le", "ge", "<="), ast.Eq: ("eq", "eq", "=="), ast.NotEq: ("ne", "ne", "!=")}
_MIRRORED = {">": "<", ">=": "<=", "<": ">", "<=": ">=", "==": "==", "!=": "!="}
_REFUSED_OPS = {ast.FloorDiv: "//", ast.Mod: "%", ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|",
                ast.BitAnd: "&", ast.BitXor: "^"}

#: Call prefixes dropped into ``Call.prefix``, longest first.
PREFIXES = ("torch.nn.functional.", "nn.functional.", "torch.", "F.", "torch.autograd.", "autograd.",
            "torch.nn.Transformer.", "nn.Transformer.", "torch.nn.utils.rnn.", "nn.utils.rnn.")
#: the prefixes naming nn.Transformer, whose one static method is a function a forward calls
#: (``nn.Transformer.generate_square_subsequent_mask(3)``)
TRANSFORMER_PREFIXES = ("torch.nn.Transformer.", "nn.Transformer.")
GRAD_MODES = ("no_grad", "enable_grad")

#: Python's integers that PyTorch accepts as a scalar (int64, and uint64 for positives).
_MAX_INT_DIGITS = 400   # an integer literal's digits (Python's own limit for str(int) is 4300)

_ALLOWED_TAIL = "use names, numbers, + - * / ** @, comparisons, calls, indexing and tuples"

_REFUSED = {
    ast.Lambda: "a lambda",
    ast.ListComp: "a comprehension", ast.SetComp: "a comprehension", ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a generator expression",
    ast.Set: "a set display",
    ast.BoolOp: "'and'/'or'", ast.IfExp: "a conditional expression",
    ast.Await: "await", ast.Yield: "yield", ast.YieldFrom: "yield", ast.Starred: "starred arguments",
    ast.NamedExpr: "':='", ast.JoinedStr: "an f-string", ast.FormattedValue: "an f-string",
}

# Where a sub-expression stands decides which literals it may be.
_OPERAND = "operand"   # an operand, a callee's object, a returned value ...
_ARG = "arg"           # a call argument: strings, True/False and None allowed
_INDEX = "index"       # a subscript item: None and ... allowed
_SLICE = "slice"       # a bound of a slice: None means absent
_BINARY = "binary"     # an operand of + - * / ** @ //: an operand where True/False is allowed too (x * True)


# ----------------------------------------------------------------------------- public API

def parse_expression(node: YNode, what: str, allow_none: bool = False, hook_body: bool = False) -> Expr:
    """Parse one expression from a YAML scalar (a loss, a hook's ``returns``, a backward formula).

    ``allow_none``: ``None`` may stand anywhere (a hook's returned tuple); otherwise only as
    a call argument or an index. ``hook_body``: a hook's ``returns:``, which may hold a
    comprehension (``tuple(g * 2 for g in grad_input)``)."""
    scalar = _as_text(node, what, single=True)
    tree = _ast_parse(scalar, "eval", what)
    b = _Builder(scalar, allow_none, stripped=True)
    b.hook_body = hook_body
    return b.expression(tree.body, _OPERAND)


def parse_program(node: YNode, what: str, module_dicts: frozenset = frozenset()) -> Program:
    """Parse a custom forward: one expression (``(Return(expr),)``), or statements ending in a
    top-level ``return``. A YAML list of lines is one program, as a block string is.
    ``module_dicts``: the paths of the module's ``ModuleDict`` children (``transformer``), whose
    items a call names by attribute (``transformer.wte(idx)``, ``transformer.h[0](x)``)."""
    items = _items(node, what, "give lines 'name = expr' ending in 'return expr'")
    located: list[tuple[ast.stmt, _Builder]] = []
    for item in items:
        scalar = _as_text(item, what, single=False)
        tree = _ast_parse(scalar, "exec", what)
        b = _Builder(scalar, False, stripped=False)
        b.in_forward = True   # a forward may hold raise lines (adjoint.format.raise_stmt)
        b.module_dicts = module_dicts
        located.extend((stmt, b) for stmt in tree.body)
    if not located:
        raise ProblemError(node.loc, f"{what} is empty; give an expression or lines ending in 'return expr'")
    if len(located) == 1 and isinstance(located[0][0], ast.Expr):
        stmt, b = located[0]
        value = b.expression(stmt.value, _OPERAND)
        return (Return(value.loc, value),)
    out: list[Stmt] = []
    for i, (stmt, b) in enumerate(located):
        last = i == len(located) - 1
        if isinstance(stmt, ast.Return):
            if not last:
                raise ProblemError(b.loc(stmt), f"{what}: nothing may follow the 'return' line")
            out.append(b.statement(stmt, what, allow_return=True))
        elif last:
            if isinstance(stmt, ast.With):
                b.statement(stmt, what, allow_return=False)  # a 'return' inside it gets its own message
            raise ProblemError(b.loc(stmt), f"{what} must end in 'return expr'")
        else:
            out.append(b.statement(stmt, what, allow_return=False))
    return tuple(out)


def parse_statements(node: YNode, what: str, hook_body: bool = False) -> tuple[Stmt, ...]:
    """Statements without ``return`` (a hook's ``does:``): assignments, augmented assignments,
    calls, ``with`` blocks; ``hook_body``: a hook's, which may also hold ``if`` blocks and
    comprehensions. A YAML list of lines is accepted too."""
    out: list[Stmt] = []
    for item in _items(node, what, "give lines such as 'g = 2 * grad'"):
        scalar = _as_text(item, what, single=False)
        tree = _ast_parse(scalar, "exec", what)
        b = _Builder(scalar, True, stripped=False)
        b.hook_body = hook_body
        for stmt in tree.body:
            if isinstance(stmt, ast.Return):
                raise ProblemError(b.loc(stmt), f"{what} may not 'return'; put the returned value under returns:")
            out.append(b.statement(stmt, what, allow_return=False))
    return tuple(out)


# ----------------------------------------------------------------------------- v1 pipeline

@dataclass(frozen=True)
class SimpleAssign:
    """A v1 forward line ``name = expr``: the shape the v1 pipeline (graph, lower, torchside,
    renderers) consumes until the new runtime replaces it."""

    name: str
    value: Expr
    loc: Loc


def simple_program(prog: Program) -> tuple[tuple[SimpleAssign, ...], Expr]:
    """A program as v1's (assignments, returned expression); anything v2 added raises
    ProblemError "not supported yet" at the statement."""
    *body, last = prog
    if not isinstance(last, Return):
        raise ProblemError(last.loc, f"'{stmt_source(last)}' cannot end a forward; end it with 'return expr'")
    return simple_assigns(tuple(body)), last.value


def simple_assigns(stmts: tuple[Stmt, ...]) -> tuple[SimpleAssign, ...]:
    """Statements as v1's ``name = expr`` lines; anything else raises "not supported yet"."""
    out = []
    for s in stmts:
        if isinstance(s, Assign) and isinstance(s.target, Name):
            out.append(SimpleAssign(s.target.id, s.value, s.loc))
            continue
        raise ProblemError(s.loc, f"'{stmt_source(s)}' is not supported yet: this version runs 'name = expr' lines "
                                  "(and a final 'return expr' in a forward)")
    return tuple(out)


# ----------------------------------------------------------------------------- text and ast

def _items(node: YNode, what: str, hint: str) -> list[YNode]:
    if isinstance(node, YSeq):
        if not node.items:
            raise ProblemError(node.loc, f"{what} is an empty list; {hint}")
        return list(node.items)
    return [node]


def _as_text(node: YNode, what: str, single: bool) -> YScalar:
    """The scalar holding source text; size limits per expression, or per line of a program."""
    if not isinstance(node, YScalar) or node.kind in ("bool", "null"):
        raise ProblemError(node.loc, f"{what} must be an expression written as a string, e.g. \"relu(x)\"")
    lines = node.text.splitlines() or [""]
    if single or len(lines) == 1:
        if len(node.text) > MAX_EXPR_CHARS:
            raise ProblemError(node.loc, f"{what} is {len(node.text)} characters long; expressions are limited to "
                                         f"{MAX_EXPR_CHARS}; split it into named lines")
        return node
    for i, line in enumerate(lines, start=1):
        if len(line) > MAX_EXPR_CHARS:
            raise ProblemError(node.loc_at(i, 1), f"line {i} of {what} is {len(line)} characters long; lines are "
                                                  f"limited to {MAX_EXPR_CHARS}; split it into shorter named lines")
    return node


def _ast_parse(scalar: YScalar, mode: str, what: str) -> ast.AST:
    text = scalar.text.strip() if mode == "eval" else scalar.text
    outcome: dict = {}

    def run() -> None:  # a fresh thread: Python's AST construction gets a whole recursion budget
        try:
            outcome["tree"] = ast.parse(text, mode=mode)
        except Exception as exc:  # handed to the calling thread, below
            outcome["error"] = exc

    worker = threading.Thread(target=run, name="adjoint-parse", daemon=True)
    worker.start()
    worker.join()
    exc = outcome.get("error")
    if isinstance(exc, SyntaxError):
        msg = exc.msg
        if msg.startswith("'return' outside function"):
            msg = "misplaced 'return'"
        if mode == "exec" and scalar.folded:
            msg += ("; YAML joined its lines into one (a > block, or a scalar written over several lines without "
                    "|): write it as a | block to keep one statement per line")
        raise ProblemError(scalar.loc_at(exc.lineno or 1, exc.offset or 1), f"cannot parse {what}: {msg}")
    if isinstance(exc, (RecursionError, MemoryError)):
        raise ProblemError(scalar.loc, f"{what} is nested too deeply to parse; split it into named lines")
    if isinstance(exc, ValueError):
        raise ProblemError(scalar.loc, f"cannot parse {what}: {exc}")
    if exc is not None:
        raise exc
    tree = outcome["tree"]
    _refuse_dunders(tree, _Builder(scalar, False, stripped=(mode == "eval")))
    return tree


def _refuse_dunders(tree: ast.AST, b: "_Builder") -> None:
    """Name the most suspicious thing first: any __dunder__ name, attribute or keyword anywhere."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            name = node.id
        elif isinstance(node, ast.Attribute):
            name = node.attr
        elif isinstance(node, ast.keyword):
            name = node.arg
        else:
            continue
        if name and name.startswith("__"):
            where = node.value if isinstance(node, ast.keyword) else node
            raise ProblemError(b.loc(where), f"'{name}' is not allowed: dunder names are refused in problem files, "
                                             "which are data and never run code")


_STMT_NAMES = {ast.Import: "an import", ast.ImportFrom: "an import", ast.FunctionDef: "a function definition",
               ast.AsyncFunctionDef: "a function definition", ast.ClassDef: "a class definition",
               ast.For: "a loop", ast.AsyncFor: "a loop", ast.While: "a loop", ast.If: "an if",
               ast.Delete: "del", ast.Global: "global", ast.Nonlocal: "nonlocal",
               ast.AnnAssign: "an annotated assignment", ast.Try: "try", ast.TryStar: "try", ast.Raise: "raise",
               ast.Assert: "assert", ast.Pass: "pass", ast.Match: "match", ast.AsyncWith: "async with"}


def _indexed_path(node: ast.AST) -> str | None:
    """``layers[0]`` or ``transformer.h[1]`` as a module path (``layers.0``); None for anything
    else, and for a path without an index (``_dotted`` reads those)."""
    parts, indexed = [], False
    while True:
        if isinstance(node, ast.Name):
            return ".".join([node.id] + parts[::-1]) if indexed else None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and type(node.slice.value) is int \
                and node.slice.value >= 0:
            parts.append(str(node.slice.value))
            indexed = True
            node = node.value
        elif isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        else:
            return None


def _dotted(node: ast.AST) -> str | None:
    """``torch.nn.functional`` for a chain of attributes on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


# ----------------------------------------------------------------------------- the builder

class _Builder:
    """Copies one scalar's Python syntax into syntax records, locating every node in the file."""

    def __init__(self, scalar: YScalar, allow_none: bool, stripped: bool):
        self.scalar = scalar
        self.lines = scalar.text.splitlines() or [""]
        first = self.lines[0]
        # parse_expression strips leading blanks of an expression; keep columns true
        self.strip_offset = len(first) - len(first.lstrip()) if stripped else 0
        self.allow_none = allow_none
        self.count = 0
        self.hook_body = False   # a hook's returns: or does: (if blocks, comprehensions)

    # ------------------------------------------------------------------ locations
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

    # ------------------------------------------------------------------ statements
    def statement(self, stmt: ast.stmt, what: str, allow_return: bool) -> Stmt:
        self.count = 0  # the part limit is per statement
        loc = self.loc(stmt)
        if isinstance(stmt, ast.Assign):
            if len(stmt.targets) != 1:
                raise ProblemError(self.loc(stmt.targets[1]), f"{what}: assign one target per line, as in 'h = a * b'")
            node = stmt.targets[0]
            if isinstance(node, ast.Attribute) and node.attr == "requires_grad" \
                    and isinstance(node.value, (ast.Name, ast.Attribute)):
                # ``t.requires_grad = flag``, ``lin.weight.requires_grad = False``: the Tensor setter
                # (the interpreter says which tensors it may set)
                target = Attr(self.loc(node), self.expression(node.value, _OPERAND), "requires_grad")
                return Assign(loc, target, self.expression(stmt.value, _ARG))   # True / False
            return Assign(loc, self.target(node, what, unpack=True), self.expression(stmt.value, _OPERAND))
        if isinstance(stmt, ast.AugAssign):
            op = BINARY_OPS.get(type(stmt.op))
            if op is None:
                sym = _REFUSED_OPS.get(type(stmt.op), type(stmt.op).__name__)
                raise ProblemError(loc, f"operator '{sym}=' is not allowed; use += -= *= /= **= @=")
            return AugAssign(loc, self.target(stmt.target, what, unpack=False), op,
                             self.expression(stmt.value, _OPERAND))
        if isinstance(stmt, ast.Expr):
            if not isinstance(stmt.value, ast.Call):
                raise ProblemError(loc, f"{what}: a bare expression as a line does nothing; only a call such as "
                                        "x.mul_(2) stands alone: assign the value (h = ...) or return it")
            return ExprStmt(loc, self.expression(stmt.value, _OPERAND))
        if isinstance(stmt, ast.With):
            return self.with_block(stmt, what)
        if isinstance(stmt, ast.Assert):
            return self.assert_statement(stmt, what)
        if isinstance(stmt, ast.If) and self.hook_body:
            return self.if_block(stmt, what)
        if isinstance(stmt, ast.Raise) and getattr(self, "in_forward", False):   # a forward's raise line
            from adjoint.format.raise_stmt import parse_raise
            return parse_raise(stmt, loc, what)
        if isinstance(stmt, ast.Return):
            if not allow_return:
                raise ProblemError(loc, f"{what}: 'return' is only allowed as the last line of a forward")
            if stmt.value is None:
                raise ProblemError(loc, f"{what}: 'return' needs a value, as in 'return h'")
            if isinstance(stmt.value, ast.Tuple):   # return logits, None: a tuple output may hold None
                before, self.allow_none = self.allow_none, True
                try:
                    return Return(loc, self.expression(stmt.value, _OPERAND))
                finally:
                    self.allow_none = before
            return Return(loc, self.expression(stmt.value, _OPERAND))
        name = _STMT_NAMES.get(type(stmt), type(stmt).__name__)
        raise ProblemError(loc, f"{what}: {name} is not allowed; a forward holds assignments, calls, "
                                "'with no_grad():' blocks and a final 'return expr'")

    def assert_statement(self, stmt: ast.Assert, what: str) -> Assert:
        """``assert EXPR`` / ``assert not EXPR``, optionally with a string literal message
        (``assert EXPR, "text"``): Python's AssertionError (an answer) when it fails, whose
        ``str()`` is the message (empty without one). The message is evaluated only when the
        test fails, as Python does; a literal has no effect beyond that."""
        message = None
        if stmt.msg is not None:
            if not (isinstance(stmt.msg, ast.Constant) and isinstance(stmt.msg.value, str)):
                raise ProblemError(self.loc(stmt.msg), f"{what}: an assert message other than a string literal is not "
                                                       "modelled; write 'assert EXPR, \"text\"' or 'assert EXPR'")
            message = stmt.msg.value
        test, negated = stmt.test, False
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, negated = test.operand, True
        return Assert(self.loc(stmt), self.expression(test, _OPERAND), negated, message)

    def if_block(self, stmt: ast.If, what: str) -> If:
        """``if TEST:`` with its body and ``elif`` / ``else:`` (a hook body's): Python's statement,
        the test's truth value deciding which block runs; ``pass`` is a block with nothing in it."""
        loc = self.loc(stmt)
        test = self.expression(stmt.test, _OPERAND)

        def block(stmts):
            out = []
            for inner in stmts:
                if isinstance(inner, ast.Return):
                    raise ProblemError(self.loc(inner), f"{what}: 'return' inside an if block is not allowed; assign "
                                                        "the value to a name in each block and return that name")
                if not isinstance(inner, ast.Pass):
                    out.append(self.statement(inner, what, allow_return=False))
            return tuple(out)
        return If(loc, test, block(stmt.body), block(stmt.orelse))

    def with_block(self, stmt: ast.With, what: str) -> With:
        loc = self.loc(stmt)
        if len(stmt.items) != 1:
            raise ProblemError(self.loc(stmt.items[1].context_expr), f"{what}: one context manager per with block; "
                                                                     "nest them instead")
        item = stmt.items[0]
        ctx = item.context_expr
        mode = None
        switch = False
        name = _dotted(ctx.func) if isinstance(ctx, ast.Call) else None
        name = name.removeprefix("torch.") if name else None
        if name in GRAD_MODES and not ctx.args and not ctx.keywords:
            mode = name
        elif name == "inference_mode" and not ctx.args and not ctx.keywords:
            # torch.inference_mode(): grad mode off, and what is made inside is an inference tensor
            # (adjoint.engine.inference); a forward's block with nothing nested in it
            if not getattr(self, "in_forward", False):
                raise ProblemError(self.loc(ctx), f"{what}: 'with inference_mode():' is modelled in a forward only")
            nested = next((x for x in stmt.body for n in ast.walk(x) if isinstance(n, (ast.With, ast.If))), None)
            if nested is not None:
                raise ProblemError(self.loc(nested), f"{what}: a block inside 'with inference_mode():' is not "
                                                     "modelled; write the inference_mode block on its own")
            mode = "inference_mode"
        elif name == "set_grad_enabled":
            # torch.set_grad_enabled(mode) sets grad mode when made and restores it on exit: inside
            # the block it is no_grad() (False) or enable_grad() (True); a bool literal only
            flags = list(ctx.args) + [k.value for k in ctx.keywords if k.arg == "mode"]
            if not (len(flags) == 1 == len(ctx.args) + len(ctx.keywords) and isinstance(flags[0], ast.Constant)
                    and isinstance(flags[0].value, bool)):
                raise ProblemError(self.loc(ctx), f"{what}: set_grad_enabled takes one bool literal here, "
                                                  "'with set_grad_enabled(False):' or 'with set_grad_enabled(True):' "
                                                  "(a mode computed at run time is not modelled)")
            mode, switch = ("enable_grad" if flags[0].value else "no_grad"), True
        if mode is None:
            raise ProblemError(self.loc(ctx), f"{what}: only 'with no_grad():', 'with enable_grad():', "
                                              "'with set_grad_enabled(BOOL):' and 'with inference_mode():' blocks "
                                              "are allowed (torch. prefix optional)")
        if item.optional_vars is not None:
            written = With(loc, mode, (), switch).manager
            raise ProblemError(self.loc(item.optional_vars), f"{what}: 'with {written} as ...' binds nothing "
                                                             f"useful; write 'with {written}:'")
        body = []
        for inner in stmt.body:
            if isinstance(inner, ast.Return):
                raise ProblemError(self.loc(inner), f"{what}: 'return' inside a with block is not allowed; assign the "
                                                    "value and return it after the block")
            body.append(self.statement(inner, what, allow_return=False))
        return With(loc, mode, tuple(body), switch)

    def target(self, node: ast.AST, what: str, unpack: bool) -> Expr:
        """An assignment target: a name, a subscript of a name, or (``unpack``) a tuple of targets."""
        if isinstance(node, ast.Name):
            return Name(self.loc(node), node.id)
        if isinstance(node, ast.Subscript):
            if isinstance(node.value, ast.Name):
                self.count += 1
                return Subscript(self.loc(node), Name(self.loc(node.value), node.value.id), self.index_items(node.slice))
            if not self.hook_body:
                raise ProblemError(self.loc(node), f"{what}: assign into a subscript of a name, as in 'x[0] = v'")
            # a hook body's ``grad[0][:, 0] = v``, ``grad_input[0][1] = v``, ``W.grad[0] = v``: the write
            # goes into the tensor the expression evaluates to (a view of what it indexes, an argument)
            return Subscript(self.loc(node), self.expression(node.value, _OPERAND), self.index_items(node.slice))
        if isinstance(node, (ast.Tuple, ast.List)) and unpack:
            if not node.elts:
                raise ProblemError(self.loc(node), f"{what}: cannot assign to an empty tuple")
            return Tup(self.loc(node), tuple(self.target(e, what, unpack=True) for e in node.elts))
        if isinstance(node, ast.Starred):
            raise ProblemError(self.loc(node), f"{what}: starred assignment is not allowed; unpack into as many "
                                               "names as there are values")
        if isinstance(node, ast.Attribute) and node.attr == "grad" and isinstance(node.value, ast.Name):
            # ``t.grad = v`` (a hook body setting a leaf's .grad; the interpreter says where it may stand)
            return Attr(self.loc(node), Name(self.loc(node.value), node.value.id), "grad")
        if isinstance(node, ast.Attribute) and node.attr == "grad" and isinstance(node.value, ast.Attribute):
            # ``lin.weight.grad = v``: a parameter by its path (the interpreter reads it as an expression)
            self.count += 1
            return Attr(self.loc(node), self.expression(node.value, _OPERAND), "grad")
        if isinstance(node, ast.Attribute) and getattr(self, "in_forward", False) \
                and isinstance(node.value, ast.Name) and node.value.id == "self":
            from adjoint.format.module_attrs import self_attribute_target
            return self_attribute_target(self, node, what, unpack)
        if isinstance(node, ast.Attribute):
            raise ProblemError(self.loc(node), f"{what}: assigning to an attribute is not allowed; assign to a name, "
                                               "into a subscript (x[0] = v), a leaf's .grad (t.grad = v) or a tensor's "
                                               ".requires_grad (t.requires_grad = False)")
        kind = "a tuple" if isinstance(node, (ast.Tuple, ast.List)) else "this"
        raise ProblemError(self.loc(node), f"{what}: cannot assign to {kind} here; assign to a name or a subscript")

    def index_items(self, node: ast.AST) -> tuple[Expr, ...]:
        elts = node.elts if isinstance(node, ast.Tuple) else [node]
        return tuple(self.expression(e, _INDEX) for e in elts)

    # ------------------------------------------------------------------ expressions
    def expression(self, root: ast.AST, ctx: str) -> Expr:
        """Build an expression without recursion: a work stack of nodes to visit and of
        records to assemble from the results of their children (in source order)."""
        results: list = []
        work: list = [(root, ctx, None)]
        while work:
            node, ctx, assemble = work.pop()
            if assemble is not None:
                n = assemble[0]
                parts = results[len(results) - n:] if n else []
                del results[len(results) - n:]
                results.append(assemble[1](parts))
                continue
            plan = self.visit(node, ctx)
            if not isinstance(plan, tuple):
                results.append(plan)
                continue
            children, make = plan
            work.append((node, ctx, (len(children), make)))
            for child, child_ctx in reversed(children):
                if child is None:
                    work.append((None, None, (0, lambda _parts: None)))
                else:
                    work.append((child, child_ctx, None))
        return results[0]

    def visit(self, node: ast.AST, ctx: str):
        """One node: a finished record, or (children with their contexts, assemble(parts) -> record)."""
        self.count += 1
        loc = self.loc(node)
        if self.count > MAX_EXPR_NODES:
            raise ProblemError(loc, f"expression has more than {MAX_EXPR_NODES} parts; split it into named lines")
        if isinstance(node, ast.Constant):
            return self.constant(node, loc, ctx)
        if isinstance(node, ast.Name):
            return Name(loc, node.id)
        if isinstance(node, ast.BinOp):
            # //: of Python numbers only (a head size C // n_head); the interpreter refuses it on a tensor
            op = BINARY_OPS.get(type(node.op)) or ("//" if isinstance(node.op, ast.FloorDiv) else None)
            if op is None:
                sym = _REFUSED_OPS.get(type(node.op), type(node.op).__name__)
                raise ProblemError(loc, f"operator '{sym}' is not allowed; use + - * / ** @")
            oloc = self.operator_loc(node, op)
            return [(node.left, _BINARY), (node.right, _BINARY)], lambda p: Bin(oloc, op, p[0], p[1])
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Is, ast.IsNot)):
            right = node.comparators[0]
            if not (isinstance(right, ast.Constant) and right.value is None):
                raise ProblemError(self.loc(right), "'is' and 'is not' are allowed with None only, as in "
                                                    "'g is not None'")
            negated = isinstance(node.ops[0], ast.IsNot)
            return [(node.left, _ARG)], lambda p: IsNone(loc, p[0], negated)
        if isinstance(node, ast.Compare):
            return self.comparison(node, loc)
        if isinstance(node, ast.IfExp):   # Python's order: the test first, then the one branch it chooses
            branch = ctx if ctx in (_ARG, _BINARY) else _OPERAND
            return ([(node.test, _OPERAND), (node.body, branch), (node.orelse, branch)],
                    lambda p: IfExp(loc, p[0], p[1], p[2]))
        if isinstance(node, ast.ListComp):
            return self.comprehension(node, loc, "list")
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.USub):
                return [(node.operand, _OPERAND)], lambda p: self.negate(p[0], loc, node)
            if isinstance(node.op, ast.UAdd):
                return [(node.operand, ctx)], lambda p: p[0]
            if isinstance(node.op, ast.Invert):   # ~m: Tensor.__invert__, which is bitwise_not
                return [(node.operand, _OPERAND)], lambda p: Method(loc, p[0], "bitwise_not", (), operator="~")
            raise ProblemError(loc, "only unary minus and ~ are allowed ('not' is not)")
        if isinstance(node, ast.Call):
            return self.call(node, loc)
        if isinstance(node, ast.Attribute):
            self.check_attribute(node)
            return [(node.value, _OPERAND)], lambda p: Attr(loc, p[0], node.attr)
        if isinstance(node, ast.Subscript):
            elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return ([(node.value, _OPERAND)] + [(e, _INDEX) for e in elts],
                    lambda p: Subscript(loc, p[0], tuple(p[1:])))
        if isinstance(node, ast.Slice):
            if ctx != _INDEX:
                raise ProblemError(loc, "a slice is only allowed inside [...]")
            parts = [node.lower, node.upper, node.step]
            return [(x, _SLICE) for x in parts], lambda p: Slice(loc, *p)
        if isinstance(node, (ast.Tuple, ast.List)):
            inner = _ARG if ctx == _ARG else _OPERAND
            record = Tup if isinstance(node, ast.Tuple) else ListLit
            return [(e, inner) for e in node.elts], lambda p: record(loc, tuple(p))
        if isinstance(node, ast.Dict):
            keys = []
            for k in node.keys:
                if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                    raise ProblemError(self.loc(k) if k is not None else loc,
                                       "a dict may only have string keys, as in {\"bias\": 2 * kwargs[\"bias\"]}")
                keys.append(k.value)
            return [(v, _ARG) for v in node.values], lambda p: DictLit(loc, tuple(zip(keys, p)))
        what = _REFUSED.get(type(node), type(node).__name__)
        raise ProblemError(loc, f"{what} is not allowed in problem expressions; {_ALLOWED_TAIL}")

    def comprehension(self, node, loc: Loc, kind: str):
        """``[ELT for NAME in SEQ]`` / ``tuple(ELT for NAME in SEQ)`` in a hook body: one ``for``
        over one name, no ``if`` clause."""
        if not self.hook_body:
            raise ProblemError(loc, "a comprehension is only allowed in a hook's returns: and does:; in a forward, "
                                    "name each item (torch.stack([f(x[0]), f(x[1])]))")
        if len(node.generators) != 1:
            raise ProblemError(loc, "a comprehension takes one 'for' here; nest the lines instead")
        gen = node.generators[0]
        if gen.ifs or gen.is_async:
            raise ProblemError(self.loc(gen.ifs[0]) if gen.ifs else loc, "a comprehension's 'if' clause is not "
                                                                          "allowed; choose with 'A if COND else B'")
        if not isinstance(gen.target, ast.Name):
            raise ProblemError(self.loc(gen.target), "a comprehension binds one name here ('for g in grad_input')")
        name = gen.target.id
        return [(gen.iter, _OPERAND), (node.elt, _OPERAND)], lambda p: Comp(loc, p[1], name, p[0], kind)

    def comparison(self, node: ast.Compare, loc: Loc):
        """``a > b`` as the Tensor method Python calls: ``a.gt(b)``, or ``b.lt(a)`` when ``a`` is a
        number literal. A chain (``0 < x < 1``) is Python's ``(0 < x) and (x < 1)`` (a ``Chain``:
        a tensor's truth value decides, PyTorch raising for more than one element); ``is`` /
        ``in`` are not tensor operations."""
        ops = []
        for op in node.ops:
            names = COMPARISONS.get(type(op))
            if names is None:
                raise ProblemError(loc, "only the comparisons > >= < <= == != are allowed ('is' and 'in' are not)")
            ops.append(names)

        def link(left, right, names):
            method, mirrored, text = names
            if isinstance(left, Num) and isinstance(right, Num):
                raise ProblemError(loc, f"'{to_source(left)} {text} {to_source(right)}' compares two numbers (a "
                                        "Python bool, not a tensor); compare a tensor")
            if isinstance(left, Num):   # Python calls right.__gt__(left) for left < right
                return Method(loc, right, mirrored, (left,), operator=_MIRRORED[text])
            return Method(loc, left, method, (right,), operator=text)

        def make(p):
            links = tuple(link(p[i], p[i + 1], names) for i, names in enumerate(ops))
            if len(links) == 1:
                return links[0]
            return Chain(loc, tuple(p), tuple(names[2] for names in ops), links)
        return [(x, _OPERAND) for x in [node.left] + list(node.comparators)], make

    def negate(self, inner: Expr, loc: Loc, node: ast.UnaryOp) -> Expr:
        if isinstance(inner, Num):
            value = -inner.value   # a Python int beyond int64 stays one: PyTorch's error where it is converted
            num = Num(loc, value, "-" + inner.text)
            if isinstance(value, Fraction) and not value and not num.is_int \
                    and (len(num.text) - len(num.text.lstrip("-"))) % 2:
                raise ProblemError(loc, f"'{num.text}' is Python's negative zero, which an expression's exact numbers "
                                        "do not hold (a tensor literal does: inputs:, targets:, params:); write 0.0, "
                                        "or the -0.0 in a literal")
            return num
        if isinstance(inner, (Str, Bool, NoneLit, EllipsisLit)):
            raise ProblemError(loc, f"unary minus needs a number or a tensor, not {to_source(inner)}")
        return Neg(loc, inner)

    def constant(self, node: ast.Constant, loc: Loc, ctx: str) -> Expr | None:
        v = node.value
        if v is None:
            if ctx == _SLICE:
                return None  # x[None:2] is x[:2]
            if self.allow_none or ctx in (_ARG, _INDEX):
                return NoneLit(loc)
            raise ProblemError(loc, "None is only allowed as a call argument, an index (x[None]) or inside a hook's "
                                    "returned tuple")
        if v is Ellipsis:
            if ctx != _INDEX:
                raise ProblemError(loc, "'...' is only allowed as an index, as in x[..., 0]")
            return EllipsisLit(loc)
        if isinstance(v, bool):
            if ctx not in (_ARG, _BINARY):
                raise ProblemError(loc, f"{v} is only allowed as a call argument, as in keepdim={v}, or an operand "
                                        f"of an arithmetic operator (x * {v})")
            return Bool(loc, v)
        if isinstance(v, str):
            if ctx not in (_ARG, _INDEX):
                raise ProblemError(loc, "a string literal is not allowed here; strings are call arguments "
                                        "(reduction=\"sum\"), dict keys and keys of a dict (kwargs[\"bias\"])")
            return Str(loc, v)
        if isinstance(v, complex):   # an imaginary literal (2j, 0.5j): a Gaussian rational (1 + 2j folds as Python)
            text = self.segment(node).replace("_", "")
            try:
                im = read_number(text[:-1], floor="normal")
            except (NumberRefused, NotANumber) as exc:
                raise ProblemError(loc, f"number literal {exc}" if isinstance(exc, NotANumber) else str(exc)) from None
            return Num(loc, Gaussian(Fraction(0), im), text)
        if not isinstance(v, (int, float)):
            raise ProblemError(loc, f"a {type(v).__name__} literal is not allowed; expressions take numbers and names")
        return self.number(node, loc)

    def number(self, node: ast.Constant, loc: Loc) -> Num:
        text = self.segment(node).replace("_", "")
        if isinstance(node.value, int):
            if len(text) > _MAX_INT_DIGITS:
                raise ProblemError(loc, f"the integer {_short(text)} has more than {_MAX_INT_DIGITS} digits; write "
                                        "a smaller number")
            value = Fraction(node.value)   # beyond int64: PyTorch's error where it converts it (adjoint.engine.bigints)
            return Num(loc, value, str(node.value))  # 0x10 is written 16: Num.is_int reads the text
        try:
            return Num(loc, read_number(text, floor="normal"), text)
        except (NumberRefused, NotANumber) as exc:
            raise ProblemError(loc, f"number literal {exc}" if isinstance(exc, NotANumber) else str(exc)) from None

    def attribute_loc(self, node: ast.Attribute) -> Loc:
        """Where the attribute's name is (``x._base``: at ``_base``)."""
        line = self.lines[node.end_lineno - 1] if 0 < node.end_lineno <= len(self.lines) else ""
        if node.end_lineno == 1 and self.strip_offset:
            line = line.lstrip()
        raw = line.encode("utf-8")
        start = node.end_col_offset - len(node.attr.encode("utf-8"))
        col = len(raw[:start].decode("utf-8", "ignore")) + 1 + (self.strip_offset if node.end_lineno == 1 else 0)
        return self.scalar.loc_at(node.end_lineno, col)

    def check_attribute(self, node: ast.Attribute) -> None:
        if node.attr.startswith("_") and node.attr != "_version":   # t._version: the version counter, read only
            raise ProblemError(self.attribute_loc(node), f"attribute '{node.attr}' is not allowed: names starting with "
                                                         "'_' are private to PyTorch; use public tensor methods and "
                                                         "attributes")

    def call(self, node: ast.Call, loc: Loc):
        func = node.func
        for kw in node.keywords:
            if kw.arg is None:
                raise ProblemError(self.loc(kw.value), "'**' unpacking is not allowed in a call; write the keyword "
                                                       "arguments out, as in sum(x, dim=0)")
        names = [kw.arg for kw in node.keywords]
        children = [(a, _ARG) for a in node.args] + [(kw.value, _ARG) for kw in node.keywords]
        nargs = len(node.args)

        def split(parts):
            return tuple(parts[:nargs]), tuple(zip(names, parts[nargs:]))

        if isinstance(func, ast.Name) and func.id == "tuple" and len(node.args) == 1 and not node.keywords \
                and isinstance(node.args[0], ast.GeneratorExp):
            return self.comprehension(node.args[0], loc, "tuple")
        if isinstance(func, ast.Name):
            def make_call(p):
                args, kwargs = split(p)
                return Call(loc, func.id, args, kwargs)
            return children, make_call
        if isinstance(func, ast.Attribute):
            self.check_attribute(func)
            dotted = _dotted(func)
            prefix = next((pre for pre in PREFIXES if dotted and dotted.startswith(pre)
                           and "." not in dotted[len(pre):]), None)
            if prefix is not None:
                def make_prefixed(p):
                    args, kwargs = split(p)
                    return Call(loc, func.attr, args, kwargs, prefix)
                return children, make_prefixed
            holder = dotted.rsplit(".", 1)[0] if dotted else _indexed_path(func.value)
            if holder is not None and holder in getattr(self, "module_dicts", ()):
                path = f"{holder}.{func.attr}"

                def make_item_call(p):   # transformer.wte(idx), layers[0].lin(x): a ModuleDict's item, by its path
                    args, kwargs = split(p)
                    return Call(loc, path, args, kwargs)
                return children, make_item_call

            def make_method(p):
                args, kwargs = split(p[1:])
                return Method(loc, p[0], func.attr, args, kwargs)
            return [(func.value, _OPERAND)] + children, make_method
        if isinstance(func, ast.Subscript):
            path = self.module_list_path(func)

            def make_item(p):
                args, kwargs = split(p)
                return Call(loc, path, args, kwargs)
            return children, make_item
        if isinstance(func, (ast.Lambda, ast.Call)):
            self.expression(func, _OPERAND)  # refuses the lambda (or whatever it is) by name
        raise ProblemError(loc, "only named functions, methods and ModuleList items (layers[0](x)) can be called")

    def module_list_path(self, node: ast.Subscript) -> str:
        """``layers[0]`` (or ``blocks[1][0]``) called: the item's module path ``layers.0``."""
        indices = []
        while isinstance(node, ast.Subscript):
            idx = node.slice
            if isinstance(idx, ast.UnaryOp) and isinstance(idx.op, ast.USub) and isinstance(idx.operand, ast.Constant):
                raise ProblemError(self.loc(idx), "call a ModuleList item by a non-negative integer literal, as in "
                                                  "layers[0](x)")
            if not (isinstance(idx, ast.Constant) and type(idx.value) is int):
                raise ProblemError(self.loc(idx), "call a ModuleList item by an integer literal, as in layers[0](x)")
            indices.append(str(idx.value))
            node = node.value
        dotted = _dotted(node) if isinstance(node, ast.Attribute) else None
        if dotted and dotted.rsplit(".", 1)[0] in getattr(self, "module_dicts", ()):   # transformer.h[0]
            return ".".join([dotted] + list(reversed(indices)))
        if not isinstance(node, ast.Name):
            raise ProblemError(self.loc(node), "only named functions, methods and ModuleList items (layers[0](x)) can "
                                               "be called")
        return ".".join([node.id] + list(reversed(indices)))


def _short(text: str) -> str:
    return text if len(text) <= 24 else text[:20] + "..."
