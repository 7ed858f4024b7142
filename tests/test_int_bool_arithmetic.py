"""Integer and bool tensor arithmetic (adjoint.engine.int_arith) against real PyTorch 2.13.

Each case is a small problem whose forward computes an int64 or bool tensor ``r`` (or raises
PyTorch's error) and returns ``x * r``; the differential check (tests/gen/check.py) solves it
exactly and runs it in real torch: every forward value is compared, its dtype too (integers
exactly), and an error must be PyTorch's own, type and message. The expected outcome per case
(``ok`` or ``both_raise``) was read off real torch 2.13 (``torch.tensor([True, False]) - ...``).
"""

import pytest

import adjoint
from adjoint.format.errors import ProblemError
from gen import check

HEADER = """name: int-bool-case
inputs:
  x: {value: [1.5, -2, 3], requires_grad: true}
  i: {value: [1, 0, 3], dtype: int64}
  j: {value: [-2, 5, 7], dtype: int64}
  m: {value: [true, false, true], dtype: bool}
  n: {value: [false, false, true], dtype: bool}
  big: {value: [4611686018427387904, -9223372036854775808, 5], dtype: int64}
model:
  inputs: [x, i, j, m, n, big]
  forward: |
"""
LOSS = 'loss: "sum(y)"\n'

