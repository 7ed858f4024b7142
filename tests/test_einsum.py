"""``torch.einsum`` against real torch: ATen's composite (unsqueeze / permute per operand, then
mul, or permute / reshape / bmm / view / permute / view; one operand: permute, sum), compared on
the node chain (names, edges, creation order), values, grads, the legacy hook's grad_input and
the saved-tensor packs (tests/opcheck.py); its equation and size errors as PyTorch words them;
a label repeated in one operand (ATen's ``diagonal(0, prev, dim).movedim(-1, prev)``: DiagonalBackward0
then PermuteBackward0, before the operand's own unsqueezes and permute); the refusal of three
operands."""

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402
from opcheck import case  # noqa: E402


def _t(*shape, start=1):
    """A nested list of the given shape with distinct values (some negative, some halves)."""
    n = 1
    for d in shape:
        n *= d
    flat = [((k * 7 + start) % 11 - 5) / 2 for k in range(n)]

    def build(s, off):
        if not s:
            return flat[off]
        size = 1
        for d in s[1:]:
            size *= d
        return [build(s[1:], off + i * size) for i in range(s[0])]
    return build(shape, 0) if shape else flat[0]


CASES = [
    ("bij,bjk->bik", (2, 2, 3), (2, 3, 2)),
    ("bhqd,bhkd->bhqk", (1, 2, 3, 2), (1, 2, 4, 2)),
    ("bhtd,bhsd->bhts", (1, 1, 4, 2), (1, 1, 4, 2)),
    ("bhts,bhsd->bhtd", (1, 1, 4, 4), (1, 1, 4, 2)),
    ("ij,j->i", (2, 3), (3,)),
    ("i,i->", (3,), (3,)),
    ("bi,bi->b", (2, 3), (2, 3)),
    ("ij,jk", (2, 3), (3, 2)),
    ("ij,kj->ik", (2, 3), (4, 3)),
    ("i,j->ij", (2,), (3,)),
    ("ij,ij->ij", (2, 3), (2, 3)),
    ("ij,jk->", (2, 3), (3, 2)),
    ("ik,jl->ij", (2, 3), (4, 2)),       # each operand's own contraction label summed first
    ("...ij,...jk->...ik", (2, 2, 3), (3, 2)),
    ("bij,bjk", (1, 2, 3), (2, 3, 2)),   # a size-1 batch broadcasts
    ("ba,ca->bc", (2, 3), (2, 3)),
    # the right operand's output dims all before the left's: sumproduct_pair swaps the operands
    # (swap_lo_ro), so bmm's first operand is the right one; size-1 dims both have count as ro
    ("ij,jk->ki", (2, 3), (3, 2)),
    ("bij,bjk->bki", (2, 2, 3), (2, 3, 2)),
    ("bhqd,d->bhq", (1, 1, 3, 2), (2,)),
    ("bhqd,hd->bhq", (1, 2, 3, 2), (2, 2)),
    # a label repeated in one operand: its diagonal first
    ("ii,i->i", (3, 3), (3,)),
    ("ii,ij->j", (2, 2), (2, 3)),
    ("bii,bi->b", (2, 3, 3), (2, 3)),
    ("ij,jj->i", (2, 3), (3, 3)),
]


@pytest.mark.parametrize("eq,sa,sb", CASES)
def test_two_operands_against_torch(eq, sa, sb):
    inputs = {"a": (_t(*sa), True), "b": (_t(*sb, start=4), True)}
    assert case(inputs, f"torch.einsum({eq!r}, a, b)", lambda a, b: torch.einsum(eq, a, b)) == []


@pytest.mark.parametrize("eq,shape", [("ij->ji", (2, 3)), ("ij->", (2, 3)), ("ij->j", (2, 3)), ("ijk", (2, 3, 2)),
                                      ("ba", (2, 3)), ("...j->j", (2, 2, 3)),
                                      # a label repeated: diagonal, movedim (a permute), then as above
                                      ("ii->i", (3, 3)), ("ii", (3, 3)), ("bii->bi", (2, 3, 3)), ("iij->ji", (2, 2, 3)),
                                      ("iji->j", (2, 3, 2)), ("jii->ij", (2, 3, 3)), ("iii->i", (2, 2, 2)),
                                      ("...ii->...i", (2, 2, 2)), ("ijij->ij", (2, 3, 2, 3)), ("ii->", (1, 1))])
def test_one_operand_against_torch(eq, shape):
    inputs = {"a": (_t(*shape), True)}
    assert case(inputs, f"torch.einsum({eq!r}, a)", lambda a: torch.einsum(eq, a)) == []


def test_list_of_operands_and_one_not_requiring_grad():
    inputs = {"a": (_t(2, 3), True), "b": (_t(3, 2, start=3), False)}
    assert case(inputs, "torch.einsum('ij,jk->ik', [a, b])", lambda a, b: torch.einsum("ij,jk->ik", [a, b])) == []


ERRORS = [
    ("ij,jk->ik", (2, 3), (4, 2)),
    ("ij,jk->ik", (2, 3), None),
    ("ij->ik", (2, 3), None),
    ("ij->ii", (2, 3), None),
    ("i1->i", (2,), None),
    ("ij->i2", (2, 3), None),
    ("ijk,jk->i", (2, 3), (3, 2)),
    ("i.j,j->i", (2, 3), (3,)),
    ("...i...,i->i", (2, 3), (3,)),
    ("i->......", (2,), None),
    ("i,i,->i", (2,), (2,)),
    ("...i,...i->i", (2, 3), (3, 3)),
    ("ij,ij->", (2, 3), (3, 3)),
    ("ii->i", (2, 3), None),
]


@pytest.mark.parametrize("eq,sa,sb", ERRORS)
def test_equation_and_size_errors_are_pytorchs(eq, sa, sb):
    args = "a" if sb is None else "a, b"
    text = f"""
name: e
dtype: float64
inputs:
  a: {{value: {_t(*sa)}, requires_grad: true}}
  b: {{value: {_t(*(sb or (1,)))}, requires_grad: true}}
model:
  inputs: [a, b]
  forward: "torch.einsum({eq!r}, {args}).sum()"
"""
    v = adjoint.loads(text).solve().variants[0]
    ta = torch.tensor(_t(*sa), dtype=torch.float64, requires_grad=True)
    tb = torch.tensor(_t(*(sb or (1,))), dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError) as theirs:
        torch.einsum(eq, ta) if sb is None else torch.einsum(eq, ta, tb)
    assert v.error is not None
    assert (v.error.type, v.error.message, v.error.during) == ("RuntimeError", str(theirs.value), "forward")


def test_no_operand_is_the_value_error():
    text = """
name: e
inputs:
  a: {value: [1, 2], requires_grad: true}
model:
  inputs: [a]
  forward: "torch.einsum('i->') + a.sum()"
"""
    v = adjoint.loads(text).solve().variants[0]
    with pytest.raises(ValueError) as theirs:
        torch.einsum("i->")
    assert (v.error.type, v.error.message) == ("ValueError", str(theirs.value))


@pytest.mark.parametrize("forward,needle", [
    ("torch.einsum('ij,jk,kl->il', a, a, a).sum()", "opt_einsum"),
])
def test_refusals(forward, needle):
    text = f"""
name: r
inputs:
  a: {{value: [[1, 2], [3, 4]], requires_grad: true}}
model:
  inputs: [a]
  forward: "{forward}"
"""
    with pytest.raises(ProblemError) as err:
        adjoint.loads(text).solve()
    assert needle in str(err.value) and "\n" not in str(err.value)
