"""The older, deprecated ``torch.nn.utils.weight_norm`` (a module's ``weight_norm: {dim: D, legacy:
true}``, adjoint/format/weight_norm.py, adjoint/engine/weight_norm.py) against real torch 2.13
written by hand: its ``WeightNorm`` forward pre-hook computes ``module.weight =
_weight_norm(weight_v, weight_g, dim)`` once per call (the same nodes as the parametrization form),
before a full backward hook's ``BackwardHookFunction`` and before the forward pre-hooks registered
after it; ``module.weight`` read between calls is the last call's tensor; the parameters are
``weight_g``, ``weight_v`` (version 0, after ``bias``); applying it warns (FutureWarning).
Expected values come from torch, never from adjoint."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import adjoint
from nn_harness import Case, assert_close, assert_root_module, dyadic, lit, module_problem, t64, torch_chain, \
    torch_module_run

LEGACY = "weight_norm: {{dim: {dim}, legacy: true}}"


def legacy_weight_norm(module, dim=0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return nn.utils.weight_norm(module, dim=dim)


def _g(wshape, dim: int):
    if dim == -1:
        return 1.5
    return dyadic(tuple(n if i == dim else 1 for i, n in enumerate(wshape)), 5, 2)


CASES = [
    ("Linear", {"in_features": 3, "out_features": 2}, (2, 3), 0, [[1, 2, -1], [0.5, 0, 2]]),
    ("Linear", {"in_features": 3, "out_features": 2}, (2, 3), 1, [[1, 2, -1], [0.5, 0, 2]]),
    ("Linear", {"in_features": 3, "out_features": 2}, (2, 3), -1, [[1, 2, -1], [0.5, 0, 2]]),
    ("Conv1d", {"in_channels": 2, "out_channels": 2, "kernel_size": 2}, (2, 2, 2), 2, dyadic((1, 2, 4), 1)),
    ("Conv1d", {"in_channels": 2, "out_channels": 3, "kernel_size": 2}, (3, 2, 2), 1, dyadic((1, 2, 4), 8)),
    ("Conv2d", {"in_channels": 2, "out_channels": 3, "kernel_size": 2}, (3, 2, 2, 2), 1, dyadic((1, 2, 3, 3), 5)),
    ("Conv3d", {"in_channels": 1, "out_channels": 2, "kernel_size": 2}, (2, 1, 2, 2, 2), 0, dyadic((1, 1, 2, 3, 2), 4)),
]


@pytest.mark.parametrize("type_,args,wshape,dim,x", CASES, ids=[f"{c[0]}-dim{c[3]}" for c in CASES])
def test_legacy_module_matches_torch(type_, args, wshape, dim, x):
    """Chain (WeightNormInterfaceBackward0 for dim 0 / last, else the composite), values, grads of
    weight_g, weight_v and bias, the legacy backward hook, the saved tensors' pack / unpack order."""
    params = {"weight_g": _g(wshape, dim), "weight_v": dyadic(wshape, 7), "bias": dyadic((wshape[0],), 3)}
    case = Case(module_problem(type_, args, params, x, module_keys="  " + LEGACY.format(dim="null" if dim == -1 else dim)
                               + "\n"))
    m = legacy_weight_norm(getattr(nn, type_)(**args), dim=None if dim == -1 else dim)
    y, names, rec = torch_module_run(m, params, x)
    assert type(m).__name__ == type_   # no Parametrized class: the module's own, with a pre-hook
    assert_root_module(case, y, names, rec)


def test_named_parameters_names_order_and_versions():
    """bias, weight_g, weight_v, both at version 0 (the parametrization form's original1 is at 1)."""
    text = module_problem("Linear", {"in_features": 3, "out_features": 2},
                          {"weight_v": dyadic((2, 3), 1), "weight_g": [[1], [2]], "bias": [0, 1]}, [[1, 2, 3]],
                          module_keys="  weight_norm: {dim: 0, legacy: true}\n")
    ours = [(p.name, p.version) for p in adjoint.loads(text).model.params]
    m = legacy_weight_norm(nn.Linear(3, 2))
    assert [n for n, _ in ours] == [n for n, _ in m.named_parameters()] == ["bias", "weight_g", "weight_v"]
    assert [v for n, v in ours if n != "bias"] == [p._version for n, p in m.named_parameters() if n != "bias"] == [0, 0]


