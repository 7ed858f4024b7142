"""A written DDP communication hook: ``comm_hook: {does: [STMT, ...], returns: EXPR}`` over ``bucket``.

The expression is handed ``bucket`` (the bucket's flat gradient buffer, ``bucket.buffer()``)
and ``world_size``; ``all_reduce(T)`` is ``dist.all_reduce`` on a copy of ``T``: the SUM of
``T`` over the ranks. What it returns becomes the bucket's gradients. It is evaluated on all
ranks at once (each value a list, one per rank), since ``all_reduce`` needs every rank's
operand. The language here is deliberately small: numbers, ``bucket``, ``world_size``,
``+ - * /``, unary minus and ``all_reduce``; anything else is refused where it is written.

``does:`` writes the bucket in place before ``returns:`` is evaluated (``bucket.buffer()``
written: ``bucket.mul_(E)``, ``div_``, ``add_``, ``sub_``, ``copy_``, ``bucket *= E`` and the
other augmented assignments, and ``all_reduce(bucket)``, which is ``dist.all_reduce`` on the
buffer itself: the sum over the ranks written into it). Without ``returns:`` the hook returns
the buffer it wrote (a Future holding ``bucket.buffer()``).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from adjoint.format.errors import Loc, ProblemError
from adjoint.format.expr import parse_expression, parse_statements
from adjoint.format.syntax import AugAssign, Bin, Call, ExprStmt, Method, Name, Neg, Num, free_names

NAMES = ("bucket", "world_size")
OPS = {"+": "add", "-": "sub", "*": "mul", "/": "div"}


def parse_comm_expression(node):
    expr = parse_expression(node, "distributed.comm_hook.returns")
    check(expr)
    return expr


#: the in-place methods a ``does:`` line may call on ``bucket``, and the operator each one applies
INPLACE = {"mul_": "*", "div_": "/", "add_": "+", "sub_": "-", "copy_": None}


@dataclass(frozen=True)
class BucketWrite:
    """One ``does:`` line: ``bucket = bucket OP operand`` in place (``op`` None: ``copy_``), or
    ``all_reduce(bucket)`` (``op`` "all_reduce", no operand)."""

    op: str | None
    operand: object          # syntax.Expr | None
    loc: Loc


def parse_comm_statements(node) -> tuple:
    """``does:``: one line or a list of lines, each a write of ``bucket`` in place."""
    out = []
    for stmt in parse_statements(node, "distributed.comm_hook.does"):
        out.append(_write(stmt))
    return tuple(out)


def _write(stmt) -> BucketWrite:
    hint = ("a comm hook's does: writes the bucket in place: bucket.mul_(E), div_, add_, sub_, copy_, "
            "bucket *= E (+= -= /=) or all_reduce(bucket)")
    if isinstance(stmt, AugAssign) and isinstance(stmt.target, Name) and stmt.target.id == "bucket" \
            and stmt.op in OPS:
        check(stmt.value)
        return BucketWrite(stmt.op, stmt.value, stmt.loc)
    if isinstance(stmt, ExprStmt):
        e = stmt.value
        if isinstance(e, Method) and isinstance(e.obj, Name) and e.obj.id == "bucket" and e.name in INPLACE \
                and len(e.args) == 1 and not e.kwargs:
            check(e.args[0])
            if e.name == "copy_" and "bucket" not in _names(e.args[0]):
                raise ProblemError(e.args[0].loc, "bucket.copy_ takes a tensor (an expression over bucket); "
                                                  "to fill the bucket with a number N write two lines: "
                                                  "bucket.mul_(0), bucket.add_(N)")
            return BucketWrite(INPLACE[e.name], e.args[0], stmt.loc)
        if isinstance(e, Call) and e.func == "all_reduce" and not e.prefix and len(e.args) == 1 and not e.kwargs \
                and isinstance(e.args[0], Name) and e.args[0].id == "bucket":
            return BucketWrite("all_reduce", None, stmt.loc)
    raise ProblemError(stmt.loc, hint + " are modelled yet")


def _names(e) -> set:
    return set(free_names(e))


def reduces(writes: tuple) -> bool:
    """Whether a ``does:`` reads other ranks' buffers (``all_reduce`` anywhere in it)."""
    def has(e) -> bool:
        if isinstance(e, Call):
            return True
        if isinstance(e, Bin):
            return has(e.left) or has(e.right)
        if isinstance(e, Neg):
            return has(e.operand)
        return False
    return any(w.op == "all_reduce" or (w.operand is not None and has(w.operand)) for w in writes)


def run_writes(writes: tuple, B, buckets: list, world_size: int) -> list:
    """``does:`` on every rank at once: each rank's bucket after the writes (lists, one per rank)."""
    buckets = list(buckets)
    for w in writes:
        if w.op == "all_reduce":
            total = buckets[0]
            for v in buckets[1:]:
                total = _bin(B, "+", total, v)
            buckets = [total] * len(buckets)
            continue
        values = evaluate(w.operand, B, buckets, world_size)
        if w.op is None:      # copy_: the operand is a tensor over bucket (checked when read)
            buckets = list(values)
        else:
            buckets = [_bin(B, w.op, b, v) for b, v in zip(buckets, values)]
    return buckets


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
