"""matmul for every rank combination torch 2.13 accepts, pinned against real torch
(tests/opcheck.py): at::matmul's dispatch (dot, mv, mm; the fold of a batch into mm / mv when
the smaller operand requires grad or the larger folds without a copy; else expand + reshape
(view, ReshapeAliasBackward0 or clone + _unsafe_view) + bmm + _unsafe_view; a batch of 1 that
requires grad squeezed away for 3-D @ 3-D), with requires_grad on either side or both, on
contiguous and on transposed operands; mm and bmm; the shape errors worded as PyTorch's."""

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from opcheck import case  # noqa: E402


def values(shape, offset: int = 0):
    """Small distinct exact numbers of a shape (nested lists)."""
    n = 1
    for d in shape:
        n *= d
    flat = [((k + offset) % 7 - 3) / 2 for k in range(n)]

    def nest(vals, dims):
        if not dims:
            return vals[0]
        step = len(vals) // dims[0]
        return [nest(vals[i * step:(i + 1) * step], dims[1:]) for i in range(dims[0])]
    return nest(flat, list(shape))


PAIRS = [
    ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 2)), ((2, 3), (3, 2)),
    ((3,), (4, 3, 2)), ((3,), (1, 3, 2)), ((3,), (2, 2, 3, 2)),
    ((2, 3), (4, 3, 2)), ((2, 3), (1, 3, 2)), ((2, 3), (2, 1, 3, 2)),
    ((4, 2, 3), (3,)), ((4, 2, 3), (3, 2)), ((1, 2, 3), (3, 2)), ((2, 4, 2, 3), (3,)), ((2, 1, 2, 3), (3, 2)),
    ((4, 2, 3), (4, 3, 2)), ((4, 2, 3), (1, 3, 2)), ((1, 2, 3), (4, 3, 2)), ((1, 2, 3), (1, 3, 2)),
    ((4, 2, 3), (2, 4, 3, 2)), ((4, 2, 3), (2, 1, 3, 2)), ((1, 2, 3), (2, 4, 3, 2)),
    ((2, 4, 2, 3), (4, 3, 2)), ((2, 4, 2, 3), (1, 3, 2)), ((2, 1, 2, 3), (4, 3, 2)),
    ((2, 4, 2, 3), (2, 4, 3, 2)), ((2, 1, 2, 3), (1, 4, 3, 2)),
]
GRADS = [(True, True), (True, False), (False, True)]
CASES = [(sa, sb, rg) for sa, sb in PAIRS for rg in GRADS]


@pytest.mark.parametrize("sa,sb,rg", CASES, ids=[f"{list(a)}@{list(b)}-{r[0]:d}{r[1]:d}" for a, b, r in CASES])
def test_matmul_chain_against_torch(sa, sb, rg):
    inputs = {"a": (values(sa), rg[0]), "b": (values(sb, 3), rg[1])}
    assert case(inputs, "a @ b", lambda a, b: a @ b) == []


# transposed operands: strides decide should_fold and whether reshape is a view, an alias or a copy
STRIDED = [
    ("a.transpose(0, 1) @ b", lambda a, b: a.transpose(0, 1) @ b, (2, 4, 3), (3, 2)),
    ("a.transpose(0, 1) @ b", lambda a, b: a.transpose(0, 1) @ b, (2, 4, 3), (3,)),
    ("a.mT @ b", lambda a, b: a.mT @ b, (4, 3, 2), (3, 2)),
    ("a.mT @ b", lambda a, b: a.mT @ b, (4, 3, 2), (4, 3, 2)),
    ("a @ b.mT", lambda a, b: a @ b.mT, (4, 2, 3), (4, 2, 3)),
    ("a @ b.mT", lambda a, b: a @ b.mT, (2, 3), (4, 2, 3)),
    ("a.permute(2, 0, 1) @ b", lambda a, b: a.permute(2, 0, 1) @ b, (2, 3, 4), (3,)),
    ("a.expand(4, 2, 3) @ b", lambda a, b: a.expand(4, 2, 3) @ b, (2, 3), (3, 2)),
    ("a @ b.expand(3, 3, 2)", lambda a, b: a @ b.expand(3, 3, 2), (3, 2, 3), (3, 2)),
]


@pytest.mark.parametrize("expr,fn,sa,sb", STRIDED, ids=[f"{s[0]}-{list(s[2])}-{list(s[3])}" for s in STRIDED])
@pytest.mark.parametrize("rg", GRADS, ids=["11", "10", "01"])
def test_matmul_of_strided_operands(expr, fn, sa, sb, rg):
    inputs = {"a": (values(sa), rg[0]), "b": (values(sb, 3), rg[1])}
    assert case(inputs, expr, fn) == []


