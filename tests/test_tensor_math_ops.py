"""Tensor math users write that adjoint refused ("a PyTorch function adjoint does not model yet"):
addcmul / addcdiv, the scaled matrix products (baddbmm, addbmm, addmv, addr), fmod / remainder,
hypot, heaviside, nansum / nanmean, std_mean, logcumsumexp. Each problem is solved by adjoint and
run in real torch 2.13 by verify (tests/gen's ``check``: node names, hook calls, what a
saved-tensors pack hook sees and in which order, values, gradients, errors), for each
combination of which operands require grad; a few facts are also read from torch here directly
(grad_fn names, errors)."""

from __future__ import annotations

import itertools

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from gen import check  # noqa: E402

TEMPLATE = """
name: tmath
dtype: DTYPE
inputs:
INPUTS
model:
  inputs: [NAMES]
  forward: |
FORWARD
loss: "y"
variants:
  plain: {}
  saved:
    hooks:
      - {saved_tensors: {pack: "x", unpack: "x * 2"}, label: doubled}
"""


def problem(inputs: dict, forward: str, dtype: str = "float64", requires=None) -> str:
    """A problem over ``inputs`` (name -> nested list; ``requires``: the names that require grad,
    all by default) whose forward is ``forward`` (lines, the last one a return)."""
    req = set(inputs) if requires is None else set(requires)
    lines = "\n".join(f"  {k}: {{value: {str(v).replace(chr(39), '')}, requires_grad: {'true' if k in req else 'false'}}}"
                      for k, v in inputs.items())
    body = "\n".join("    " + line for line in forward.strip().splitlines())
    return (TEMPLATE.replace("DTYPE", dtype).replace("INPUTS", lines).replace("NAMES", ", ".join(inputs))
            .replace("FORWARD", body))


def verified(text: str) -> None:
    outcome = check(text, timeout=180)
    assert outcome.ok, f"adjoint and PyTorch disagree:\n{outcome.report()}\n--- problem ---\n{text}"


def solved(text: str, variant: str = "plain") -> dict:
    return adjoint.loads(text).solve().to_json()["variants"][variant]


def subsets(names):
    """Every non-empty subset of ``names`` (which operands require grad)."""
    return [c for n in range(1, len(names) + 1) for c in itertools.combinations(names, n)]


# ----------------------------------------------------------------------------- addcmul, addcdiv

ADDC = {"x": [[1, -2, 0.5], [3, 0.25, -1]], "a": [2, -1, 4], "b": [[0.5], [-2]]}


@pytest.mark.torch
@pytest.mark.parametrize("requires", subsets(("x", "a", "b")), ids="-".join)
@pytest.mark.parametrize("call", ["torch.addcmul(x * 1, a, b, value=0.5)", "(x * 1).addcdiv(a, b, value=-3)",
                                  "torch.addcdiv(x * 1, a, b)", "(x * 1).addcmul_(a, b, value=2)",
                                  "(x * 1).addcdiv_(a, b, value=0.25)"])
def test_addcmul_addcdiv_against_torch(call, requires):
    verified(problem(ADDC, f"o = {call}\nreturn (o * o * o).sum()", requires=requires))


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_addc_signed_zeros_and_float32(dtype):
    inputs = {"x": [-0.0, -0.0, 1, 2], "a": [0, -0.0, 1, 0], "b": [1, 1, 0, 2]}
    verified(problem(inputs, "o = torch.addcmul(x * 1, a, b, value=-1)\nq = torch.addcmul(x * 1, a, b)\n"
                             "s = torch.addcdiv(x * 1, a, b * 1 + 1)\nreturn (o * q).sum() + (s * s).sum()", dtype))


@pytest.mark.torch
@pytest.mark.parametrize("forward", [
    "return torch.addcmul(x, a, x).sum()",                       # shapes that do not broadcast
    "return (x * 1).addcmul_(b, b).sum()",                       # in place: the broadcast shape is not self's
    "c = b * 1\no = torch.addcdiv(a, c, a)\nc.mul_(2)\nreturn o.sum()",   # a saved tensor modified
    "return torch.addcdiv(a, a > 0, a > 0).sum()",              # integer division refused by the kernel
    "return a.addcmul_(a, a).sum()",                             # a leaf that requires grad, in place
])
def test_addc_errors_are_torch_errors(forward):
    inputs = {"x": [1, 2], "a": [2, -1, 4], "b": [[1, 1], [2, 2], [3, 3]]}
    text = problem(inputs, forward)
    assert solved(text).get("error") is not None
    verified(text)


