"""The expression and statement parser (adjoint/format/expr.py): what it accepts, into which records,
where it locates them, what it refuses and with which message, and its size limits.

Expected records and messages are written by hand from the grammar (contract v2,
"Expressions") and Python's own syntax; columns are counted by hand in the YAML shown."""

import dataclasses
import sys
from fractions import Fraction

import pytest

from adjoint.format import syntax as S
from adjoint.format.errors import ProblemError
from adjoint.format.expr import (MAX_EXPR_NODES, parse_expression, parse_program, parse_statements, simple_assigns,
                          simple_program)
from adjoint.format.loader import parse_yaml_text


def node(src: str):
    """``src`` as the single-quoted scalar of ``e: '...'``: its text starts at line 1, column 5."""
    return parse_yaml_text("e: '" + src.replace("'", "''") + "'\n", "f.yaml").get("e")


def block(src: str):
    """``src`` as a literal block scalar under ``e: |``: line k of src is file line k + 1, column 3."""
    return parse_yaml_text("e: |\n" + "".join(f"  {line}\n" for line in src.split("\n")), "f.yaml").get("e")


def dump(x):
    """A record as nested tuples (class name, fields but loc, and but a Method's operator when no
    operator made it): what the parser built."""
    if dataclasses.is_dataclass(x):
        return (type(x).__name__,) + tuple(dump(getattr(x, f.name)) for f in dataclasses.fields(x)
                                           if f.name != "loc" and not (f.name == "operator" and not x.operator))
    if isinstance(x, tuple):
        return tuple(dump(i) for i in x)
    if isinstance(x, Fraction):
        return str(x)
    return x


def refused(fn, src_node, *args, **kwargs) -> str:
    with pytest.raises(ProblemError) as info:
        fn(src_node, "the forward", *args, **kwargs)
    return info.value.line()


X = ("Name", "x")
NUM = {n: ("Num", str(n), str(n)) for n in range(-2, 4)}

# ----------------------------------------------------------------------------- expressions