NAMED = [
    ("torch.matmul(a, b)", lambda a, b: torch.matmul(a, b), (2, 2, 3), (3,)),
    ("a.matmul(b)", lambda a, b: a.matmul(b), (3,), (2, 3, 2)),
    ("torch.mm(a, b)", lambda a, b: torch.mm(a, b), (2, 3), (3, 2)),
    ("a.mm(b)", lambda a, b: a.mm(b), (2, 3), (3, 2)),
    ("torch.bmm(a, b)", lambda a, b: torch.bmm(a, b), (2, 2, 3), (2, 3, 2)),
    ("a.bmm(b)", lambda a, b: a.bmm(b), (2, 2, 3), (2, 3, 2)),
]


@pytest.mark.parametrize("expr,fn,sa,sb", NAMED, ids=[n[0] for n in NAMED])
@pytest.mark.parametrize("rg", GRADS, ids=["11", "10", "01"])
def test_named_products(expr, fn, sa, sb, rg):
    inputs = {"a": (values(sa), rg[0]), "b": (values(sb, 3), rg[1])}
    assert case(inputs, expr, fn) == []


@pytest.mark.parametrize("expr,sa,sb", [
    ("a @ b", (4, 2, 3), (4, 2, 2)),     # bmm's kernel refuses: PyTorch's error is the answer
    ("a @ b", (4, 2, 3), (5, 3, 2)),     # batch dims that do not broadcast: infer_size's error
    ("a @ b", (4, 2, 3), (2,)),          # mv's kernel refuses (the batch folded into rows)
    ("a @ (b.t())", (2, 3), (4, 2)),     # mm's kernel refuses
    ("torch.bmm(a, b)", (2, 3), (3, 2)),   # operands of the wrong rank: predicted after the packs
    ("torch.mm(a, b)", (2, 2, 3), (3, 2)),
])
def test_shape_errors_are_worded_as_pytorch(expr, sa, sb):
    text = f"""
name: e
inputs:
  a: {{value: {values(sa)}, requires_grad: true}}
  b: {{value: {values(sb)}}}
model:
  inputs: [a, b]
  forward: "({expr}).sum()"
"""
    a = torch.tensor(values(sa), requires_grad=True)
    b = torch.tensor(values(sb))
    with pytest.raises(RuntimeError) as theirs:
        eval(expr, {"torch": torch, "a": a, "b": b})
    v = adjoint.loads(text).solve().variants[0]
    assert (v.error.type, v.error.message, v.error.during) == ("RuntimeError", str(theirs.value), "forward")


def _sequence_numbers(t, of_node, edges_of, name_of):
    out, seen = [], set()

    def walk(n):
        if n is None or id(n) in seen:
            return
        seen.add(id(n))
        if "AccumulateGrad" not in name_of(n):
            out.append(of_node(n))
        for c in edges_of(n):
            walk(c)
    walk(t.grad_fn)
    out.sort()
    return [s - out[0] for s in out]


def test_should_fold_uses_up_a_sequence_number_for_the_dropped_transpose():
    # (1,2,3) @ (4,3,2), both requiring grad: squeeze(0) of a, then should_fold makes b.mT and
    # drops it (a sequence number used), then the fold's own b.mT: a gap of one after the squeeze
    from opcheck import expr_child, problem_text
    a = torch.tensor(values((1, 2, 3)), dtype=torch.float64, requires_grad=True)
    b = torch.tensor(values((4, 3, 2), 3), dtype=torch.float64, requires_grad=True)
    h = a @ b
    theirs = _sequence_numbers(h, lambda n: n._sequence_nr(), lambda n: [f for f, _ in n.next_functions],
                               lambda n: n.name())
    text = problem_text({"a": (values((1, 2, 3)), True), "b": (values((4, 3, 2), 3), True)},
                        expr_child(["a", "b"], "a @ b"), tuple(h.shape))
    m = adjoint.loads(text).solve().variants[0].run.forward.names["m"]
    ours = _sequence_numbers(m, lambda n: n.seq, lambda n: [e.node if e else None for e in n.edges],
                             lambda n: n.name)
    assert ours == theirs == [0, 2, 3, 4, 5, 6, 7, 8, 9]


def test_attention_chain_against_torch():
    # batched scores, softmax over the last dim, batched product with the values, GELU
    import torch.nn.functional as F
    inputs = {"x": ([[[0.5, -1, 0.25], [1, 0.5, -0.5]], [[-0.25, 1, 0], [0.5, 0.5, 1]]], True),
              "wq": ([[0.5, 0, -0.5], [1, 0.25, 0], [0, -0.5, 0.5]], True)}
    expr = "q = x @ wq\ns = q @ x.mT\np = F.softmax(s, dim=-1)\nreturn F.gelu(p @ x)"

    def fn(x, wq):
        return F.gelu(F.softmax((x @ wq) @ x.mT, dim=-1) @ x)
    assert case(inputs, expr, fn) == []