def test_addc_nodes_in_torch():
    x, a, b = (torch.ones(2, dtype=torch.float64, requires_grad=True) for _ in range(3))
    assert torch.addcmul(x, a, b).grad_fn.name() == "AddcmulBackward0"
    assert torch.addcdiv(x, a, b).grad_fn.name() == "AddcdivBackward0"
    got = solved(problem({"x": [1, 2], "a": [3, 4], "b": [5, 6]}, "o = torch.addcdiv(x, a, b)\nreturn o.sum()"))
    assert got["values"]["o"]["grad_fn"] == "AddcdivBackward0"


# ----------------------------------------------------------------------------- baddbmm, addbmm, addmv, addr

PRODUCTS = {"s": [1, -2, 0.5], "b1": [[[1, 2], [3, -1]], [[0.5, 1], [2, 2]]],
            "b2": [[[1, 2, 0], [3, -1, 1]], [[0.5, 1, -2], [2, 2, 1]]], "m": [[1, 2, 0], [3, -1, 1]],
            "v": [2, -1, 0.5], "w": [4, -3]}
PRODUCT_CALLS = {
    "baddbmm": ("torch.baddbmm(s, b1, b2, beta=2, alpha=-0.5)", ("s", "b1", "b2")),
    "baddbmm_method": ("b1.baddbmm(b1, b1 * 1)", ("b1",)),
    "addbmm": ("torch.addbmm(s, b1, b2, alpha=3)", ("s", "b1", "b2")),
    "addmv": ("torch.addmv(w, m, v, beta=0.25)", ("w", "m", "v")),
    "addr": ("torch.addr(s, w, v, beta=-1, alpha=2)", ("s", "w", "v")),
    "addmv_": ("(w * 1).addmv_(m, v, alpha=2)", ("w", "m", "v")),
    "addr_": ("(s * w.unsqueeze(1)).addr_(w, v, beta=0.5)", ("s", "w", "v")),
    "addbmm_": ("(m * 1).addbmm_(b1, b2[:, :, :3], beta=0)", ("m", "b1", "b2")),
    "baddbmm_": ("(b2 * 1).baddbmm_(b1, b2, alpha=0.5)", ("b1", "b2")),
}


def _product_cases():
    for name, (call, names) in PRODUCT_CALLS.items():
        for req in subsets(names):
            yield pytest.param(call, names, req, id=f"{name}-{'-'.join(req)}")


@pytest.mark.torch
@pytest.mark.parametrize("call,names,requires", list(_product_cases()))
def test_scaled_products_against_torch(call, names, requires):
    inputs = {k: PRODUCTS[k] for k in names}
    verified(problem(inputs, f"o = {call}\nreturn (o * o * o).sum()", requires=requires))


@pytest.mark.torch
@pytest.mark.parametrize("call", ["torch.addr(n, w, v, beta=0)", "torch.addmv(n[0], m, v, beta=0, alpha=2)",
                                  "torch.baddbmm(n.unsqueeze(0), b1, b1[:, :, :1].expand(2, 2, 2), beta=0)",
                                  "torch.addbmm(n[:, :2], b1, b1, beta=0)"])
def test_beta_zero_ignores_infinite_self(call):
    """beta=0: self is not read, so its infinite elements do not reach the result (PyTorch's doc)."""
    inputs = dict(PRODUCTS, n=[[1, "inf", "-inf"], ["inf", 2, 3]])
    names = ("b1", "m", "v", "w", "n")
    verified(problem({k: inputs[k] for k in names}, f"o = {call}\nreturn (o * o).sum()",
                     requires=("b1", "m", "v", "w")))


