"""``torch.nn.utils.parametrizations.weight_norm`` on Linear and Conv modules (a module's
``weight_norm: {dim: D}``, adjoint/format/weight_norm.py), against real torch 2.13 written by hand:
the node chain (WeightNormInterfaceBackward0 under the layer's node, one per read of ``.weight``),
values, the gradients of ``parametrizations.weight.original0`` (g) and ``original1`` (v), the
saved tensors' pack / unpack sequence (g, v, the norms), the legacy and full backward hooks on the
parametrized module, and ``named_parameters()``'s names, order and versions. Expected values
come from torch, never from adjoint."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn
from torch.nn.utils.parametrizations import weight_norm

import adjoint
from nn_harness import Case, assert_close, assert_root_module, dyadic, lit, module_problem, t64, torch_chain, \
    torch_module_run

G, V = "parametrizations.weight.original0", "parametrizations.weight.original1"


def _g(v, dim: int) -> list:
    """A g of the right shape with values of its own (not v's norms: g and v are independent)."""
    if dim == -1:
        return 1.5
    shape = tuple(n if i == dim else 1 for i, n in enumerate(torch.tensor(v).shape))
    return dyadic(shape, 5, 2)


def _nodes(chain, name: str) -> set:
    """The sequence ranks of the nodes called ``name`` in a chain (a node reached twice counts once)."""
    out, stack = set(), [chain]
    while stack:
        node = stack.pop()
        if node is None or node[0] == "AccumulateGrad":
            continue
        if node[0] == name:
            out.add(node[1])
        stack.extend(node[2])
    return out


CASES = [
    ("Linear", {"in_features": 3, "out_features": 2}, (2, 3), 0, [[1, 2, -1], [0.5, 0, 2]]),
    ("Linear", {"in_features": 3, "out_features": 2}, (2, 3), 1, [[1, 2, -1], [0.5, 0, 2]]),
    ("Linear", {"in_features": 3, "out_features": 4, "bias": False}, (4, 3), 0, [[1, -2, 0.5]]),
    ("Conv1d", {"in_channels": 2, "out_channels": 2, "kernel_size": 2}, (2, 2, 2), 2, dyadic((1, 2, 4), 1)),
    ("Conv2d", {"in_channels": 1, "out_channels": 2, "kernel_size": 2}, (2, 1, 2, 2), 0, dyadic((1, 1, 3, 3), 2)),
    ("Conv2d", {"in_channels": 2, "out_channels": 2, "kernel_size": 2, "padding": 1, "padding_mode": "reflect"},
     (2, 2, 2, 2), 3, dyadic((1, 2, 3, 3), 3)),
    ("Conv3d", {"in_channels": 1, "out_channels": 2, "kernel_size": 2}, (2, 1, 2, 2, 2), 0, dyadic((1, 1, 2, 3, 2), 4)),
    # not fused: v * (g / norm_except_dim(v, 2, dim)) as ATen ops (transposes, a clone when the
    # transposed weight is not contiguous, views, NormBackward1; dim -1: NormBackward0), DivBackward0, MulBackward0
    ("Conv2d", {"in_channels": 2, "out_channels": 3, "kernel_size": 2}, (3, 2, 2, 2), 1, dyadic((1, 2, 3, 3), 5)),
    ("Conv2d", {"in_channels": 1, "out_channels": 2, "kernel_size": 2}, (2, 1, 2, 2), 1, dyadic((1, 1, 3, 3), 6)),
    ("Conv2d", {"in_channels": 2, "out_channels": 2, "kernel_size": [2, 3]}, (2, 2, 2, 3), 2, dyadic((1, 2, 3, 4), 7)),
    ("Linear", {"in_features": 3, "out_features": 2}, (2, 3), -1, [[1, 2, -1], [0.5, 0, 2]]),
]


@pytest.mark.parametrize("type_,args,wshape,dim,x", CASES, ids=[f"{c[0]}-dim{c[3]}-{i}" for i, c in enumerate(CASES)])
def test_parametrized_module_matches_torch(type_, args, wshape, dim, x):
    v = dyadic(wshape, 7)
    params = {G: _g(v, dim), V: v}
    if args.get("bias", True):
        params["bias"] = dyadic((wshape[0],), 3)
    case = Case(module_problem(type_, args, params, x, module_keys=f"  weight_norm: {{dim: {dim}}}\n"))
    m = weight_norm(getattr(nn, type_)(**args), dim=None if dim == -1 else dim)
    y, names, rec = torch_module_run(m, params, x)
    assert type(m).__name__ == f"Parametrized{type_}"
    assert_root_module(case, y, names, rec)   # chain, values, grads of g, v (and bias), legacy hook, saved
    fused = dim in (0, len(wshape) - 1)
    assert ("WeightNormInterfaceBackward0" in json.dumps(torch_chain(y, names))) == fused
    assert len(rec.packs) >= 3   # g, v and the norms (fused), then the layer's own


def test_named_parameters_names_order_and_versions():
    """named_parameters(): the module's own bias first, then original0, original1, whatever order
    the file gives them in."""
    text = module_problem("Linear", {"in_features": 3, "out_features": 2},
                          {V: dyadic((2, 3), 1), G: [[1], [2]], "bias": [0, 1]}, [[1, 2, 3]],
                          module_keys="  weight_norm: {dim: 0}\n")
    problem = adjoint.loads(text)
    ours = [p.name for p in problem.model.params]
    m = weight_norm(nn.Linear(3, 2))
    assert ours == [n for n, _ in m.named_parameters()] == ["bias", G, V]


def test_full_backward_hooks_and_two_reads_of_the_weight():
    """A parent calls the parametrized child twice and reads child.weight itself twice: four
    WeightNormInterfaceBackward0 nodes, in creation order; the child's full backward (pre) hooks
    see only its input's and output's gradients (the weight is no input of the call)."""
    v, g, b = [[1, 2, 2], [3, 0, -4]], [[2], [0.5]], [0.5, -1]
    x = [[1, -1, 0.5], [0.25, 2, -1]]
    text = f"""name: t
dtype: float64
inputs:
  x: {{value: {lit(x)}, requires_grad: true}}
model:
  children:
    lin:
      type: Linear
      args: {{in_features: 3, out_features: 2}}
      weight_norm: {{dim: 0}}
      params: {{bias: {lit(b)}, {G}: {lit(g)}, {V}: {lit(v)}}}
  forward: |
    h = lin(x).tanh()
    k = lin(x * 2)
    return (h * k).sum() + (lin.weight * lin.weight).sum()
hooks:
  - {{module: lin, kind: full_backward_pre}}
  - {{module: lin, kind: full_backward, does: "grad_input[0].mul_(3)"}}
"""
    case = Case(text)
    lin = weight_norm(nn.Linear(3, 2)).double()
    with torch.no_grad():
        lin.bias.copy_(t64(b))
        lin.parametrizations.weight.original0.copy_(t64(g))
        lin.parametrizations.weight.original1.copy_(t64(v))
    seen = []
    lin.register_full_backward_pre_hook(lambda mod, go: seen.append(("pre", [t.clone() for t in go])))

    def full(mod, gi, go):
        seen.append(("full", [t.clone() for t in gi], [t.clone() for t in go]))
        gi[0].mul_(3)
    lin.register_full_backward_hook(full)
    xt = t64(x, True)
    h = lin(xt).tanh()
    k = lin(xt * 2)
    y = (h * k).sum() + (lin.weight * lin.weight).sum()
    y.backward()
    names = {"x": xt, "lin.bias": lin.bias, f"lin.{G}": lin.parametrizations.weight.original0,
             f"lin.{V}": lin.parametrizations.weight.original1}
    assert case.chain("y") == torch_chain(y, names)
    assert len(_nodes(torch_chain(y, names), "WeightNormInterfaceBackward0")) == 4   # two calls, two reads
    for name, t in names.items():
        assert_close(case.grad(name), t.grad, f"grad of {name}")
    ours = [c for c in case.json["hook_calls"] if c["kind"] in ("full_backward_pre", "full_backward")]
    assert [c["kind"] for c in ours] == [{"pre": "full_backward_pre", "full": "full_backward"}[s[0]] for s in seen]
    for c, s in zip(ours, seen):
        if s[0] == "pre":
            assert_close(c["args"]["grad_output"][0]["value"], s[1][0], "grad_output")
        else:
            assert_close(c["args"]["grad_input"][0]["value"], s[1][0], "grad_input")
            assert_close(c["args"]["grad_output"][0]["value"], s[2][0], "grad_output")


def test_float32_values_and_saved_norms():
    """float32: the saved norms (result1) read back through _saved_result1 and the grads of g, v."""
    v, g = [[1, 2, 2], [3, 0, 4]], [[2, 1, 0.5]]
    text = f"""name: t
inputs:
  x: {{value: [[1, 2, -1], [0.5, 0, 2]], requires_grad: true}}
model:
  children:
    lin:
      type: Linear
      args: {{in_features: 3, out_features: 2, bias: false}}
      weight_norm: {{dim: 1}}
      params: {{{G}: {lit(g)}, {V}: {lit(v)}}}
  forward: "lin(x).sum()"
"""
    case = Case(text)
    lin = weight_norm(nn.Linear(3, 2, bias=False), dim=1)
    with torch.no_grad():
        lin.parametrizations.weight.original0.copy_(torch.tensor(g))
        lin.parametrizations.weight.original1.copy_(torch.tensor(v))
    xt = torch.tensor([[1, 2, -1], [0.5, 0, 2]], requires_grad=True)
    lin(xt).sum().backward()
    for name, t in ((f"lin.{G}", lin.parametrizations.weight.original0), (f"lin.{V}", lin.parametrizations.weight.original1),
                    ("x", xt)):
        ours = torch.tensor(case.grad(name), dtype=torch.float32)
        assert torch.allclose(ours, t.grad, rtol=1e-6, atol=1e-7), name
    w = lin.weight
    assert w.grad_fn.name() == "WeightNormInterfaceBackward0"
    assert w.grad_fn._saved_dim == 1
    assert torch.equal(w.grad_fn._saved_result1, torch.tensor([[10 ** 0.5, 2.0, 20 ** 0.5]]))


REFUSED = [
    ("Conv2d", {"in_channels": 1, "out_channels": 2, "kernel_size": 2}, "{dim: -2}",
     "weight_norm with dim -2 is not modelled yet"),
    ("Linear", {"in_features": 3, "out_features": 2}, "{name: bias}", "weight_norm of 'bias' is not modelled yet"),
    ("Bilinear", {"in1_features": 3, "in2_features": 3, "out_features": 2}, "{dim: 0}", "takes no 'weight_norm'"),
]


@pytest.mark.parametrize("type_,args,wn,message", REFUSED, ids=[r[3][:30] for r in REFUSED])
def test_what_is_not_modelled_is_refused(type_, args, wn, message):
    text = module_problem(type_, args, {}, [[1, 2, 3]], module_keys=f"  weight_norm: {wn}\n")
    with pytest.raises(adjoint.ProblemError) as info:
        adjoint.loads(text).solve()
    assert message in str(info.value)


def test_a_global_module_hook_is_refused():
    """PyTorch fires a global forward hook on _WeightNorm and ParametrizationList as the weight is
    read (checked here): not modelled, so refused."""
    calls = []
    handle = nn.modules.module.register_module_forward_hook(lambda mod, a, o: calls.append(type(mod).__name__))
    try:
        weight_norm(nn.Linear(2, 2))(torch.ones(1, 2))
    finally:
        handle.remove()
    assert calls == ["_WeightNorm", "ParametrizationList", "ParametrizedLinear"]
    text = module_problem("Linear", {"in_features": 2, "out_features": 2, "bias": False},
                          {G: [[1], [2]], V: [[1, 2], [3, 4]]},
                          [[1, 2]], module_keys="  weight_norm: {dim: 0}\n").replace(
        "hooks:\n", "hooks:\n  - {global: forward}\n", 1)
    with pytest.raises(adjoint.ProblemError) as info:
        adjoint.loads(text).solve()
    assert "global module hook" in str(info.value)


# ----------------------------------------------------------------------------- import

class _Net(nn.Module):
    def __init__(self, dim_conv: int = 3):
        super().__init__()
        self.conv = weight_norm(nn.Conv2d(1, 2, 2), dim=dim_conv)
        self.fc = weight_norm(nn.Linear(8, 3))

    def forward(self, x):
        return self.fc(self.conv(x).relu().flatten(1))


def test_import_writes_weight_norm_and_the_gradients_match_torch():
    """adjoint.from_module of ParametrizedConv2d / ParametrizedLinear children: weight_norm: {dim: D}
    and original0 / original1 as parameters; the answer's gradients are torch's own backward's."""
    torch.manual_seed(0)
    net = _Net().double()
    net.fc.register_full_backward_hook(lambda mod, gi, go: None)
    x = torch.randn(1, 1, 3, 3, dtype=torch.float64, requires_grad=True)
    problem = adjoint.from_module(net, x)
    conv = problem.model.child("conv")
    assert (conv.type, conv.weight_norm, problem.model.child("fc").weight_norm) == ("Conv2d", 3, 0)
    js = problem.solve().variants[0].to_json()
    xt = x.detach().clone().requires_grad_(True)
    net(xt).sum().backward()
    for name, p in net.named_parameters():
        assert_close(js["grads"][name]["value"], p.grad, name)
    assert_close(js["grads"]["x"]["value"], xt.grad, "x")


@pytest.mark.parametrize("make, message", [
    (lambda: nn.Sequential(nn.utils.parametrizations.spectral_norm(nn.utils.parametrizations.orthogonal(
        nn.Linear(2, 2)))), "_Orthogonal+_SpectralNorm"),   # spectral_norm alone: tests/test_spectral_norm.py
    (lambda: nn.Sequential(weight_norm(nn.Linear(2, 2), dim=-2)), "weight_norm with dim -2"),
    (lambda: nn.Sequential(nn.utils.parametrizations.orthogonal(nn.Linear(2, 2))), "_Orthogonal"),
], ids=["spectral_norm", "dim_minus_2", "orthogonal"])
def test_import_refuses_other_parametrizations(make, message):
    with pytest.raises(adjoint.ProblemError) as info:
        adjoint.from_module(make(), torch.ones(1, 2))
    assert message in str(info.value)


def test_two_backwards_accumulate_into_original0_and_original1():
    """Two forward/backward passes: the second adds into .grad of g and v (the node's gradients are
    new contiguous tensors: AccumulateGrad steals the first, adds the second); a post-accumulate
    hook halves g's .grad in place each time. Against torch's own two passes."""
    v, g, b = [[0.5, 1], [1, -0.5]], [[1], [2]], [1, 0]
    text = f"""name: t
dtype: float64
inputs:
  x: {{value: [[1, 2]]}}
model:
  children:
    a:
      type: Linear
      args: {{in_features: 2, out_features: 2}}
      weight_norm: {{dim: 0}}
      params: {{bias: {lit(b)}, {G}: {lit(g)}, {V}: {lit(v)}}}
  forward: "a(x).tanh()"
loss: "(y ** 2).sum()"
steps: [forward, backward, forward, backward]
hooks:
  - {{tensor: a.{G}, kind: post_accumulate_grad, does: "tensor.grad.mul_(0.5)"}}
"""
    js = adjoint.loads(text).solve().variants[0].to_json()
    a = weight_norm(nn.Linear(2, 2)).double()
    with torch.no_grad():
        a.bias.copy_(t64(b))
        a.parametrizations.weight.original0.copy_(t64(g))
        a.parametrizations.weight.original1.copy_(t64(v))
    def halve(t):
        t.grad.mul_(0.5)
    a.parametrizations.weight.original0.register_post_accumulate_grad_hook(halve)
    for _ in range(2):
        (a(t64([[1, 2]])).tanh() ** 2).sum().backward()
    for name, p in a.named_parameters():
        assert_close(js["grads"][f"a.{name}"]["value"], p.grad, name)


def test_a_dim_outside_the_weight_is_pytorchs_index_error():
    """weight_norm(Linear(3, 2), dim=2): right_inverse's transpose raises IndexError, the answer."""
    text = module_problem("Linear", {"in_features": 3, "out_features": 2, "bias": False},
                          {G: [[1, 2, 3]], V: [[1, 2, 3], [4, 5, 6]]}, [[1, 2, 3]],
                          module_keys="  weight_norm: {dim: 2}\n")
    js = adjoint.loads(text).solve().variants[0].to_json()
    with pytest.raises(IndexError) as info:
        weight_norm(nn.Linear(3, 2, bias=False), dim=2)
    assert (js["error"]["type"], js["error"]["message"]) == ("IndexError", str(info.value))