ACCEPTED = [
    ("x + 1", "x + 1", ("Bin", "+", X, NUM[1])),
    ("2 ** x @ W / 3", "((2 ** x) @ W) / 3",
     ("Bin", "/", ("Bin", "@", ("Bin", "**", NUM[2], X), ("Name", "W")), NUM[3])),
    ("-2", "-2", NUM[-2]),
    ("-x", "-x", ("Neg", X)),
    ("+x", "x", X),
    ("0.3", "0.3", ("Num", "3/10", "0.3")),
    ("1_000", "1000", ("Num", "1000", "1000")),
    ("0x10", "16", ("Num", "16", "16")),
    ("2.5e-3", "2.5e-3", ("Num", "1/400", "2.5e-3")),
    ("softmax(x, dim=-1)", "softmax(x, dim=-1)", ("Call", "softmax", (X,), (("dim", NUM[-1]),), "")),
    ("torch.relu(x)", "torch.relu(x)", ("Call", "relu", (X,), (), "torch.")),
    ("F.cross_entropy(y, t, reduction='sum')", "F.cross_entropy(y, t, reduction='sum')",
     ("Call", "cross_entropy", (("Name", "y"), ("Name", "t")), (("reduction", ("Str", "sum")),), "F.")),
    ("torch.nn.functional.gelu(x, approximate='tanh')", "torch.nn.functional.gelu(x, approximate='tanh')",
     ("Call", "gelu", (X,), (("approximate", ("Str", "tanh")),), "torch.nn.functional.")),
    ("nn.functional.silu(x)", "nn.functional.silu(x)", ("Call", "silu", (X,), (), "nn.functional.")),
    ("x.view(2, -1)", "x.view(2, -1)", ("Method", X, "view", (NUM[2], NUM[-1]), ())),
    ("x.sum(dim=0, keepdim=True)", "x.sum(dim=0, keepdim=True)",
     ("Method", X, "sum", (), (("dim", NUM[0]), ("keepdim", ("Bool", True))))),
    ("(x + 1).clone().detach()", "(x + 1).clone().detach()",
     ("Method", ("Method", ("Bin", "+", X, NUM[1]), "clone", (), ()), "detach", (), ())),
    ("x.T", "x.T", ("Attr", X, "T")),
    ("torch.linalg.vector_norm(x)", "torch.linalg.vector_norm(x)",
     ("Method", ("Attr", ("Name", "torch"), "linalg"), "vector_norm", (X,), ())),
    ("x[0]", "x[0]", ("Subscript", X, (NUM[0],))),
    ("x[:, 1:3]", "x[:, 1:3]", ("Subscript", X, (("Slice", None, None, None), ("Slice", NUM[1], NUM[3], None)))),
    ("x[..., -1]", "x[..., -1]", ("Subscript", X, (("EllipsisLit",), NUM[-1]))),
    ("x[None, ::2]", "x[None, ::2]", ("Subscript", X, (("NoneLit",), ("Slice", None, None, NUM[2])))),
    ("x[None:2]", "x[:2]", ("Subscript", X, (("Slice", None, NUM[2], None),))),
    ("x[i + 1]", "x[i + 1]", ("Subscript", X, (("Bin", "+", ("Name", "i"), NUM[1]),))),
    ("grad_input[0]", "grad_input[0]", ("Subscript", ("Name", "grad_input"), (NUM[0],))),
    ("layers[0](x)", "layers.0(x)", ("Call", "layers.0", (X,), (), "")),
    ("blocks[1][0](x, scale=2)", "blocks.1.0(x, scale=2)", ("Call", "blocks.1.0", (X,), (("scale", NUM[2]),), "")),
    ("enc.block(x)", "enc.block(x)", ("Method", ("Name", "enc"), "block", (X,), ())),
    ("cat((a, b), dim=1)", "cat((a, b), dim=1)",
     ("Call", "cat", (("Tup", (("Name", "a"), ("Name", "b"))),), (("dim", NUM[1]),), "")),
    ("cat([a, b])", "cat([a, b])", ("Call", "cat", (("ListLit", (("Name", "a"), ("Name", "b"))),), (), "")),
    ("x.permute(0, 2, 1)", "x.permute(0, 2, 1)", ("Method", X, "permute", (NUM[0], NUM[2], NUM[1]), ())),
    ("f(x, None)", "f(x, None)", ("Call", "f", (X, ("NoneLit",)), (), "")),
    ("(a, b)", "(a, b)", ("Tup", (("Name", "a"), ("Name", "b")))),
    ("(a,)", "(a,)", ("Tup", (("Name", "a"),))),
    ("x.mul_(2)", "x.mul_(2)", ("Method", X, "mul_", (NUM[2],), ())),
]


@pytest.mark.parametrize("src,source,record", ACCEPTED, ids=[a[0] for a in ACCEPTED])
def test_accepted_expression(src, source, record):
    e = parse_expression(node(src), "the forward")
    assert dump(e) == record
    assert S.to_source(e) == source


def test_num_is_int_follows_python():
    ints = [parse_expression(node(s), "e") for s in ("2", "-1", "0x1e", "1_000")]
    floats = [parse_expression(node(s), "e") for s in ("2.0", "1e3", "-1.5")]
    assert all(n.is_int for n in ints) and not any(n.is_int for n in floats)
    assert [n.value for n in ints] == [2, -1, 30, 1000]


def test_every_node_is_located_at_its_first_character():
    e = parse_expression(node("relu(x) + w.sum(dim=0)"), "e")
    #                          5678901234567890123456  (columns)
    assert (e.loc.line, e.loc.col) == (1, 13)                       # the operator
    assert e.left.loc.col == 5 and e.left.args[0].loc.col == 10     # relu(, x
    m = e.right
    assert m.loc.col == 15 and m.obj.loc.col == 15                  # w.sum( starts at w
    assert m.kwargs[0][1].loc.col == 25                             # 0


def test_stripped_expression_keeps_columns():
    e = parse_expression(node("   x * y"), "e")
    assert (e.loc.col, e.left.loc.col, e.right.loc.col) == (10, 8, 12)