@pytest.mark.torch
@pytest.mark.parametrize("call", [
    "torch.addmv(w, m, w)", "torch.addmv(v, m, v)", "torch.addmv(m, m, v)", "torch.addmv(w, m, m)",
    "torch.addr(m, v, w)", "torch.addr(m, m, v)", "torch.addr(m, w, m)",
    "torch.baddbmm(w, b1, b2)", "torch.baddbmm(v, b1, b1)", "torch.baddbmm(v, m, b2)", "torch.baddbmm(v, b1, m)",
    "torch.baddbmm(v, b1, b2[:1])",
    "torch.addbmm(w, b1, b2)", "torch.addbmm(v, b1, b1)", "torch.addbmm(v, b1, b2[:1])", "torch.addbmm(v, b1, m)",
    "torch.addbmm(v, m, b2)",
])
def test_scaled_product_shape_errors_are_torch_errors(call):
    text = problem(PRODUCTS, f"o = {call}\nreturn o.sum()")
    assert solved(text).get("error") is not None
    verified(text)


def test_scaled_product_refusals():
    """alpha=0 beside an infinite product operand (BLAS skips the product for addmv and addbmm, not
    for baddbmm and addr) and an in-place call whose self is not the result's shape are refused."""
    for call in ("torch.addmv(w, n, v[:3], alpha=0)", "(v * 1).addmv_(m, v)", "(v * 1).addbmm_(b1, b2)"):
        text = problem(dict(PRODUCTS, n=[[1, "inf", 2], [3, 4, 5]]), f"o = {call}\nreturn o.sum()")
        with pytest.raises(adjoint.ProblemError):
            adjoint.loads(text).solve()


def test_scaled_product_nodes_in_torch():
    def leaf(*shape):
        return torch.ones(*shape, dtype=torch.float64, requires_grad=True)
    names = {torch.baddbmm(leaf(3), leaf(2, 3, 4), leaf(2, 4, 3)).grad_fn.name(),
             torch.addbmm(leaf(3), leaf(2, 3, 4), leaf(2, 4, 3)).grad_fn.name(),
             torch.addmv(leaf(3), leaf(3, 4), leaf(4)).grad_fn.name(), torch.addr(leaf(3, 2), leaf(3), leaf(2)).grad_fn.name()}
    assert names == {"BaddbmmBackward0", "AddbmmBackward0", "AddmvBackward0", "AddrBackward0"}
    got = solved(problem(PRODUCTS, "o = torch.baddbmm(s, b1, b2)\nreturn o.sum()"))
    assert got["values"]["o"]["grad_fn"] == "BaddbmmBackward0"


# ----------------------------------------------------------------------------- hypot, heaviside

TWO = {"x": [[3, 0, -4], [1, -0.0, 2]], "z": [4, 1, 3]}


@pytest.mark.torch
@pytest.mark.parametrize("requires", subsets(("x", "z")), ids="-".join)
@pytest.mark.parametrize("call", ["torch.hypot(x * 1, z)", "(z * 2).hypot(x)", "(x * 1).hypot_(z)"])
def test_hypot_against_torch(call, requires):
    verified(problem(TWO, f"o = {call}\nreturn (o * o * o).sum()", requires=requires))


@pytest.mark.torch
def test_hypot_at_the_origin_is_nan_as_in_torch():
    verified(problem({"x": [0, 1], "z": [0, -2]}, "o = torch.hypot(x, z)\nreturn o.sum()"))


@pytest.mark.torch
@pytest.mark.parametrize("forward", [
    "o = torch.heaviside(x, z)\nreturn (o * x).sum()",          # the NotImplemented node raises in the backward
    "o = x.heaviside(z * 1)\nreturn (x * x).sum()",             # a node never reached: no error, the values
    "o = torch.heaviside(x * 1, z)\nreturn o.sum()",
])
def test_heaviside_against_torch(forward):
    verified(problem(TWO, forward))


def test_heaviside_node_in_torch():
    x = torch.tensor([-1.0, 0.0, 2.0], dtype=torch.float64, requires_grad=True)
    y = torch.heaviside(x, torch.tensor([0.5], dtype=torch.float64))
    assert y.grad_fn.name() == "torch::autograd::NotImplemented"
    with pytest.raises(RuntimeError, match="derivative for aten::heaviside is not implemented"):
        y.sum().backward()
    unreached = solved(problem(TWO, "o = torch.heaviside(x, z)\nreturn (x * x).sum()"))
    assert unreached["values"]["o"]["grad_fn"] == type(y.grad_fn).__name__ == "NotImplemented"
    assert unreached["values"]["o"]["value"] == [[1, 1, 0], [1, 1, 1]]
    got = solved(problem(TWO, "o = torch.heaviside(x, z)\nreturn (o * x).sum()"))
    assert "derivative for aten::heaviside is not implemented" in str(got["error"])