def _two_forms(legacy: bool):
    """torch: a Conv1d with weight_norm (dim None) in either form, a full backward hook and a hook
    on g; the order they fire in."""
    torch.manual_seed(0)
    c = nn.Conv1d(2, 3, 2).double()
    c = legacy_weight_norm(c, dim=None) if legacy else nn.utils.parametrizations.weight_norm(c, dim=None)
    g = c.weight_g if legacy else c.parametrizations.weight.original0
    v = c.weight_v if legacy else c.parametrizations.weight.original1
    with torch.no_grad():
        g.fill_(1.5)
        v.copy_(t64([[[1, 2], [2, 0]], [[3, 0], [4, 1]], [[-2, 0], [1, 1]]]))
        c.bias.copy_(t64([0.5, -1, 0.25]))
    log = []
    c.register_full_backward_hook(lambda mod, gi, go: log.append("full_backward"))
    g.register_hook(lambda grad: log.append("hook"))
    x = t64([[[1, 2, -1, 0.5, 2], [0.5, 0, 2, 1, -1]]], True)
    c(x).sum().backward()
    return log, g.grad, v.grad, x.grad


@pytest.mark.parametrize("legacy", [True, False], ids=["legacy", "parametrization"])
def test_the_full_backward_hook_fires_before_gs_hook_only_in_the_legacy_form(legacy):
    """The legacy pre-hook makes the weight's nodes before the input's BackwardHookFunction (lower
    sequence numbers): the module's full backward hook fires before g's tensor hook; in the
    parametrization form the weight is read inside forward, after it: the other way round."""
    log, g_grad, v_grad, x_grad = _two_forms(legacy)
    assert log == (["full_backward", "hook"] if legacy else ["hook", "full_backward"])
    g, v = ("weight_g", "weight_v") if legacy else ("parametrizations.weight.original0",
                                                  "parametrizations.weight.original1")
    key = "weight_norm: {dim: null, legacy: true}" if legacy else "weight_norm: {dim: null}"
    text = f"""name: t
dtype: float64
inputs:
  x: {{value: [[[1, 2, -1, 0.5, 2], [0.5, 0, 2, 1, -1]]], requires_grad: true}}
model:
  children:
    c:
      type: Conv1d
      args: {{in_channels: 2, out_channels: 3, kernel_size: 2}}
      {key}
      params: {{bias: [0.5, -1, 0.25], {g}: 1.5, {v}: [[[1, 2], [2, 0]], [[3, 0], [4, 1]], [[-2, 0], [1, 1]]]}}
  forward: "c(x)"
loss: "sum(y)"
hooks:
  - {{module: c, kind: full_backward}}
  - {{tensor: c.{g}, kind: hook}}
"""
    case = Case(text)
    assert [c["kind"] for c in case.json["hook_calls"]] == log
    assert_close(case.grad(f"c.{g}"), g_grad, "g")
    assert_close(case.grad(f"c.{v}"), v_grad, "v")
    assert_close(case.grad("x"), x_grad, "x")


def test_forward_pre_hooks_around_the_weight_norm_hook_and_reads_between_calls():
    """A prepended forward pre-hook runs before WeightNorm's, an appended one after; two calls and
    a read of lin.weight after them: two weight nodes (the read is the second call's tensor, not a
    third), against torch; len(_forward_pre_hooks) counts WeightNorm's hook."""
    v, g, b, x = [[1, 2, 2], [3, 0, -4]], [[2], [0.5]], [0.5, -1], [[1, -1, 0.5], [0.25, 2, -1]]
    text = f"""name: t
dtype: float64
inputs:
  x: {{value: {lit(x)}, requires_grad: true}}
model:
  children:
    lin:
      type: Linear
      args: {{in_features: 3, out_features: 2}}
      weight_norm: {{dim: 0, legacy: true}}
      params: {{bias: {lit(b)}, weight_g: {lit(g)}, weight_v: {lit(v)}}}
  forward: |
    h = lin(x).tanh()
    k = lin(x * 2)
    return (h * k).sum() + (lin.weight * lin.weight).sum()
hooks:
  - {{module: lin, kind: forward_pre, returns: "(input[0] * 3,)"}}
  - {{module: lin, kind: forward_pre, prepend: true, returns: "(input[0] + 1,)"}}
  - {{module: lin, kind: full_backward, does: "grad_input[0].mul_(2)"}}
steps:
  - forward
  - {{registered: {{module: lin, kind: forward_pre, as: n}}}}
  - backward
"""
    case = Case(text)
    lin = legacy_weight_norm(nn.Linear(3, 2)).double()
    with torch.no_grad():
        lin.bias.copy_(t64(b))
        lin.weight_g.copy_(t64(g))
        lin.weight_v.copy_(t64(v))
    lin.register_forward_pre_hook(lambda mod, inp: (inp[0] * 3,))
    lin.register_forward_pre_hook(lambda mod, inp: (inp[0] + 1,), prepend=True)
    def full(mod, gi, go):
        gi[0].mul_(2)
    lin.register_full_backward_hook(full)
    xt = t64(x, True)
    h = lin(xt).tanh()
    k = lin(xt * 2)
    y = (h * k).sum() + (lin.weight * lin.weight).sum()
    y.backward()
    names = {"x": xt, "lin.bias": lin.bias, "lin.weight_g": lin.weight_g, "lin.weight_v": lin.weight_v}
    assert case.chain("y") == torch_chain(y, names)
    assert str(torch_chain(y, names)).count("WeightNormInterfaceBackward0") >= 2
    for name, t in names.items():
        assert_close(case.grad(name), t.grad, f"grad of {name}")
    assert case.json["registered"]["n"] == len(lin._forward_pre_hooks) == 3