def test_block_scalar_statements_are_located_per_line():
    prog = parse_program(block("h = x * 2\nwith no_grad():\n    g = h + 1\nreturn g"), "f")
    assert [(s.loc.line, s.loc.col) for s in prog] == [(2, 3), (3, 3), (5, 3)]
    inner = prog[1].body[0]
    assert (inner.loc.line, inner.loc.col) == (4, 7)
    assert (inner.value.loc.line, inner.value.loc.col) == (4, 13)   # the '+'


REFUSED = [
    ("lambda: x", "1:5: a lambda is not allowed in problem expressions; use names, numbers, + - * / ** @, comparisons, calls, "
                  "indexing and tuples"),
    ("(lambda: x)()", "1:6: a lambda is not allowed in problem expressions; use names, numbers, + - * / ** @, comparisons, calls, "
                      "indexing and tuples"),
    ("[v for v in x]", "1:5: " + "a comprehension is only allowed in a hook's returns: and does:; in a forward, name each item (torch.stack([f(x[0]), f(x[1])]))"),
    ("x < 1 < 2", "1:5: '1 < 2' compares two numbers (a Python bool, not a tensor); compare a tensor"),
    ("x is y", "1:10: 'is' and 'is not' are allowed with None only, as in 'g is not None'"),
    ("x in y", "1:5: only the comparisons > >= < <= == != are allowed ('is' and 'in' are not)"),
    ("1 < 2", "1:5: '1 < 2' compares two numbers (a Python bool, not a tensor); compare a tensor"),
    ("{a: 1}", "1:6: a dict may only have string keys, as in {\"bias\": 2 * kwargs[\"bias\"]}"),
    ("f(*a)", "1:7: starred arguments is not allowed in problem expressions; use names, numbers, + - * / ** @, comparisons, calls, "
              "indexing and tuples"),
    ("(y := x)", "1:6: ':=' is not allowed in problem expressions; use names, numbers, + - * / ** @, comparisons, calls, indexing "
                 "and tuples"),
    ('f"{x}"', "1:5: an f-string is not allowed in problem expressions; use names, numbers, + - * / ** @, comparisons, calls, "
               "indexing and tuples"),
    ("x % 2", "1:5: operator '%' is not allowed; use + - * / ** @"),
    ("x & y", "1:5: operator '&' is not allowed; use + - * / ** @"),
    ("not x", "1:5: only unary minus and ~ are allowed ('not' is not)"),
    ("__import__('os')", "1:5: '__import__' is not allowed: dunder names are refused in problem files, which are data "
                         "and never run code"),
    ("x.__class__", "1:5: '__class__' is not allowed: dunder names are refused in problem files, which are data and "
                    "never run code"),
    ("f(__x=1)", "1:11: '__x' is not allowed: dunder names are refused in problem files, which are data and never run "
                 "code"),
    ("x._base", "1:7: attribute '_base' is not allowed: names starting with '_' are private to PyTorch; use public "
                "tensor methods and attributes"),
    ("x * 'two'", "1:9: a string literal is not allowed here; strings are call arguments (reduction=\"sum\"), dict keys and keys of a dict (kwargs[\"bias\"])"),
    ("(x, True)", "1:9: True is only allowed as a call argument, as in keepdim=True, or an operand of an arithmetic "
                  "operator (x * True)"),
    ("None", "1:5: None is only allowed as a call argument, an index (x[None]) or inside a hook's returned tuple"),
    ("x * ...", "1:9: '...' is only allowed as an index, as in x[..., 0]"),
    ("sum(x, **opts)", "1:14: '**' unpacking is not allowed in a call; write the keyword arguments out, as in "
                       "sum(x, dim=0)"),
    ("layers[-1](x)", "1:12: call a ModuleList item by a non-negative integer literal, as in layers[0](x)"),
    ("layers[i](x)", "1:12: call a ModuleList item by an integer literal, as in layers[0](x)"),
    ("f(x)(y)", "1:5: only named functions, methods and ModuleList items (layers[0](x)) can be called"),
    ("x * 1e999999999", "1:9: exponent 999999999 is beyond what a float64 can hold (the largest is about 1.8e308)"),
    ("x * 1e-100000", "1:9: exponent -100000 is below what a float64 can hold: it would round to 0 (the smallest "
                      "float64 is about 4.9e-324)"),
    ("x * 1e-310", "1:9: '1e-310' is below float64's smallest normal number (about 2.2e-308): Python holds it as a "
                   "denormal, which PyTorch flushes or rounds; write a larger number"),
    ("x * " + "9" * 401, "1:9: the integer " + "9" * 20 + "... has more than 400 digits; write a smaller number"),
    ("x * * 2", "1:9: cannot parse the forward: invalid syntax"),
]