# ----------------------------------------------------------------------------- std_mean

@pytest.mark.torch
@pytest.mark.parametrize("call", ["torch.std_mean(x, dim=1, keepdim=True)", "torch.std_mean(x, correction=0)",
                                  "torch.std_mean(x, 0, False)", "torch.std_mean(x, dim=(0, 1), correction=2)",
                                  "torch.std_mean(x, 1, True, True)", "torch.std_mean(z, dim=0)"])
@pytest.mark.parametrize("use", ["(s * m).sum()", "s.sum()", "m.sum()"])
def test_std_mean_against_torch(call, use):
    inputs = {"x": [[1, 2, 4], [3, -1, 0]], "z": [[2, 2], [2, 2]]}
    verified(problem(inputs, f"s, m = {call}\nreturn {use}"))


@pytest.mark.torch
def test_std_mean_without_degrees_of_freedom_warns_as_torch():
    verified(problem({"x": [[1, 2, 4]], "z": [1]}, "s, m = torch.std_mean(x, dim=0)\nreturn m.sum()"))


# ----------------------------------------------------------------------------- fmod, remainder

MODULO = {"a": [[5, -5, 5, -5], [0, -0.0, 3.5, -7.25]], "b": [3, 3, -3, -3]}


@pytest.mark.torch
@pytest.mark.parametrize("requires", subsets(("a", "b")), ids="-".join)
@pytest.mark.parametrize("call", ["torch.fmod(a * 1, b)", "torch.remainder(a * 1, b)", "(a * 1).fmod(b * 2)",
                                  "(b * 1).remainder(a[1] + 1)", "(a * 1).fmod_(b)", "(a * 1).remainder_(b)",
                                  "torch.fmod(a * 1, -2.5)", "(a * 1).remainder(0.75)", "(a * 1).fmod_(2)",
                                  "(a * 1).remainder_(-1.5)"])
def test_fmod_remainder_against_torch(call, requires):
    verified(problem(MODULO, f"o = {call}\nreturn (o * o * o).sum() + (o * a).sum()", requires=requires))


def test_fmod_remainder_signs_in_torch_and_here():
    """fmod takes self's sign, remainder other's; a zero keeps self's sign (-0.0)."""
    a = torch.tensor(MODULO["a"], dtype=torch.float64)
    b = torch.tensor(MODULO["b"], dtype=torch.float64)
    got = solved(problem(MODULO, "f = torch.fmod(a, b)\nr = torch.remainder(a, b)\nreturn (f + r).sum()"))["values"]
    for name, want in (("f", torch.fmod(a, b)), ("r", torch.remainder(a, b))):
        assert torch.tensor(got[name]["value"], dtype=torch.float64).tolist() == want.tolist()
        assert [str(v) for v in torch.tensor(got[name]["value"]).flatten().tolist()] == \
            [str(v) for v in want.flatten().tolist()]   # -0.0 printed as such
    assert got["f"]["grad_fn"] == "FmodBackward1" and got["r"]["grad_fn"] == "RemainderBackward1"


NAN_MODULO = {"a": [[5, -5, 5, -5], [0, 1.5, 3.5, -7.25]], "b": [3, 3, -3, 0.75], "z": [["inf", 1, 2, 0], [0, 0, "inf", 1]]}


@pytest.mark.torch
@pytest.mark.parametrize("call", ["torch.fmod(a + n, b)", "torch.remainder(a + n, b)", "torch.fmod(a, b + n)",
                                  "(a * 1).remainder(b + n)", "(a + n).fmod(2)", "(a + n).remainder_(-0.75)",
                                  "(a * 1).fmod_(b + n)"])
def test_fmod_remainder_of_nan_against_torch(call):
    """A nan operand gives nan (sweep seed 89300, problem 2: a parameter an SGD step made nan);
    solve refused it as an irrational element. Its gradient: nan where other's reads the quotient."""
    verified(problem(NAN_MODULO, f"n = z * 0\no = {call}\nreturn (o * o).sum() + (o * a).sum()", requires=("a", "b")))
    a = torch.tensor(NAN_MODULO["a"], dtype=torch.float64)
    z = torch.tensor([[float("inf"), 1, 2, 0], [0, 0, float("inf"), 1]], dtype=torch.float64)
    assert torch.fmod(a + z * 0, 2).isnan().sum().item() == 2    # torch's nan, the one solve now answers


