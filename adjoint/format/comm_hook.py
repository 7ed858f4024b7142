"""A written DDP communication hook: ``comm_hook: {returns: EXPR}`` over ``bucket``.

The expression is handed ``bucket`` (the bucket's flat gradient buffer, ``bucket.buffer()``)
and ``world_size``; ``all_reduce(T)`` is ``dist.all_reduce`` on a copy of ``T``: the SUM of
``T`` over the ranks. What it returns becomes the bucket's gradients. It is evaluated on all
ranks at once (each value a list, one per rank), since ``all_reduce`` needs every rank's
operand. The language here is deliberately small: numbers, ``bucket``, ``world_size``,
``+ - * /``, unary minus and ``all_reduce``; anything else is refused where it is written.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.errors import ProblemError
from adjoint.format.expr import parse_expression
from adjoint.format.syntax import Bin, Call, Name, Neg, Num

NAMES = ("bucket", "world_size")
OPS = {"+": "add", "-": "sub", "*": "mul", "/": "div"}


def parse_comm_expression(node):
    expr = parse_expression(node, "distributed.comm_hook.returns")
    check(expr)
    return expr


def check(e) -> None:
    if isinstance(e, Num):
        return
    if isinstance(e, Name):
        if e.id not in NAMES:
            raise ProblemError(e.loc, f"a comm hook is handed bucket (and world_size); '{e.id}' is not known there")
        return
    if isinstance(e, Bin) and e.op in OPS:
        check(e.left)
        check(e.right)
        return
    if isinstance(e, Neg):
        check(e.operand)
        return
    if isinstance(e, Call) and e.func == "all_reduce" and not e.prefix and len(e.args) == 1 and not e.kwargs:
        check(e.args[0])
        return
    raise ProblemError(e.loc, "in a comm hook only numbers, bucket, world_size, + - * /, unary minus and "
                              "all_reduce(T) are modelled yet")


def evaluate(e, B, buckets: list, world_size: int) -> list:
    """The expression on every rank: a list of values (backend tensors or Fractions), one per rank."""
    n = len(buckets)
    if isinstance(e, Num):
        return [e.value] * n
    if isinstance(e, Name):
        return list(buckets) if e.id == "bucket" else [Fraction(world_size)] * n
    if isinstance(e, Neg):
        return [_neg(B, v) for v in evaluate(e.operand, B, buckets, world_size)]
    if isinstance(e, Call):
        vals = evaluate(e.args[0], B, buckets, world_size)
        total = vals[0]
        for v in vals[1:]:
            total = _bin(B, "+", total, v)
        return [total] * n
    left = evaluate(e.left, B, buckets, world_size)
    right = evaluate(e.right, B, buckets, world_size)
    return [_bin(B, e.op, a, b) for a, b in zip(left, right)]


def _neg(B, v):
    return -v if isinstance(v, Fraction) else B.mul(B.scalar(-1), v)


def _bin(B, op: str, a, b):
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        if op == "/" and b == 0:
            raise ProblemError(None, "a comm hook divides by zero")
        return {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else None}[op]
    a = B.scalar(a) if isinstance(a, Fraction) else a
    b = B.scalar(b) if isinstance(b, Fraction) else b
    return getattr(B, OPS[op])(a, b)