@pytest.mark.parametrize("src,message", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_expression(src, message):
    assert refused(parse_expression, node(src)) == f"f.yaml:{message}"


def test_a_chained_comparison_is_one_chain_of_lone_comparisons():
    # Python's (0 < x) and (x < y + 1): each link read as a lone comparison is (0 < x is x.gt(0)),
    # each operand once (docs/semantics.md, "Chained comparisons")
    e = parse_expression(node("0 < x < y + 1"), "e")
    assert isinstance(e, S.Chain) and e.ops == ("<", "<") and S.to_source(e) == "0 < x < (y + 1)"
    assert [S.to_source(link) for link in e.links] == ["x.gt(0)", "x.lt(y + 1)"]
    assert e.links[1].obj is e.operands[1] and e.links[1].args[0] is e.operands[2]
    assert S.children(e) == e.operands


def test_integer_literals_beyond_int64_are_python_ints():
    # PyTorch's OverflowError comes where the int is converted, when the expression runs
    # (adjoint.engine.bigints; tests/data/regressions/python_int_beyond_int64_is_an_error.yaml)
    assert parse_expression(node("x * 18446744073709551616"), "e").right.value == 2 ** 64
    assert parse_expression(node("x - -9223372036854775809"), "e").right.value == -2 ** 63 - 1


def test_integer_literals_torch_takes_are_accepted():
    # torch.ones(1) * 2**63 and + (-2**63) work; one more either way raises OverflowError
    assert parse_expression(node("x * 18446744073709551615"), "e").right.value == 2 ** 64 - 1
    assert parse_expression(node("x + -9223372036854775808"), "e").right.value == -2 ** 63


def test_imaginary_literals_are_gaussian_rationals():
    # 3j is a complex number (docs/format.md, "Complex tensors"): exact, its text kept
    e = parse_expression(node("x * 0.5j"), "e")
    assert (e.right.value.re, e.right.value.im, e.right.text, e.right.is_int) == (0, Fraction(1, 2), "0.5j", False)


def test_none_anywhere_in_a_hook_return():
    e = parse_expression(node("(None, 2 * grad_input[0])"), "the returns", allow_none=True)
    assert dump(e.items[0]) == ("NoneLit",)


# ----------------------------------------------------------------------------- programs

PROGRAMS = [
    ("x * 2", ["return x * 2"]),
    ("h = x * 2\nreturn h", ["h = x * 2", "return h"]),
    ("a, b = x.chunk(2)\nreturn a, b", ["a, b = x.chunk(2)", "return a, b"]),
    ("(a, (b, c)) = f(x)\nreturn a", ["a, (b, c) = f(x)", "return a"]),
    ("x[0] = v\nreturn x", ["x[0] = v", "return x"]),
    ("x[:, 1] = v\nreturn x", ["x[:, 1] = v", "return x"]),
    ("h = x\nh += x\nh @= W\nreturn h", ["h = x", "h += x", "h @= W", "return h"]),
    ("x[0] *= 2\nreturn x", ["x[0] *= 2", "return x"]),
    ("x.mul_(2)\nreturn x", ["x.mul_(2)", "return x"]),
    ("with no_grad():\n    h = x * 2\nreturn h", ["with no_grad():", "return h"]),
    ("with torch.enable_grad():\n    h = x\nreturn h", ["with enable_grad():", "return h"]),
    ("with torch.set_grad_enabled(False):\n    h = x\nreturn h", ["with set_grad_enabled(False):", "return h"]),
    ("with set_grad_enabled(mode=True):\n    h = x\nreturn h", ["with set_grad_enabled(True):", "return h"]),
]


@pytest.mark.parametrize("src,lines", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_accepted_program(src, lines):
    prog = parse_program(block(src), "the forward")
    assert [S.stmt_source(s) for s in prog] == lines
    assert isinstance(prog[-1], S.Return)


def test_statement_records():
    prog = parse_program(block("a, b = x.chunk(2)\nx[0] = a\nh += b\nwith no_grad():\n    x.relu_()\nreturn h"), "f")
    assert dump(prog[0]) == ("Assign", ("Tup", (("Name", "a"), ("Name", "b"))),
                             ("Method", X, "chunk", (NUM[2],), ()))
    assert dump(prog[1]) == ("Assign", ("Subscript", X, (NUM[0],)), ("Name", "a"))
    assert dump(prog[2]) == ("AugAssign", ("Name", "h"), "+", ("Name", "b"))
    assert dump(prog[3]) == ("With", "no_grad", (("ExprStmt", ("Method", X, "relu_", (), ())),), False)
    assert dump(prog[4]) == ("Return", ("Name", "h"))


def test_one_expression_forward_is_one_return():
    prog = parse_program(node("relu(x)"), "the forward")
    assert dump(prog) == (("Return", ("Call", "relu", (X,), (), "")),)


def test_a_yaml_list_of_lines_is_one_program():
    lines = parse_yaml_text("e:\n  - h = x * 2\n  - g = h + 1\n  - return g\n", "f.yaml").get("e")
    prog = parse_program(lines, "the forward")
    assert [S.stmt_source(s) for s in prog] == ["h = x * 2", "g = h + 1", "return g"]
    assert [s.loc.line for s in prog] == [2, 3, 4]


PROGRAM_REFUSALS = [
    ("h = x * 2\nh * 3", "3:3: the forward must end in 'return expr'"),
    ("h = x", "2:3: the forward must end in 'return expr'"),
    ("return x\nh = 2", "2:3: the forward: nothing may follow the 'return' line"),
    ("return", "2:3: the forward: 'return' needs a value, as in 'return h'"),
    ("x\nreturn x", "2:3: the forward: a bare expression as a line does nothing; only a call such as x.mul_(2) "
                    "stands alone: assign the value (h = ...) or return it"),
    ("3\nreturn x", "2:3: the forward: a bare expression as a line does nothing; only a call such as x.mul_(2) "
                    "stands alone: assign the value (h = ...) or return it"),
    ("with no_grad():\n    return x", "3:7: the forward: 'return' inside a with block is not allowed; assign the "
                                      "value and return it after the block"),
    ("with no_grad() as g:\n    h = x\nreturn h", "2:21: the forward: 'with no_grad() as ...' binds nothing useful; "
                                                  "write 'with no_grad():'"),
    ("with no_grad(), enable_grad():\n    h = x\nreturn h", "2:19: the forward: one context manager per with block; "
                                                            "nest them instead"),
    ("with open('f'):\n    h = x\nreturn h", "2:8: the forward: only 'with no_grad():', 'with enable_grad():', "
                                             "'with set_grad_enabled(BOOL):' and 'with inference_mode():' blocks "
                                             "are allowed (torch. prefix "
                                             "optional)"),
    ("with set_grad_enabled(x.requires_grad):\n    h = x\nreturn h",
     "2:8: the forward: set_grad_enabled takes one bool literal here, 'with set_grad_enabled(False):' or "
     "'with set_grad_enabled(True):' (a mode computed at run time is not modelled)"),
    ("with set_grad_enabled(False) as g:\n    h = x\nreturn h",
     "2:35: the forward: 'with set_grad_enabled(False) as ...' binds nothing useful; write "
     "'with set_grad_enabled(False):'"),
    ("h //= 2\nreturn h", "2:3: operator '//=' is not allowed; use += -= *= /= **= @="),
    ("a = b = x\nreturn a", "2:7: the forward: assign one target per line, as in 'h = a * b'"),
    ("*a, b = x\nreturn b", "2:3: the forward: starred assignment is not allowed; unpack into as many names as there "
                            "are values"),
    ("x.y = 2\nreturn x", "2:3: the forward: assigning to an attribute is not allowed; assign to a name, into a "
                          "subscript (x[0] = v), a leaf's .grad (t.grad = v) or a tensor's .requires_grad "
                          "(t.requires_grad = False)"),
    ("x[0][1] = 2\nreturn x", "2:3: the forward: assign into a subscript of a name, as in 'x[0] = v'"),
    ("if x:\n    h = 1\nreturn h", "2:3: the forward: an if is not allowed; a forward holds assignments, calls, "
                                   "'with no_grad():' blocks and a final 'return expr'"),
    ("for i in x:\n    h = i\nreturn h", "2:3: the forward: a loop is not allowed; a forward holds assignments, "
                                         "calls, 'with no_grad():' blocks and a final 'return expr'"),
    ("import os\nreturn x", "2:3: the forward: an import is not allowed; a forward holds assignments, calls, "
                            "'with no_grad():' blocks and a final 'return expr'"),
    ("global g\nreturn x", "2:3: the forward: global is not allowed; a forward holds assignments, calls, "
                           "'with no_grad():' blocks and a final 'return expr'"),
    ("def f(): pass\nreturn x", "2:3: the forward: a function definition is not allowed; a forward holds "
                                "assignments, calls, 'with no_grad():' blocks and a final 'return expr'"),
]


@pytest.mark.parametrize("src,message", PROGRAM_REFUSALS, ids=[p[0] for p in PROGRAM_REFUSALS])
def test_refused_program(src, message):
    assert refused(parse_program, block(src)) == f"f.yaml:{message}"


def test_hook_does_takes_statements_but_no_return():
    stmts = parse_statements(block("g = 2 * grad\ng += 1\ngrad.mul_(2)\nn = None"), "the does")
    assert [S.stmt_source(s) for s in stmts] == ["g = 2 * grad", "g += 1", "grad.mul_(2)", "n = None"]
    assert refused(parse_statements, block("g = grad\nreturn g")) == \
        "f.yaml:3:3: the forward may not 'return'; put the returned value under returns:"


def test_a_hook_body_chooses_as_python_does():
    """``A if C else B``, ``is None`` / ``is not None``, comprehensions and ``if`` blocks (a
    hook's): records that read back as their source."""
    for src in ("g * 0.5 if g is not None else None", "tuple(g * 2 for g in grad_input)",
                "[g if g is None else g + 1 for g in grad_input]", "(a if c else b) * 2"):
        assert S.to_source(parse_expression(node(src), "the returns", allow_none=True, hook_body=True)) == src
    e = parse_expression(node("x is not None"), "the returns")
    assert isinstance(e, S.IsNone) and e.negated and S.free_names(e) == ["x"]
    comp = parse_expression(node("tuple(g * k for g in grad_input)"), "the returns", hook_body=True)
    assert isinstance(comp, S.Comp) and comp.kind == "tuple" and S.free_names(comp) == ["k", "grad_input"]
    stmts = parse_statements(block("if grad is None:\n    pass\nelif n > 1:\n    g = grad\nelse:\n    g = 2 * grad"),
                             "the does", hook_body=True)
    assert len(stmts) == 1 and isinstance(stmts[0], S.If) and stmts[0].body == ()
    assert S.stmt_source(stmts[0]) == "if grad is None: pass elif n.gt(1): g = grad else: g = 2 * grad"
    assert refused(parse_statements, block("if grad is None:\n    g = grad")) == \
        "f.yaml:2:3: the forward: an if is not allowed; a forward holds assignments, calls, 'with no_grad():' blocks " \
        "and a final 'return expr'"


# ----------------------------------------------------------------------------- limits

def test_a_thousand_term_sum_parses():
    e = parse_expression(node(" + ".join(["x"] * 1000)), "the loss")
    depth = 0
    while isinstance(e, S.Bin):
        depth, e = depth + 1, e.left
    assert depth == 999


def test_parsing_does_not_depend_on_the_callers_stack_depth():
    text = node(" + ".join(["x"] * 1000))

    def deep(k):
        return deep(k - 1) if k else parse_expression(text, "the loss")

    assert isinstance(deep(sys.getrecursionlimit() - 150), S.Bin)   # Python's AST building gets a fresh stack


def test_deep_nesting_of_every_kind_parses_without_recursion():
    # Python's own parser allows 200 nested parentheses; a chain of subscripts has none
    src = "relu(" * 190 + "x" + ")" * 190 + " + " + "-(" * 190 + "x" + ")" * 190 + " + x" + "[0]" * 400
    e = parse_expression(node(src), "the loss")
    assert isinstance(e, S.Bin)


def test_a_300_line_forward_parses():
    lines = ["h0 = x"] + [f"h{i} = tanh(h{i - 1})" for i in range(1, 300)] + ["return h299"]
    prog = parse_program(block("\n".join(lines)), "the forward")
    assert len(prog) == 301


def test_a_long_program_is_limited_per_line_not_in_total():
    lines = ["h0 = x"] + [f"h{i} = tanh(h{i - 1}) + 0.{i:04d} * x" for i in range(1, 1000)] + ["return h999"]
    text = "\n".join(lines)
    assert len(text) > 30_000
    assert len(parse_program(block(text), "the forward")) == 1001


def test_one_long_line_of_a_program_is_refused_as_a_line():
    long = "h = " + " + ".join(["x"] * 3000)      # 4 + 3000 + 2999 * 3 = 12001 characters
    assert refused(parse_program, block(f"g = x\n{long}\nreturn h")) == (
        "f.yaml:3:3: line 2 of the forward is 12001 characters long; lines are limited to 10000; split it into "
        "shorter named lines")


def test_a_long_single_expression_gets_the_named_lines_advice():
    # 3000 + 2999 * 3 = 11997 characters; the scalar starts at its quote, column 4
    assert refused(parse_expression, node(" + ".join(["x"] * 3000))) == (
        "f.yaml:1:4: the forward is 11997 characters long; expressions are limited to 10000; split it into named "
        "lines")


def test_part_limit_is_per_statement():
    many = " + ".join(["x"] * (MAX_EXPR_NODES // 2))    # MAX_EXPR_NODES - 1 parts: allowed
    prog = parse_program(block(f"a = {many}\nb = {many}\nreturn a + b"), "the forward")
    assert len(prog) == 3
    too_many = " + ".join(["x"] * (MAX_EXPR_NODES // 2 + 1))
    assert "more than 2000 parts" in refused(parse_expression, node(too_many))


def test_parenthesis_nesting_beyond_python_is_refused_in_one_line():
    message = refused(parse_expression, node("(" * 3000 + "x" + ")" * 3000))
    assert message.startswith("f.yaml:1:") and "cannot parse the forward" in message


# ----------------------------------------------------------------------------- the v1 engine's view

def test_simple_program_gives_v1_shape():
    assigns, result = simple_program(parse_program(block("h = x * 2\nreturn h + 1"), "f"))
    assert [(a.name, S.to_source(a.value)) for a in assigns] == [("h", "x * 2")]
    assert S.to_source(result) == "h + 1"


@pytest.mark.parametrize("src", ["h = x\nh += x\nreturn h", "a, b = f(x)\nreturn a", "x.mul_(2)\nreturn x",
                                 "with no_grad():\n    h = x\nreturn h", "x[0] = 1\nreturn x"])
def test_simple_program_refuses_v2_statements_as_not_supported_yet(src):
    with pytest.raises(ProblemError) as info:
        simple_program(parse_program(block(src), "f"))
    assert "is not supported yet" in info.value.message


def test_simple_assigns_of_a_hook_body():
    stmts = parse_statements(block("g = 2 * grad"), "the does")
    assert [(a.name, S.to_source(a.value)) for a in simple_assigns(stmts)] == [("g", "2 * grad")]