#: (body lines, outcome): the body sets ``r``; the forward returns ``x * r``
OK = [
    # bool with a Python int, bool with bool (logical or / and), int64 with bool or int64
    "r = m * 2", "r = 2 * m", "r = m + 1", "r = 1 + m", "r = m * 0", "r = m * -3", "r = m + m", "r = m + n",
    "r = m * n", "r = m * m", "r = n * m + m", "r = (m + n) * 2", "r = (m * n) + 1", "r = i + m", "r = m + i",
    "r = i * m", "r = m * j", "r = i + j", "r = i - j", "r = j - i", "r = i * j", "r = i * i * i",
    "r = -i", "r = -j", "r = i.neg()", "r = torch.neg(j)", "r = 1 - i", "r = 5 - j", "r = i - 1", "r = j - 10",
    "r = 0 - i", "r = i * 2 - j * 3 + 1", "r = (i + 1) * (j - 2)", "r = -(i - j)", "r = torch.add(i, j)",
    "r = torch.mul(m, n)", "r = torch.add(m, 1)", "r = torch.sub(j, i)", "r = i.add(m)", "r = j.mul(2)",
    "r = i.sub(3)", "r = m.mul(m)", "r = m.add(n)",
    # alpha= (an int alpha; a bool result casts it to True)
    "r = torch.add(i, m, alpha=2)", "r = torch.add(m, n, alpha=2)", "r = torch.add(i, 2, alpha=3)",
    "r = torch.add(m, 1, alpha=2)", "r = i.add(m, alpha=2)", "r = m.add(n, alpha=3)", "r = torch.add(i, m, alpha=0)",
    "r = torch.sub(i, j, alpha=-3)", "r = torch.add(i, 2.0, alpha=2)", "r = torch.add(big, big, alpha=2)",
    "r = j.sub(i, alpha=5)",
    # a Python bool literal beside an int64 or bool tensor: a 0-d bool tensor (m * True is bool)
    "r = m * True", "r = m + False", "r = True + m", "r = i * False", "r = i + True", "r = (m + True) * n",
    # integer results used on: an index, a comparison, a view, a reduction, a cast
    "k = i.clone()\nv = k[0:2]\nv += 1\nr = k", "r = x[i + 1 - i]", "r = (m + n) > 0", "r = (i * 2).float()",
    "r = (i + j).max()", "r = (i * j)[1]", "r = (i + 1).view(3, 1)", "r = m.sum() / 2", "r = m.prod(0)",
    "r = (i * j).sum(0, keepdim=True)",
    # comparisons of the float tensor used as numbers
    "r = (x > 1) * 2", "r = (x > 0) + (x < 2)", "r = (x > 0) * (x < 2)", "r = (x > 0) + 1",
    "r = (x > 0) * 5 - (x < 0) * 3", "r = (x >= 1.5) + (x > 1.5) + (x == 3)", "r = (x > 0) * i",
    # wrap-around of int64 (two's complement)
    "r = big * 2", "r = big + big", "r = big * big", "r = -big", "r = big - 5", "r = big * 3 + 7",
    "r = big * i", "r = big + 4611686018427387904", "r = big - big * 3", "r = i * 3000000000 * 3000000000",
    "r = big * m", "r = (big * 4) * 0 + 1",
    # reductions: sum and prod of bool or int64 are int64
    "r = m.sum()", "r = (x > 0).sum()", "r = i.sum()", "r = j.sum()", "r = m.sum(0)", "r = m.sum(dim=0)",
    "r = m.sum(0, keepdim=True)", "r = i.prod()", "r = j.prod()", "r = m.prod()", "r = n.prod()",
    "r = torch.sum(m)", "r = torch.sum(j, 0)", "r = big.sum()", "r = (m + n).sum()", "r = (i * j).sum()",
    "r = (big * 2).sum()", "r = (m * 2).sum() + i.sum()", "r = (x > 0).sum() * 2 + 1", "r = j.prod() * 0 + m.sum()",
    # in-place into int64 and bool tensors
    "k = i.clone()\nk += 1\nr = k", "k = i.clone()\nk *= 3\nr = k", "k = i.clone()\nk -= j\nr = k",
    "k = i.clone()\nk += m\nr = k", "k = j.clone()\nk.neg_()\nr = k", "k = i.clone()\nk.add_(j)\nr = k",
    "k = i.clone()\nk.mul_(j)\nr = k", "k = big.clone()\nk *= 2\nr = k", "k = big.clone()\nk += big\nr = k",
    "k = m.clone()\nk += n\nr = k", "k = n.clone()\nk *= m\nr = k", "k = m.clone()\nk.add_(n)\nr = k",
    "k = m.clone()\nk.mul_(n)\nr = k", "k = i.clone()\nk += 1\nk *= k\nr = k", "k = i.clone()\nk.sub_(1)\nr = k",
    # mixing with float tensors afterwards
    "r = (i + m) * 0.5", "r = x * (m * 2) + i", "r = (m + n) * x", "r = (i * j) / 2", "r = 1.0 - (m * 1)",
    "r = x + (x > 1) * 2", "r = x * (m + n) + (i - j)", "r = (x > 0).sum() * x", "r = x.sum() + m.sum()",
    "r = (i - j).sum() * 0.5 + x",
]
RAISE = [
    "r = m - n", "r = m - m", "r = m - 1", "r = 1 - m", "r = i - m", "r = -m", "r = m.neg()",
    "r = torch.sub(m, n)", "r = j - (x > 0)",
    "k = i.clone()\nk -= m\nr = k", "k = m.clone()\nk -= n\nr = k", "k = m.clone()\nk += 1\nr = k",
    "k = m.clone()\nk += i\nr = k", "k = i.clone()\nk += 0.5\nr = k", "k = i.clone()\nk += x\nr = k",
    "k = i.clone()\nk /= 2\nr = k", "r = torch.add(i, i, alpha=0.5)", "r = torch.add(i, 2, alpha=2.0)",
    "r = torch.sub(m, n, alpha=2)", "r = torch.sub(i, m, alpha=0.5)", "r = torch.add(m, 2, alpha=0.5)",
    "r = m.add(n, alpha=1.0)", "r = m - True", "r = False - i", "k = m.clone()\nk *= 2\nr = k", "k = m.clone()\nk.neg_()\nr = k",
]
#: still refused (clear messages): an in-place alpha (2 or 2.0 cannot be told there), int64 floor division,
#: modulo, power, abs, clamp, maximum
REFUSED = ["k = i.clone()\nk.add_(j, alpha=2)\nr = k", "r = i // 2", "r = i % 2", "r = i ** 2", "r = abs(i)", "r = i.clamp(0, 1)", "r = torch.maximum(i, j)"]


