"""docs/cookbook.md: every answer it gives, checked on the problem that answers it.

The problems directly in problems/ are also run in torch by ``adjoint verify problems/``
(tests/test_verify.py); here each claim the cookbook makes is checked by hand (numbers
derived in the comments). The problems in problems/v2/ use features ``verify``'s torch side
does not run yet (in-place modules, saved-tensor hooks): they are written out in real
PyTorch below and compared call by call.
"""

from __future__ import annotations

import os
import re

import pytest
import sympy

import adjoint
from adjoint.answer.effects import hook_effects

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COOKBOOK = os.path.join(ROOT, "docs", "cookbook.md")


def solve(name: str):
    return adjoint.load(os.path.join(ROOT, "problems", f"{name}.yaml")).solve()


def test_every_problem_the_cookbook_names_exists_and_solves():
    text = open(COOKBOOK, encoding="utf-8").read()
    named = sorted(set(re.findall(r"problems/((?:v2/)?[a-z_]+)\.yaml", text)))
    assert len(named) >= 9
    for name in named:
        assert solve(name).variants


def test_zeros_or_none():
    pred = solve("zeros_vs_none")
    # y = lin(x * c) = 2 (1.5 * 3) + 1 (-2 * 0.5) + 0.5 = 8.5; dloss/dy = 17; lin's grad_input = 17 w = [34, 17];
    # scale's grad_input for x = [34 * 3, 17 * 0.5]; for c: a zero tensor, though c does not require grad
    (call,) = pred["zeros"].hook_calls
    x, c = call.args["grad_input"]
    assert x.tolist() == [102.0, 8.5] and c is not None and c.tolist() == [0.0, 0.0]
    first, second = pred["frozen_input"].hook_calls
    assert (first.kind, second.kind) == ("full_backward", "hook")      # before lin.weight's gradient exists
    assert first.args["grad_input"] == (None,) and first.args["grad_output"][0].tolist() == [17.0]
    assert second.args["grad"].tolist() == [[17 * 4.5, 17 * -1.0]]     # dloss/dW = 17 * (x * c)


def test_legacy_or_full():
    pred = solve("slinear")
    assert pred["legacy"].hook_calls[0].node == "PowBackward0"
    assert pred["full"].hook_calls[0].node == "BackwardHookFunctionBackward"


def test_firing_order():
    labels = [h.label.split()[0] for h in solve("hook_order").variants[0].hook_calls]
    assert labels[:2] == ["1", "2"]          # forward hooks during the forward
    assert labels.index("6") < labels.index("7") < labels.index("8")   # tensor hook, node pre, node post


def test_rescaling_depends_on_where():
    pred = solve("rescaling")
    lin2 = {"lin2.weight", "lin2.bias"}
    for variant, halved in (("tensor_hook", {"x", "lin1.weight", "lin1.bias"}),
                            ("backward_pre", {"x", "lin1.weight", "lin1.bias"} | lin2),
                            ("full_backward", {"x", "lin1.weight", "lin1.bias"})):
        e = hook_effects(pred[variant])
        assert {c.name for c in e.changes} == halved, variant
        assert all(str(c.ratio) == "1/2" for c in e.changes), variant
        assert set(e.unchanged) == ({"x", "lin1.weight", "lin1.bias"} | lin2) - halved, variant


def test_early_full_hook_sees_no_weight_grad():
    pred = solve("early_full_hook")
    order = [(h.kind, h.target) for h in pred["data_input"].hook_calls]
    assert order[0] == ("full_backward", "fc") and {t for _, t in order[1:]} == {"fc.weight", "fc.bias"}
    order = [(h.kind, h.target) for h in pred["input_requires_grad"].hook_calls]
    assert order[-1] == ("full_backward", "fc")


def test_symbolic_closed_forms():
    pred = solve("symbolic")
    w, b, x0 = sympy.symbols("w b x0")
    dh = 2 * (w * x0 + b - 1)                      # dloss/dh, loss = (w x0 + b - 1)^2
    observe, doubled = pred["observe"], pred["doubled"]
    assert sympy.simplify(sympy.sympify(observe.hook_calls[0].args["grad"].strings()[0]) - dh) == 0
    assert sympy.simplify(sympy.sympify(observe.grads["x"].strings()[0]) - w * dh) == 0
    assert sympy.simplify(sympy.sympify(doubled.grads["lin.weight"].strings()[0][0]) - 2 * x0 * dh) == 0
    assert [str(c.ratio) for c in hook_effects(doubled).changes] == ["2", "2", "2"]
    numeric = adjoint.load(os.path.join(ROOT, "problems", "symbolic.yaml")).solve(numeric=True)
    assert numeric["doubled"].grads["x"].tolist() == [0.5 * 2 * 2 * (0.5 * 1.5 - 0.25 - 1)]


# ---- problems/v2: written out in real PyTorch ------------------------------------------------