def test_the_deprecation_warning_and_a_dim_outside_the_weight():
    """Applying it warns (FutureWarning) before norm_except_dim's IndexError; both are the answer's."""
    text = module_problem("Linear", {"in_features": 3, "out_features": 2, "bias": False},
                          {"weight_g": [[1, 2, 3]], "weight_v": [[1, 2, 3], [4, 5, 6]]}, [[1, 2, 3]],
                          module_keys="  weight_norm: {dim: 2, legacy: true}\n")
    js = adjoint.loads(text).solve().variants[0].to_json()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(IndexError) as info:
            nn.utils.weight_norm(nn.Linear(3, 2, bias=False), dim=2)
    assert (js["error"]["type"], js["error"]["message"]) == ("IndexError", str(info.value))
    assert [(w["category"], w["message"]) for w in js["warnings"]] == \
        [(w.category.__name__, str(w.message)) for w in caught]


@pytest.mark.parametrize("keys, message", [
    ("weight_norm: {name: bias, legacy: true}", "weight_norm of 'bias' is not modelled yet"),
    ("weight_norm: {dim: -2, legacy: true}", "weight_norm with dim -2 is not modelled yet"),
])
def test_refusals(keys, message):
    text = module_problem("Linear", {"in_features": 3, "out_features": 2}, {}, [[1, 2, 3]],
                          module_keys=f"  {keys}\n")
    with pytest.raises(adjoint.ProblemError) as info:
        adjoint.loads(text).solve()
    assert message in str(info.value)


def test_a_read_before_the_first_call_is_refused():
    """The weight WeightNorm.apply computes at registration is not modelled: refused, not guessed."""
    text = """name: t
inputs:
  x: {value: [[1, 2]], requires_grad: true}
model:
  children:
    lin:
      type: Linear
      args: {in_features: 2, out_features: 1}
      weight_norm: {legacy: true}
      params: {bias: [0.5], weight_g: [[2]], weight_v: [[1, 2]]}
  forward: "lin.weight.sum() + lin(x).sum()"
"""
    with pytest.raises(adjoint.ProblemError) as info:
        adjoint.loads(text).solve()
    assert "is read before 'lin' is called" in str(info.value)


# ----------------------------------------------------------------------------- import

class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = legacy_weight_norm(nn.Conv1d(2, 3, 2), dim=None)
        self.fc = legacy_weight_norm(nn.Linear(12, 2), dim=1)

    def forward(self, x):
        return self.fc(self.conv(x).tanh().flatten(1))


def test_import_writes_legacy_weight_norm_and_the_gradients_match_torch():
    torch.manual_seed(0)
    net = _Net().double()
    net.fc.register_full_backward_hook(lambda mod, gi, go: None)
    net.conv.register_forward_pre_hook(lambda mod, inp: (inp[0] * 2,))
    x = torch.randn(1, 2, 5, dtype=torch.float64, requires_grad=True)
    text = adjoint.from_module_text(net, x)
    assert "weight_norm: {dim: -1, legacy: true}" in text and "weight_norm: {dim: 1, legacy: true}" in text
    problem = adjoint.from_module(net, x)
    js = problem.solve().variants[0].to_json()
    xt = x.detach().clone().requires_grad_(True)
    net(xt).sum().backward()
    assert [p.name for m in problem.model.walk() for p in m.params] == [n for n, _ in net.named_parameters()]
    for name, p in net.named_parameters():
        assert_close(js["grads"][name]["value"], p.grad, name)
    assert_close(js["grads"]["x"]["value"], xt.grad, "x")


def _hook_before():
    lin = nn.Linear(2, 2)
    lin.register_forward_pre_hook(lambda mod, inp: None)
    return nn.Sequential(legacy_weight_norm(lin))


@pytest.mark.parametrize("make, message", [
    (_hook_before, "forward pre-hook registered before torch.nn.utils.weight_norm"),
    (lambda: nn.Sequential(legacy_weight_norm(nn.Linear(2, 2), dim=-2)), "weight_norm with dim -2"),
    (lambda: nn.Sequential(legacy_weight_norm(nn.ConvTranspose1d(2, 2, 2))), "on a ConvTranspose1d"),
], ids=["hook_before", "dim_minus_2", "conv_transpose"])
def test_import_refusals(make, message):
    with pytest.raises(adjoint.ProblemError) as info:
        adjoint.from_module(make(), torch.ones(1, 2) if "Conv" not in message else torch.ones(1, 2, 3))
    assert message in str(info.value)