#: a Python bool (== / != with None gives one, in a hook body) beside an int64 or bool tensor: PyTorch
#: wraps it as a 0-d bool tensor (``m * False`` is bool, ``i + True`` int64; ``-`` is sub_check's error).
#: ``g`` is the tensor hook's grad of x, [1, -3, 4]; the hook returns ``g * (EXPR)``
PYBOOL_OK = ["(g > 0) * (g == None)", "(g > 0) + (g != None)", "(g != None) * (g > 0)", "(g > 0) * 3 + (g != None)",
             "(g == None) + (g > 0) * 2", "((g > 0) * 3) * (g != None)", "(g > 0) + (g == None)",
             "((g < 0) + (g == None)).sum()"]
PYBOOL_RAISE = ["(g > 0) - (g != None)", "((g > 0) * 3) - (g == None)", "(g != None) - (g > 0)"]
PYBOOL = """name: pybool
inputs:
  x: {value: [0.5, -1.5, 2], requires_grad: true}
model:
  forward: "x * x"
loss: "sum(y)"
hooks:
  - {tensor: x, returns: "grad * (EXPR)"}
"""


def problem(body: str) -> str:
    lines = "".join(f"    {line}\n" for line in body.split("\n")) + "    return x * r\n"
    return HEADER + lines + LOSS


def _id(body):
    return body.replace("\n", "; ")


@pytest.mark.torch
@pytest.mark.parametrize("body", OK, ids=_id)
def test_integer_arithmetic_agrees_with_torch(body):
    outcome = check(problem(body))
    assert outcome.variants and outcome.status == "ok", outcome.report()


@pytest.mark.torch
@pytest.mark.parametrize("body", RAISE, ids=_id)
def test_integer_arithmetic_errors_are_torchs(body):
    outcome = check(problem(body))
    assert outcome.variants and outcome.status == "both_raise", outcome.report()


@pytest.mark.torch
@pytest.mark.parametrize("expr", PYBOOL_OK + PYBOOL_RAISE)
def test_python_bool_beside_integer_tensors(expr):
    outcome = check(PYBOOL.replace("EXPR", expr.replace("g", "grad")))
    assert outcome.variants and outcome.status == ("ok" if expr in PYBOOL_OK else "both_raise"), outcome.report()


@pytest.mark.parametrize("body", REFUSED, ids=_id)
def test_still_refused(body):
    with pytest.raises(ProblemError):
        adjoint.loads(problem(body)).solve()


def _values(text, mode="exact"):
    return next(iter(adjoint.loads(text).solve(mode=mode).to_json()["variants"].values()))["values"]


def test_values_and_dtypes_by_hand():
    """(x > 0).sum() of [1.5, -2, 3] is 2 (int64); m + n is a logical or (bool); big * 2 wraps:
    2**62 * 2 is -2**63 and -2**63 * 2 is 0 (two's complement)."""
    values = _values(problem("s = (x > 0).sum()\nb = m + n\nw = big * 2\nr = s * b + w"))
    assert (values["s"]["value"], values["s"]["dtype"]) == (2, "int64")
    assert (values["b"]["value"], values["b"]["dtype"]) == ([True, False, True], "bool")
    assert (values["w"]["exact"], values["w"]["dtype"]) == (["-9223372036854775808", "0", "10"], "int64")


def test_float64_refuses_integers_beyond_2_53():
    """--float64: a double may have rounded an integer at or beyond 2**53: refused, not wrapped."""
    with pytest.raises(ProblemError, match="2\\*\\*53"):
        adjoint.loads(problem("r = i * 9007199254740992")).solve(mode="float64")
    with pytest.raises(ProblemError, match="2\\*\\*53"):
        adjoint.loads(problem("r = i * 3002399751580331 * 3")).solve(mode="float64")   # 3 * that is 2**53 + 1
    with pytest.raises(ProblemError, match="2\\*\\*53"):   # an operand a double may have rounded, a small result
        adjoint.loads(problem("r = big - 4611686018427387904")).solve(mode="float64")
    values = _values(problem("r = (i * 1000000 + m) * j"), mode="float64")   # below 2**53: exact doubles
    assert values["r"]["value"] == [-2000002, 0, 21000007] and values["r"]["dtype"] == "int64"


def test_structure_mode_keeps_shapes_and_dtypes():
    values = _values(problem("s = m.sum()\nr = (i + m) * j - s"), mode="structure")
    assert values["s"]["dtype"] == "int64" and values["r"]["dtype"] == "int64" and values["r"]["shape"] == [3]