@pytest.mark.torch
def test_inplace_hooks_match_torch():
    import torch

    pred = solve("v2/inplace_hooks")
    lin = torch.nn.Linear(2, 2, dtype=torch.float64)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1, 0.5], [0.25, 1]]))
        lin.bias.copy_(torch.tensor([0, 0.5]))
    x = torch.tensor([1.5, -2], dtype=torch.float64, requires_grad=True)
    calls = []
    h = lin(x)
    h.register_hook(lambda g: calls.append(g.clone()))   # registered when lin returned
    h.retain_grad()
    y = torch.nn.ReLU(inplace=True)(h)
    (y * y).sum().backward()
    v = pred["tensor_hooks"]
    assert len(v.hook_calls) == len(calls) == 0          # the hook stayed with the overwritten value
    assert v.grads["lin"].tolist() == h.grad.tolist() and v.grads["x"].tolist() == x.grad.tolist()
    assert v.grads["lin.weight"].tolist() == lin.weight.grad.tolist()
    assert v.values["lin"].tolist() == h.detach().tolist()   # the ReLU wrote into lin's output

    lin.register_full_backward_hook(lambda m, gi, go: None)
    with pytest.raises(RuntimeError) as theirs:
        torch.nn.ReLU(inplace=True)(lin(x))
    err = pred["relu_after_hooked_module"].error
    assert err is not None and err.during == "forward" and err.message == str(theirs.value)


@pytest.mark.torch
@pytest.mark.parametrize("variant, unpack_factor, scoped", [("observe", 1, False), ("scaled_unpack", 2, False),
                                                            ("scoped", 1, True)])
