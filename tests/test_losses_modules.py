"""The loss modules against real torch 2.13, float64: each type called in a forward after a
Linear (node chain, loss, grads, what its legacy backward hook and its full backward hook are
handed), and a loss module called by name from ``loss:`` with its hooks firing as in torch."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import require_torch

torch = require_torch()
import torch.nn as nn  # noqa: E402 (after the check)

import adjoint  # noqa: E402
from nodechain import chain, leaf_names  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
F64 = torch.float64

X = [[0.5, -1.0], [0.25, 2.0]]
W = [[1.0, 2.0], [0.5, -1.0], [0.0, 1.0]]
BIAS = [0.125, 0.25, -0.5]
TARGETS = {
    "t": ([2, 0], "int64"),
    "ti": ([2, 1], "int64"),
    "y3": ([[0.0, 1.0, 2.5], [0.25, 0.5, -0.5]], None),
    "r": ([[0.0, 1.0, 0.5], [1.0, 0.25, 0.75]], None),
    "p": ([[0.25, 0.25, 0.5], [1.0, 0.0, 0.0]], None),
}

#: (module type, args, buffers, how the forward uses it, its target, torch's module, the same use in torch)
MODULES = [
    ("MSELoss", {}, {}, "L({h}, y3)", "y3", lambda: nn.MSELoss(), lambda L, h, T: L(h, T)),
    ("MSELoss", {"reduction": "sum"}, {}, "L({h}, y3)", "y3", lambda: nn.MSELoss(reduction="sum"), lambda L, h, T: L(h, T)),
    ("L1Loss", {}, {}, "L({h}, y3)", "y3", lambda: nn.L1Loss(), lambda L, h, T: L(h, T)),
    ("SmoothL1Loss", {"beta": 0.5}, {}, "L({h}, y3)", "y3", lambda: nn.SmoothL1Loss(beta=0.5), lambda L, h, T: L(h, T)),
    ("HuberLoss", {"delta": 0.5, "reduction": "sum"}, {}, "L({h}, y3)", "y3",
     lambda: nn.HuberLoss(delta=0.5, reduction="sum"), lambda L, h, T: L(h, T)),
    ("CrossEntropyLoss", {}, {}, "L({h}, t)", "t", lambda: nn.CrossEntropyLoss(), lambda L, h, T: L(h, T)),
    ("CrossEntropyLoss", {"label_smoothing": 0.25, "ignore_index": 1}, {"weight": [1.0, 2.0, 0.5]}, "L({h}, ti)", "ti",
     lambda: nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5], dtype=F64), label_smoothing=0.25, ignore_index=1),
     lambda L, h, T: L(h, T)),
    ("CrossEntropyLoss", {"reduction": "sum"}, {"weight": [1.0, 2.0, 0.5]}, "L({h}, p)", "p",
     lambda: nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5], dtype=F64), reduction="sum"),
     lambda L, h, T: L(h, T)),
    ("NLLLoss", {"ignore_index": 0}, {"weight": [1.0, 2.0, 0.5]}, "L({h}, ti)", "ti",
     lambda: nn.NLLLoss(weight=torch.tensor([1.0, 2.0, 0.5], dtype=F64), ignore_index=0), lambda L, h, T: L(h, T)),
    ("BCELoss", {}, {"weight": [1.0, 2.0, 0.5]}, "L(sigmoid({h}), r)", "r",
     lambda: nn.BCELoss(weight=torch.tensor([1.0, 2.0, 0.5], dtype=F64)), lambda L, h, T: L(torch.sigmoid(h), T)),
    ("BCEWithLogitsLoss", {}, {"pos_weight": [3.0, 0.5, 2.0]}, "L({h}, r)", "r",
     lambda: nn.BCEWithLogitsLoss(pos_weight=torch.tensor([3.0, 0.5, 2.0], dtype=F64)), lambda L, h, T: L(h, T)),
    ("KLDivLoss", {"reduction": "batchmean"}, {}, "L({h}, p)", "p", lambda: nn.KLDivLoss(reduction="batchmean"),
     lambda L, h, T: L(h, T)),
    ("KLDivLoss", {"log_target": True}, {}, "L({h}, y3)", "y3", lambda: nn.KLDivLoss(log_target=True),
     lambda L, h, T: L(h, T)),
]


def _yaml_map(d: dict) -> str:
    return "{" + ", ".join(f"{k}: {str(v).lower() if isinstance(v, bool) else v}" for k, v in d.items()) + "}"


def module_problem(mtype, args, buffers, use, target, loss_line: str | None, hooks: str,
                   forward_ends_in_loss: bool | None = None) -> str:
    """Root: fc (Linear 2 -> 3) and the loss module L; the forward either ends in L (``use``
    with fc's output) or returns fc's output for ``loss_line`` to call L (unless
    ``forward_ends_in_loss``: then ``loss_line`` is a loss of the module's output)."""
    value, dt = TARGETS[target]
    parts = [f"type: {mtype}"]
    if args:
        parts.append(f"args: {_yaml_map(args)}")
    if buffers:
        parts.append(f"buffers: {_yaml_map(buffers)}")
    ends = forward_ends_in_loss if forward_ends_in_loss is not None else not loss_line
    forward = use.format(h="fc(x)") if ends else "fc(x)"
    return f"""
name: module_case
dtype: float64
inputs:
  x: {{value: {X}, requires_grad: true}}
targets:
  {target}: {{value: {value}{', dtype: ' + dt if dt else ''}}}
model:
  children:
    fc: {{type: Linear, params: {{weight: {W}, bias: {BIAS}}}}}
    L: {{{', '.join(parts)}}}
  forward: "{forward}"
{('loss: "' + loss_line + '"') if loss_line else ''}
{hooks}
"""


def torch_setup(make_loss, target):
    x = torch.tensor(X, dtype=F64, requires_grad=True)
    fc = nn.Linear(2, 3).double()
    with torch.no_grad():
        fc.weight.copy_(torch.tensor(W, dtype=F64))
        fc.bias.copy_(torch.tensor(BIAS, dtype=F64))
    value, dt = TARGETS[target]
    T = torch.tensor(value, dtype=torch.int64 if dt else F64)
    return x, fc, make_loss(), T


def close(ours, theirs) -> bool:
    if ours is None or theirs is None:
        return ours is None and theirs is None
    ours = getattr(ours, "value", ours)  # an int64 tensor's record carries its dtype (adjoint.engine.graph.Typed)
    a = np.array(ours.floats(), dtype=float)
    b = np.asarray(theirs.detach(), dtype=float)
    return a.shape == b.shape and np.allclose(a, b, rtol=1e-10, atol=1e-12)


def same_tuple(ours, theirs) -> bool:
    return len(ours) == len(theirs) and all(close(a, b) for a, b in zip(ours, theirs))


HOOKS = """
variants:
  legacy: {hooks: [{module: L, kind: backward}]}
  full: {hooks: [{module: L, kind: full_backward}]}
"""


@pytest.mark.parametrize("case", MODULES, ids=[f"{m[0]}-{i}" for i, m in enumerate(MODULES)])
def test_module_in_a_forward_matches_torch(case):
    mtype, args, buffers, use, target, make, apply = case
    pred = adjoint.loads(module_problem(mtype, args, buffers, use, target, None, HOOKS)).solve()
    for kind in ("legacy", "full"):
        v = pred.variant(kind)
        x, fc, L, T = torch_setup(make, target)
        seen = []
        if kind == "legacy":
            L.register_backward_hook(lambda m, gi, go: seen.append((gi, go)))
        else:
            L.register_full_backward_hook(lambda m, gi, go: seen.append((gi, go)))
        out = apply(L, fc(x), T)
        fwd = v.run.forward
        ours = fwd.output
        names = {"x": fwd.names["x"], "fc.weight": v.run.model.params["fc.weight"],
                 "fc.bias": v.run.model.params["fc.bias"]}
        theirs_names = {"x": x, "fc.weight": fc.weight, "fc.bias": fc.bias}
        if kind == "legacy":  # with a full hook both sides end in BackwardHookFunctionBackward
            assert chain(ours, leaf_names(names)) == chain(out, leaf_names(theirs_names))
        assert close(ours.value, out)
        out.backward()
        grads = v.run.grads()
        assert close(grads["x"], x.grad) and close(grads["fc.weight"], fc.weight.grad)
        (call,) = v.hook_calls
        ((gi, go),) = seen
        assert same_tuple(call.args["grad_input"], gi), (kind, call.args["grad_input"], gi)
        assert same_tuple(call.args["grad_output"], go)


def test_full_hook_hands_an_int64_zero_tensor_for_the_class_indices():
    v = adjoint.loads(module_problem(*MODULES[5][:5], None, HOOKS)).solve().variant("full")
    (call,) = v.hook_calls
    grad_x, grad_t = call.args["grad_input"]
    # zeros_like(target): PyTorch hands tensor([0, 0]), int64
    assert grad_t.dtype == "int64" and grad_t.elements() == [0, 0]
    assert call.node == "BackwardHookFunctionBackward"
    # the slot of the class indices carries their dtype (torch hands tensor([0, 0]), int64)
    (lcall,) = [c for c in v.run.forward.calls if c.callid == "L"]
    assert [dt for _, dt in lcall.in_node.outputs] == ["float64", "int64"]
    assert [a.dtype for a in lcall.args] == ["float64", "int64"]


LOSS_HOOKS = """
hooks:
  - {module: L, kind: forward_pre}
  - {module: L, kind: forward}
  - {module: L, kind: full_backward}
  - {module: fc, kind: full_backward}
"""


@pytest.mark.parametrize("index", [5, 6, 9])
def test_loss_module_called_from_loss(index):
    """``loss: "L(y, t)"``: the root's child runs through nn.Module's call machinery; its forward
    hooks see (logits, target), its full backward hook fires before fc's."""
    mtype, args, buffers, use, target, make, apply = MODULES[index]
    line = use.format(h="y")
    v = adjoint.loads(module_problem(mtype, args, buffers, use, target, line, LOSS_HOOKS)).solve().variants[0]
    x, fc, L, T = torch_setup(make, target)
    log = []
    L.register_forward_pre_hook(lambda m, inp: log.append(("forward_pre", "L", inp)))
    L.register_forward_hook(lambda m, inp, out: log.append(("forward", "L", inp, out)))
    L.register_full_backward_hook(lambda m, gi, go: log.append(("full_backward", "L", gi, go)))
    fc.register_full_backward_hook(lambda m, gi, go: log.append(("full_backward", "fc", gi, go)))
    loss = apply(L, fc(x), T)
    loss.backward()
    assert [(c.kind, c.target) for c in v.hook_calls] == [(e[0], e[1]) for e in log]
    for c, e in zip(v.hook_calls, log):
        if c.kind == "forward_pre":
            assert same_tuple(c.args["input"], e[2])
        elif c.kind == "forward":
            assert same_tuple(c.args["input"], e[2]) and close(c.args["output"], e[3])
        else:
            assert same_tuple(c.args["grad_input"], e[2]) and same_tuple(c.args["grad_output"], e[3])
    assert close(v.run.forward.loss.value, loss)
    assert close(v.run.grads()["x"], x.grad)
    assert v.run.forward.names["L"] is v.run.forward.loss


def test_loss_may_only_call_the_roots_children():
    text = module_problem(*MODULES[5][:5], "M(y, t)", "")
    with pytest.raises(adjoint.ProblemError, match="the root's children, which the loss may call: fc, L"):
        adjoint.loads(text).solve()


def test_loss_module_takes_its_target_by_keyword():
    text = module_problem(*MODULES[5][:5], "L(y, target=t)", "")
    v = adjoint.loads(text).solve().variants[0]
    x, fc, L, T = torch_setup(MODULES[5][5], "t")
    loss = L(fc(x), target=T)
    assert close(v.run.forward.loss.value, loss)
    with pytest.raises(TypeError) as caught:   # forward(input, target) takes no weight: CPython's binding error
        L(fc(x), weight=T)
    got = adjoint.loads(module_problem(*MODULES[5][:5], "L(y, weight=t)", "")).solve().to_json()
    error = next(iter(got["variants"].values()))["error"]
    assert (error["type"], error["message"]) == ("TypeError", str(caught.value))


_W3 = [1.0, 2.0, 0.5]
#: type -> (args, buffers, use, target, torch's module for a reduction)
EVERY = {
    "MSELoss": ({}, {}, "L({h}, y3)", "y3", lambda **kw: nn.MSELoss(**kw)),
    "L1Loss": ({}, {}, "L({h}, y3)", "y3", lambda **kw: nn.L1Loss(**kw)),
    "SmoothL1Loss": ({"beta": 0.5}, {}, "L({h}, y3)", "y3", lambda **kw: nn.SmoothL1Loss(beta=0.5, **kw)),
    "HuberLoss": ({"delta": 0.5}, {}, "L({h}, y3)", "y3", lambda **kw: nn.HuberLoss(delta=0.5, **kw)),
    "CrossEntropyLoss": ({"label_smoothing": 0.25}, {"weight": _W3}, "L({h}, t)", "t",
                         lambda **kw: nn.CrossEntropyLoss(weight=torch.tensor(_W3, dtype=F64), label_smoothing=0.25,
                                                          **kw)),
    "NLLLoss": ({}, {"weight": _W3}, "L({h}, t)", "t",
                lambda **kw: nn.NLLLoss(weight=torch.tensor(_W3, dtype=F64), **kw)),
    "BCELoss": ({}, {}, "L(sigmoid({h}), r)", "r", lambda **kw: nn.BCELoss(**kw)),
    "BCEWithLogitsLoss": ({}, {"weight": _W3, "pos_weight": [3.0, 0.5, 2.0]}, "L({h}, r)", "r",
                          lambda **kw: nn.BCEWithLogitsLoss(weight=torch.tensor(_W3, dtype=F64),
                                                            pos_weight=torch.tensor([3.0, 0.5, 2.0], dtype=F64), **kw)),
    "KLDivLoss": ({}, {}, "L({h}, p)", "p", lambda **kw: nn.KLDivLoss(**kw)),
}


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("mtype", sorted(EVERY))
def test_every_module_with_every_reduction(mtype, reduction):
    """Value, grads and the legacy hook's arguments (the loss's last node), each reduction;
    an unreduced loss is summed by ``loss:``."""
    args, buffers, use, target, make = EVERY[mtype]
    hooks = "hooks: [{module: L, kind: backward}]"
    text = module_problem(mtype, dict(args, reduction=reduction), buffers, use, target,
                          "sum(y)" if reduction == "none" else None, hooks, forward_ends_in_loss=True)
    v = adjoint.loads(text).solve().variants[0]
    x, fc, L, T = torch_setup(lambda: make(reduction=reduction), target)
    seen = []
    L.register_backward_hook(lambda m, gi, go: seen.append((gi, go)))
    h = fc(x)
    out = L(torch.sigmoid(h) if "sigmoid" in use else h, T)
    assert close(v.run.forward.output.value, out)
    (out.sum() if reduction == "none" else out).backward()
    assert close(v.run.grads()["x"], x.grad) and close(v.run.grads()["fc.bias"], fc.bias.grad)
    (call,) = v.hook_calls
    ((gi, go),) = seen
    assert same_tuple(call.args["grad_input"], gi) and same_tuple(call.args["grad_output"], go)