@pytest.mark.torch
@pytest.mark.parametrize("call", ["torch.remainder(t + (p - p.detach()), 0.75)", "torch.fmod(t, p.detach() * 0 + 0.5)",
                                  "(t * 3).fmod(t.abs() + (p - p.detach()) + 1)"])
def test_fmod_remainder_of_a_closed_form_rational_against_torch(call):
    """An element whose closed form simplifies to a rational (2 + (tanh(3/2) - tanh(3/2))) was
    refused as irrational; regression remainder_of_a_closed_form_rational.yaml."""
    text = problem({"x": [1.5, -0.5], "t": [2, -1.25]}, f"p = tanh(x)\no = {call}\nreturn (o * o).sum()",
                   requires=("x",))
    verified(text)
    x, t = torch.tensor([1.5, -0.5], dtype=torch.float64), torch.tensor([2, -1.25], dtype=torch.float64)
    p = torch.tanh(x)
    assert (t + (p - p)).tolist() == t.tolist()     # exactly t in torch's doubles as well


def test_fmod_by_zero_and_a_number_dividend_are_refused():
    for forward in ("o = torch.fmod(a, b * 0)\nreturn o.sum()", "o = torch.remainder(2, a)\nreturn o.sum()"):
        with pytest.raises(adjoint.ProblemError):
            adjoint.loads(problem(MODULO, forward)).solve()


# ----------------------------------------------------------------------------- nansum, nanmean

NAN_INPUTS = {"x": [[1, 2, 4], [3, -1, 0]], "z": [["inf", 1, 2], [2, 3, "inf"]]}


@pytest.mark.torch
@pytest.mark.parametrize("call", ["torch.nansum(h)", "h.nansum(dim=1, keepdim=True)", "torch.nansum(h, (0, 1))",
                                  "torch.nanmean(h, dim=0)", "h.nanmean()", "torch.nanmean(h, 1, True)",
                                  "torch.nanmean(h * 0 + z - z, 0)"])
def test_nansum_nanmean_against_torch(call):
    """h has a nan where z is infinite (inf - inf): those elements are skipped and take no gradient."""
    text = problem(NAN_INPUTS, f"h = x * (z - z + 1)\no = {call}\nreturn (o * o).sum()", requires=("x",))
    verified(text.replace('{pack: "x", unpack: "x * 2"}', '{pack: "x", unpack: "x"}'))


def test_nansum_node_in_torch():
    x = torch.tensor([[1.0, float("nan")], [2.0, 3.0]], dtype=torch.float64, requires_grad=True)
    y = torch.nanmean(x, 0)
    assert y.grad_fn.name() == "DivBackward0" and y.grad_fn.next_functions[0][0].name() == "NansumBackward0"
    y.sum().backward()
    assert x.grad.tolist() == [[0.5, 0.0], [0.5, 1.0]]


# ----------------------------------------------------------------------------- logcumsumexp