def test_saved_tensors_match_torch(variant, unpack_factor, scoped):
    import contextlib

    import torch

    log = []

    def pack(t):
        log.append(("pack", t.detach().clone()))
        return t

    def unpack(t):
        out = t * unpack_factor
        log.append(("unpack", out.detach().clone()))
        return out

    x = torch.tensor([0.5, -1], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([2, 3], dtype=torch.float64, requires_grad=True)
    hooks = lambda: torch.autograd.graph.saved_tensors_hooks(pack, unpack)  # noqa: E731
    with contextlib.nullcontext() if scoped else hooks():
        h = x * w
        with hooks() if scoped else contextlib.nullcontext():
            y = torch.tanh(h)
        loss = (y ** 2).sum()
    loss.backward()
    v = solve("v2/saved_tensors")[variant]
    ours = [(c.kind, c.returned.tolist()) for c in v.hook_calls]
    theirs = [(kind, t.tolist()) for kind, t in log]
    assert [k for k, _ in ours] == [k for k, _ in theirs]
    for (_, a), (_, b) in zip(ours, theirs):
        assert a == pytest.approx(b, rel=1e-12)
    assert v.grads["x"].tolist() == pytest.approx(x.grad.tolist(), rel=1e-12)
    assert v.grads["w"].tolist() == pytest.approx(w.grad.tolist(), rel=1e-12)


# ---- models: cnn, transformer_block, layernorm_one_element, against hand-written PyTorch -----

def _params(name: str) -> dict:
    """The file's parameter values (given, or filled by its init: {seed: N}) by full name, as float64
    tensors: the numbers the problem states, handed to a model written out by hand below."""
    import numpy as np
    import torch

    problem = adjoint.load(os.path.join(ROOT, "problems", f"{name}.yaml"))
    out = {}
    for m in problem.model.walk():
        for d in m.params:
            out[d.name] = torch.tensor(np.array([float(v) for v in d.value.items]).reshape(d.value.shape))
    return problem, out


def _load(module, params: dict, prefix: str) -> None:
    import torch

    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(params[prefix + name])


def _input(problem, name: str, grad: bool = False):
    import numpy as np
    import torch

    d = next(d for d in problem.variants[0].inputs + problem.targets if d.name == name)
    if d.dtype == "int64":
        return torch.tensor([int(v) for v in d.value.items]).reshape(d.value.shape)
    return torch.tensor(np.array([float(v) for v in d.value.items]).reshape(d.value.shape), requires_grad=grad)


def _close(ours, theirs, tol=1e-12):
    import numpy as np

    theirs = theirs.detach().numpy()
    return np.allclose(np.array(ours.floats(), dtype=float), theirs, rtol=tol, atol=tol)


@pytest.mark.torch
def test_cnn_block_hooks_match_torch():
    import torch
    from torch import nn

    problem, params = _params("cnn")
    pred = solve("cnn")
    for variant in ("full", "legacy", "bn"):
        block = nn.Sequential(nn.Conv2d(2, 2, 3, padding=1), nn.BatchNorm2d(2), nn.ReLU()).double()
        fc = nn.Linear(8, 3).double()
        _load(block, {k.replace("block.conv.", "0.").replace("block.bn.", "1."): v for k, v in params.items()}, "")
        _load(fc, params, "fc.")
        x, t = _input(problem, "x", True), _input(problem, "t")
        seen = []
        target = block[1] if variant == "bn" else block
        register = target.register_backward_hook if variant == "legacy" else target.register_full_backward_hook
        register(lambda m, gi, go: seen.append((gi, go)))
        loss = nn.CrossEntropyLoss()(fc(nn.Flatten()(nn.MaxPool2d(2)(block(x)))), t)
        loss.backward()
        (call,) = pred[variant].hook_calls
        (gi,), (go,) = seen[0]
        assert _close(call.args["grad_input"][0], gi) and _close(call.args["grad_output"][0], go), variant
        assert _close(pred[variant].grads["x"], x.grad) and _close(pred[variant].loss, loss)
    assert pred["legacy"].hook_calls[0].node == "ReluBackward0"
    # the cookbook's claims: the legacy grad_input is ReLU's own (here equal to grad_output),
    # the BatchNorm's grad_input sums to 0 per channel, and conv.bias.grad is 0 (torch: noise)
    legacy = pred["legacy"].hook_calls[0].args
    assert legacy["grad_input"][0].strings() == legacy["grad_output"][0].strings()
    import numpy as np
    bn_in = np.array(pred["bn"].hook_calls[0].args["grad_input"][0].floats())
    assert np.abs(bn_in.sum(axis=(0, 2, 3))).max() < 1e-15
    assert all(v == 0 for v in pred["full"].grads["block.conv.bias"].floats())
    assert block[0].bias.grad.abs().max() < 1e-15


@pytest.mark.torch
def test_transformer_block_hooks_match_torch():
    import torch
    from torch import nn

    problem, params = _params("transformer_block")
    ln1, ln2 = nn.LayerNorm(4).double(), nn.LayerNorm(4).double()
    attn = nn.MultiheadAttention(4, 2, batch_first=True).double()
    mlp = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 4)).double()
    _load(ln1, params, "ln1.")
    _load(ln2, params, "ln2.")
    _load(attn, params, "attn.")
    _load(mlp, {k.replace("mlp.fc.", "mlp.0.").replace("mlp.proj.", "mlp.2."): v for k, v in params.items()}, "mlp.")
    x, t = _input(problem, "x", True), _input(problem, "t")
    seen = []
    attn.register_full_backward_hook(lambda m, gi, go: seen.append((gi, go)))
    a = ln1(x)
    a.register_hook(lambda g: seen.append(g))
    h = x + attn(a, a, a, need_weights=False)[0]
    y = h + mlp(ln2(h))
    loss = ((y - t) ** 2).sum() / 2
    loss.backward()
    v = solve("transformer_block")["attention"]
    full, tensor_hook = v.hook_calls
    (gi, go), g_ln1 = seen
    assert len(full.args["grad_input"]) == 3 and len(full.args["grad_output"]) == 2 == len(go)
    assert full.args["grad_output"][1] is None and go[1] is None
    for ours, theirs in zip(full.args["grad_input"], gi):
        assert _close(ours, theirs)
    assert _close(tensor_hook.args["grad"], g_ln1) and _close(tensor_hook.args["grad"], gi[0] + gi[1] + gi[2])
    assert _close(v.grads["attn.in_proj_bias"], attn.in_proj_bias.grad)
    assert v.grads["attn.in_proj_bias"].floats()[4:8] == [0, 0, 0, 0]     # the key bias: exactly 0
    assert attn.in_proj_bias.grad[4:8].abs().max() < 1e-15                # torch: 0 up to rounding
    assert solve("transformer_block")["legacy_attention"].hook_calls[0].node == "TransposeBackward0"


@pytest.mark.torch
def test_layernorm_one_element_is_exactly_zero_where_torch_has_noise():
    import torch

    pred = solve("layernorm_one_element")
    v = pred["full_hook"]
    assert v.grads["ln.weight"].strings() == ["0"] and v.grads["x"].strings() == [["0"], ["0"], ["0"]]
    assert v.grads["ln.bias"].strings() == ["6"]
    assert v.hook_calls[0].args["grad_input"][0].strings() == [["0"], ["0"], ["0"]]
    noise = {}
    for dtype in (torch.float32, torch.float64):       # pytorch#188375, as torch 2.13 has it
        ln = torch.nn.LayerNorm([1], dtype=dtype)
        with torch.no_grad():
            ln.weight.fill_(1.5)
            ln.bias.fill_(0.25)
        x = torch.tensor([[0.3], [1.7], [-2.5]], dtype=dtype, requires_grad=True)
        y = ln(x)
        (y * torch.tensor([[1], [2], [3]], dtype=dtype)).sum().backward()
        assert y.detach().tolist() == [[0.25]] * 3 and x.grad.abs().max() == 0 and ln.bias.grad.item() == 6
        noise[dtype] = abs(ln.weight.grad.item())
    assert 0 < noise[torch.float64] < 1e-12 and noise[torch.float32] > 1e-6   # what the description says