@pytest.mark.torch
@pytest.mark.parametrize("call", ["torch.logcumsumexp(x, 1)", "x.logcumsumexp(dim=0)", "torch.logcumsumexp(x * 1, -1)",
                                  "torch.logcumsumexp(s, 0)", "torch.logcumsumexp(x, 2)", "torch.logcumsumexp(x[0], 0)"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_logcumsumexp_against_torch(call, dtype):
    """Values are certified reals; the last dim errors as PyTorch does (IndexError)."""
    text = problem({"x": [[1, 2, 4], [3, -1, 0]], "s": 0.5}, f"o = {call}\nreturn (o * o * o).sum()", dtype)
    verified(text)


def test_logcumsumexp_node_in_torch():
    x = torch.tensor([[1.0, 2.0]], dtype=torch.float64, requires_grad=True)
    assert torch.logcumsumexp(x, 1).grad_fn.name() == "LogcumsumexpBackward0"
    got = solved(problem({"x": [[1, 2]]}, "o = torch.logcumsumexp(x, 1)\nreturn o.sum()"))
    assert got["values"]["o"]["grad_fn"] == "LogcumsumexpBackward0"
    want = torch.logcumsumexp(x, 1)
    assert got["values"]["o"]["value"][0] == pytest.approx(want.tolist()[0], rel=1e-14)


# ----------------------------------------------------------------------------- which gradients are grad itself

ALIAS = """
name: alias
dtype: float64
inputs:
  x0: {value: [[-1.25, 2, 0.75]], requires_grad: true}
  i: {value: [[0, 0], [1, 0]], dtype: int64}
model:
  inputs: [x0, i]
  params:
    A0: [[0.25, -0.75, 0.75], [-0.5, 1.25, -0.5]]
    p3: [[1.5, -1], [0.125, -0.75]]
    A1: [[-2]]
    B: [[[1, 2], [0.5, -1]]]
    v: [1, -0.5]
  children:
    c0:
      inputs: [a0]
      forward: "a0.mean(0)[:2]"
  forward: |
    h0 = c0(A0)
    h2 = CALL
    return x0 + h2.mean()
loss: "(y ** 2).sum()"
hooks:
  - {node: "h0", kind: post}
  - {global: full_backward}
steps:
  - forward
  - backward
  - forward
  - backward
"""


@pytest.mark.torch
@pytest.mark.parametrize("call", [
    "torch.addcmul(p3, A1, h0, value=0.5)", "torch.addbmm(p3, B, h0.expand(1, 2, 2))",
    "torch.addbmm(p3, B, h0.expand(1, 2, 2), beta=2)", "torch.addmv(v, p3, h0, beta=0.5)", "torch.addr(p3, h0, v)",
    "torch.baddbmm(p3, B, h0.expand(1, 2, 2), beta=2)", "torch.remainder(p3, h0 + 2)",
    "p3.scatter_reduce(0, i, h0.expand(2, 2), 'sum')", "p3.scatter_reduce(0, i, h0.expand(2, 2), 'mean')",
    "F.bilinear(p3, h0.expand(2, 2), B)"])
def test_second_backward_into_a_grad_the_new_nodes_handed_on(call):
    """A parameter's .grad taken from a node that hands on the incoming gradient itself (or a new
    tensor), then added into by a second backward: solve refused it for the nodes gradalias did not
    list (sweep seed 89302, problem 84); regression new_ops_self_gradient_is_grad.yaml."""
    verified(ALIAS.replace("CALL", call))


@pytest.mark.torch
@pytest.mark.parametrize("make, same", [
    (lambda s, a, b: torch.addcmul(s, a, b, value=2), True), (lambda s, a, b: torch.addbmm(s, a[None], b[None]), True),
    (lambda s, a, b: torch.addbmm(s, a[None], b[None], beta=2), False), (lambda s, a, b: torch.fmod(s, b + 3), True),
    (lambda s, a, b: s.scatter_reduce(0, torch.tensor([[0, 1], [1, 1]]), b, "sum"), True),
    (lambda s, a, b: s.scatter_reduce(0, torch.tensor([[0, 1], [1, 1]]), b, "sum", include_self=False), False)])
def test_self_gradient_is_the_incoming_one_in_torch(make, same):
    """The facts gradalias.SAME records for these nodes, read from torch 2.13."""
    s, a, b = (torch.randn(2, 2, dtype=torch.float64, requires_grad=True) for _ in range(3))
    out = make(s, a, b)
    seen = {}
    out.grad_fn.register_hook(lambda gi, go: seen.update(same=gi[0] is go[0]))
    out.backward(torch.ones_like(out))
    assert seen["same"] is same


@pytest.mark.torch
def test_logcumsumexp_nan_gradient_is_zero_as_in_torch():
    """A nan incoming gradient is in neither of logcumsumexp_backward's parts (grad > 0, grad < 0):
    x's gradient is 0 there in torch 2.13, not nan (sweep seed 89304, problem 85)."""
    text = problem({"x": [[-2, -1], [0.5, 2], [-2, -2]], "w": [1.5, -1]},
                   "h = torch.logcumsumexp(x, 0)\nz = (h * w).sum()\nreturn torch.sqrt(z - z) + (h * 0).sum()")
    verified(text)
    x = torch.tensor([[-2, -1], [0.5, 2], [-2, -2]], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([1.5, -1], dtype=torch.float64, requires_grad=True)
    h = torch.logcumsumexp(x, 0)
    z = (h * w).sum()
    (torch.sqrt(z - z) + (h * 0).sum()).backward()
    got = solved(text)["grads"]["x"]["value"]
    assert x.grad.tolist() == got == [[0.0, 0.0]] * 3
